"""
ExpectedReLo: ReLo's reducible loss at the expected target ``mean_k Q_k + h`` (``h`` ExpectedTD's regressor), so that
a sample's own reward noise leaves its priority unchanged, or ReLo's own loss times the share of the TD error that
``h`` explains.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th

from sb3_per import DQN, SAC, TQC, ExpectedReLo, PrioritizedReplayBuffer, ReLo
from sb3_per.schemes.base import CriticStep
from sb3_per.schemes.expected_relo import expected_reducible_loss, learnable_share, signal_share
from sb3_per.schemes.relo import reducible_loss


class FixedCritics:
    """Target critics with fixed Q-values and an algorithm's own per-sample loss (SAC's squared error by default)."""

    elementwise_critic_loss = SAC.elementwise_critic_loss

    def __init__(self, batch: object, target_q_values: tuple[th.Tensor, ...]) -> None:
        self.batch, self.fixed = batch, target_q_values

    def target_q_values(self, batch: object) -> tuple[th.Tensor, ...]:
        assert batch is self.batch
        return self.fixed


class HuberCritics(FixedCritics):
    elementwise_critic_loss = DQN.elementwise_critic_loss


def column(*values: float) -> th.Tensor:
    return th.tensor(values).reshape(-1, 1)


def test_expected_reducible_loss_by_hand():
    batch = SimpleNamespace()
    online = (column(1.0, 0.0, 2.0).requires_grad_(), column(3.0, 0.0, 2.0).requires_grad_())  # means 2, 0, 2
    target = (column(2.0, 1.0, 0.0), column(2.0, 3.0, 0.0))
    h = column(1.0, 1.0, 0.0)  # expected targets 3, 1, 2
    # online: ((1-3)^2 + (3-3)^2) / 2 = 2, (1 + 1) / 2 = 1, 0;  target: 1, (0 + 4) / 2 = 2, 4
    got = expected_reducible_loss(CriticStep(batch, online, column(9.0, 9.0, 9.0)), FixedCritics(batch, target), h)
    assert th.allclose(got, th.tensor([1.0, 0.0, 0.0]))
    assert got.shape == (3,) and not got.requires_grad


def test_the_samples_own_target_does_not_enter_the_expected_reducible_loss():
    """The same critics and ``h`` with any sampled ``y``: the same priority (ReLo's moves with ``y``)."""
    generator = th.Generator().manual_seed(0)
    batch = SimpleNamespace()
    online = tuple(th.randn(32, 1, generator=generator) for _ in range(2))
    critics = FixedCritics(batch, tuple(th.randn(32, 1, generator=generator) for _ in range(2)))
    h = th.randn(32, 1, generator=generator)
    quiet, loud = th.zeros(32, 1), 10 * th.randn(32, 1, generator=generator)
    assert th.equal(
        expected_reducible_loss(CriticStep(batch, online, quiet), critics, h),
        expected_reducible_loss(CriticStep(batch, online, loud), critics, h),
    )
    assert not th.equal(
        reducible_loss(CriticStep(batch, online, quiet), critics),
        reducible_loss(CriticStep(batch, online, loud), critics),
    )


@pytest.mark.parametrize("critics_class", [FixedCritics, HuberCritics], ids=["squared-error", "Huber"])
def test_a_transition_whose_expected_td_error_is_zero_scores_zero_however_far_the_critics_moved(critics_class):
    generator = th.Generator().manual_seed(1)
    batch = SimpleNamespace()
    online = (3 * th.randn(64, 1, generator=generator),)
    critics = critics_class(batch, (3 * th.randn(64, 1, generator=generator),))
    step = CriticStep(batch, online, 5 * th.randn(64, 1, generator=generator))
    assert th.equal(expected_reducible_loss(step, critics, th.zeros(64, 1)), th.zeros(64))
    assert (reducible_loss(step, critics) > 0).sum() > 10  # ReLo's own priority on the same batch is not 0


def test_without_noise_the_expected_reducible_loss_is_relos():
    """Where ``h`` is the sampled TD error itself (no noise to average out), both priorities are the same."""
    generator = th.Generator().manual_seed(2)
    batch = SimpleNamespace()
    online = tuple(th.randn(16, 1, generator=generator) for _ in range(2))
    critics = FixedCritics(batch, tuple(th.randn(16, 1, generator=generator) for _ in range(2)))
    y = th.randn(16, 1, generator=generator)
    h = y - (online[0] + online[1]) / 2
    step = CriticStep(batch, online, y)
    th.testing.assert_close(expected_reducible_loss(step, critics, h), reducible_loss(step, critics))


def test_learnable_share_by_hand():
    td = column(2.0, -4.0, 0.5, 0.0, 1.0)
    h = column(1.0, 1.0, -3.0, 0.7, 0.0)
    assert th.allclose(learnable_share(td, h), th.tensor([0.5, 0.25, 1.0, 1.0, 0.0]))


def test_signal_share_by_hand():
    moments = th.tensor([[1.0, 4.0], [-2.0, 4.0], [0.5, 0.0], [0.0, 0.0], [0.0, 2.0]])
    # 1/4; 4/4; an estimate below h ** 2 counts as h ** 2: 1; nothing at all: 1; pure noise: 0
    assert th.allclose(signal_share(moments), th.tensor([0.25, 1.0, 1.0, 1.0, 0.0]))


def test_the_signal_share_regressor_learns_the_second_moment_where_the_error_is_noise(trained_two_moments):
    """On FixedSignal-like batches: where the TD error is N(0, 2^2) the share is near 0, where it is 1, near 1."""
    regressor, observations, actions, noisy = trained_two_moments
    with th.no_grad():
        share = signal_share(regressor(observations, actions))
    assert share[noisy].mean() < 0.15 and share[~noisy].mean() > 0.7


@pytest.fixture(scope="module")
def trained_two_moments():
    n_threads = th.get_num_threads()
    th.set_num_threads(1)
    th.manual_seed(0)
    scheme = ExpectedReLo(signal="signal_share", hidden_sizes=(32, 32), learning_rate=3e-3)
    space = SimpleNamespace(observation_space=gym_box(2), action_space=gym_box(1), device=th.device("cpu"))
    regressor = scheme.make_state(space)
    assert regressor.moments == 2
    generator = th.Generator().manual_seed(1)
    for _ in range(800):
        observations, actions = th.rand(64, 2, generator=generator) * 2 - 1, th.rand(64, 1, generator=generator) * 2 - 1
        noisy = observations[:, :1] < 0
        td = th.where(noisy, 2.0 * th.randn(64, 1, generator=generator), th.ones(64, 1))
        regressor.fit_step(observations, actions, td)
    th.set_num_threads(n_threads)
    observations, actions = th.rand(2000, 2, generator=generator) * 2 - 1, th.rand(2000, 1, generator=generator) * 2 - 1
    away = observations[:, 0].abs() > 0.2
    observations, actions = observations[away], actions[away]
    return regressor, observations, actions, (observations[:, 0] < 0)


def gym_box(size: int):
    from gymnasium import spaces

    return spaces.Box(-1, 1, (size,))


def sac(signal: str = "expected") -> SAC:
    model = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"alpha": 0.5, "epsilon": 1e-5},
        replay_scheme=ExpectedReLo(signal=signal, hidden_sizes=(16,)),
        learning_starts=200,
        buffer_size=1_000,
        batch_size=64,
        policy_kwargs={"net_arch": [16, 16]},
        seed=0,
    )
    model.learn(200)
    generator = th.Generator().manual_seed(0)
    with th.no_grad():  # the target critics start as copies of the online ones: move them apart
        for parameter in model.critic_target.parameters():
            parameter.add_(0.1 * th.randn(parameter.shape, generator=generator))
    return model


@pytest.mark.parametrize("signal", ["expected", "expected_root", "gated", "signal_share"])
def test_a_sac_training_call_writes_the_signal_of_the_fitted_regressor(record_calls, priorities, signal):
    model = sac(signal)
    buffer = model.replay_buffer
    critic_before, target_before = copy.deepcopy(model.critic), copy.deepcopy(model.critic_target)
    before = priorities(buffer)
    write_backs = record_calls(model, "_write_back")
    model.train(gradient_steps=1, batch_size=64)

    (((_, _, step), _),) = write_backs
    batch, y = step.batch, step.targets
    with th.no_grad():  # by hand, from the networks before the step and the regressor after its fit
        h = model.replay_scheme_state(batch.observations, batch.actions)
        online_q = critic_before(batch.observations, batch.actions)
        target_q = target_before(batch.observations, batch.actions)
        mean_q = (online_q[0] + online_q[1]) / 2
        if signal.startswith("expected"):
            y_hat = mean_q + h[:, :1]
            online = sum((q - y_hat) ** 2 for q in online_q) / 2
            target = sum((q - y_hat) ** 2 for q in target_q) / 2
            expected = (online - target).clamp(min=0).flatten()
            if signal == "expected_root":
                expected = expected.sqrt()
        else:
            online = sum((q - y) ** 2 for q in online_q) / 2
            target = sum((q - y) ** 2 for q in target_q) / 2
            if signal == "gated":
                share = (h.abs() / (y - mean_q).abs()).clamp(max=1)
            else:  # h ** 2 over the estimated second moment, at least h ** 2
                share = h[:, :1] ** 2 / th.maximum(h[:, 1:], h[:, :1] ** 2)
            expected = ((online - target).clamp(min=0) * share).flatten()
    expected = expected.numpy().astype(np.float64)
    assert (expected > 1e-4).any()
    last = dict(zip(batch.indices.tolist(), expected.tolist(), strict=True))
    sampled = np.array(sorted(last))
    after = priorities(buffer)
    np.testing.assert_allclose(after[sampled], [(last[i] + 1e-5) ** 0.5 for i in sampled], rtol=1e-4)
    unsampled = np.setdiff1d(np.arange(buffer.n_transitions), sampled)
    np.testing.assert_array_equal(after[unsampled], before[unsampled])


def test_the_actor_loss_is_importance_weighted_as_relos():
    weights = th.rand(8, 1)
    batches = SimpleNamespace(sample=lambda n: SimpleNamespace(weights=weights))
    (update,) = list(ExpectedReLo().updates(batches, 8, True, lambda q, y, weights: weights))
    assert update.actor_weights is weights and update.actor_batch is update.critic_batch
    assert update.critic_loss(None, None) is weights  # the critic's loss takes the same weights
    assert ExpectedReLo.updates is ReLo.updates


@pytest.mark.parametrize("algorithm", [DQN, TQC], ids=["DQN", "TQC"])
def test_it_trains_dqn_and_tqc_and_writes_priorities(algorithm):
    env = "CartPole-v1" if algorithm is DQN else "Pendulum-v1"
    model = algorithm(
        "MlpPolicy",
        env,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_scheme=ExpectedReLo(hidden_sizes=(16,)),
        learning_starts=100,
        buffer_size=500,
        batch_size=32,
        policy_kwargs={"net_arch": [16]},
        seed=0,
        **({"target_update_interval": 10} if algorithm is DQN else {}),
    )
    model.learn(300)
    assert model.replay_buffer.n_priority_updates > 0
    assert np.isfinite(model.logger.name_to_value["train/per_priority_mean"])


def test_a_bad_signal_raises_value_error_naming_it():
    with pytest.raises(
        ValueError, match=r"signal must be one of \('expected', 'expected_root', 'gated', 'signal_share'\), got 'noisy'"
    ):
        ExpectedReLo(signal="noisy")


def test_expected_relo_is_refused_without_a_prioritized_buffer():
    with pytest.raises(ValueError, match=r"ExpectedReLo\(.*\) samples in proportion to its priorities"):
        SAC("MlpPolicy", "Pendulum-v1", replay_scheme=ExpectedReLo())

"""
ExpectedTD (Panahi et al. 2024): the priority is ``|h(s, a)|``, a regressor's estimate of ``E[y - mean_k Q_k | s, a]``,
fit by one Adam step per critic step to the signed TD errors of that step's batch: noise of mean zero is left out.
"""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from sb3_per import DQN, SAC, ExpectedTD, PrioritizedDictReplayBuffer, PrioritizedReplayBuffer
from sb3_per.schemes.base import CriticStep
from sb3_per.schemes.expected_td import TDErrorRegressor, signed_td_errors

BATCH = 64


def test_signed_td_error_is_the_target_minus_the_critics_mean_by_hand():
    q1, q2 = th.tensor([[1.0], [0.0], [-2.0]]), th.tensor([[3.0], [1.0], [0.0]])
    targets = th.tensor([[0.0], [2.0], [-1.0]])
    got = signed_td_errors(CriticStep(None, (q1.requires_grad_(), q2), targets))
    assert th.allclose(got, th.tensor([[-2.0], [1.5], [0.0]]))  # y - (Q1 + Q2) / 2, sign kept
    assert got.shape == (3, 1) and not got.requires_grad


class FixedSignal:
    """
    Batches on ``[-1, 1]^2 x [-1, 1]``: where ``s_0 < 0`` the signed TD error is ``N(0, 2^2)`` (mean zero, mean
    absolute value 1.6), elsewhere it is 1. Each batch's twin critics are offset by -0.5 and +0.5 around a random
    Q, so that only their mean cancels.
    """

    def __init__(self, seed: int) -> None:
        self.generator = th.Generator().manual_seed(seed)

    def batch(self, n: int) -> tuple[th.Tensor, th.Tensor, th.Tensor]:
        g = self.generator
        observations, actions = th.rand(n, 2, generator=g) * 2 - 1, th.rand(n, 1, generator=g) * 2 - 1
        noisy = observations[:, :1] < 0
        td = th.where(noisy, 2.0 * th.randn(n, 1, generator=g), th.ones(n, 1))
        return observations, actions, td

    def step(self, observations: th.Tensor, actions: th.Tensor, td: th.Tensor) -> CriticStep:
        q = th.randn(len(td), 1, generator=self.generator)
        return CriticStep(SimpleNamespace(observations=observations, actions=actions), (q - 0.5, q + 0.5), q + td)


@pytest.fixture(scope="module")
def trained_on_a_fixed_signal():
    """
    ExpectedTD (32x32 regressor, learning rate 3e-3), its regressor after 500 training calls of ``priorities`` on
    ``FixedSignal``, and the signal.
    """
    n_threads = th.get_num_threads()
    th.set_num_threads(1)
    th.manual_seed(0)
    scheme = ExpectedTD(hidden_sizes=(32, 32), learning_rate=3e-3)
    regressor = scheme.make_state(
        SimpleNamespace(
            observation_space=spaces.Box(-1, 1, (2,)), action_space=spaces.Box(-1, 1, (1,)), device=th.device("cpu")
        )
    )
    critics = SimpleNamespace(replay_scheme_state=regressor)
    signal = FixedSignal(seed=1)
    for _ in range(500):
        step = signal.step(*signal.batch(BATCH))
        scheme.priorities(step, th.zeros(BATCH), critics)
    th.set_num_threads(n_threads)
    return scheme, critics, signal


def test_regressor_learns_the_mean_td_error_not_its_noise(trained_on_a_fixed_signal):
    """
    Away from the boundary (|s_0| > 0.2), measured over torch seeds 0-3 (signal seeds 1-4, 4,000 points): on the
    noisy side (mean |td| 1.6) mean h -0.05 to 0.07 and mean |h| 0.04-0.08; on the clean side mean |h - 1| 0.03-0.04.
    """
    _, critics, signal = trained_on_a_fixed_signal
    observations, actions, _ = signal.batch(4_000)
    with th.no_grad():
        h = critics.replay_scheme_state(observations, actions).flatten()
    noisy, clean = observations[:, 0] < -0.2, observations[:, 0] > 0.2
    assert h[noisy].mean().abs() < 0.2
    assert h[noisy].abs().mean() < 0.25
    assert (h[clean] - 1).abs().mean() < 0.15


def test_priorities_are_the_predicted_expected_td_error_not_the_sampled_one(trained_on_a_fixed_signal):
    """A noisy transition sampled with |td| = 3 gets a priority near 0; a clean one with td = 1 gets about 1."""
    scheme, critics, signal = trained_on_a_fixed_signal
    observations, actions, _ = signal.batch(BATCH)
    noisy = observations[:, 0] < 0
    td = th.where(noisy, 3.0 * th.where(th.arange(BATCH) % 2 == 0, 1.0, -1.0), th.ones(BATCH)).reshape(-1, 1)
    regressor = critics.replay_scheme_state
    fitted = copy.deepcopy(regressor)
    priorities = scheme.priorities(signal.step(observations, actions, td), td.abs().flatten(), critics)
    # the priority is |h| after this step's fit, of each transition
    fitted.fit_step(observations, actions, td)
    with th.no_grad():
        assert th.allclose(priorities, fitted(observations, actions).abs().flatten())
    assert priorities[noisy].mean() < 0.3 < 0.8 < priorities[~noisy].mean()
    assert (priorities[noisy] < td.abs().flatten()[noisy]).all()


def model_with_expected_td(algorithm: type, env_id: str, **kwargs) -> SAC | DQN:
    """A model holding 200 transitions of random play, not trained yet."""
    model = algorithm(
        "MlpPolicy",
        env_id,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"alpha": 0.5, "epsilon": 1e-5},
        replay_scheme=ExpectedTD(hidden_sizes=(16,)),
        learning_starts=200,
        buffer_size=1_000,
        batch_size=BATCH,
        policy_kwargs={"net_arch": [16, 16]},
        seed=0,
        **kwargs,
    )
    model.learn(200)
    assert model.replay_buffer.n_priority_updates == 0
    return model


def test_a_dqn_training_call_fits_the_signed_td_errors_and_writes_the_fitted_prediction(record_calls, priorities):
    model = model_with_expected_td(DQN, "CartPole-v1")
    buffer, regressor = model.replay_buffer, model.replay_scheme_state
    assert isinstance(regressor, TDErrorRegressor)
    with th.no_grad():  # CartPole's rewards are all 1: lift Q by 1 so that the TD errors take both signs
        model.q_net.q_net[-1].bias.add_(1.0)
    policy_before, regressor_before = copy.deepcopy(model.policy), copy.deepcopy(regressor)
    before = priorities(buffer)
    fits = record_calls(regressor, "fit_step")
    write_backs = record_calls(model, "_write_back")

    model.train(gradient_steps=1, batch_size=BATCH)

    (((_, _, step), _),) = write_backs
    (((observations, actions, td), _),) = fits
    batch = step.batch
    assert observations is batch.observations and actions is batch.actions
    with th.no_grad():  # DQN's target, by hand from the networks before the step
        next_q = policy_before.q_net_target(batch.next_observations).amax(dim=1, keepdim=True)
        target = batch.rewards + (1 - batch.dones) * model.gamma * next_q
        q = policy_before.q_net(batch.observations).gather(1, batch.actions.long())
    assert th.allclose(td, target - q, atol=1e-6)  # signed: y - Q
    assert (td < 0).any() and (td > 0).any()
    # one Adam step of the regressor on those errors, then its prediction is the priority
    regressor_before.fit_step(observations, actions, target - q)
    for fitted, got in zip(regressor_before.parameters(), regressor.parameters(), strict=True):
        assert th.allclose(fitted, got, atol=1e-7)
    with th.no_grad():
        h = regressor(batch.observations, batch.actions).abs().flatten().numpy().astype(np.float64)
    expected = dict(zip(batch.indices.tolist(), (h + 1e-5) ** 0.5, strict=True))
    sampled = np.array(sorted(expected))
    after = priorities(buffer)
    np.testing.assert_allclose(after[sampled], [expected[i] for i in sampled], rtol=1e-5)
    unsampled = np.setdiff1d(np.arange(buffer.n_transitions), sampled)
    np.testing.assert_array_equal(after[unsampled], before[unsampled])
    assert not np.allclose(after[batch.indices], (np.abs(td.flatten().numpy()) + 1e-5) ** 0.5, rtol=1e-3)


def test_a_sac_training_call_fits_the_twin_critics_mean_error_and_writes_the_fitted_prediction(
    record_calls, priorities
):
    model = model_with_expected_td(SAC, "Pendulum-v1")
    buffer, regressor = model.replay_buffer, model.replay_scheme_state
    critic_before = copy.deepcopy(model.critic)
    fits = record_calls(regressor, "fit_step")
    write_backs = record_calls(model, "_write_back")

    model.train(gradient_steps=1, batch_size=BATCH)

    (((_, _, step), _),) = write_backs
    (((_, _, td), _),) = fits
    batch = step.batch
    with th.no_grad():  # the online critics before the step, averaged
        q1, q2 = critic_before(batch.observations, batch.actions)
    assert not th.allclose(q1, q2)
    assert th.allclose(td, step.targets - (q1 + q2) / 2, atol=1e-6)
    with th.no_grad():
        h = regressor(batch.observations, batch.actions).abs().flatten().numpy().astype(np.float64)
    expected = dict(zip(batch.indices.tolist(), (h + 1e-5) ** 0.5, strict=True))
    sampled = np.array(sorted(expected))
    np.testing.assert_allclose(priorities(buffer)[sampled], [expected[i] for i in sampled], rtol=1e-5)


def test_save_and_load_keep_the_regressor_and_its_optimizer(tmp_path):
    model = model_with_expected_td(SAC, "Pendulum-v1")
    initial = copy.deepcopy(model.replay_scheme_state.state_dict())
    model.learn(50, reset_num_timesteps=False)  # 50 training calls: the regressor moves
    trained = model.replay_scheme_state.state_dict()
    assert any(not th.equal(initial[name], trained[name]) for name in trained)
    model.save(tmp_path / "expected_td.zip")

    loaded = SAC.load(tmp_path / "expected_td.zip")

    assert loaded.replay_scheme == ExpectedTD(hidden_sizes=(16,))
    assert isinstance(loaded.replay_scheme_state, TDErrorRegressor)
    restored = loaded.replay_scheme_state.state_dict()
    assert restored.keys() == trained.keys()
    assert all(th.equal(restored[name], trained[name]) for name in trained)
    adam, restored_adam = model.replay_scheme_state.optimizer.state_dict(), loaded.replay_scheme_state.optimizer
    for moments, restored_moments in zip(
        adam["state"].values(), restored_adam.state_dict()["state"].values(), strict=True
    ):
        assert all(th.equal(moments[key], restored_moments[key]) for key in ("step", "exp_avg", "exp_avg_sq"))
    # the loaded optimizer steps the loaded regressor's own parameters
    assert {id(p) for group in restored_adam.param_groups for p in group["params"]} == {
        id(p) for p in loaded.replay_scheme_state.parameters()
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hidden_sizes": ()}, r"hidden_sizes must be a non-empty tuple of layer sizes, got \(\)"),
        ({"hidden_sizes": [64]}, r"hidden_sizes must be a non-empty tuple of layer sizes, got \[64\]"),
        ({"hidden_sizes": (64, 0)}, r"hidden_sizes must be a positive integer, got 0"),
        ({"hidden_sizes": (32.0,)}, r"hidden_sizes must be a positive integer, got 32.0"),
        ({"learning_rate": 0.0}, r"learning_rate must be a finite number > 0, got 0.0"),
        ({"learning_rate": math.nan}, r"learning_rate must be a finite number > 0, got nan"),
        ({"weight_decay": -1e-4}, r"weight_decay must be a finite number >= 0, got -0.0001"),
        ({"td_error_reduction": "median"}, r"td_error_reduction must be one of \('mean', 'max'\), got 'median'"),
    ],
)
def test_bad_parameters_raise_value_error_naming_them(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ExpectedTD(**kwargs)


def test_expected_td_is_refused_without_a_prioritized_buffer():
    with pytest.raises(ValueError, match=r"ExpectedTD\(.*\) samples in proportion .* is a ReplayBuffer"):
        SAC("MlpPolicy", "Pendulum-v1", replay_scheme=ExpectedTD())


def test_expected_td_is_refused_with_dict_observations(dict_pendulum):
    with pytest.raises(ValueError, match="flat observation, but the observation space is a Dict"):
        SAC(
            "MultiInputPolicy",
            dict_pendulum,
            replay_buffer_class=PrioritizedDictReplayBuffer,
            replay_scheme=ExpectedTD(),
        )

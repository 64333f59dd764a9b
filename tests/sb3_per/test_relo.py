"""ReLo (Sujit et al. 2023): the priority is the reducible loss, the online critics' loss minus the target critics'."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch as th

from sb3_per import DQN, PER, SAC, PrioritizedReplayBuffer, ReLo
from sb3_per.schemes.base import CriticStep
from sb3_per.schemes.relo import reducible_loss


class SACCritics:
    """Target critics with fixed Q-values, and SAC's own per-sample loss (the squared error)."""

    elementwise_critic_loss = SAC.elementwise_critic_loss

    def __init__(self, batch: object, target_q_values: tuple[th.Tensor, ...]) -> None:
        self.batch, self.fixed = batch, target_q_values

    def target_q_values(self, batch: object) -> tuple[th.Tensor, ...]:
        assert batch is self.batch  # the target critics see the step's own (s, a)
        return self.fixed


class DQNCritics(SACCritics):
    """The same with DQN's per-sample loss (the Huber loss)."""

    elementwise_critic_loss = DQN.elementwise_critic_loss


def column(*values: float) -> th.Tensor:
    return th.tensor(values).reshape(-1, 1)


def test_reducible_loss_is_the_clipped_difference_of_mean_squared_errors_for_sac():
    batch = SimpleNamespace()
    targets = column(0.0, 1.0, 2.0)
    online = (column(1.0, 1.0, 0.0).requires_grad_(), column(0.0, 3.0, 2.0).requires_grad_())
    target = (column(0.5, 1.0, 5.0), column(0.0, 1.0, 4.0))
    # online: (1 + 0) / 2 = 0.5, (0 + 4) / 2 = 2, (4 + 0) / 2 = 2
    # target: (0.25 + 0) / 2 = 0.125, (0 + 0) / 2 = 0, (9 + 4) / 2 = 6.5
    got = reducible_loss(CriticStep(batch, online, targets), SACCritics(batch, target))
    assert th.allclose(got, th.tensor([0.375, 2.0, 0.0]))
    assert got.shape == (3,) and not got.requires_grad


def test_reducible_loss_is_the_clipped_difference_of_huber_losses_for_dqn():
    batch = SimpleNamespace()
    targets = column(0.0, 0.0, 0.0, 0.0)
    online = (column(0.5, 3.0, -2.0, 0.2),)  # huber: 0.125, 2.5, 1.5, 0.02
    target = (column(0.0, 1.0, 0.5, -3.0),)  # huber: 0, 0.5, 0.125, 2.5
    got = reducible_loss(CriticStep(batch, online, targets), DQNCritics(batch, target))
    assert th.allclose(got, th.tensor([0.125, 2.0, 1.375, 0.0]))


@pytest.mark.parametrize(
    ("critics_class", "online", "target", "expected"),
    [
        # errors 1, 0, -2 and 0, 2, 0: squared, mean over the twin critics
        (
            SACCritics,
            (column(1.0, 1.0, 0.0), column(0.0, 3.0, 2.0)),
            (column(0.5, 1.0, 5.0), column(0.0, 1.0, 4.0)),
            [0.5, 2.0, 2.0],
        ),
        # errors 1, 2, -2: Huber 0.5, 1.5, 1.5
        (DQNCritics, (column(1.0, 3.0, 0.0),), (column(0.5, 1.0, 5.0),), [0.5, 1.5, 1.5]),
    ],
    ids=["SAC-squared-error", "DQN-Huber"],
)
def test_pers_loss_priority_is_the_online_critics_mean_loss_the_first_term_of_relos(
    critics_class, online, target, expected
):
    batch = SimpleNamespace()
    targets = column(0.0, 1.0, 2.0)
    critics = critics_class(batch, target)
    step = CriticStep(batch, online, targets)
    got = PER(priority="loss").priorities(step, th.zeros(3), critics)
    assert got.tolist() == expected
    assert th.equal(PER().priorities(step, th.full((3,), 7.0), critics), th.full((3,), 7.0))  # the TD errors
    target_loss = critics.elementwise_critic_loss(target, targets).mean(dim=1)
    assert th.equal(reducible_loss(step, critics), th.relu(got - target_loss))


def test_a_bad_per_priority_raises_value_error_naming_it():
    with pytest.raises(ValueError, match=r"priority must be one of \('td_error', 'loss'\), got 'reward'"):
        PER(priority="reward")


def relo_sac() -> SAC:
    """SAC with ReLo holding 200 transitions of random play, not trained yet (the authors' alpha and epsilon)."""
    model = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"alpha": 0.5, "epsilon": 1e-5},
        replay_scheme=ReLo(),
        learning_starts=200,
        buffer_size=1_000,
        batch_size=64,
        policy_kwargs={"net_arch": [16, 16]},
        seed=0,
    )
    model.learn(200)
    assert model.replay_buffer.n_priority_updates == 0
    return model


def test_a_sac_training_call_writes_the_reducible_loss_to_the_alpha_as_the_sampled_priorities(record_calls, priorities):
    model = relo_sac()
    buffer = model.replay_buffer
    # The target critics start as copies of the online ones (reducible loss 0 everywhere): move them apart.
    generator = th.Generator().manual_seed(0)
    with th.no_grad():
        for parameter in model.critic_target.parameters():
            parameter.add_(0.1 * th.randn(parameter.shape, generator=generator))
    critic_before, target_before = copy.deepcopy(model.critic), copy.deepcopy(model.critic_target)
    before = priorities(buffer)
    write_backs = record_calls(model, "_write_back")

    model.train(gradient_steps=1, batch_size=64)

    (((_, _, step), _),) = write_backs  # one critic step: (scheme, batches, step)
    batch, y = step.batch, step.targets
    with th.no_grad():  # by hand, from the networks before the step: SAC's squared error, averaged over the critics
        online = sum((q - y) ** 2 for q in critic_before(batch.observations, batch.actions)) / 2
        target = sum((q - y) ** 2 for q in target_before(batch.observations, batch.actions)) / 2
    reducible = (online - target).clamp(min=0).flatten().numpy().astype(np.float64)
    assert (reducible == 0).any() and (reducible > 1e-3).any()  # both sides of the clip are exercised
    last = dict(zip(batch.indices.tolist(), reducible.tolist(), strict=True))  # a repeated index keeps its last
    sampled = np.array(sorted(last))
    after = priorities(buffer)
    np.testing.assert_allclose(after[sampled], [(last[i] + 1e-5) ** 0.5 for i in sampled], rtol=1e-5)
    unsampled = np.setdiff1d(np.arange(buffer.n_transitions), sampled)
    np.testing.assert_array_equal(after[unsampled], before[unsampled])
    # not PER's priority: the absolute TD errors would give other values
    td = (sum((q - y).abs() for q in critic_before(batch.observations, batch.actions)) / 2).detach().flatten()
    assert not np.allclose(after[batch.indices], (td.numpy() + 1e-5) ** 0.5, rtol=1e-3)


@pytest.mark.parametrize(
    ("buffer", "message"),
    [
        ({}, r"ReLo\(.*\) samples in proportion to its priorities, but the replay buffer is a ReplayBuffer"),
        (
            {"replay_buffer_class": PrioritizedReplayBuffer, "replay_buffer_kwargs": {"prioritization": "rank"}},
            r"with rank-based prioritization: .*prioritization='proportional'",
        ),
    ],
    ids=["uniform_buffer", "rank_based_buffer"],
)
def test_relo_is_refused_without_a_proportional_prioritized_buffer(buffer, message):
    with pytest.raises(ValueError, match=message):
        SAC("MlpPolicy", "Pendulum-v1", replay_scheme=ReLo(), **buffer)


def test_bad_td_error_reduction_raises_value_error_naming_it():
    with pytest.raises(ValueError, match=r"td_error_reduction must be one of \('mean', 'max'\), got 'median'"):
        ReLo(td_error_reduction="median")

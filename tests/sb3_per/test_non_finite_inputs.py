"""A reward or observation that is not finite, or a loss that overflows, stops training with a ``ValueError`` that
names it before any optimizer step, so that the model stays as it was; a priority that overflows names the scheme."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch as th

from sb3_per import DQN, SAC, TQC, UPER, PrioritizedReplayBuffer, ReLo
from sb3_per.schemes.base import check_finite_critic_loss


def small() -> dict:
    """Small settings, a new dict each time (SB3 writes into policy_kwargs)."""
    return dict(learning_starts=1_000, buffer_size=200, batch_size=256, policy_kwargs=dict(net_arch=[16]), seed=0)


def filled(algorithm, env: str, **kwargs):
    """A model whose buffer holds 30 transitions or more (DQN collects 4 at a time), before any training call."""
    model = algorithm("MlpPolicy", env, replay_buffer_class=PrioritizedReplayBuffer, **small(), **kwargs)
    model.learn(30)
    assert model.replay_buffer.n_transitions >= 30 and model.replay_buffer.n_priority_updates == 0
    return model


def learned_state(model) -> list[th.Tensor]:
    """Copies of every parameter and optimizer moment the training call could change."""
    tensors = [p.detach().clone() for p in model.policy.parameters()]
    optimizers = [module.optimizer for module in model.policy.modules() if hasattr(module, "optimizer")]
    optimizers += [getattr(model, "ent_coef_optimizer", None)]
    assert optimizers[0] is not None
    for optimizer in optimizers:
        if optimizer is not None:
            for state in optimizer.state.values():
                tensors += [value.clone() for value in state.values() if isinstance(value, th.Tensor)]
    if getattr(model, "log_ent_coef", None) is not None:
        tensors.append(model.log_ent_coef.detach().clone())
    return tensors


def assert_unchanged(before: list[th.Tensor], model) -> None:
    after = learned_state(model)
    assert len(after) == len(before)
    assert all(th.equal(a, b) for a, b in zip(after, before, strict=True))


@pytest.mark.parametrize("bad", [math.nan, math.inf], ids=["nan", "inf"])
def test_a_non_finite_reward_is_named_and_leaves_sac_as_it_was(bad):
    model = filled(SAC, "Pendulum-v1")
    model.train(gradient_steps=1)  # warm the optimizers so that their moments exist
    model.replay_buffer.rewards[17, 0] = bad
    before = learned_state(model)
    with pytest.raises(ValueError, match=rf"holds a reward that is not finite \({bad}, at index 17\)"):
        model.train(gradient_steps=1)
    assert_unchanged(before, model)


def test_a_nan_observation_is_named_and_leaves_dqn_as_it_was():
    model = filled(DQN, "CartPole-v1")
    model.replay_buffer.next_observations[3, 0, 2] = np.nan
    before = learned_state(model)
    with pytest.raises(ValueError, match=r"holds a next observation that is not finite \(nan, at index 3\)"):
        model.train(gradient_steps=1)
    assert_unchanged(before, model)


def test_a_finite_reward_whose_squared_error_overflows_is_named_before_the_critic_step():
    """SAC's entropy-coefficient step comes first in SB3's order, and is taken; the critic and the actor are not."""
    model = filled(SAC, "Pendulum-v1", replay_scheme=ReLo())
    model.train(gradient_steps=1)
    model.replay_buffer.rewards[5, 0] = 1e30
    networks = [p.detach().clone() for p in model.policy.parameters()]
    with pytest.raises(ValueError, match=r"critic loss is inf: the targets and the critics' estimates are finite "):
        model.train(gradient_steps=1)
    assert all(th.equal(a, p) for a, p in zip(networks, model.policy.parameters(), strict=True))


def test_an_overflowing_priority_names_the_scheme_not_the_td_errors():
    model = filled(TQC, "Pendulum-v1", replay_scheme=UPER())  # a quantile Huber loss: finite at 1e30
    model.replay_buffer.rewards[5, 0] = 1e30
    with pytest.raises(ValueError, match=r"UPER's priorities overflowed \(inf\) though the TD errors are finite"):
        model.train(gradient_steps=1)


def test_the_loss_check_says_which_input_was_not_finite():
    q = (th.zeros(4, 1), th.zeros(4, 1))
    check_finite_critic_loss(th.tensor(1.0), q, th.zeros(4, 1))  # a finite loss passes
    with pytest.raises(ValueError, match="the TD targets are not finite"):
        check_finite_critic_loss(th.tensor(math.nan), q, th.tensor([[0.0], [math.inf], [0.0], [0.0]]))
    with pytest.raises(ValueError, match=r"the critics' estimates are not finite \(the critics diverged\)"):
        check_finite_critic_loss(th.tensor(math.nan), (th.zeros(4, 1), th.full((4, 1), math.nan)), th.zeros(4, 1))

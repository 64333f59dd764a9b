"""UPER: the information-gain priority of a quantile ensemble (Carrasco-Davis et al. 2025) on sb3_per.TQC, refused
where it cannot apply."""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
import torch as th

from sb3_per import DDPG, DQN, PER, SAC, TD3, TQC, UPER, PrioritizedReplayBuffer
from sb3_per.schemes.base import CriticStep
from sb3_per.schemes.uper import information_gain, population_variance

ENV_ID = "Pendulum-v1"
N_QUANTILES, N_CRITICS, DROP_PER_NET = 5, 2, 2


def uper_tqc(**kwargs: Any) -> TQC:
    settings = {
        "replay_buffer_class": PrioritizedReplayBuffer,
        "replay_scheme": UPER(),
        "policy_kwargs": {"net_arch": [16, 16], "n_quantiles": N_QUANTILES, "n_critics": N_CRITICS},
        "top_quantiles_to_drop_per_net": DROP_PER_NET,
        "batch_size": 32,
        "learning_starts": 50,
        "buffer_size": 1000,
        "seed": 0,
    }
    return TQC("MlpPolicy", ENV_ID, **{**settings, **kwargs})


def information_gain_by_hand(current: np.ndarray, target: np.ndarray, min_aleatoric: float) -> np.ndarray:
    """The paper's ``0.5 * log(1 + (epistemic + target_error) / aleatoric)``, written out in numpy (float64)."""
    current, target = current.astype(np.float64), target.astype(np.float64)
    ensemble_mean = current.mean(axis=1)  # the ensemble-mean distribution, (batch, quantiles)
    aleatoric = ensemble_mean.var(axis=1)  # its variance over the quantiles
    epistemic = current.var(axis=1).mean(axis=1)  # the variance across critics, averaged over the quantiles
    target_error = (target.mean(axis=(1, 2)) - ensemble_mean.mean(axis=1)) ** 2
    return 0.5 * np.log(1 + (epistemic + target_error) / np.maximum(aleatoric, min_aleatoric))


# --- the priority ---------------------------------------------------------------------------------------


def test_priority_is_the_papers_information_gain_by_hand():
    """Two critics of three quantiles, two target quantiles, population variances."""
    current = th.tensor(
        [
            [[0.0, 1.0, 5.0], [2.0, 3.0, 1.0]],  # ensemble mean (1, 2, 3): aleatoric 2/3; epistemic (1 + 1 + 4) / 3
            [[0.0, 3.0, 6.0], [0.0, 3.0, 6.0]],  # wide but agreed and right on the mean: priority 0
            [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],  # no spread at all: aleatoric floored at min_aleatoric
        ],
        requires_grad=True,
    )
    target = th.tensor([[[4.0, 6.0]], [[1.0, 5.0]], [[1.0, 2.0]]])
    # sample 0: target error (5 - 2)^2 = 9 -> 0.5 log(1 + (2 + 9) / (2/3)); sample 2: 0.5 log(1 + 0.25 / 0.01)
    expected = [0.5 * math.log(1 + 11 / (2 / 3)), 0.0, 0.5 * math.log(26)]

    gain = information_gain(current, target, min_aleatoric=0.01)
    assert gain.shape == (3,)
    assert not gain.requires_grad
    assert gain.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-7)
    np.testing.assert_allclose(
        information_gain_by_hand(current.detach().numpy(), target.numpy(), 0.01), expected, rtol=1e-12, atol=1e-12
    )
    # the scheme writes back exactly this, from the quantiles of the critic step, with its own floor
    step = CriticStep(batch=None, q_values=(), targets=target.mean(dim=2), quantiles=(current.detach(), target))
    priorities = UPER(min_aleatoric=0.01).priorities(step, th.zeros(3), critics=None)
    assert priorities.tolist() == pytest.approx(expected, rel=1e-6, abs=1e-7)


def test_priority_does_not_change_when_returns_are_shifted_or_scaled():
    """Every term is a variance or a squared difference of means: the ratio has no unit."""
    generator = th.Generator().manual_seed(0)
    current = th.randn(8, 2, 5, generator=generator, dtype=th.float64)
    target = th.randn(8, 1, 6, generator=generator, dtype=th.float64)
    gain = information_gain(current, target, 1e-12)
    th.testing.assert_close(information_gain(10 * current - 3, 10 * target - 3, 1e-12), gain)
    np.testing.assert_allclose(gain.numpy(), information_gain_by_hand(current.numpy(), target.numpy(), 1e-12))


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_population_variance_is_torchs_unbiased_false_variance_up_to_rounding(dim: int):
    values = 3.0 + 2.0 * th.randn(7, 2, 5, generator=th.Generator().manual_seed(1), dtype=th.float64)
    th.testing.assert_close(population_variance(values, dim), values.var(dim=dim, unbiased=False), rtol=1e-12, atol=0)


# --- where UPER applies ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("algorithm", "env_id"),
    [(SAC, "Pendulum-v1"), (TD3, "Pendulum-v1"), (DDPG, "Pendulum-v1"), (DQN, "CartPole-v1")],
    ids=["SAC", "TD3", "DDPG", "DQN"],
)
def test_uper_is_refused_without_quantile_critics(algorithm, env_id):
    name = algorithm.__name__
    with pytest.raises(ValueError, match=rf"UPER\(.*\) needs quantile critics \(sb3_per\.TQC\), but {name}'s are not"):
        algorithm("MlpPolicy", env_id, replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=UPER())


def test_uper_is_refused_without_a_prioritized_buffer():
    with pytest.raises(ValueError, match=r"UPER\(.*\) samples in proportion to its priorities, .* is a ReplayBuffer:"):
        uper_tqc(replay_buffer_class=None)
    with pytest.raises(ValueError, match=r"is a PrioritizedReplayBuffer with rank-based prioritization"):
        uper_tqc(replay_buffer_kwargs={"prioritization": "rank"})


@pytest.mark.parametrize("value", [0.0, -1e-6, float("nan"), float("inf"), "1e-6", None, True])
def test_bad_min_aleatoric_raises(value):
    with pytest.raises(ValueError, match=rf"min_aleatoric must be a finite number > 0, got {re.escape(repr(value))}"):
        UPER(min_aleatoric=value)


def test_bad_td_error_reduction_raises():
    with pytest.raises(ValueError, match=r"td_error_reduction must be one of \('mean', 'max'\), got 'sum'"):
        UPER(td_error_reduction="sum")


# --- training -------------------------------------------------------------------------------------------


def test_priorities_of_the_sampled_indices_are_the_information_gain_of_that_step(
    priorities, assert_only_sampled_priorities_follow, one_actor_critic_step, truncated_target_quantiles
):
    """The quantiles before the critic's optimizer step, at the batch's own (s, a), against its truncated targets."""
    model = uper_tqc(learning_starts=300)
    model.learn(300)  # collects, does not train
    buffer = model.replay_buffer
    before = priorities(buffer)

    step = one_actor_critic_step(model, batch_size=32)

    targets = truncated_target_quantiles(model, step, kept=N_CRITICS * (N_QUANTILES - DROP_PER_NET))
    with th.no_grad():
        current = step.networks.critic(step.batch.observations, step.batch.actions)
    gain = information_gain_by_hand(current.numpy(), targets.unsqueeze(1).numpy(), 1e-12)
    assert assert_only_sampled_priorities_follow(buffer, before, step.batch.indices, gain).size > 20


def test_a_short_run_writes_finite_positive_priorities(priorities):
    model = uper_tqc()
    model.learn(150)
    buffer = model.replay_buffer
    stored = priorities(buffer)
    assert buffer.n_priority_updates == model._n_updates == 100
    assert np.isfinite(stored).all() and (stored > 0).all()
    assert len(np.unique(stored)) > 50  # written back, not the entry priority
    for key in PER.logger_keys:  # UPER logs PER's keys
        assert math.isfinite(model.logger.name_to_value[key]), key

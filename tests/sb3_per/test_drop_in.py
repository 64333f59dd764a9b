"""Where SB3 is silent, the PER algorithms do what an SB3 user expects: the n-step discount, LAP's and PAL's
authors' defaults, and a loaded replay buffer that changes the kind of replay."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import torch as th

from sb3_per import DDPG, DQN, LAP, PAL, PER, SAC, TD3, PrioritizedReplayBuffer
from sb3_per.schemes.losses import lap_loss, pal_loss

CONTINUOUS = {"SAC": SAC, "TD3": TD3, "DDPG": DDPG}


def small() -> dict[str, Any]:
    """Small, fast settings (a fresh dict: SB3 writes into policy_kwargs)."""
    return {"policy_kwargs": {"net_arch": [16, 16]}, "batch_size": 32, "learning_starts": 50, "seed": 0}


# --- the n-step discount -----------------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", [SAC, TD3, DDPG])
def test_the_buffer_discounts_n_step_returns_with_the_algorithms_gamma(algorithm):
    kwargs = {"n_steps": 3}
    model = algorithm(
        "MlpPolicy", "Pendulum-v1", gamma=0.9, replay_buffer_class=PrioritizedReplayBuffer, replay_buffer_kwargs=kwargs
    )
    assert model.replay_buffer.gamma == 0.9
    assert kwargs == {"n_steps": 3}  # the user's dict is left as it was


def test_dqn_gives_its_gamma_to_the_buffer_too():
    model = DQN("MlpPolicy", "CartPole-v1", gamma=0.8, replay_buffer_class=PrioritizedReplayBuffer, buffer_size=100)
    assert model.replay_buffer.gamma == 0.8


def test_a_buffer_gamma_that_disagrees_with_the_algorithms_raises_naming_both():
    with pytest.raises(ValueError, match=r"gamma=0\.5 .* gamma=0\.9"):
        SAC(
            "MlpPolicy",
            "Pendulum-v1",
            gamma=0.9,
            replay_buffer_class=PrioritizedReplayBuffer,
            replay_buffer_kwargs={"n_steps": 3, "gamma": 0.5},
        )
    agreeing = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        gamma=0.9,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"n_steps": 3, "gamma": 0.9},
    )
    assert agreeing.replay_buffer.gamma == 0.9


# --- LAP and PAL as their authors wrote them -----------------------------------------------------------------


@pytest.mark.parametrize("name", CONTINUOUS)
@pytest.mark.parametrize(("scheme", "expected"), [(PER, "mean"), (LAP, "max"), (PAL, "max")])
def test_td_error_reduction_defaults_to_the_max_for_lap_and_pal_and_the_mean_for_per(name, scheme, expected):
    buffer_class = None if scheme is PAL else PrioritizedReplayBuffer
    model = CONTINUOUS[name]("MlpPolicy", "Pendulum-v1", replay_scheme=scheme(), replay_buffer_class=buffer_class)
    assert model.replay_scheme.td_error_reduction == expected
    other = "mean" if expected == "max" else "max"
    chosen = CONTINUOUS[name](
        "MlpPolicy", "Pendulum-v1", replay_scheme=scheme(td_error_reduction=other), replay_buffer_class=buffer_class
    )
    assert chosen.replay_scheme.td_error_reduction == other


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
@pytest.mark.parametrize("algorithm", [SAC, DQN])
def test_a_bad_lap_min_priority_raises_naming_it(algorithm, bad):
    env_id = "CartPole-v1" if algorithm is DQN else "Pendulum-v1"
    # LAP checks its parameters when it is made, before any algorithm sees it
    with pytest.raises(ValueError, match=rf"min_priority .*{bad}"):
        algorithm("MlpPolicy", env_id, replay_scheme=LAP(min_priority=bad), replay_buffer_class=PrioritizedReplayBuffer)


def test_lap_min_priority_floors_the_priorities(priorities):
    model = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        replay_scheme=LAP(min_priority=3.0),
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"alpha": 0.4},
        **small(),
    )
    model.learn(60)
    buffer = model.replay_buffer
    written = priorities(buffer)[priorities(buffer) != 1.0]  # 1.0: not sampled yet, at the entry priority
    assert len(written) > 0
    assert written.min() >= (3.0 + buffer.epsilon) ** 0.4 * (1 - 1e-9)


def test_lap_and_pal_losses_use_the_min_priority_as_their_threshold():
    kappa, alpha = 0.5, 0.4
    q = th.tensor([[0.25], [2.0]], requires_grad=True)
    target = th.zeros(2, 1)
    # LAP: 0.5 d^2 below kappa, kappa * (|d| - kappa / 2) above
    assert lap_loss((q,), target, kappa).item() == pytest.approx((0.5 * 0.25**2 + 0.5 * (2.0 - 0.25)) / 2)
    # PAL: kappa^alpha 0.5 d^2 below, kappa |d|^(1+alpha) / (1+alpha) above; over mean(max(|d|, kappa)^alpha)
    per_sample = [kappa**alpha * 0.5 * 0.25**2, kappa * 2.0 ** (1 + alpha) / (1 + alpha)]
    normalizer = (kappa**alpha + 2.0**alpha) / 2
    loss = pal_loss((q,), target, alpha=alpha, min_priority=kappa)
    assert loss.item() == pytest.approx(np.mean(per_sample) / normalizer, rel=1e-6)


# --- load_replay_buffer that changes the kind of replay ------------------------------------------------------


def test_loading_a_buffer_that_changes_the_kind_of_replay_warns_naming_both(tmp_path):
    prioritized = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, **small())
    uniform = SAC("MlpPolicy", "Pendulum-v1", **small())
    prioritized.save_replay_buffer(tmp_path / "prioritized.pkl")
    uniform.save_replay_buffer(tmp_path / "uniform.pkl")

    with pytest.warns(UserWarning, match=r"loaded ReplayBuffer replaces the model's PrioritizedReplayBuffer"):
        prioritized.load_replay_buffer(tmp_path / "uniform.pkl")
    with pytest.warns(UserWarning, match=r"loaded PrioritizedReplayBuffer replaces the model's ReplayBuffer"):
        uniform.load_replay_buffer(tmp_path / "prioritized.pkl")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        uniform.load_replay_buffer(tmp_path / "prioritized.pkl")  # the same kind again: silent
    assert isinstance(uniform.replay_buffer, PrioritizedReplayBuffer)

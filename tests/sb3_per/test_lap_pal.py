"""LAP and PAL (Fujimoto, Meger & Precup 2020) as replay schemes of the PER algorithms."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.save_util import load_from_zip_file
from torch.nn import functional as F

import sb3_per
import sb3_per.schemes.lap as lap_scheme
import sb3_per.schemes.pal as pal_scheme
from sb3_per import (
    DQN,
    LA3P,
    LAP,
    PAL,
    PER,
    SAC,
    TD3,
    UPER,
    ExpectedReLo,
    ExpectedTD,
    PrioritizedReplayBuffer,
    ReLo,
    ReplayScheme,
)
from sb3_per.schemes.losses import lap_loss, pal_loss


def small() -> dict[str, Any]:
    """Small, fast settings (a fresh dict: SB3 writes into policy_kwargs)."""
    return {"policy_kwargs": {"net_arch": [16, 16]}, "batch_size": 32, "learning_starts": 50, "seed": 0}


def test_lap_loss_matches_hand_computation():
    q1 = th.tensor([[0.5], [3.0], [-1.0]], requires_grad=True)
    q2 = th.tensor([[0.0], [1.0], [2.5]], requires_grad=True)
    target = th.tensor([[0.0], [1.0], [1.0]])
    # errors: critic 1: 0.5, 2, -2 -> huber 0.125, 1.5, 1.5; critic 2: 0, 0, 1.5 -> 0, 0, 1.0
    expected = (0.125 + 1.5 + 1.5) / 3 + (0.0 + 0.0 + 1.0) / 3
    loss = lap_loss((q1, q2), target)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    loss.backward()  # Huber gradient: the error below 1, its sign above, over the batch
    assert th.allclose(q1.grad, th.tensor([[0.5], [1.0], [-1.0]]) / 3)
    assert th.allclose(q2.grad, th.tensor([[0.0], [0.0], [1.0]]) / 3)


def test_lap_loss_for_one_critic_is_sb3s_dqn_loss():
    q, target = th.randn(64, 1), th.randn(64, 1) * 3
    assert th.allclose(lap_loss((q,), target), F.smooth_l1_loss(q, target))


@pytest.mark.parametrize(("reduction", "normalizer"), [("max", (1.0 + 2.0**0.4 + 3.0**0.4) / 3), ("mean", None)])
def test_pal_loss_matches_hand_computation(reduction, normalizer):
    alpha = 0.4
    q1 = th.tensor([[0.5], [2.0], [-3.0]], requires_grad=True)
    q2 = th.tensor([[0.0], [1.0], [1.5]], requires_grad=True)
    target = th.tensor([[0.0], [0.0], [0.0]])
    # |errors|: critic 1: 0.5, 2, 3; critic 2: 0, 1, 1.5
    pal = lambda d: 0.5 * d**2 if d < 1 else d ** (1 + alpha) / (1 + alpha)  # noqa: E731
    per_critic = [sum(pal(d) for d in (0.5, 2.0, 3.0)) / 3, sum(pal(d) for d in (0.0, 1.0, 1.5)) / 3]
    if normalizer is None:  # mean over critics of |d|: 0.25, 1.5, 2.25
        normalizer = (1.0 + 1.5**0.4 + 2.25**0.4) / 3
    loss = pal_loss((q1, q2), target, alpha=alpha, reduction=reduction)
    assert loss.item() == pytest.approx(sum(per_critic) / normalizer, rel=1e-6)
    loss.backward()  # the normaliser is a constant: the gradient is pal'(d) / (3 * normaliser)
    expected_grad = th.tensor([[0.5], [2.0**alpha], [-(3.0**alpha)]]) / (3 * normalizer)
    assert th.allclose(q1.grad, expected_grad, rtol=1e-5)


def test_pal_loss_rejects_an_unknown_reduction():
    # the loss names its own parameter; the schemes name theirs, td_error_reduction (below)
    with pytest.raises(ValueError, match=r"reduction must be one of \('mean', 'max'\), got 'median'"):
        pal_loss((th.zeros(2, 1),), th.zeros(2, 1), reduction="median")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replay_scheme": "lap"}, r"replay_scheme must be a replay scheme .* got 'lap'"),
        ({"replay_scheme": LAP()}, r"LAP\(.*\) samples in proportion"),
        (
            {
                "replay_scheme": LAP(),
                "replay_buffer_class": PrioritizedReplayBuffer,
                "replay_buffer_kwargs": {"prioritization": "rank"},
            },
            "prioritization='proportional'",
        ),
        ({"replay_scheme": PAL(), "replay_buffer_class": PrioritizedReplayBuffer}, r"PAL\(.*\) replaces"),
    ],
    ids=["a_string", "lap_on_a_uniform_buffer", "lap_on_a_rank_buffer", "pal_on_a_prioritized_buffer"],
)
def test_bad_replay_scheme_settings_are_refused_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SAC("MlpPolicy", "Pendulum-v1", **kwargs)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: PAL(alpha=-1.0), r"alpha must be a finite number >= 0, got -1.0"),
        (lambda: LAP(min_priority=0.0), r"min_priority must be a finite number > 0, got 0.0"),
        (lambda: LAP(td_error_reduction="median"), r"td_error_reduction must be one of \('mean', 'max'\)"),
        (lambda: PAL(td_error_reduction="median"), r"td_error_reduction must be one of \('mean', 'max'\)"),
        # not numbers: a ValueError naming the parameter and the value (a bool is not a fraction of 1.0)
        (lambda: PAL(alpha="0.4"), r"alpha must be a finite number >= 0, got '0.4'"),
        (lambda: LAP(min_priority=None), r"min_priority must be a finite number > 0, got None"),
        (lambda: LA3P(fraction=True), r"fraction must be in \(0, 1\], got True"),
        (lambda: LA3P(fraction=None), r"fraction must be in \(0, 1\], got None"),
    ],
    ids=[
        "pal_alpha",
        "lap_min_priority",
        "lap_td_error_reduction",
        "pal_td_error_reduction",
        "pal_alpha_string",
        "lap_min_priority_none",
        "la3p_fraction_bool",
        "la3p_fraction_none",
    ],
)
def test_bad_scheme_parameters_are_refused_when_the_scheme_is_made(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def lap_model(algorithm: type, env_id: str, **kwargs: Any):
    settings = {**small(), "replay_buffer_class": PrioritizedReplayBuffer, "replay_scheme": LAP(), **kwargs}
    return algorithm("MlpPolicy", env_id, **settings)


@pytest.mark.parametrize(("algorithm", "env_id"), [(SAC, "Pendulum-v1"), (TD3, "Pendulum-v1"), (DQN, "CartPole-v1")])
def test_lap_trains_with_unweighted_huber_loss_and_priorities_never_below_one(
    monkeypatch, priorities, algorithm, env_id
):
    model = lap_model(algorithm, env_id)
    model.learn(60)
    updates_before = model.replay_buffer.n_priority_updates
    calls = []
    real_lap_loss = lap_scheme.lap_loss

    def spy(current_q_values, target_q_values, min_priority):
        calls.append(len(current_q_values))
        return real_lap_loss(current_q_values, target_q_values, min_priority)

    def no_is_weights(*args, **kwargs):
        raise AssertionError("LAP used the IS-weighted loss")

    monkeypatch.setattr(lap_scheme, "lap_loss", spy)
    monkeypatch.setattr(model, "weighted_critic_loss", no_is_weights)
    model.train(gradient_steps=5, batch_size=32)
    assert calls == [1 if algorithm is DQN else 2] * 5
    after = priorities(model.replay_buffer)
    assert after.min() >= 1.0
    assert model.replay_buffer.n_priority_updates == updates_before + 5
    logged = model.logger.name_to_value
    assert "train/per_priority_mean" in logged and "train/per_weight_mean" not in logged


def test_lap_priorities_are_the_clamped_td_errors_to_the_alpha():
    model = lap_model(
        SAC, "Pendulum-v1", replay_scheme=LAP(td_error_reduction="max"), replay_buffer_kwargs={"alpha": 0.4}
    )
    model.learn(60)
    buffer = model.replay_buffer
    recorded = []
    real = buffer.update_priorities

    def spy(indices, td_errors, stamps):
        recorded.append((np.asarray(indices).copy(), td_errors.detach().cpu().numpy().copy()))
        real(indices, td_errors, stamps)

    buffer.update_priorities = spy
    model.train(gradient_steps=1, batch_size=32)
    ((indices, td_errors),) = recorded
    assert td_errors.min() >= 1.0  # floored before they become priorities
    got = buffer.tree[indices]
    last = dict(zip(indices.tolist(), td_errors.tolist(), strict=True))
    np.testing.assert_allclose(got, [(last[i] + buffer.epsilon) ** 0.4 for i in indices.tolist()], rtol=1e-6)


@pytest.mark.parametrize(("algorithm", "env_id"), [(SAC, "Pendulum-v1"), (TD3, "Pendulum-v1"), (DQN, "CartPole-v1")])
def test_pal_trains_on_uniform_replay_with_the_pal_loss(monkeypatch, algorithm, env_id):
    model = algorithm("MlpPolicy", env_id, replay_scheme=PAL(alpha=0.3), **small())
    model.learn(60)
    assert not hasattr(model.replay_buffer, "update_priorities")
    calls = []
    real_pal_loss = pal_scheme.pal_loss

    def spy(current_q_values, target_q_values, alpha, reduction, min_priority):
        calls.append((alpha, reduction, min_priority))
        return real_pal_loss(current_q_values, target_q_values, alpha, reduction, min_priority)

    monkeypatch.setattr(pal_scheme, "pal_loss", spy)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.train(gradient_steps=3, batch_size=32)
    assert calls == [(0.3, "max", 1.0)] * 3  # the authors' max over the critics, by default
    assert any(not th.equal(b, p) for b, p in zip(before, model.policy.parameters(), strict=True))
    assert not any(key.startswith("train/per_") for key in model.logger.name_to_value)


def test_replay_scheme_survives_save_and_load(tmp_path):
    model = SAC("MlpPolicy", "Pendulum-v1", replay_scheme=PAL(alpha=0.25), **small())
    model.save(tmp_path / "pal.zip")
    loaded = SAC.load(tmp_path / "pal.zip")
    assert loaded.replay_scheme == PAL(alpha=0.25) and loaded.replay_scheme.alpha == 0.25


def test_the_replay_schemes_are_the_documented_ones():
    exported = {name for name in sb3_per.__all__ if isinstance(getattr(sb3_per, name), type)}
    schemes = {name for name in exported if issubclass(getattr(sb3_per, name), ReplayScheme)}
    assert schemes - {"ReplayScheme"} == {"PER", "LAP", "PAL", "LA3P", "UPER", "ExpectedTD", "ReLo", "ExpectedReLo"}
    for scheme in (PER, LAP, PAL, LA3P, UPER, ExpectedTD, ReLo, ExpectedReLo):
        assert scheme() == scheme()  # each made with its defaults, a frozen value


def test_a_loaded_replay_buffer_must_suit_the_replay_scheme(tmp_path):
    lap = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=LAP(), **small())
    lap.learn(60)
    lap.save_replay_buffer(tmp_path / "prioritized.pkl")
    pal = TD3("MlpPolicy", "Pendulum-v1", replay_scheme=PAL(), **small())
    with pytest.raises(ValueError, match=r"PAL\(.*\) .* is a PrioritizedReplayBuffer"):
        pal.load_replay_buffer(tmp_path / "prioritized.pkl")
    assert not isinstance(pal.replay_buffer, PrioritizedReplayBuffer)  # the refused buffer was not kept
    pal.save_replay_buffer(tmp_path / "uniform.pkl")
    with pytest.raises(ValueError, match=r"LAP\(.*\) .* is a ReplayBuffer"):
        lap.load_replay_buffer(tmp_path / "uniform.pkl")
    lap.load_replay_buffer(tmp_path / "prioritized.pkl")  # the right kind still loads
    assert lap.replay_buffer.n_transitions == 60


def test_the_training_calls_statistics_are_not_kept_on_the_model(tmp_path):
    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, **small())
    model.learn(60)
    assert "train/per_weight_mean" in model.logger.name_to_value  # they reached the logger
    assert not [name for name in vars(model) if name.startswith("_per_")]
    model.save(tmp_path / "model.zip")
    data, _, _ = load_from_zip_file(tmp_path / "model.zip")
    assert not any(key.startswith("_per_") for key in data)
    assert data["replay_scheme"] is None  # the default: PER() with the prioritized buffer

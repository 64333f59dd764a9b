"""Tests for sb3_per.TD3 and sb3_per.DDPG: IS-weighted critic loss, priority write-back, SB3 parity."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import stable_baselines3
import torch as th
from torch.nn import functional as F

import sb3_per.per_algorithm as per_module
import sb3_per.schemes.base as scheme_base
from sb3_per import DDPG, PER, TD3, PrioritizedReplayBuffer
from sb3_per.schemes.losses import weighted_mse_loss

ENV_ID = "Pendulum-v1"
ALGORITHMS = {"TD3": (TD3, stable_baselines3.TD3), "DDPG": (DDPG, stable_baselines3.DDPG)}


def per_model(algorithm: str, **kwargs: Any) -> TD3:
    settings: dict[str, Any] = {
        "replay_buffer_class": PrioritizedReplayBuffer,
        "policy_kwargs": tiny_net(),
        "batch_size": 32,
        "learning_starts": 100,
        "seed": 0,
    }
    settings.update(kwargs)
    return ALGORITHMS[algorithm][0]("MlpPolicy", ENV_ID, **settings)


def tiny_net() -> dict[str, Any]:
    """A fresh dict each time: SB3's DDPG writes ``n_critics`` into the ``policy_kwargs`` it is given."""
    return {"net_arch": [16, 16]}


# --- the loss: what SB3's TD3 computes, weighted per sample -------------------------------------------------


def test_td3_weighted_critic_loss_matches_hand_computation():
    q1 = th.tensor([[1.0], [2.0], [-1.0]], requires_grad=True)
    q2 = th.tensor([[0.5], [3.0], [0.0]], requires_grad=True)
    target = th.tensor([[0.0], [1.0], [1.0]])
    weights = th.tensor([[1.0], [0.5], [0.25]])
    # critic 1: w * (q - y)^2 = 1*1, 0.5*1, 0.25*4 -> mean 2.5/3; critic 2: 1*0.25, 0.5*4, 0.25*1 -> mean 2.5/3
    loss = weighted_mse_loss((q1, q2), target, weights, scale=1.0)
    assert loss.item() == pytest.approx(2.5 / 3 + 2.5 / 3, rel=1e-6)
    loss.backward()  # TD3 has no 0.5 factor: d/dq_i = 2 w (q_i - y) / batch
    assert th.allclose(q1.grad, 2 * weights * (q1.detach() - target) / 3)
    # one critic (DDPG): mean(w * (q - y)^2)
    assert weighted_mse_loss([q1], target, weights.reshape(-1), scale=1.0).item() == pytest.approx(2.5 / 3)


@pytest.mark.parametrize("n_critics", [1, 2])
def test_td3_weighted_critic_loss_with_unit_weights_is_sb3_loss(n_critics):
    generator = th.Generator().manual_seed(0)
    qs = [th.randn(64, 1, generator=generator) for _ in range(n_critics)]
    target = th.randn(64, 1, generator=generator)
    sb3_loss = sum(F.mse_loss(q, target) for q in qs)  # as in stable_baselines3.TD3.train
    assert th.allclose(weighted_mse_loss(qs, target, th.ones(64, 1), scale=1.0), sb3_loss)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_invalid_td_error_reduction_raises(algorithm):
    with pytest.raises(ValueError, match=r"td_error_reduction.*'sum'"):
        per_model(algorithm, replay_scheme=PER(td_error_reduction="sum"))
    # the reduction is the scheme's now: the algorithm itself has no such parameter
    with pytest.raises(TypeError, match="td_error_reduction"):
        per_model(algorithm, td_error_reduction="max")


# --- uniform replay: exactly SB3 -------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_matches_stable_baselines3_with_a_uniform_buffer(monkeypatch, algorithm):
    ours, theirs = ALGORITHMS[algorithm]
    settings = {"batch_size": 32, "learning_starts": 50, "seed": 3}
    reference = theirs("MlpPolicy", ENV_ID, policy_kwargs=tiny_net(), **settings).learn(250)

    def must_not_run(*args, **kwargs):
        raise AssertionError("PER work done with a uniform buffer")

    for module, name in [(per_module, "weighted_mse_loss"), (scheme_base, "absolute_td_errors")]:
        monkeypatch.setattr(module, name, must_not_run)
    model = ours("MlpPolicy", ENV_ID, policy_kwargs=tiny_net(), **settings).learn(250)

    assert isinstance(model, theirs)
    assert type(model.replay_buffer) is type(reference.replay_buffer)
    assert model._n_updates == reference._n_updates == 200
    reference_parameters = reference.policy.state_dict()
    for name, parameter in model.policy.state_dict().items():
        assert th.equal(parameter, reference_parameters[name]), name


# --- prioritized replay: weighted loss, write-back of the sampled indices only ---------------------------


@pytest.mark.parametrize(("algorithm", "reduction"), [("TD3", "mean"), ("TD3", "max"), ("DDPG", "mean")])
def test_priorities_of_the_sampled_indices_follow_their_td_errors(
    monkeypatch, priorities, assert_only_sampled_priorities_follow, algorithm, reduction
):
    model = per_model(algorithm, learning_starts=300, buffer_size=1000, replay_scheme=PER(td_error_reduction=reduction))
    model.learn(300)  # collects 300 transitions, trains only once num_timesteps > learning_starts
    buffer = model.replay_buffer
    assert buffer.n_priority_updates == 0
    # uneven priorities, so that the IS weights are not all one
    buffer.tree.update(np.arange(buffer.n_transitions), np.linspace(0.1, 3.0, buffer.n_transitions))
    before = priorities(buffer)

    batches, losses = [], []
    sample = buffer.sample

    def spy_sample(*args, **kwargs):
        batches.append(sample(*args, **kwargs))
        return batches[-1]

    def spy_loss(current_q_values, target_q_values, weights, scale):
        loss = weighted_mse_loss(current_q_values, target_q_values, weights, scale)
        losses.append(([q.detach().clone() for q in current_q_values], target_q_values.clone(), weights, loss))
        return loss

    monkeypatch.setattr(buffer, "sample", spy_sample)
    monkeypatch.setattr(per_module, "weighted_mse_loss", spy_loss)
    model.train(gradient_steps=1, batch_size=32)

    ((current_q_values, target_q_values, weights, loss),), (batch,) = losses, batches
    assert len(current_q_values) == (2 if algorithm == "TD3" else 1)
    assert weights is batch.weights and weights.min() < 0.99
    by_hand = sum(
        float(w) * (float(q[i]) - float(target_q_values[i])) ** 2 / 32
        for q in current_q_values
        for i, w in enumerate(weights.reshape(-1))
    )
    assert loss.item() == pytest.approx(by_hand, rel=1e-5)  # no 0.5 factor, as SB3's TD3
    assert model.logger.name_to_value["train/critic_loss"] == pytest.approx(loss.item())

    abs_errors = (th.cat(current_q_values, dim=1) - target_q_values).abs()
    td = (abs_errors.mean(1) if reduction == "mean" else abs_errors.amax(1)).numpy().astype(np.float64)
    assert_only_sampled_priorities_follow(buffer, before, batch.indices, td)
    assert buffer.n_priority_updates == 1
    for key in PER.logger_keys:
        assert np.isfinite(model.logger.name_to_value[key]), key


def test_td3_writes_priorities_back_every_step_and_updates_the_actor_every_policy_delay():
    model = per_model("TD3", learning_starts=300, buffer_size=1000, policy_delay=3)
    model.learn(300)
    actor_before = [p.detach().clone() for p in model.actor.parameters()]
    model.train(gradient_steps=2, batch_size=32)  # _n_updates 1, 2: no actor step yet
    assert model.replay_buffer.n_priority_updates == 2
    assert all(th.equal(a, b) for a, b in zip(actor_before, model.actor.parameters(), strict=True))
    model.train(gradient_steps=1, batch_size=32)  # _n_updates 3: the delayed actor step
    assert model.replay_buffer.n_priority_updates == 3
    assert not all(th.equal(a, b) for a, b in zip(actor_before, model.actor.parameters(), strict=True))


# --- smoke: TD3 with PER on Pendulum ---------------------------------------------------------------------


def test_td3_with_per_runs_on_pendulum_and_its_priorities_change(tmp_path, priorities):
    model = per_model("TD3", replay_scheme=PER(td_error_reduction="max"), buffer_size=1000)
    model.learn(400)
    buffer = model.replay_buffer
    assert model.num_timesteps == buffer.n_transitions == 400
    assert buffer.n_priority_updates == buffer.n_sample_calls == model._n_updates == 300
    stored = priorities(buffer)
    assert np.isfinite(stored).all() and np.all(stored > 0)
    assert len(np.unique(stored)) > 200  # written back, not the entry priority
    assert 0.0 < model.logger.name_to_value["train/per_weight_mean"] <= 1.0

    model.save(tmp_path / "td3.zip")
    loaded = TD3.load(tmp_path / "td3.zip")
    assert isinstance(loaded, TD3) and loaded.replay_scheme == PER(td_error_reduction="max")


def test_ddpg_keeps_sb3s_single_critic_and_no_policy_delay():
    model = per_model("DDPG")
    assert model.policy_delay == 1
    assert len(model.critic.q_networks) == 1
    model.learn(150)
    assert model.replay_buffer.n_priority_updates == model._n_updates == 50

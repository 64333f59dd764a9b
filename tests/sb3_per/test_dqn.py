"""Tests for sb3_per.DQN: IS-weighted Huber loss, priority write-back, SB3 parity, learning CartPole."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import stable_baselines3
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from torch.nn import functional as F

import sb3_per.dqn as dqn_module
import sb3_per.schemes.base as scheme_base
from sb3_per import DQN, PER, PrioritizedReplayBuffer
from sb3_per.schemes.losses import weighted_huber_loss

ENV_ID = "CartPole-v1"


def per_dqn(**kwargs: Any) -> DQN:
    settings: dict[str, Any] = {
        "replay_buffer_class": PrioritizedReplayBuffer,
        "policy_kwargs": {"net_arch": [16, 16]},
        "batch_size": 32,
        "learning_starts": 100,
        "seed": 0,
    }
    settings.update(kwargs)
    return DQN("MlpPolicy", ENV_ID, **settings)


# --- the loss ----------------------------------------------------------------------------------------------


def test_weighted_huber_loss_matches_hand_computation():
    q = th.tensor([[0.5], [3.0], [-1.0], [0.0]], requires_grad=True)
    target = th.tensor([[0.0], [1.0], [1.0], [0.2]])
    weights = th.tensor([[1.0], [0.5], [0.25], [2.0]])
    # smooth_l1 (beta 1): 0.5 x^2 if |x| < 1 else |x| - 0.5 -> 0.125, 1.5, 1.5, 0.02
    expected = (1.0 * 0.125 + 0.5 * 1.5 + 0.25 * 1.5 + 2.0 * 0.02) / 4
    loss = weighted_huber_loss(q, target, weights)
    assert loss.shape == ()
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert weighted_huber_loss(q, target, weights.reshape(-1)).item() == pytest.approx(expected, rel=1e-6)
    loss.backward()  # d/dq = w * clamp(q - y, -1, 1) / batch
    assert th.allclose(q.grad, weights * (q.detach() - target).clamp(-1, 1) / 4)


def test_weighted_huber_loss_with_unit_weights_is_sb3_loss():
    generator = th.Generator().manual_seed(0)
    q, target = th.randn(64, 1, generator=generator) * 3, th.randn(64, 1, generator=generator)
    assert th.allclose(weighted_huber_loss(q, target, th.ones(64, 1)), F.smooth_l1_loss(q, target))


def test_dqn_has_no_td_error_reduction_parameter():
    with pytest.raises(TypeError, match="td_error_reduction"):
        per_dqn(td_error_reduction="max")


# --- uniform replay: exactly stable_baselines3.DQN ---------------------------------------------------------


def test_matches_stable_baselines3_dqn_with_a_uniform_buffer(monkeypatch):
    settings = {"batch_size": 32, "learning_starts": 100, "target_update_interval": 50, "seed": 3}
    reference = stable_baselines3.DQN("MlpPolicy", ENV_ID, policy_kwargs={"net_arch": [16, 16]}, **settings)
    reference.learn(400)

    def must_not_run(*args, **kwargs):
        raise AssertionError("PER work done with a uniform buffer")

    for module, name in [(dqn_module, "weighted_huber_loss"), (scheme_base, "absolute_td_errors")]:
        monkeypatch.setattr(module, name, must_not_run)
    model = DQN("MlpPolicy", ENV_ID, policy_kwargs={"net_arch": [16, 16]}, **settings).learn(400)

    assert isinstance(model, stable_baselines3.DQN)
    assert type(model.replay_buffer) is type(reference.replay_buffer)
    assert model._n_updates == reference._n_updates == 75
    reference_parameters = reference.policy.state_dict()
    for name, parameter in model.policy.state_dict().items():
        assert th.equal(parameter, reference_parameters[name]), name
    assert model.exploration_rate == reference.exploration_rate


# --- prioritized replay: weighted loss, write-back of the sampled indices only -----------------------------


def test_priorities_of_the_sampled_indices_follow_their_td_errors(
    monkeypatch, priorities, assert_only_sampled_priorities_follow
):
    model = per_dqn(learning_starts=300, buffer_size=1000)
    model.learn(300)  # collects 300 transitions, trains only once num_timesteps > learning_starts
    buffer = model.replay_buffer
    assert buffer.n_priority_updates == 0
    # uneven priorities, so that the IS weights are not all one
    buffer.tree.update(np.arange(buffer.n_transitions), np.linspace(0.1, 3.0, buffer.n_transitions))
    before = priorities(buffer)
    batches = []
    sample = buffer.sample

    def spy_sample(*args, **kwargs):
        batches.append(sample(*args, **kwargs))
        return batches[-1]

    monkeypatch.setattr(buffer, "sample", spy_sample)
    policy_before = copy.deepcopy(model.policy)  # DQN's target is deterministic: recompute it by hand
    model.train(gradient_steps=1, batch_size=32)

    (batch,) = batches
    assert batch.weights.min() < 0.99
    with th.no_grad():
        next_q = policy_before.q_net_target(batch.next_observations).amax(dim=1, keepdim=True)
        target = batch.rewards + (1 - batch.dones) * model.gamma * next_q
        q = policy_before.q_net(batch.observations).gather(1, batch.actions.long())
    error = (q - target).reshape(-1).numpy().astype(np.float64)
    huber = np.where(np.abs(error) < 1, 0.5 * error**2, np.abs(error) - 0.5)
    by_hand = float(np.mean(batch.weights.reshape(-1).numpy() * huber))
    assert model.logger.name_to_value["train/loss"] == pytest.approx(by_hand, rel=1e-5)

    assert_only_sampled_priorities_follow(buffer, before, batch.indices, error)
    assert buffer.n_priority_updates == 1
    for key in PER.logger_keys:
        assert np.isfinite(model.logger.name_to_value[key]), key


def test_save_load_keeps_the_class(tmp_path):
    model = per_dqn().learn(200)
    assert model.replay_buffer.n_priority_updates == model._n_updates == 25
    model.save(tmp_path / "dqn.zip")
    loaded = DQN.load(tmp_path / "dqn.zip")
    assert isinstance(loaded, DQN)
    for name, parameter in loaded.policy.state_dict().items():
        assert th.equal(parameter, model.policy.state_dict()[name]), name


# --- learning: DQN with PER solves much of CartPole in a short budget ----------------------------------------


@pytest.mark.slow
def test_dqn_with_per_learns_cartpole(priorities):
    # RL Zoo's tuned CartPole-v1 DQN hyperparameters, with a smaller network and a shorter budget.
    # Evaluation returns after 15k steps: 500, 196, 141 for seeds 0, 1, 2 (random play: about 22)
    model = DQN(
        "MlpPolicy",
        ENV_ID,
        learning_rate=2.3e-3,
        batch_size=64,
        buffer_size=100_000,
        learning_starts=1000,
        gamma=0.99,
        target_update_interval=10,
        train_freq=256,
        gradient_steps=128,
        exploration_fraction=0.16,
        exploration_final_eps=0.04,
        policy_kwargs={"net_arch": [64, 64]},
        replay_buffer_class=PrioritizedReplayBuffer,
        seed=0,
    )
    model.learn(15_000)
    buffer = model.replay_buffer
    assert buffer.n_priority_updates == buffer.n_sample_calls == model._n_updates > 0
    assert len(np.unique(priorities(buffer))) > 1000

    mean_return, _ = evaluate_policy(model, make_vec_env(ENV_ID, n_envs=1, seed=123), n_eval_episodes=10)
    assert mean_return > 100  # a random policy gets about 22, the maximum is 500

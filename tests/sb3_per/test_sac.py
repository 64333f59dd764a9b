"""Tests for sb3_per.SAC: IS-weighted critic loss, priority write-back, SB3 parity, save/load, logging."""

from __future__ import annotations

import io
import math
import warnings
from typing import Any

import numpy as np
import pytest
import stable_baselines3
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import HumanOutputFormat, KVWriter, Logger
from torch.nn import functional as F

import sb3_per.per_algorithm as per_algorithm
import sb3_per.schemes.base as scheme_base
from sb3_per import PER, SAC, PrioritizedReplayBuffer
from sb3_per.schemes.losses import absolute_td_errors, weighted_mse_loss

ENV_ID = "Pendulum-v1"
SMALL_NET = {"net_arch": [32, 32]}


def per_sac(**kwargs: Any) -> SAC:
    settings: dict[str, Any] = {
        "replay_buffer_class": PrioritizedReplayBuffer,
        "policy_kwargs": SMALL_NET,
        "batch_size": 64,
        "learning_starts": 100,
        "seed": 0,
    }
    settings.update(kwargs)
    env = settings.pop("env", ENV_ID)
    return SAC("MlpPolicy", env, **settings)


# --- the pure pieces -------------------------------------------------------------------------------------


def test_weighted_critic_loss_matches_hand_computation():
    q1 = th.tensor([[1.0], [2.0], [-1.0]], requires_grad=True)
    q2 = th.tensor([[0.5], [3.0], [0.0]], requires_grad=True)
    target = th.tensor([[0.0], [1.0], [1.0]])
    weights = th.tensor([[1.0], [0.5], [0.25]])
    # critic 1: w * (q - y)^2 = 1*1, 0.5*1, 0.25*4 -> mean 2.5/3; critic 2: 1*0.25, 0.5*4, 0.25*1 -> mean 2.5/3
    expected = 0.5 * (2.5 / 3 + 2.5 / 3)
    loss = weighted_mse_loss((q1, q2), target, weights)
    assert loss.shape == ()
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    # weights of shape (batch,) mean the same, never an outer-product broadcast
    assert weighted_mse_loss([q1, q2], target, weights.reshape(-1)).item() == pytest.approx(expected, rel=1e-6)
    loss.backward()  # gradient d/dq_i = w * (q_i - y) / batch
    assert th.allclose(q1.grad, weights * (q1.detach() - target) / 3)
    assert th.allclose(q2.grad, weights * (q2.detach() - target) / 3)


def test_weighted_critic_loss_with_unit_weights_is_sb3_loss():
    generator = th.Generator().manual_seed(0)
    qs = [th.randn(64, 1, generator=generator) for _ in range(2)]
    target = th.randn(64, 1, generator=generator)
    sb3_loss = 0.5 * sum(F.mse_loss(q, target) for q in qs)
    assert th.allclose(weighted_mse_loss(qs, target, th.ones(64, 1)), sb3_loss)


def test_absolute_td_errors_mean_and_max():
    q1 = th.tensor([[1.0], [2.0], [-1.0]], requires_grad=True)
    q2 = th.tensor([[-1.0], [3.0], [0.0]], requires_grad=True)
    target = th.tensor([[0.0], [1.0], [1.0]])
    mean = absolute_td_errors([q1, q2], target, "mean")
    # opposite-sign errors (+1, -1) do not cancel: absolute values are averaged
    assert th.equal(mean, th.tensor([1.0, 1.5, 1.5]))
    assert th.equal(absolute_td_errors([q1, q2], target, "max"), th.tensor([1.0, 2.0, 2.0]))
    assert absolute_td_errors([q1, q2], target).shape == (3,)
    assert not mean.requires_grad
    with pytest.raises(ValueError, match=r"reduction.*'median'"):
        absolute_td_errors([q1, q2], target, "median")


def test_invalid_td_error_reduction_raises():
    with pytest.raises(ValueError, match=r"td_error_reduction.*'sum'"):
        per_sac(replay_scheme=PER(td_error_reduction="sum"))
    # the reduction is the scheme's now: SAC itself has no such parameter
    with pytest.raises(TypeError, match="td_error_reduction"):
        per_sac(td_error_reduction="max")


# --- one gradient step with a prioritized buffer ---------------------------------------------------------


def collected_model(**kwargs: Any) -> SAC:
    """A PER model whose buffer holds 300 transitions of random play and that has not trained yet."""
    model = per_sac(learning_starts=300, buffer_size=1000, **kwargs)
    model.learn(300)  # trains only once num_timesteps > learning_starts
    assert model.replay_buffer.n_priority_updates == 0
    return model


def test_train_weights_the_critic_loss_by_the_sampled_is_weights(monkeypatch, sampled_batches):
    model = collected_model()
    buffer = model.replay_buffer
    # uneven priorities, so that the IS weights are not all one
    buffer.tree.update(np.arange(buffer.n_transitions), np.linspace(0.1, 3.0, buffer.n_transitions))
    batches = sampled_batches(buffer)
    calls = []

    def spy_loss(current_q_values, target_q_values, weights, scale):
        assert scale == 0.5
        loss = weighted_mse_loss(current_q_values, target_q_values, weights, scale)
        calls.append(([q.detach().clone() for q in current_q_values], target_q_values.clone(), weights, loss))
        return loss

    monkeypatch.setattr(per_algorithm, "weighted_mse_loss", spy_loss)
    model.train(gradient_steps=1, batch_size=64)

    ((current_q_values, target_q_values, weights, loss),), (batch,) = calls, batches
    assert weights is batch.weights
    assert weights.min() < 0.99
    by_hand = sum(
        float(w) * (float(q[i]) - float(target_q_values[i])) ** 2 / 64
        for q in current_q_values
        for i, w in enumerate(weights.reshape(-1))
    )
    assert loss.item() == pytest.approx(0.5 * by_hand, rel=1e-5)
    assert model.logger.name_to_value["train/critic_loss"] == pytest.approx(loss.item())


@pytest.mark.parametrize(("reduction", "discount"), [("mean", None), ("max", None), ("mean", 0.5)])
def test_priorities_of_the_sampled_indices_follow_their_td_errors(
    priorities, assert_only_sampled_priorities_follow, one_actor_critic_step, reduction, discount
):
    model = collected_model(replay_scheme=PER(td_error_reduction=reduction))
    buffer = model.replay_buffer
    before = priorities(buffer)

    step = one_actor_critic_step(model, batch_size=64, discount=discount)

    batch, networks = step.batch, step.networks
    with th.no_grad():
        next_q = th.cat(networks.critic_target(batch.next_observations, step.next_actions), dim=1).amin(1, True)
        next_q = next_q - step.ent_coef * step.next_log_prob.reshape(-1, 1)
        gamma = model.gamma if discount is None else discount
        target = batch.rewards + (1 - batch.dones) * gamma * next_q
        abs_errors = (th.cat(networks.critic(batch.observations, batch.actions), dim=1) - target).abs()
    td = (abs_errors.mean(1) if reduction == "mean" else abs_errors.amax(1)).numpy().astype(np.float64)
    sampled = assert_only_sampled_priorities_follow(buffer, before, batch.indices, td)
    after = priorities(buffer)
    # larger error, larger priority
    last_td = {i: error for i, error in zip(batch.indices.tolist(), td, strict=True)}
    by_error = sorted(sampled, key=last_td.__getitem__)
    assert np.all(np.diff(after[by_error]) >= 0)
    assert buffer.n_priority_updates == 1
    assert buffer.max_priority == pytest.approx(max(1.0, after.max()))


# --- uniform replay: exactly stable_baselines3.SAC ------------------------------------------------------


@pytest.mark.parametrize("n_steps", [1, 3])
def test_matches_stable_baselines3_sac_with_a_uniform_buffer(monkeypatch, n_steps):
    settings = {"policy_kwargs": SMALL_NET, "batch_size": 32, "learning_starts": 50, "n_steps": n_steps, "seed": 3}
    reference = stable_baselines3.SAC("MlpPolicy", ENV_ID, **settings).learn(250)

    def must_not_run(*args, **kwargs):
        raise AssertionError("PER work done with a uniform buffer")

    for module, name in [(per_algorithm, "weighted_mse_loss"), (scheme_base, "absolute_td_errors")]:
        monkeypatch.setattr(module, name, must_not_run)
    model = SAC("MlpPolicy", ENV_ID, **settings).learn(250)

    assert type(model.replay_buffer) is type(reference.replay_buffer)
    assert model._n_updates == reference._n_updates == 200
    reference_parameters = reference.policy.state_dict()
    for name, parameter in model.policy.state_dict().items():
        assert th.equal(parameter, reference_parameters[name]), name
    assert th.equal(model.log_ent_coef, reference.log_ent_coef)


# --- save / load / resume ---------------------------------------------------------------------------------


def test_save_load_and_resume_keep_the_priorities(tmp_path, priorities):
    model = per_sac(replay_scheme=PER(td_error_reduction="max"), learning_starts=50)
    model.learn(200)
    buffer = model.replay_buffer
    model.save(tmp_path / "model.zip")
    model.save_replay_buffer(tmp_path / "buffer.pkl")

    loaded = SAC.load(tmp_path / "model.zip", env=make_vec_env(ENV_ID, n_envs=1, seed=0))
    loaded.load_replay_buffer(tmp_path / "buffer.pkl")
    loaded_buffer = loaded.replay_buffer
    assert isinstance(loaded, SAC)
    assert loaded.replay_scheme == PER(td_error_reduction="max")
    assert isinstance(loaded_buffer, PrioritizedReplayBuffer)
    assert loaded_buffer.n_transitions == buffer.n_transitions == 200
    np.testing.assert_array_equal(priorities(loaded_buffer), priorities(buffer))
    assert len(np.unique(priorities(loaded_buffer))) > 100  # the written-back priorities, not the entry one
    assert loaded_buffer.tree.total == buffer.tree.total
    assert loaded_buffer.max_priority == buffer.max_priority
    assert loaded_buffer.n_sample_calls == buffer.n_sample_calls == 150
    assert loaded_buffer.beta == buffer.beta
    for name, parameter in loaded.policy.state_dict().items():
        assert th.equal(parameter, model.policy.state_dict()[name]), name

    loaded.learn(100, reset_num_timesteps=False)
    assert loaded.num_timesteps == 300
    assert loaded._n_updates == 250
    assert loaded_buffer.n_sample_calls == 250
    assert loaded_buffer.n_priority_updates == buffer.n_priority_updates + 100


# --- logging ----------------------------------------------------------------------------------------------


class RecordingFormat(KVWriter):
    def __init__(self) -> None:
        self.dumps: list[tuple[dict[str, Any], dict[str, Any]]] = []

    def write(self, key_values, key_excluded, step=0) -> None:
        self.dumps.append((dict(key_values), dict(key_excluded)))

    def close(self) -> None:
        pass


def test_logger_records_the_per_keys():
    recording, stdout = RecordingFormat(), io.StringIO()
    model = per_sac(learning_starts=50)
    model.set_logger(Logger(folder=None, output_formats=[recording, HumanOutputFormat(stdout)]))
    model.learn(250, log_interval=1)  # Pendulum episodes are 200 steps: one dump

    assert recording.dumps
    key_values, key_excluded = recording.dumps[-1]
    for key in PER.logger_keys:
        assert math.isfinite(key_values[key]), key
        assert "tensorboard" not in (key_excluded.get(key) or ()), key
        assert key.split("/")[1] in stdout.getvalue()
    assert 0.0 < key_values["train/per_weight_mean"] <= 1.0
    assert key_values["train/per_beta"] == pytest.approx(0.4, abs=0.01)
    assert key_values["train/per_priority_max"] >= key_values["train/per_priority_mean"] > 0.0


def test_uniform_buffer_logs_no_per_keys():
    recording = RecordingFormat()
    model = per_sac(replay_buffer_class=None, learning_starts=50)
    model.set_logger(Logger(folder=None, output_formats=[recording]))
    model.learn(250, log_interval=1)
    key_values, _ = recording.dumps[-1]
    assert "train/critic_loss" in key_values
    assert not set(PER.logger_keys) & set(key_values)


# --- the never-updated warning ----------------------------------------------------------------------------


def test_stock_sb3_sac_with_the_per_buffer_warns():
    model = stable_baselines3.SAC(
        "MlpPolicy",
        ENV_ID,
        replay_buffer_class=PrioritizedReplayBuffer,
        policy_kwargs=SMALL_NET,
        batch_size=32,
        learning_starts=20,
        seed=0,
    )
    with pytest.warns(UserWarning, match=r"sb3_per\.SAC"):
        model.learn(150)


def test_sb3_per_sac_does_not_warn():
    model = per_sac(batch_size=32, learning_starts=20)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.learn(150)
    assert model.replay_buffer.n_sample_calls >= 100
    assert not [w for w in caught if "sb3_per.SAC" in str(w.message)]


# --- smoke: learn on Pendulum with one and two envs ---------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("n_envs", [1, 2])
def test_learn_smoke_on_pendulum(priorities, n_envs):
    env = make_vec_env(ENV_ID, n_envs=n_envs, seed=0)
    model = per_sac(env=env, buffer_size=10_000)
    model.learn(2000)

    buffer = model.replay_buffer
    assert isinstance(buffer, PrioritizedReplayBuffer)
    assert buffer.n_envs == n_envs
    assert model.num_timesteps == 2000
    assert buffer.n_transitions == 2000
    assert buffer.n_priority_updates == buffer.n_sample_calls == model._n_updates > 0
    stored = priorities(buffer)
    assert np.all(stored > 0) and np.isfinite(stored).all()
    assert len(np.unique(stored)) > 1000
    actions, _ = model.predict(env.reset(), deterministic=True)
    assert actions.shape == (n_envs, 1)


def test_sb3_replay_buffer_is_the_default():
    assert type(per_sac(replay_buffer_class=None).replay_buffer) is ReplayBuffer

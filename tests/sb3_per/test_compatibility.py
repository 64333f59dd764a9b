"""What SB3 users plug in around an sb3_per algorithm works with the prioritized buffer: several envs in
subprocesses, VecNormalize, TensorBoard, the progress bar, and stock SB3 loading the saved model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sb3_contrib
import stable_baselines3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv, VecNormalize

from sb3_per import DQN, PER, QRDQN, SAC, TQC, UPER, PrioritizedReplayBuffer, ReLo


def small(**kwargs) -> dict:
    """Small settings, a new dict each time (SB3 writes into policy_kwargs)."""
    settings = dict(
        replay_buffer_class=PrioritizedReplayBuffer,
        learning_starts=100,
        buffer_size=2_000,
        batch_size=32,
        policy_kwargs=dict(net_arch=[16]),
        seed=0,
    )
    settings.update(kwargs)
    return settings


@pytest.mark.slow
def test_two_envs_in_subprocesses_fill_the_buffer_and_get_their_priorities(priorities):
    env = make_vec_env("Pendulum-v1", n_envs=2, seed=0, vec_env_cls=SubprocVecEnv)
    try:
        model = SAC("MlpPolicy", env, **small())
        model.learn(400)
    finally:
        env.close()
    buffer = model.replay_buffer
    assert buffer.n_envs == 2 and buffer.n_transitions == 400
    assert buffer.n_priority_updates == buffer.n_sample_calls == model._n_updates > 0
    stored = priorities(buffer)
    # Each env's column got priorities written back: more distinct values than the entry priorities alone.
    assert len(np.unique(stored.reshape(-1, 2)[:, 0])) > 20
    assert len(np.unique(stored.reshape(-1, 2)[:, 1])) > 20


def test_vec_normalize_normalizes_the_prioritized_samples_as_sb3s_buffer_does():
    env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=1, seed=0))
    model = SAC("MlpPolicy", env, **small())
    model.learn(300)
    buffer = model.replay_buffer
    batch = buffer.sample(64, env=model.get_vec_normalize_env())
    stored = buffer.observations[batch.indices, 0]
    np.testing.assert_allclose(batch.observations.numpy(), env.normalize_obs(stored), rtol=1e-6)
    np.testing.assert_allclose(
        batch.rewards.numpy()[:, 0], env.normalize_reward(buffer.rewards[batch.indices, 0]), rtol=1e-6
    )
    assert not np.allclose(batch.observations.numpy(), stored)  # the normalization did something


@pytest.mark.slow
def test_tensorboard_gets_the_per_keys(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = SAC("MlpPolicy", "Pendulum-v1", tensorboard_log=str(tmp_path), **small(learning_starts=50))
    model.learn(250, log_interval=1)  # Pendulum episodes are 200 steps: one dump
    (run,) = tmp_path.iterdir()
    events = EventAccumulator(str(run))
    events.Reload()
    for key in PER.logger_keys:
        (point,) = events.Scalars(key)[-1:]
        assert math.isfinite(point.value), key


def test_the_progress_bar_counts_the_steps(capsys):
    model = SAC("MlpPolicy", "Pendulum-v1", **small())
    model.learn(150, progress_bar=True)
    assert model.num_timesteps == 150
    assert "150/150" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("ours", "stock", "env_id", "scheme"),
    [
        (SAC, stable_baselines3.SAC, "Pendulum-v1", PER()),
        (SAC, stable_baselines3.SAC, "Pendulum-v1", ReLo()),
        (DQN, stable_baselines3.DQN, "CartPole-v1", PER()),
        (TQC, sb3_contrib.TQC, "Pendulum-v1", UPER()),
        (QRDQN, sb3_contrib.QRDQN, "CartPole-v1", ReLo()),
    ],
    ids=["PER-SAC", "ReLo-SAC", "PER-DQN", "UPER-TQC", "ReLo-QRDQN"],
)
def test_stock_sb3_loads_the_model_and_acts_the_same(tmp_path, ours, stock, env_id, scheme):
    model = ours("MlpPolicy", env_id, replay_scheme=scheme, **small(learning_starts=50))
    model.learn(120)
    model.save(tmp_path / "model.zip")
    loaded = stock.load(tmp_path / "model.zip")
    observations = np.stack([model.observation_space.sample() for _ in range(20)])
    np.testing.assert_array_equal(
        model.predict(observations, deterministic=True)[0], loaded.predict(observations, deterministic=True)[0]
    )

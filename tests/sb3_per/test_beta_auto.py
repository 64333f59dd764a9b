"""beta_anneal_steps='auto': beta follows the training progress the algorithm sets."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
import stable_baselines3
from gymnasium import spaces

from sb3_per import SAC, PrioritizedDictReplayBuffer, PrioritizedReplayBuffer

OBS_SPACE = spaces.Box(-np.inf, np.inf, (3,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


def auto_buffer(**kwargs) -> PrioritizedReplayBuffer:
    buffer = PrioritizedReplayBuffer(
        20, OBS_SPACE, ACTION_SPACE, device="cpu", beta_start=0.4, beta_end=1.0, beta_anneal_steps="auto", **kwargs
    )
    obs = np.zeros((1, 3), dtype=np.float32)
    for _ in range(20):
        buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    return buffer


def test_beta_is_the_set_progress_between_start_and_end_whatever_the_sample_count():
    buffer = auto_buffer()
    assert buffer.beta_anneal_steps == "auto"
    for progress in (0.0, 0.25, 1.0, 0.5):
        buffer.set_beta_progress(progress)
        for _ in range(3):
            buffer.sample(4)
        assert buffer.beta == pytest.approx(0.4 + progress * 0.6)


def test_the_weights_use_the_progress_beta():
    buffer = auto_buffer(alpha=1.0)
    buffer.update_priorities(np.arange(20), np.arange(20) + 1.0)
    buffer.set_beta_progress(0.5)
    samples = buffer.sample(8)
    priorities = np.arange(20) + 1.0 + buffer.epsilon
    expected = (priorities[samples.indices] / priorities.min()) ** -0.7
    np.testing.assert_allclose(samples.weights.numpy().ravel(), expected, rtol=1e-6)


def test_sampling_before_any_progress_is_set_points_to_sb3_pers_algorithms_and_draws_nothing():
    buffer = auto_buffer()
    state = np.random.get_state()[1].copy()  # noqa: NPY002
    with pytest.raises(ValueError, match=r"beta_anneal_steps='auto'.*sb3_per\.SAC"):
        buffer.sample(4)
    np.testing.assert_array_equal(np.random.get_state()[1], state)  # noqa: NPY002
    assert buffer.n_sample_calls == 0


def test_a_stock_sb3_algorithm_with_auto_gets_the_error():
    model = stable_baselines3.SAC(
        "MlpPolicy",
        "Pendulum-v1",
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=dict(beta_anneal_steps="auto"),
        learning_starts=10,
        batch_size=8,
        policy_kwargs=dict(net_arch=[8]),
        seed=0,
    )
    with pytest.raises(ValueError, match="set_beta_progress"):
        model.learn(20)


@pytest.mark.parametrize("progress", [-0.1, 1.5, np.nan, "half", True])
def test_progress_outside_zero_one_is_refused(progress):
    buffer = auto_buffer()
    buffer.set_beta_progress(0.3)
    with pytest.raises(ValueError, match="progress"):
        buffer.set_beta_progress(progress)
    assert buffer.beta_progress == 0.3


def test_set_beta_progress_is_refused_by_a_buffer_that_anneals_over_sample_calls():
    buffer = PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, device="cpu", beta_anneal_steps=100)
    with pytest.raises(ValueError, match="beta_anneal_steps=100"):
        buffer.set_beta_progress(0.5)


@pytest.mark.parametrize("steps", ["automatic", "", True, 0, -5])
def test_bad_beta_anneal_steps_are_refused(steps):
    with pytest.raises(ValueError, match="beta_anneal_steps"):
        PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, beta_anneal_steps=steps)
    with pytest.raises(ValueError, match="beta_anneal_steps"):
        PrioritizedDictReplayBuffer(10, spaces.Dict({"a": OBS_SPACE}), ACTION_SPACE, beta_anneal_steps=steps)


def test_pickling_keeps_auto_and_the_progress():
    buffer = auto_buffer()
    buffer.set_beta_progress(0.75)
    restored = pickle.loads(pickle.dumps(buffer))
    assert restored.beta_anneal_steps == "auto" and restored.beta == buffer.beta


def record_betas(model: SAC, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The buffer's beta after each of the model's training calls from now on (the beta its last batch used)."""
    betas: list[float] = []
    real_train = model.train

    def train(*args, **kwargs):
        real_train(*args, **kwargs)
        betas.append(model.replay_buffer.beta)

    monkeypatch.setattr(model, "train", train)
    return betas


@pytest.mark.slow
def test_auto_beta_never_goes_down_when_a_saved_run_resumes_without_resetting_its_timesteps(tmp_path, monkeypatch):
    settings = dict(learning_starts=20, batch_size=16, policy_kwargs=dict(net_arch=[8]), seed=0)
    model = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=dict(beta_anneal_steps="auto"),
        **settings,
    )
    betas = record_betas(model, monkeypatch)
    model.learn(60)
    assert betas == sorted(betas) and betas[-1] == pytest.approx(1.0)  # beta_end once the run's steps are in
    model.save(tmp_path / "model.zip")
    model.save_replay_buffer(tmp_path / "buffer.pkl")

    resumed = SAC.load(tmp_path / "model.zip", env=gym.make("Pendulum-v1"))
    resumed.load_replay_buffer(tmp_path / "buffer.pkl")
    resumed_betas = record_betas(resumed, monkeypatch)
    # Continued, the run is 60 of 90 steps in: its progress restarts at 2/3, where beta would be 0.8.
    resumed.learn(30, reset_num_timesteps=False)
    assert resumed.num_timesteps == 90 and len(resumed_betas) == 30
    assert resumed_betas == [pytest.approx(1.0)] * 30

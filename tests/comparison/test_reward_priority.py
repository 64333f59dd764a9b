"""A PER ablation buffer whose priorities come from rewards, set when a transition is written and kept."""

import pickle
import re
import warnings

import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.utils import set_random_seed

from comparison.ablation_buffers import RewardPrioritizedReplayBuffer
from comparison.experiment import RunConfig, make_model
from sb3_per import LA3P, LAP, SAC, PrioritizedReplayBuffer

OBS_SPACE = spaces.Box(-np.inf, np.inf, (3,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


def reward_buffer(buffer_size: int = 50, n_envs: int = 1, **kwargs) -> RewardPrioritizedReplayBuffer:
    return RewardPrioritizedReplayBuffer(
        buffer_size, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=n_envs, alpha=0.6, epsilon=1e-3, **kwargs
    )


def add_rewards(buffer: RewardPrioritizedReplayBuffer, rewards: np.ndarray) -> None:
    """Add one step per row of ``rewards`` (shape (n_steps, n_envs))."""
    n_envs = buffer.n_envs
    for row in rewards:
        obs = np.zeros((n_envs, 3), dtype=np.float32)
        buffer.add(obs, obs, np.zeros((n_envs, 1)), row, np.zeros(n_envs), [{} for _ in range(n_envs)])


def expected_priorities(buffer: RewardPrioritizedReplayBuffer, rewards: np.ndarray) -> np.ndarray:
    return (np.abs(rewards.reshape(-1)) + buffer.epsilon) ** buffer.alpha


@pytest.mark.parametrize("n_envs", [1, 2])
def test_each_transition_enters_at_the_priority_of_its_reward(n_envs):
    buffer = reward_buffer(buffer_size=100, n_envs=n_envs)  # SB3 splits buffer_size over the envs
    rewards = np.random.default_rng(0).normal(size=(30, n_envs))
    add_rewards(buffer, rewards)
    np.testing.assert_allclose(buffer.priorities_at(np.arange(30 * n_envs)), expected_priorities(buffer, rewards))


def test_an_overwritten_slot_takes_its_new_reward_priority():
    buffer = reward_buffer(buffer_size=10)
    rewards = np.random.default_rng(1).normal(size=(25, 1))
    add_rewards(buffer, rewards)
    stored = np.roll(rewards[-10:], 25 % 10, axis=0)  # slot i holds the last reward written there
    np.testing.assert_allclose(buffer.priorities_at(np.arange(10)), expected_priorities(buffer, stored))


def test_tags_memory_layout_and_max_priority_follow_the_reward_priorities():
    buffer = reward_buffer(
        buffer_size=10, tag_key="regime", optimize_memory_usage=True, handle_timeout_termination=False
    )
    rewards = np.random.default_rng(3).normal(size=(12, 1))
    n_envs = 1
    for step, row in enumerate(rewards):
        obs = np.zeros((n_envs, 3), dtype=np.float32)
        buffer.add(obs, obs, np.zeros((n_envs, 1)), row, np.zeros(n_envs), [{"regime": step % 2}])
    stored = np.roll(rewards[-10:], 12 % 10, axis=0).reshape(-1)
    expected = expected_priorities(buffer, stored)
    expected[buffer.pos] = 0.0  # SB3's memory-saving layout: the slot whose next observation is gone
    np.testing.assert_allclose(buffer.priorities_at(np.arange(10)), expected)
    tags = buffer.tags_at(np.arange(10))
    shares = buffer.tag_priority_shares()
    assert shares[1] == pytest.approx(expected[tags == 1].sum() / expected.sum())
    assert buffer.max_priority == pytest.approx(expected_priorities(buffer, rewards).max())


def test_sampling_follows_the_reward_priorities():
    buffer = reward_buffer(buffer_size=20)
    rewards = np.linspace(-2.0, 2.0, 20).reshape(-1, 1)
    add_rewards(buffer, rewards)
    set_random_seed(0)
    n_draws = 100_000
    frequencies = np.bincount(buffer.sample(n_draws).indices, minlength=20) / n_draws
    probabilities = expected_priorities(buffer, rewards) / expected_priorities(buffer, rewards).sum()
    tolerance = 5 * np.sqrt(probabilities * (1 - probabilities) / n_draws)
    assert np.all(np.abs(frequencies - probabilities) <= tolerance)


def test_td_error_updates_are_checked_and_counted_but_leave_the_priorities():
    buffer = reward_buffer()
    rewards = np.random.default_rng(2).normal(size=(20, 1))
    add_rewards(buffer, rewards)
    batch = buffer.sample(8)
    buffer.update_priorities(batch.indices, np.full(8, 100.0), batch.stamps)
    assert buffer.n_priority_updates == 1
    np.testing.assert_allclose(buffer.priorities_at(np.arange(20)), expected_priorities(buffer, rewards))
    with pytest.raises(ValueError, match="priorities must be finite"):
        buffer.update_priorities(batch.indices, np.full(8, np.nan), batch.stamps)
    assert buffer.n_priority_updates == 1


@pytest.mark.parametrize("n_envs", [1, 2])
def test_rewards_below_the_floor_enter_at_the_floors_priority(n_envs):
    buffer = reward_buffer(buffer_size=100, n_envs=n_envs, reward_floor=0.5)
    rewards = np.random.default_rng(4).normal(size=(30, n_envs))
    add_rewards(buffer, rewards)
    floored = np.maximum(np.abs(rewards), 0.5)
    assert (np.abs(rewards) < 0.5).any() and (np.abs(rewards) > 0.5).any()
    np.testing.assert_allclose(buffer.priorities_at(np.arange(30 * n_envs)), expected_priorities(buffer, floored))


def test_the_floor_survives_pickling_and_a_buffer_pickled_without_one_loads_unfloored():
    buffer = reward_buffer(reward_floor=0.5)
    add_rewards(buffer, np.array([[0.1], [2.0]]))
    loaded = pickle.loads(pickle.dumps(buffer))
    add_rewards(loaded, np.array([[0.2]]))
    np.testing.assert_allclose(loaded.priorities_at(np.arange(3)), expected_priorities(loaded, np.array([0.5, 2, 0.5])))
    old = reward_buffer()
    del old.reward_floor  # as pickled before reward_floor existed
    older = pickle.loads(pickle.dumps(old))
    add_rewards(older, np.array([[0.2]]))
    np.testing.assert_allclose(older.priorities_at(np.arange(1)), expected_priorities(older, np.array([0.2])))


@pytest.mark.parametrize("bad", [-1e-9, np.nan, np.inf, True, "0.1"])
def test_a_bad_reward_floor_is_refused(bad):
    with pytest.raises(ValueError, match="reward_floor must be a finite number >= 0"):
        reward_buffer(reward_floor=bad)


def test_a_floor_too_large_for_the_sum_tree_is_refused_when_the_buffer_is_made():
    def buffer(reward_floor: float) -> RewardPrioritizedReplayBuffer:
        return RewardPrioritizedReplayBuffer(50, OBS_SPACE, ACTION_SPACE, alpha=1.0, reward_floor=reward_floor)

    with pytest.raises(ValueError, match=r"reward_floor=1e\+307 is too large"):
        buffer(1e307)  # a finite float64, but 50 leaves at it would overflow the tree's total
    assert buffer(1e300).reward_floor == 1e300  # within the sum tree's bound


@pytest.mark.parametrize("floor", [0.0, 0.5])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_reward_that_is_not_finite_is_refused_before_anything_is_stored(bad, floor):
    buffer = reward_buffer(reward_floor=floor)
    add_rewards(buffer, np.ones((3, 1)))
    with pytest.raises(ValueError, match=f"reward must be finite, got {-bad}"):
        add_rewards(buffer, np.array([[-bad]]))
    assert (buffer.pos, buffer.size()) == (3, 3)
    np.testing.assert_allclose(buffer.tree.total, 3 * (1.0 + buffer.epsilon) ** buffer.alpha)


def test_sac_trains_on_it_without_touching_the_reward_priorities():
    config = RunConfig(variant="per_reward_priority", total_steps=300, learning_starts=100, batch_size=32)
    env = make_vec_env(config.env_id, n_envs=1, seed=0)
    model = make_model(config, env)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning that the priorities were never updated
        model.learn(config.total_steps)
    buffer = model.replay_buffer
    assert isinstance(buffer, RewardPrioritizedReplayBuffer)
    assert buffer.n_priority_updates == config.total_steps - config.learning_starts
    n = buffer.n_transitions
    rewards = buffer.rewards.reshape(-1)[:n]
    np.testing.assert_allclose(buffer.priorities_at(np.arange(n)), expected_priorities(buffer, rewards), rtol=1e-6)


def test_dict_observations_are_refused_as_by_its_base():
    with pytest.raises(ValueError, match="PrioritizedDictReplayBuffer"):
        RewardPrioritizedReplayBuffer(10, spaces.Dict({"x": OBS_SPACE}), ACTION_SPACE)


@pytest.mark.parametrize("scheme", [LAP(), LA3P()], ids=["lap", "la3p"])
def test_lap_schemes_refuse_it_since_its_priorities_never_follow_the_td_errors(scheme):
    kwargs = {"inverse_sampling": True} if isinstance(scheme, LA3P) else {}
    with pytest.raises(ValueError, match=re.escape(repr(scheme)) + ".*RewardPrioritizedReplayBuffer"):
        SAC(
            "MlpPolicy",
            make_vec_env("Pendulum-v1", n_envs=1, seed=0),
            replay_buffer_class=RewardPrioritizedReplayBuffer,
            replay_buffer_kwargs=kwargs,
            replay_scheme=scheme,
            device="cpu",
        )


def test_a_lap_model_refuses_to_load_it_and_keeps_its_own_buffer(tmp_path):
    reward = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=RewardPrioritizedReplayBuffer, device="cpu")
    reward.save_replay_buffer(tmp_path / "reward.pkl")
    lap = SAC(
        "MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=LAP(), device="cpu"
    )
    own = lap.replay_buffer
    with pytest.raises(
        ValueError, match=r"LAP\(.*sets its priorities from the TD errors.*RewardPrioritizedReplayBuffer"
    ):
        lap.load_replay_buffer(tmp_path / "reward.pkl")
    assert lap.replay_buffer is own

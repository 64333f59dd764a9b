"""Bad input is refused with a ValueError naming it, state unchanged; SB3 usage where PER adds nothing works."""

import numpy as np
import pytest
import stable_baselines3
import torch as th
from gymnasium import spaces
from scipy import stats
from stable_baselines3.common.utils import set_random_seed

from sb3_per import PrioritizedReplayBuffer

OBS_SPACE = spaces.Box(-np.inf, np.inf, (3,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


def filled(buffer_size: int = 10, n_added: int | None = None, **kwargs) -> PrioritizedReplayBuffer:
    buffer = PrioritizedReplayBuffer(buffer_size, OBS_SPACE, ACTION_SPACE, device="cpu", **kwargs)
    obs = np.zeros((1, 3), dtype=np.float32)
    for _ in range(buffer_size if n_added is None else n_added):
        buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    return buffer


def state(buffer: PrioritizedReplayBuffer) -> tuple:
    return buffer.tree._sums.copy(), buffer.max_priority, buffer.n_priority_updates


def assert_unchanged(buffer: PrioritizedReplayBuffer, before: tuple) -> None:
    np.testing.assert_array_equal(buffer.tree._sums, before[0])
    assert (buffer.max_priority, buffer.n_priority_updates) == before[1:]


@pytest.mark.parametrize("prioritization", ["proportional", "rank"])
def test_a_batch_larger_than_the_buffer_samples_with_replacement_in_proportion(prioritization):
    buffer = filled(5, alpha=1.0, prioritization=prioritization)
    buffer.update_priorities(np.arange(5), np.array([1.0, 2.0, 3.0, 4.0, 10.0]))
    if prioritization == "rank":
        buffer.sampler.rank_index.heap.sort()  # exact ranks (between re-sorts the heap order approximates them)
    set_random_seed(0)
    counts = np.bincount(np.concatenate([buffer.sample(256).indices for _ in range(20)]), minlength=5)
    priorities = np.array([1.0, 2.0, 3.0, 4.0, 10.0]) + buffer.epsilon
    weights = priorities if prioritization == "proportional" else 1.0 / (5 - np.argsort(np.argsort(priorities)))
    assert stats.chisquare(counts, weights / weights.sum() * counts.sum())[1] > 0.01


@pytest.mark.slow
def test_stock_sb3_sac_trains_with_a_buffer_smaller_than_its_batch():
    model = stable_baselines3.SAC(
        "MlpPolicy",
        "Pendulum-v1",
        buffer_size=40,
        replay_buffer_class=PrioritizedReplayBuffer,
        learning_starts=10,
        batch_size=64,
        policy_kwargs=dict(net_arch=[8]),
        seed=0,
    )
    with pytest.warns(UserWarning, match="never updated"):
        model.learn(120)
    assert model.replay_buffer.n_sample_calls == 110


@pytest.mark.parametrize("alpha", [0.0, 0.6])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_td_errors_are_refused_whatever_alpha(alpha, bad):
    buffer = filled(alpha=alpha)
    before = state(buffer)
    with pytest.raises(ValueError, match="priorities must be finite"):
        buffer.update_priorities(np.array([0, 1]), np.array([1.0, bad]))
    assert_unchanged(buffer, before)


def test_huge_finite_errors_within_range_are_accepted():
    buffer = filled(alpha=0.5)
    buffer.update_priorities(np.array([0, 1]), np.array([1e308, 1e308]))  # their sum overflows, their priorities do not
    assert buffer.max_priority == pytest.approx(1e154)


@pytest.mark.parametrize("half_life", [None, 50.0])
def test_priorities_whose_tree_sum_would_overflow_are_refused_with_the_tree_unchanged(half_life):
    buffer = filled(1000, alpha=1.0, priority_half_life=half_life)
    buffer.update_priorities(np.arange(3), np.array([1.0, 2.0, 3.0]))
    before = state(buffer)
    with pytest.raises(ValueError, match="overflow"):
        buffer.update_priorities(np.array([0, 1]), np.array([1.0, 1e306]))
    assert_unchanged(buffer, before)
    # the largest accepted priority keeps every later add and sample finite
    top = buffer.sampler.largest_priority / 2
    buffer.update_priorities(np.arange(1000), np.full(1000, top))
    for _ in range(200):
        buffer.add(*(np.zeros((1, 3), dtype=np.float32),) * 2, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    assert np.isfinite(buffer.tree.total) and np.isfinite(buffer.sample(8).weights.numpy()).all()


@pytest.mark.parametrize(
    ("indices", "priorities", "name"),
    [
        (np.array([0, 1]), np.array(["a", "b"]), "priorities"),
        (np.array([0, 1]), np.array([1 + 1j, 2.0]), "priorities"),
        (np.array([0, 1]), th.tensor([1 + 1j, 2.0]), "priorities"),
        (np.array([0, 1]), np.array([True, False]), "priorities"),
        (np.array(["0", "1"]), np.array([1.0, 2.0]), "indices"),
        (np.array([0.0, 1.0]), np.array([1.0, 2.0]), "indices"),
        ([None, 1], np.array([1.0, 2.0]), "indices"),
    ],
)
def test_non_numeric_updates_raise_a_value_error_naming_the_argument(indices, priorities, name):
    buffer = filled()
    before = state(buffer)
    with pytest.raises(ValueError, match=name):
        buffer.update_priorities(indices, priorities)
    assert_unchanged(buffer, before)


@pytest.mark.parametrize("dtype", [th.float16, th.bfloat16])
def test_half_precision_tensors_are_widened(dtype):
    buffer = filled()
    buffer.update_priorities(th.tensor([0, 1]), th.tensor([[0.5], [2.0]], dtype=dtype))
    np.testing.assert_allclose(buffer.tree[np.arange(2)], (np.array([0.5, 2.0]) + buffer.epsilon) ** buffer.alpha)


def test_sample_refuses_a_bool_batch_size():
    buffer = filled()
    with pytest.raises(ValueError, match="batch_size"):
        buffer.sample(True)


def test_an_epsilon_that_underflows_every_importance_weight_in_float32_is_refused():
    with pytest.raises(ValueError, match="epsilon=1e-80"):
        PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, epsilon=1e-80, alpha=0.6)
    # with beta 0 no weight depends on epsilon
    PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, epsilon=1e-80, alpha=0.6, beta_start=0.0, beta_end=0.0)
    with pytest.raises(ValueError, match="inverse tree"):
        PrioritizedReplayBuffer(
            1000,
            OBS_SPACE,
            ACTION_SPACE,
            epsilon=1e-307,
            alpha=1.0,
            beta_start=0.0,
            beta_end=0.0,
            inverse_sampling=True,
        )


DICT_OBS_SPACE = spaces.Dict({"observation": OBS_SPACE, "desired_goal": OBS_SPACE, "achieved_goal": OBS_SPACE})


def make_each_buffer(**kwargs):
    """Each buffer class of sb3_per that stores transitions, made with SB3's storage arguments ``kwargs``."""
    from stable_baselines3.common.envs import BitFlippingEnv
    from stable_baselines3.common.vec_env import DummyVecEnv

    from sb3_per import PrioritizedDictReplayBuffer, PrioritizedHerReplayBuffer, TaggedReplayBuffer

    goal_env = DummyVecEnv([lambda: BitFlippingEnv(n_bits=3)])
    arguments = {"buffer_size": 10, **kwargs}
    return {
        "PrioritizedReplayBuffer": lambda: PrioritizedReplayBuffer(
            observation_space=OBS_SPACE, action_space=ACTION_SPACE, **arguments
        ),
        "PrioritizedDictReplayBuffer": lambda: PrioritizedDictReplayBuffer(
            observation_space=DICT_OBS_SPACE, action_space=ACTION_SPACE, **arguments
        ),
        "PrioritizedHerReplayBuffer": lambda: PrioritizedHerReplayBuffer(
            observation_space=goal_env.observation_space, action_space=goal_env.action_space, env=goal_env, **arguments
        ),
        "TaggedReplayBuffer": lambda: TaggedReplayBuffer(
            observation_space=OBS_SPACE, action_space=ACTION_SPACE, tag_key="regime", **arguments
        ),
    }


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"buffer_size": 0}, "buffer_size must be a positive integer, got 0"),
        ({"buffer_size": -5}, "buffer_size must be a positive integer, got -5"),
        ({"buffer_size": True}, "buffer_size must be a positive integer, got True"),
        ({"buffer_size": float("nan")}, "buffer_size must be a positive integer, got nan"),
        ({"n_envs": 0}, "n_envs must be a positive integer, got 0"),
        ({"n_envs": -1}, "n_envs must be a positive integer, got -1"),
        ({"handle_timeout_termination": "yes"}, "handle_timeout_termination must be a bool, got 'yes'"),
        ({"optimize_memory_usage": 1}, "optimize_memory_usage must be a bool, got 1"),
    ],
)
def test_sb3s_storage_arguments_are_checked_by_every_buffer(kwargs, named):
    for name, make in make_each_buffer(**kwargs).items():
        with pytest.raises(ValueError, match=named):
            make()
            pytest.fail(f"{name} took {kwargs}")


def test_the_tagged_uniform_buffer_refuses_dict_observations_by_name():
    from sb3_per import TaggedReplayBuffer

    with pytest.raises(ValueError, match="TaggedReplayBuffer stores array observations, but observation_space is a"):
        TaggedReplayBuffer(10, DICT_OBS_SPACE, ACTION_SPACE, tag_key="regime")

"""inverse_sampling: a second sum tree over 1 / priority, in step with the first, for LA3P's actor batches."""

import pickle

import numpy as np
import pytest
from gymnasium import spaces
from scipy import stats
from stable_baselines3.common.utils import set_random_seed

from sb3_per import PrioritizedDictReplayBuffer, PrioritizedReplayBuffer, SumTree

OBS_SPACE = spaces.Box(-np.inf, np.inf, (3,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


def inverse_buffer(buffer_size: int, n_envs: int = 1, **kwargs) -> PrioritizedReplayBuffer:
    return PrioritizedReplayBuffer(
        buffer_size, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=n_envs, inverse_sampling=True, **kwargs
    )


def add_steps(buffer: PrioritizedReplayBuffer, n_steps: int) -> None:
    n_envs = buffer.n_envs
    for step in range(n_steps):
        obs = np.full((n_envs, 3), step, dtype=np.float32)
        buffer.add(obs, obs + 1, np.zeros((n_envs, 1)), np.zeros(n_envs), np.zeros(n_envs), [{}] * n_envs)


def rebuilt_inverse_tree(buffer: PrioritizedReplayBuffer) -> SumTree:
    """A fresh tree over 1 / (each leaf of the main tree), 0 where the main leaf is 0."""
    capacity = buffer.tree.capacity
    leaves = buffer.tree[np.arange(capacity)]
    tree = SumTree(capacity)
    tree.update(np.arange(capacity), np.where(leaves > 0, 1.0 / np.where(leaves > 0, leaves, 1.0), 0.0))
    return tree


def test_inverse_sampling_frequencies_match_one_over_priority_after_wrap_around_with_three_envs():
    buffer = inverse_buffer(3 * 13, n_envs=3, alpha=0.7)  # 39 leaves: not a power of two
    add_steps(buffer, 20)  # wrapped around
    rng = np.random.default_rng(0)
    td_errors = rng.exponential(1.0, 39) * 10 ** rng.uniform(-1, 1, 39)
    buffer.update_priorities(np.arange(39), td_errors)
    add_steps(buffer, 2)  # two slots re-enter at the largest priority
    priorities = buffer.tree[np.arange(39)]
    expected = (1.0 / priorities) / (1.0 / priorities).sum()
    set_random_seed(1)
    batch, n_batches = 32, 2000
    counts = np.bincount(
        np.concatenate([buffer.sample(batch, inverse=True).indices for _ in range(n_batches)]), minlength=39
    )
    assert stats.chisquare(counts, expected * batch * n_batches)[1] > 0.01
    # and it is not the prioritized law
    assert stats.chisquare(counts, priorities / priorities.sum() * batch * n_batches)[1] < 1e-6


def test_inverse_tree_equals_a_rebuild_from_the_leaves_after_random_adds_and_updates():
    buffer = inverse_buffer(2 * 50, n_envs=2, optimize_memory_usage=True, handle_timeout_termination=False)
    rng = np.random.default_rng(3)
    for _ in range(40):
        add_steps(buffer, int(rng.integers(1, 6)))
        samples = buffer.sample(16)
        buffer.update_priorities(samples.indices, rng.exponential(1.0, 16) * 10 ** rng.uniform(-3, 3, 16))
    assert buffer.full
    rebuilt = rebuilt_inverse_tree(buffer)
    np.testing.assert_array_equal(buffer.sampler.inverse_index.tree._sums, rebuilt._sums)
    np.testing.assert_array_equal(buffer.sampler.inverse_index.tree._mins, rebuilt._mins)
    invalid = buffer.pos * 2 + np.arange(2)  # the slot optimize_memory_usage must never sample
    assert (buffer.sampler.inverse_index.tree[invalid] == 0).all()
    assert not np.isin(invalid, np.concatenate([buffer.sample(64, inverse=True).indices for _ in range(50)])).any()


def test_inverse_samples_have_unit_weights_stamps_and_leave_beta_alone():
    buffer = inverse_buffer(10, beta_anneal_steps=5)
    add_steps(buffer, 10)
    buffer.update_priorities(np.arange(10), np.arange(10.0))
    samples = buffer.sample(8, inverse=True)
    assert (samples.weights.numpy() == 1.0).all()
    np.testing.assert_array_equal(samples.stamps, 1)
    assert buffer.n_sample_calls == 0 and buffer.beta == buffer.beta_start


def test_pickling_keeps_the_inverse_tree():
    buffer = inverse_buffer(30)
    add_steps(buffer, 30)
    buffer.update_priorities(np.arange(30), np.random.default_rng(0).exponential(size=30))
    restored = pickle.loads(pickle.dumps(buffer))
    np.testing.assert_array_equal(restored.sampler.inverse_index.tree._sums, buffer.sampler.inverse_index.tree._sums)
    set_random_seed(2)
    expected = buffer.sample(16, inverse=True).indices
    set_random_seed(2)
    np.testing.assert_array_equal(restored.sample(16, inverse=True).indices, expected)


def test_dict_buffer_samples_inversely_too():
    space = spaces.Dict({"state": OBS_SPACE})
    buffer = PrioritizedDictReplayBuffer(4, space, ACTION_SPACE, device="cpu", inverse_sampling=True)
    for _ in range(4):
        obs = {"state": np.zeros((1, 3), dtype=np.float32)}
        buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    buffer.update_priorities(np.arange(4), np.array([1e3, 1e3, 1e3, 0.0]))
    indices = np.concatenate([buffer.sample(4, inverse=True).indices for _ in range(10)])
    assert (indices == 3).mean() > 0.9


def test_inverse_sampling_is_refused_where_it_cannot_work():
    plain = PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, device="cpu")
    add_steps(plain, 3)
    with pytest.raises(ValueError, match="inverse_sampling=True"):
        plain.sample(2, inverse=True)
    with pytest.raises(ValueError, match="inverse_sampling"):
        inverse_buffer(10, prioritization="rank")
    with pytest.raises(ValueError, match="inverse_sampling must be a bool"):
        PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, inverse_sampling="yes")
    buffer = inverse_buffer(10)
    add_steps(buffer, 3)
    with pytest.raises(ValueError, match="inverse must be a bool"):
        buffer.sample(2, inverse=1)

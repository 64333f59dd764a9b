import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
import stable_baselines3
import torch as th
from gymnasium import spaces
from scipy import stats
from stable_baselines3.common.buffers import NStepReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.utils import set_random_seed

from sb3_per import PrioritizedReplayBuffer, PrioritizedReplayBufferSamples
from sb3_per.rank_heap import RankHeap

OBS_SPACE = spaces.Box(-np.inf, np.inf, (3,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


def make_buffer(buffer_size: int = 100, n_envs: int = 1, **kwargs) -> PrioritizedReplayBuffer:
    return PrioritizedReplayBuffer(buffer_size, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=n_envs, **kwargs)


def add_steps(buffer: PrioritizedReplayBuffer, n_steps: int, start: int = 0, timeouts: bool = False) -> None:
    """Add `n_steps` steps whose observation encodes (step, env) as [step, env, step * 10 + env]."""
    n_envs = buffer.n_envs
    for step in range(start, start + n_steps):
        envs = np.arange(n_envs)
        obs = np.stack([np.full(n_envs, step), envs, step * 10 + envs], axis=1).astype(np.float32)
        infos = [{"TimeLimit.truncated": timeouts} for _ in range(n_envs)]
        buffer.add(obs, obs + 1, np.full((n_envs, 1), 0.5), np.full(n_envs, float(step)), np.ones(n_envs), infos)


def set_priorities(buffer: PrioritizedReplayBuffer, priorities: np.ndarray) -> None:
    """Give the stored transitions these priorities (already raised to alpha), as TD errors would."""
    td_errors = priorities ** (1.0 / buffer.alpha) - buffer.epsilon
    buffer.update_priorities(np.arange(len(priorities)), td_errors)


def leaf_priorities(buffer: PrioritizedReplayBuffer) -> np.ndarray:
    return buffer.tree[np.arange(buffer.n_transitions)]


def rank_heap(buffer: PrioritizedReplayBuffer) -> RankHeap:
    """The heap a rank-based buffer samples from (its ``RankIndex``'s)."""
    assert buffer.sampler.rank_index is not None
    return buffer.sampler.rank_index.heap


# --- construction ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"alpha": -0.1}, "alpha"),
        ({"alpha": np.nan}, "alpha"),
        ({"beta_start": 1.5}, "beta_start"),
        ({"beta_start": -0.1}, "beta_start"),
        ({"beta_end": np.nan}, "beta_end"),
        ({"beta_anneal_steps": 0}, "beta_anneal_steps"),
        ({"beta_anneal_steps": 2.5}, "beta_anneal_steps"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"weight_normalization": "global"}, "weight_normalization"),
        ({"alpha": 60.0, "epsilon": 1e-6}, "underflows"),
        # not numbers: a ValueError naming the parameter and the value, never a TypeError
        ({"alpha": "0.6"}, "alpha.*'0.6'"),
        ({"alpha": None}, "alpha.*None"),
        ({"epsilon": "1e-6"}, "epsilon.*'1e-6'"),
        ({"epsilon": None}, "epsilon.*None"),
        ({"beta_start": "0.4"}, "beta_start.*'0.4'"),
        ({"beta_start": None}, "beta_start.*None"),
        ({"beta_anneal_steps": np.nan}, "beta_anneal_steps.*nan"),
        ({"beta_anneal_steps": None}, "beta_anneal_steps.*None"),
    ],
)
def test_bad_parameters_raise_a_value_error_naming_them(kwargs, name):
    with pytest.raises(ValueError, match=name):
        make_buffer(**kwargs)


def test_one_leaf_per_transition_over_all_envs():
    buffer = make_buffer(buffer_size=103, n_envs=4)
    assert buffer.buffer_size == 25
    assert buffer.tree.capacity == 100


# --- sampling ---------------------------------------------------------------------------------------


def test_samples_extend_sb3_samples_field_for_field():
    n = len(ReplayBufferSamples._fields)
    assert PrioritizedReplayBufferSamples._fields[:n] == ReplayBufferSamples._fields
    assert PrioritizedReplayBufferSamples._fields[n:] == ("weights", "indices", "stamps")
    buffer = make_buffer()
    add_steps(buffer, 10)
    samples = buffer.sample(8)
    assert samples.weights.shape == (8, 1) and samples.weights.dtype == th.float32
    assert samples.indices.dtype == np.int64 and samples.indices.shape == (8,)
    assert samples.stamps.dtype == np.int64 and samples.stamps.shape == (8,)
    assert samples.discounts is None


def test_sampled_data_belongs_to_the_returned_index_for_every_env():
    buffer = make_buffer(buffer_size=40, n_envs=4)
    add_steps(buffer, 7)
    set_random_seed(0)
    seen_envs = set()
    for _ in range(50):
        samples = buffer.sample(16)
        step, env = np.divmod(samples.indices, 4)
        obs = samples.observations.numpy()
        np.testing.assert_array_equal(obs[:, 0], step)
        np.testing.assert_array_equal(obs[:, 1], env)
        np.testing.assert_array_equal(samples.next_observations.numpy(), obs + 1)
        np.testing.assert_array_equal(samples.rewards.numpy().ravel(), step)
        seen_envs.update(env.tolist())
    assert seen_envs == {0, 1, 2, 3}


def test_sampling_frequencies_match_priority_to_the_alpha_over_their_sum():
    capacity = 37  # not a power of two
    buffer = make_buffer(buffer_size=capacity, alpha=0.7)
    add_steps(buffer, capacity)
    rng = np.random.default_rng(1)
    td_errors = rng.exponential(1.0, capacity)
    td_errors[:3] = [0.0, 5.0, 0.01]
    buffer.update_priorities(np.arange(capacity), td_errors)
    expected = (np.abs(td_errors) + buffer.epsilon) ** 0.7
    expected /= expected.sum()
    set_random_seed(123)
    batch, n_batches = 32, 2000
    counts = np.bincount(np.concatenate([buffer.sample(batch).indices for _ in range(n_batches)]), minlength=capacity)
    _, p_value = stats.chisquare(counts, expected * batch * n_batches)
    assert p_value > 0.01
    assert counts[0] < counts[1] / 20  # the zero-error transition is still reachable but rare


@pytest.mark.filterwarnings("ignore:PrioritizedReplayBuffer has been sampled")
def test_equal_priorities_sample_uniformly_with_unit_weights():
    buffer = make_buffer(buffer_size=50)
    add_steps(buffer, 50)
    set_random_seed(7)
    counts = np.zeros(50)
    for _ in range(400):
        samples = buffer.sample(25)
        np.testing.assert_array_equal(samples.weights.numpy(), 1.0)
        counts += np.bincount(samples.indices, minlength=50)
    _, p_value = stats.chisquare(counts)
    assert p_value > 0.01


@pytest.mark.parametrize("normalization", ["buffer", "batch"])
def test_importance_weights_equal_a_hand_computation(normalization):
    buffer = make_buffer(buffer_size=6, alpha=0.5, beta_start=0.4, weight_normalization=normalization)
    add_steps(buffer, 6)
    priorities = np.array([0.5, 1.0, 2.0, 4.0, 0.25, 8.0])
    set_priorities(buffer, priorities)
    samples = buffer.sample(4)
    beta, n = 0.4, 6
    probabilities = priorities / priorities.sum()
    raw = (n * probabilities) ** -beta
    largest = raw.max() if normalization == "buffer" else raw[samples.indices].max()
    np.testing.assert_allclose(samples.weights.numpy().ravel(), raw[samples.indices] / largest, rtol=1e-6)


# --- rank-based prioritization ----------------------------------------------------------------------


def test_rank_based_sampling_frequencies_match_one_over_rank_to_the_alpha():
    capacity = 37
    buffer = make_buffer(buffer_size=capacity, alpha=0.7, prioritization="rank")
    add_steps(buffer, capacity)
    td_errors = np.random.default_rng(2).permutation(np.arange(1, capacity + 1, dtype=float))  # distinct
    buffer.update_priorities(np.arange(capacity), td_errors)
    rank_heap(buffer).sort()  # exact ranks (between re-sorts the heap order approximates them)
    rank = np.empty(capacity, dtype=np.int64)
    rank[np.argsort(-td_errors)] = np.arange(1, capacity + 1)
    expected = (1.0 / rank) ** 0.7
    expected /= expected.sum()
    set_random_seed(5)
    batch, n_batches = 8, 3000
    counts = np.bincount(np.concatenate([buffer.sample(batch).indices for _ in range(n_batches)]), minlength=capacity)
    _, p_value = stats.chisquare(counts, expected * batch * n_batches)
    assert p_value > 1e-3
    # the same counts against proportional sampling of the same priorities: clearly rejected
    proportional = (td_errors + buffer.epsilon) ** 0.7
    assert stats.chisquare(counts, proportional / proportional.sum() * batch * n_batches)[1] < 1e-6


@pytest.mark.parametrize("normalization", ["buffer", "batch"])
def test_rank_based_importance_weights_equal_a_hand_computation(normalization):
    buffer = make_buffer(
        buffer_size=6, alpha=0.5, beta_start=0.4, weight_normalization=normalization, prioritization="rank"
    )
    add_steps(buffer, 6)
    buffer.update_priorities(np.arange(6), np.array([0.5, 1.0, 2.0, 4.0, 0.25, 8.0]))
    rank_heap(buffer).sort()
    samples = buffer.sample(4)
    rank = np.array([4, 3, 2, 1, 5, 0])  # 0-based rank of each transition, by decreasing error
    probabilities = (1.0 / (rank + 1)) ** 0.5
    probabilities /= probabilities.sum()
    raw = (6 * probabilities) ** -0.4
    largest = raw.max() if normalization == "buffer" else raw[samples.indices].max()
    np.testing.assert_allclose(samples.weights.numpy().ravel(), raw[samples.indices] / largest, rtol=1e-6)


def test_rank_based_new_transitions_enter_at_rank_one_and_priorities_stay_readable():
    buffer = make_buffer(buffer_size=10, prioritization="rank")
    add_steps(buffer, 6)
    buffer.update_priorities(np.arange(6), np.arange(6) * 10.0)
    add_steps(buffer, 1, start=6)
    assert rank_heap(buffer).position(np.array([6]))[0] == 0
    np.testing.assert_array_equal(rank_heap(buffer)[np.arange(7)], leaf_priorities(buffer))


def test_rank_based_prioritization_is_checked_against_its_limits():
    with pytest.raises(ValueError, match="prioritization must be one of"):
        make_buffer(prioritization="ranked")
    with pytest.raises(ValueError, match="optimize_memory_usage"):
        make_buffer(prioritization="rank", optimize_memory_usage=True, handle_timeout_termination=False)


def test_beta_anneals_linearly_and_stays_at_its_end():
    buffer = make_buffer(beta_start=0.4, beta_end=1.0, beta_anneal_steps=4)
    add_steps(buffer, 5)
    betas = []
    for _ in range(6):
        betas.append(buffer.beta)
        samples = buffer.sample(2)
        buffer.update_priorities(samples.indices, np.ones(2))
    np.testing.assert_allclose(betas, [0.4, 0.55, 0.7, 0.85, 1.0, 1.0])


@pytest.mark.parametrize(
    ("batch_size", "fill", "message"),
    [
        (0, 5, "positive integer"),
        (-2, 5, "positive integer"),
        (2, 0, "empty"),
        (True, 5, "batch_size"),
        (4.0, 5, "batch_size"),
        ("8", 5, "batch_size"),
    ],
)
def test_bad_sample_requests_raise(batch_size, fill, message):
    buffer = make_buffer(buffer_size=100)
    add_steps(buffer, fill)
    with pytest.raises(ValueError, match=message):
        buffer.sample(batch_size)


def test_a_batch_larger_than_the_stored_count_repeats_transitions_as_sb3_does():
    buffer = make_buffer(buffer_size=100)
    add_steps(buffer, 5)
    samples = buffer.sample(64)
    assert set(samples.indices.tolist()) <= set(range(5))


# --- priorities ---------------------------------------------------------------------------------------


def test_new_and_overwritten_transitions_enter_at_the_largest_priority_seen():
    buffer = make_buffer(buffer_size=4, alpha=0.5)
    add_steps(buffer, 4)
    np.testing.assert_array_equal(leaf_priorities(buffer), 1.0)
    buffer.update_priorities(np.array([0, 1, 2, 3]), np.array([8.0, 0.0, 0.5, 2.0]))
    top = (8.0 + buffer.epsilon) ** 0.5  # alpha applied once
    assert buffer.max_priority == pytest.approx(top)
    add_steps(buffer, 2, start=4)  # overwrites slots 0 and 1
    np.testing.assert_allclose(leaf_priorities(buffer)[:2], [top, top])
    assert leaf_priorities(buffer)[2] == pytest.approx((0.5 + buffer.epsilon) ** 0.5)


def test_update_for_a_slot_overwritten_since_it_was_sampled_is_skipped():
    buffer = make_buffer(buffer_size=4)
    add_steps(buffer, 4)
    set_random_seed(0)
    samples = buffer.sample(4)
    entry_priority = buffer.max_priority
    add_steps(buffer, 1, start=4)  # overwrites slot 0
    buffer.update_priorities(samples.indices, np.full(4, 3.0))
    priorities = leaf_priorities(buffer)
    assert 0 in samples.indices
    assert priorities[0] == entry_priority
    expected = (3.0 + buffer.epsilon) ** buffer.alpha
    fresh = np.unique(samples.indices[samples.indices != 0])
    np.testing.assert_allclose(priorities[fresh], expected)
    # Sampled again after the overwrite, slot 0 takes updates again.
    set_random_seed(1)
    while 0 not in (samples := buffer.sample(4)).indices:
        pass
    buffer.update_priorities(samples.indices, np.full(4, 0.5))
    assert leaf_priorities(buffer)[0] == pytest.approx((0.5 + buffer.epsilon) ** buffer.alpha)


def test_stamps_count_the_writes_of_each_sampled_leaf():
    buffer = make_buffer(buffer_size=8, n_envs=2)  # 4 slots of 2 envs
    add_steps(buffer, 6)  # slots 0 and 1 written twice, 2 and 3 once
    samples = buffer.sample(8)
    np.testing.assert_array_equal(samples.stamps, np.where(samples.indices // 2 < 2, 2, 1))


def test_with_stamps_an_older_batch_whose_slot_was_overwritten_and_sampled_again_is_skipped():
    def older_batch_then_newer_batch(with_stamps: bool) -> float:
        buffer = make_buffer(buffer_size=4)
        add_steps(buffer, 4)
        set_random_seed(0)
        while 0 not in (older := buffer.sample(4)).indices:
            pass
        add_steps(buffer, 1, start=4)  # overwrites slot 0
        while 0 not in (newer := buffer.sample(4)).indices:
            pass
        buffer.update_priorities(newer.indices, np.full(4, 2.0), newer.stamps if with_stamps else None)
        buffer.update_priorities(older.indices, np.full(4, 9.0), older.stamps if with_stamps else None)
        return leaf_priorities(buffer)[0]

    assert older_batch_then_newer_batch(with_stamps=True) == pytest.approx((2.0 + 1e-6) ** 0.6)
    # the documented gap of the call without stamps: the stale update lands
    assert older_batch_then_newer_batch(with_stamps=False) == pytest.approx((9.0 + 1e-6) ** 0.6)


@pytest.mark.parametrize(
    ("stamps", "message"), [(np.array([1, 1]), "stamps has 2 values"), (np.array([1.0, 1.0, 1.0]), "stamps must be")]
)
def test_bad_stamps_raise_and_leave_priorities_unchanged(stamps, message):
    buffer = make_buffer(buffer_size=10)
    add_steps(buffer, 10)
    with pytest.raises(ValueError, match=message):
        buffer.update_priorities(np.arange(3), np.full(3, 5.0), stamps)
    np.testing.assert_array_equal(leaf_priorities(buffer), 1.0)


def test_update_accepts_torch_tensors_of_any_shape_that_flattens_to_the_batch():
    buffer = make_buffer(buffer_size=10)
    add_steps(buffer, 10)
    buffer.update_priorities(th.tensor([1, 2, 3]), th.tensor([[0.5], [-2.0], [0.0]]))
    expected = (np.array([0.5, 2.0, 0.0]) + buffer.epsilon) ** buffer.alpha
    np.testing.assert_allclose(leaf_priorities(buffer)[1:4], expected)


@pytest.mark.parametrize(
    ("indices", "td_errors", "message"),
    [
        ([0, 1], [1.0, np.nan], "finite"),
        ([0, 1], [np.inf, 1.0], "finite"),
        ([0, 1, 2], [1.0, 1.0], "3"),
        ([0, 10], [1.0, 1.0], "out of range"),  # not stored yet
        ([-1, 0], [1.0, 1.0], "out of range"),
        ([0.0, 1.0], [1.0, 1.0], "integers"),
    ],
)
def test_bad_priority_updates_raise_and_leave_priorities_unchanged(indices, td_errors, message):
    buffer = make_buffer(buffer_size=20)
    add_steps(buffer, 10)
    buffer.update_priorities(np.arange(10), np.linspace(0.1, 3, 10))
    before, top = leaf_priorities(buffer).copy(), buffer.max_priority
    with pytest.raises(ValueError, match=message):
        buffer.update_priorities(np.array(indices), np.array(td_errors))
    np.testing.assert_array_equal(leaf_priorities(buffer), before)
    assert buffer.max_priority == top


# --- SB3 options -----------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:PrioritizedReplayBuffer has been sampled")
def test_optimize_memory_usage_never_samples_the_slot_whose_next_observation_is_gone():
    buffer = make_buffer(buffer_size=8, optimize_memory_usage=True, handle_timeout_termination=False)
    add_steps(buffer, 11)  # full, wrapped: pos = 3
    set_random_seed(0)
    indices = np.concatenate([buffer.sample(8).indices for _ in range(300)])
    assert buffer.pos not in indices
    assert set(indices.tolist()) == set(range(8)) - {buffer.pos}
    samples = buffer.sample(8)
    obs, next_obs = samples.observations.numpy(), samples.next_observations.numpy()
    np.testing.assert_array_equal(next_obs[:, 0], obs[:, 0] + 1)  # next obs is the following step's obs


def test_timeouts_are_not_dones_when_handled():
    handled = make_buffer(buffer_size=10)
    add_steps(handled, 5, timeouts=True)
    assert (handled.sample(5).dones.numpy() == 0).all()
    ignored = make_buffer(buffer_size=10, handle_timeout_termination=False)
    add_steps(ignored, 5, timeouts=True)
    assert (ignored.sample(5).dones.numpy() == 1).all()


class _Normalizer:
    """Stands in for VecNormalize: only the two methods the buffer calls."""

    def normalize_obs(self, obs):
        return obs * 2.0

    def normalize_reward(self, reward):
        return reward - 100.0


def test_observations_and_rewards_are_normalised_through_env_as_in_sb3():
    buffer = make_buffer(buffer_size=10)
    add_steps(buffer, 5)
    set_random_seed(3)
    raw = buffer.sample(4)
    set_random_seed(3)
    normalized = buffer.sample(4, env=_Normalizer())
    np.testing.assert_array_equal(normalized.observations.numpy(), raw.observations.numpy() * 2)
    np.testing.assert_array_equal(normalized.next_observations.numpy(), raw.next_observations.numpy() * 2)
    np.testing.assert_array_equal(normalized.rewards.numpy(), raw.rewards.numpy() - 100)


def test_pickle_round_trip_keeps_priorities_max_and_beta_progress():
    buffer = make_buffer(buffer_size=30, n_envs=2, beta_anneal_steps=10)
    add_steps(buffer, 12)
    for _ in range(3):
        samples = buffer.sample(8)
        buffer.update_priorities(samples.indices, np.random.default_rng(0).exponential(1, 8))
    restored = pickle.loads(pickle.dumps(buffer))
    np.testing.assert_array_equal(leaf_priorities(restored), leaf_priorities(buffer))
    assert restored.max_priority == buffer.max_priority
    assert restored.beta == buffer.beta and restored.n_sample_calls == 3
    set_random_seed(5)
    a = buffer.sample(8)
    set_random_seed(5)
    b = restored.sample(8)
    np.testing.assert_array_equal(a.indices, b.indices)


def test_rank_based_buffer_pickles_without_what_it_can_rebuild():
    buffer = make_buffer(buffer_size=1000, prioritization="rank")
    add_steps(buffer, 1000)
    buffer.update_priorities(np.arange(1000), np.random.default_rng(0).exponential(size=1000))
    rank_heap(buffer).sort()  # allocates sort()'s scratch arrays
    loaded = pickle.loads(pickle.dumps(buffer))
    assert len(pickle.dumps(rank_heap(buffer))) < 30 * 1000  # 24 bytes a leaf, not 64
    np.testing.assert_array_equal(
        rank_heap(loaded).position(np.arange(1000)), rank_heap(buffer).position(np.arange(1000))
    )
    set_random_seed(3)
    expected = buffer.sample(32)
    set_random_seed(3)
    got = loaded.sample(32)
    np.testing.assert_array_equal(got.indices, expected.indices)
    assert th.equal(got.weights, expected.weights)
    rank_heap(loaded).sort()  # its scratch arrays come back on demand


def test_reset_forgets_priorities():
    buffer = make_buffer(buffer_size=10)
    add_steps(buffer, 10)
    buffer.update_priorities(np.arange(10), np.full(10, 50.0))
    buffer.reset()
    assert buffer.n_transitions == 0 and buffer.tree.total == 0 and buffer.max_priority == 1.0


def test_warns_once_at_the_second_sample_when_priorities_are_never_updated():
    buffer = make_buffer(buffer_size=10)
    add_steps(buffer, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        buffer.sample(4)  # an algorithm that writes priorities back does so before its next sample
    with pytest.warns(UserWarning, match=r"sampled 2 times .* `sb3_per.TQC` .*QRDQN and CrossQ") as record:
        for _ in range(50):
            buffer.sample(4)
    assert len(record) == 1


def test_no_warning_when_priorities_are_updated():
    buffer = make_buffer(buffer_size=10)
    add_steps(buffer, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(buffer.SAMPLES_BEFORE_NO_UPDATE_WARNING + 50):
            samples = buffer.sample(4)
            buffer.update_priorities(samples.indices, np.ones(4))


@pytest.mark.slow
def test_stock_sb3_sac_runs_end_to_end_with_the_buffer_class():
    env = gym.make("Pendulum-v1")
    model = stable_baselines3.SAC(
        "MlpPolicy",
        env,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=dict(alpha=0.6, beta_start=0.4, beta_end=1.0, beta_anneal_steps=200, epsilon=1e-6),
        learning_starts=50,
        batch_size=32,
        policy_kwargs=dict(net_arch=[16, 16]),
        seed=0,
    )
    with pytest.warns(UserWarning, match="never updated"):
        model.learn(300)
    buffer = model.replay_buffer
    assert isinstance(buffer, PrioritizedReplayBuffer)
    assert buffer.n_transitions == 300
    assert buffer.n_sample_calls == 250
    assert buffer.beta == 1.0


@pytest.mark.filterwarnings("ignore:overflow encountered in power:RuntimeWarning")
def test_a_finite_error_whose_priority_overflows_is_rejected():
    buffer = make_buffer(buffer_size=10, alpha=2.0)
    add_steps(buffer, 10)
    with pytest.raises(ValueError, match="overflow"):
        buffer.update_priorities(np.array([0, 1]), np.array([1.0, 1e200]))
    np.testing.assert_array_equal(leaf_priorities(buffer), 1.0)


def test_an_empty_update_changes_nothing():
    buffer = make_buffer(buffer_size=10)
    add_steps(buffer, 10)
    buffer.update_priorities(np.array([], dtype=np.int64), np.array([]))
    np.testing.assert_array_equal(leaf_priorities(buffer), 1.0)


def test_dict_observation_spaces_are_refused_with_a_pointer_to_the_dict_buffer():
    space = spaces.Dict({"a": OBS_SPACE})
    with pytest.raises(ValueError, match="is a Dict: use PrioritizedDictReplayBuffer"):
        PrioritizedReplayBuffer(10, space, ACTION_SPACE)


def test_an_update_cannot_revive_the_invalid_slot_of_optimize_memory_usage():
    buffer = make_buffer(buffer_size=4, optimize_memory_usage=True, handle_timeout_termination=False)
    add_steps(buffer, 5)  # full, pos = 1: slot 1's next observation has been overwritten
    buffer.update_priorities(np.arange(4), np.full(4, 5.0))
    assert leaf_priorities(buffer)[buffer.pos] == 0.0
    assert (np.delete(leaf_priorities(buffer), buffer.pos) > 1.0).all()


# --- n-step returns ------------------------------------------------------------------------------


def add_random_episodes(buffers: list, n_envs: int, n_steps: int, seed: int) -> None:
    """Add the same random transitions, with episode ends and timeouts, to every buffer."""
    rng = np.random.default_rng(seed)
    for _ in range(n_steps):
        obs = rng.standard_normal((n_envs, 3)).astype(np.float32)
        next_obs = rng.standard_normal((n_envs, 3)).astype(np.float32)
        action = rng.uniform(-1, 1, (n_envs, 1)).astype(np.float32)
        reward = rng.standard_normal(n_envs).astype(np.float32)
        done = rng.random(n_envs) < 0.2
        infos = [{"TimeLimit.truncated": bool(d and rng.random() < 0.4)} for d in done]
        for buffer in buffers:
            buffer.add(obs, next_obs, action, reward, done, infos)


@pytest.mark.parametrize("n_envs", [1, 3])
@pytest.mark.parametrize("n_added", [7, 20, 33])  # partly filled, just full, wrapped around
def test_n_step_samples_equal_sb3_n_step_buffer_on_the_same_data(n_envs, n_added):
    kwargs = dict(n_envs=n_envs, n_steps=3, gamma=0.9)
    ours = PrioritizedReplayBuffer(20 * n_envs, OBS_SPACE, ACTION_SPACE, device="cpu", **kwargs)
    theirs = NStepReplayBuffer(20 * n_envs, OBS_SPACE, ACTION_SPACE, device="cpu", **kwargs)
    add_random_episodes([ours, theirs], n_envs, n_added, seed=n_added)
    batch_inds = np.arange(ours.size())
    # SB3 draws an env per sample from the global generator: draw the same ones for our leaves.
    set_random_seed(0)
    env_inds = np.random.randint(0, n_envs, size=batch_inds.shape)  # noqa: NPY002
    set_random_seed(0)
    expected = theirs._get_samples(batch_inds)
    leaves = batch_inds * n_envs + env_inds
    got = ours._get_prioritized_samples(leaves, np.ones(len(batch_inds)), ours._write_count[leaves], None)
    for field in ReplayBufferSamples._fields:
        assert th.equal(getattr(got, field), getattr(expected, field)), field
    assert (got.discounts.numpy() < 0.9**3 + 1e-6).sum() > 0  # some sums were cut by an episode end


def test_n_step_buffer_parameters_are_checked():
    with pytest.raises(ValueError, match="n_steps"):
        make_buffer(n_steps=0)
    with pytest.raises(ValueError, match="gamma"):
        make_buffer(n_steps=3, gamma=1.5)
    with pytest.raises(ValueError, match="optimize_memory_usage"):
        make_buffer(n_steps=3, optimize_memory_usage=True, handle_timeout_termination=False)


@pytest.mark.slow
def test_sb3_per_sac_trains_on_n_step_prioritized_samples():
    from sb3_per import SAC

    model = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=dict(n_steps=3, gamma=0.99),
        learning_starts=50,
        batch_size=32,
        policy_kwargs=dict(net_arch=[16, 16]),
        seed=0,
    ).learn(150)
    samples = model.replay_buffer.sample(32)
    # No episode ends within 150 steps; only the newest transitions' sums are cut, at the ring's seam.
    discounts = samples.discounts.numpy().ravel()
    assert np.isin(discounts, np.float32([0.99, 0.99**2, 0.99**3])).all()
    assert (discounts == np.float32(0.99**3)).mean() > 0.5
    assert model.replay_buffer.n_priority_updates == 100


@pytest.mark.parametrize("optimize_memory_usage", [False, True])
def test_sample_uniform_ignores_priorities_and_skips_the_invalid_slot(optimize_memory_usage):
    buffer = make_buffer(
        buffer_size=10, n_envs=2, optimize_memory_usage=optimize_memory_usage, handle_timeout_termination=False
    )
    add_steps(buffer, 13)  # wraps: full, and with optimize_memory_usage the slot at `pos` is invalid
    set_priorities(buffer, np.geomspace(1e-3, 1e3, buffer.n_transitions))
    before = leaf_priorities(buffer).copy()
    np.random.seed(0)  # noqa: NPY002
    samples = buffer.sample_uniform(40_000)
    valid = np.ones(buffer.n_transitions, dtype=bool)
    if optimize_memory_usage:
        valid[buffer.pos * buffer.n_envs : (buffer.pos + 1) * buffer.n_envs] = False
    counts = np.bincount(samples.indices, minlength=buffer.n_transitions)
    assert (counts[~valid] == 0).all()
    assert stats.chisquare(counts[valid]).pvalue > 1e-3
    assert th.equal(samples.weights, th.ones(40_000, 1))
    assert np.array_equal(samples.stamps, buffer._write_count[samples.indices])
    assert np.array_equal(leaf_priorities(buffer), before) and buffer.n_sample_calls == 0


def test_a_stale_update_does_not_raise_the_entry_priority():
    buffer = make_buffer(buffer_size=4)
    add_steps(buffer, 4)
    indices = np.array([0, 3])
    stamps = buffer._write_count[indices].copy()  # as a batch of slots 0 and 3 would carry them
    add_steps(buffer, 1, start=4)  # overwrites slot 0 only
    buffer.update_priorities(indices, np.array([1e6, 3.0]), stamps)
    assert buffer.max_priority == pytest.approx((3.0 + buffer.epsilon) ** buffer.alpha)
    assert leaf_priorities(buffer)[0] == 1.0  # the overwritten slot keeps its entry priority

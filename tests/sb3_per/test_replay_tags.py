"""Tags on stored transitions: what is stored, the per-tag shares, and a uniform buffer that samples as SB3's."""

import pickle

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.type_aliases import ReplayBufferSamples
from stable_baselines3.common.utils import set_random_seed

from sb3_per import PrioritizedDictReplayBuffer, PrioritizedReplayBuffer, TaggedReplayBuffer, TaggedReplayBufferSamples
from sb3_per.replay_tags import MAX_TAGS, UNKNOWN_TAG, tag_of

OBS_SPACE = spaces.Box(-np.inf, np.inf, (3,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


def shares_by_count(tags: np.ndarray) -> dict[int, float]:
    values, counts = np.unique(tags, return_counts=True)
    return dict(zip(values.tolist(), (counts / counts.sum()).tolist(), strict=True))


def shares_by_mass(tags: np.ndarray, mass: np.ndarray) -> dict[int, float]:
    return {int(t): mass[tags == t].sum() / mass.sum() for t in np.unique(tags)}


def assert_shares_equal(got: dict[int, float], expected: dict[int, float]) -> None:
    assert set(got) == set(expected)
    for tag, share in expected.items():
        assert got[tag] == pytest.approx(share, rel=1e-9, abs=1e-12), tag
    assert sum(got.values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("value", "tag"),
    [(3, 3), (np.int64(-5), -5), (np.uint8(7), 7), (0, 0), (2.0, -1), (True, -1), (np.bool_(True), -1), ("1", -1)],
)
def test_only_int64_integers_are_tags_the_rest_is_unknown(value, tag):
    assert tag_of(value) == tag
    assert tag_of(None) == tag_of(np.array(3)) == tag_of(2**63) == UNKNOWN_TAG


def test_a_missing_key_or_non_integer_value_stores_minus_one():
    buffer = PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=3, tag_key="regime")
    obs = np.zeros((3, 3), dtype=np.float32)
    infos = [{"regime": 2}, {}, {"regime": 1.5}]
    buffer.add(obs, obs, np.zeros((3, 1)), np.zeros(3), np.zeros(3), infos)
    np.testing.assert_array_equal(buffer.tags_at(np.arange(3)), [2, -1, -1])
    assert buffer.tag_buffer_shares() == pytest.approx({2: 1 / 3, -1: 2 / 3})


@pytest.mark.parametrize("prioritization", ["proportional", "rank"])
@pytest.mark.parametrize("n_envs", [1, 3])
def test_shares_equal_a_count_of_stored_tags_and_a_sum_over_leaves_through_wrap_around(
    prioritization, n_envs, add_tagged_steps, stored_tags
):
    buffer = PrioritizedReplayBuffer(
        23 * n_envs, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=n_envs, tag_key="regime",
        prioritization=prioritization,
    )  # fmt: skip
    rng = np.random.default_rng(4)
    tags = []
    for round_ in range(6):  # 6 x 9 steps: partly filled, then wrapped around twice
        tags += add_tagged_steps([buffer], n_envs, 9, seed=round_)
        samples = buffer.sample(16)
        buffer.update_priorities(samples.indices, rng.exponential(1.0, 16) * 10 ** rng.uniform(-3, 3, 16))
        expected_tags = stored_tags(buffer, tags)
        n = buffer.n_transitions
        np.testing.assert_array_equal(buffer.tags_at(np.arange(n)), expected_tags)
        np.testing.assert_array_equal(buffer.tags_at(samples.indices), expected_tags[samples.indices])
        assert_shares_equal(buffer.tag_buffer_shares(), shares_by_count(expected_tags))
        assert_shares_equal(buffer.tag_priority_shares(), shares_by_mass(expected_tags, buffer.tree[np.arange(n)]))


def test_the_invalid_slot_of_optimize_memory_usage_holds_no_priority_mass(add_tagged_steps, stored_tags):
    buffer = PrioritizedReplayBuffer(
        8, OBS_SPACE, ACTION_SPACE, device="cpu", optimize_memory_usage=True, handle_timeout_termination=False,
        tag_key="regime",
    )  # fmt: skip
    tags = add_tagged_steps([buffer], 1, 13, seed=1)
    buffer.update_priorities(np.arange(8), np.arange(8) + 1.0)
    expected_tags = stored_tags(buffer, tags)
    mass = buffer.tree[np.arange(8)]
    assert mass[buffer.pos] == 0.0
    assert_shares_equal(buffer.tag_priority_shares(), shares_by_mass(expected_tags, mass))


def test_pickling_keeps_tags_and_sums_the_tag_priorities_afresh_from_the_leaves(add_tagged_steps, stored_tags):
    buffer = PrioritizedReplayBuffer(40, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=2, tag_key="regime")
    tags = add_tagged_steps([buffer], 2, 30, seed=2)
    buffer.update_priorities(np.arange(20), np.linspace(0.1, 5.0, 20))
    shares = buffer.tag_priority_shares()
    buffer.tag_mass.sums += 1e3  # drift, as if from accumulated rounding
    restored = pickle.loads(pickle.dumps(buffer))
    np.testing.assert_array_equal(restored.tags_at(np.arange(40)), stored_tags(buffer, tags))
    assert restored.tag_buffer_shares() == buffer.tag_buffer_shares()
    assert_shares_equal(restored.tag_priority_shares(), shares)
    add_tagged_steps([restored], 2, 5, seed=3)  # and it keeps counting after the load
    assert_shares_equal(restored.tag_buffer_shares(), shares_by_count(restored.tags_at(np.arange(40))))


BUFFERS_THAT_CHECK_INFOS = {
    # SB3 reads no info here (timeouts not handled): before the check, a short list was stored without a word
    "prioritized": lambda: PrioritizedReplayBuffer(
        12, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=3, handle_timeout_termination=False
    ),
    # tagged, faded: the tags, their priority mass and the fading clock must not move either
    "prioritized_tagged_faded": lambda: PrioritizedReplayBuffer(
        12, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=3, tag_key="regime", priority_half_life=2.0
    ),
    "uniform_tagged": lambda: TaggedReplayBuffer(12, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=3, tag_key="regime"),
}


@pytest.mark.parametrize("n_infos", [2, 4])
@pytest.mark.parametrize("kind", list(BUFFERS_THAT_CHECK_INFOS))
def test_add_without_one_info_per_env_is_refused_before_anything_is_stored(kind, n_infos, add_tagged_steps):
    buffer = BUFFERS_THAT_CHECK_INFOS[kind]()
    add_tagged_steps([buffer], 3, 6, seed=7)  # full and wrapped: the next add overwrites stored transitions
    before = pickle.dumps(buffer)
    observations, pos, full = buffer.observations.copy(), buffer.pos, buffer.full
    tags = buffer.tags_at(np.arange(12)) if buffer.tagged else None
    shares = buffer.tag_buffer_shares() if buffer.tagged else None
    obs = np.full((3, 3), 7.0, dtype=np.float32)  # unlike anything stored, so that a partial write shows
    with pytest.raises(ValueError, match=r"add needs one info dict per env \(3\)"):
        buffer.add(obs, obs, np.zeros((3, 1)), np.ones(3), np.zeros(3), [{"regime": 9}] * n_infos)
    np.testing.assert_array_equal(buffer.observations, observations)
    assert (buffer.pos, buffer.full) == (pos, full)
    if buffer.tagged:
        np.testing.assert_array_equal(buffer.tags_at(np.arange(12)), tags)
        assert buffer.tag_buffer_shares() == shares
    assert pickle.dumps(buffer) == before  # nothing else moved: priorities, stamps, clock, tag slots
    # and the same step with one info per env is stored
    buffer.add(obs, obs, np.zeros((3, 1)), np.ones(3), np.zeros(3), [{"regime": 9}] * 3)
    np.testing.assert_array_equal(buffer.observations[pos], obs)


TAGGED_BUFFERS = {
    "prioritized_tagged_faded": lambda size: PrioritizedReplayBuffer(
        size, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=3, tag_key="regime", priority_half_life=2.0
    ),
    "uniform_tagged": lambda size: TaggedReplayBuffer(
        size, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=3, tag_key="regime"
    ),
}


def tag_adder(buffer):
    obs = np.zeros((3, 3), dtype=np.float32)

    def add_tags(*tags: int) -> None:
        buffer.add(obs, obs, np.zeros((3, 1)), np.ones(3), np.zeros(3), [{"regime": tag} for tag in tags])

    return add_tags


@pytest.mark.parametrize("kind", list(TAGGED_BUFFERS))
def test_a_tag_past_max_tags_stored_at_once_is_refused_before_anything_is_stored_and_reset_frees_the_slots(kind):
    buffer = TAGGED_BUFFERS[kind](300)  # 100 slots for each of 3 envs: room for more than MAX_TAGS tags at once
    add_tags = tag_adder(buffer)
    for first in range(0, MAX_TAGS, 3):  # an episode counter as the tag: new tags at every step, 0 .. MAX_TAGS - 1
        add_tags(*(min(tag, MAX_TAGS - 1) for tag in (first, first + 1, first + 2)))
    before = pickle.dumps(buffer)
    with pytest.raises(ValueError, match=rf"info\['regime'\] = {MAX_TAGS} would be tag number {MAX_TAGS + 1} stored"):
        add_tags(0, 1, MAX_TAGS)
    assert pickle.dumps(buffer) == before
    add_tags(0, 1, 2)  # tags it already has are still stored
    buffer.reset()
    add_tags(MAX_TAGS, MAX_TAGS + 1, MAX_TAGS + 2)  # and a reset buffer starts counting afresh
    assert set(buffer.tags_at(np.arange(3))) == {MAX_TAGS, MAX_TAGS + 1, MAX_TAGS + 2}


@pytest.mark.parametrize("kind", list(TAGGED_BUFFERS))
def test_a_small_buffer_takes_any_number_of_tags_over_time_in_the_slots_of_tags_no_longer_stored(kind):
    buffer = TAGGED_BUFFERS[kind](12)  # 4 slots for each of 3 envs
    add_tags = tag_adder(buffer)
    for first in range(0, 3 * 400, 3):  # 1,200 distinct tags, 12 stored at a time
        add_tags(first, first + 1, first + 2)
    assert buffer.n_tag_slots == MAX_TAGS
    stored = buffer.tags_at(np.arange(12))
    assert sorted(stored) == list(range(1200 - 12, 1200))
    assert_shares_equal(buffer.tag_buffer_shares(), shares_by_count(stored))
    if kind.startswith("prioritized"):
        effective = buffer.priorities_at(np.arange(12))
        expected = {int(tag): float(effective[stored == tag].sum() / effective.sum()) for tag in np.unique(stored)}
        assert_shares_equal(buffer.tag_priority_shares(), expected)


def test_tag_priority_shares_stay_exact_when_priorities_span_22_orders_of_magnitude():
    """Adjusted by differences, a tag's mass keeps the rounding of 1e11-sized amounts once a total of 1e-11-sized
    priorities is left: the shares are summed afresh when that rounding could show."""
    buffer = PrioritizedReplayBuffer(
        8, OBS_SPACE, ACTION_SPACE, device="cpu", alpha=1.0, epsilon=1e-30, tag_key="regime"
    )
    obs = np.zeros((1, 3), dtype=np.float32)
    for tag in (0, 1, 0, 1, 0, 1, 0, 1):
        buffer.add(obs, obs, np.zeros((1, 1)), np.ones(1), np.zeros(1), [{"regime": tag}])
    generator = np.random.default_rng(0)
    for _ in range(50):  # every priority swings between 1e11 and 1e-11
        buffer.update_priorities(np.arange(8), 10.0 ** generator.uniform(-11, 11, 8))
    buffer.update_priorities(np.arange(8), 10.0 ** generator.uniform(-11, -10, 8))
    effective = buffer.priorities_at(np.arange(8))
    tags = buffer.tags_at(np.arange(8))
    expected = {tag: float(effective[tags == tag].sum() / effective.sum()) for tag in (0, 1)}
    shares = buffer.tag_priority_shares()
    for tag in (0, 1):
        assert shares[tag] == pytest.approx(expected[tag], rel=1e-9, abs=0)


def test_reset_forgets_tags(add_tagged_steps):
    buffer = PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, device="cpu", tag_key="regime")
    add_tagged_steps([buffer], 1, 10, seed=0)
    buffer.reset()
    assert buffer.tag_buffer_shares() == {} and buffer.tag_priority_shares() == {}
    add_tagged_steps([buffer], 1, 2, seed=1)
    assert sum(buffer.tag_buffer_shares().values()) == pytest.approx(1.0)


def test_dict_buffer_stores_tags_too():
    space = spaces.Dict({"state": OBS_SPACE})
    buffer = PrioritizedDictReplayBuffer(10, space, ACTION_SPACE, device="cpu", n_envs=2, tag_key="regime")
    obs = {"state": np.zeros((2, 3), dtype=np.float32)}
    buffer.add(obs, obs, np.zeros((2, 1)), np.zeros(2), np.zeros(2), [{"regime": 4}, {"regime": 0}])
    np.testing.assert_array_equal(buffer.tags_at(np.array([1, 0])), [0, 4])
    assert buffer.tag_priority_shares() == pytest.approx({4: 0.5, 0: 0.5})


def test_tag_queries_check_their_input(add_tagged_steps):
    untagged = PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, device="cpu")
    assert not untagged.tagged
    with pytest.raises(ValueError, match="tag_key=None"):
        untagged.tag_buffer_shares()
    with pytest.raises(ValueError, match="tag_key"):
        PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, tag_key=3)
    with pytest.raises(ValueError, match="tag_key"):
        TaggedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, tag_key=None)
    with pytest.raises(ValueError, match="needs tag_key"):  # as replay_buffer_class without replay_buffer_kwargs
        TaggedReplayBuffer(10, OBS_SPACE, ACTION_SPACE)
    buffer = PrioritizedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, device="cpu", tag_key="regime")
    add_tagged_steps([buffer], 1, 4, seed=0)
    assert buffer.tagged
    with pytest.raises(ValueError, match="out of range"):
        buffer.tags_at(np.array([4]))
    with pytest.raises(ValueError, match="integers"):
        buffer.tags_at(np.array([0.0]))


# --- the uniform tagged buffer ---------------------------------------------------------------------------


def test_tagged_samples_extend_sb3_samples_field_for_field():
    n = len(ReplayBufferSamples._fields)
    assert TaggedReplayBufferSamples._fields[:n] == ReplayBufferSamples._fields
    assert TaggedReplayBufferSamples._fields[n:] == ("indices",)
    assert not hasattr(TaggedReplayBuffer, "update_priorities")
    assert not hasattr(TaggedReplayBuffer, "tag_priority_shares")


@pytest.mark.parametrize("optimize_memory_usage", [False, True])
@pytest.mark.parametrize("n_envs", [1, 2])
@pytest.mark.parametrize("n_added", [9, 31])  # partly filled, wrapped around
def test_tagged_buffer_samples_exactly_what_sb3s_replay_buffer_samples(
    optimize_memory_usage, n_envs, n_added, add_tagged_steps, stored_tags
):
    kwargs = dict(device="cpu", n_envs=n_envs, optimize_memory_usage=optimize_memory_usage)
    if optimize_memory_usage:
        kwargs["handle_timeout_termination"] = False
    ours = TaggedReplayBuffer(20 * n_envs, OBS_SPACE, ACTION_SPACE, tag_key="regime", **kwargs)
    theirs = ReplayBuffer(20 * n_envs, OBS_SPACE, ACTION_SPACE, **kwargs)
    tags = add_tagged_steps([ours, theirs], n_envs, n_added, seed=n_added)
    for seed in range(3):
        set_random_seed(seed)
        expected = theirs.sample(32)
        after_theirs = np.random.random()  # noqa: NPY002
        set_random_seed(seed)
        got = ours.sample(32)
        assert np.random.random() == after_theirs  # noqa: NPY002  (same number of draws)
        assert isinstance(got, TaggedReplayBufferSamples)
        for field in ReplayBufferSamples._fields:
            a, b = getattr(got, field), getattr(expected, field)
            assert (a is None and b is None) or th.equal(a, b), field
        # the indices point at the sampled data
        rows = ours.observations.reshape(-1, 3)[got.indices]
        np.testing.assert_array_equal(rows, got.observations.numpy())
        np.testing.assert_array_equal(ours.tags_at(got.indices), stored_tags(ours, tags)[got.indices])


def test_tagged_buffer_pickles_and_resets_its_tags(add_tagged_steps, stored_tags):
    buffer = TaggedReplayBuffer(12, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=3, tag_key="regime")
    tags = add_tagged_steps([buffer], 3, 6, seed=5)
    restored = pickle.loads(pickle.dumps(buffer))
    np.testing.assert_array_equal(restored.tags_at(np.arange(12)), stored_tags(buffer, tags))
    assert_shares_equal(restored.tag_buffer_shares(), shares_by_count(stored_tags(buffer, tags)))
    restored.reset()
    assert restored.tag_buffer_shares() == {}

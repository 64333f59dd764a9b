import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from sb3_per.rank_heap import DEFAULT_RESORT_INTERVAL, RankHeap


def heap_array(heap: RankHeap) -> tuple[np.ndarray, np.ndarray]:
    """Leaves and priorities in heap order, rebuilt from the public ``position`` map (checked to be a bijection)."""
    positions = heap.position(np.arange(heap.capacity))
    present = np.flatnonzero(positions >= 0)
    assert present.size == heap.size
    leaves = np.full(heap.size, -1, dtype=np.int64)
    leaves[positions[present]] = present
    assert (leaves >= 0).all(), "positions of the stored leaves are not exactly 0..size-1"
    # The public view agrees with the internal array.
    np.testing.assert_array_equal(leaves, heap._heap["leaf"][: heap.size])
    return leaves, heap[leaves]


def assert_valid_heap(heap: RankHeap) -> tuple[np.ndarray, np.ndarray]:
    leaves, priorities = heap_array(heap)
    children = np.arange(1, heap.size)
    parents = (children - 1) // 2
    bad = children[priorities[parents] < priorities[children]]
    assert bad.size == 0, f"heap property broken at positions {bad[:5]}"
    return leaves, priorities


def heap_state(heap: RankHeap) -> tuple:
    return heap._heap.copy(), heap._position.copy(), heap.size, heap._updates_since_sort


def assert_same_state(before: tuple, after: tuple) -> None:
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])
    assert before[2:] == after[2:]


def filled_heap(capacity: int, n: int, alpha: float, seed: int = 0, **kwargs) -> RankHeap:
    rng = np.random.default_rng(seed)
    heap = RankHeap(capacity, alpha, **kwargs)
    heap.update(rng.choice(capacity, n, replace=False), rng.random(n))
    return heap


def rank_probabilities(n: int, alpha: float) -> np.ndarray:
    weights = np.arange(1, n + 1, dtype=np.float64) ** -alpha
    return weights / weights.sum()


@settings(max_examples=80, deadline=None)
@given(
    capacity=st.integers(1, 300),
    batches=st.lists(
        st.lists(
            st.tuples(st.integers(0, 10_000), st.one_of(st.integers(0, 4).map(float), st.floats(0.0, 1e6))),
            min_size=1,
            max_size=40,
        ),
        min_size=1,
        max_size=8,
    ),
    validate=st.booleans(),
)
def test_heap_and_position_map_stay_consistent_under_batched_inserts_and_updates(capacity, batches, validate):
    heap = RankHeap(capacity, 0.7, resort_interval=3)
    expected = {}
    for batch in batches:
        leaves = np.array([leaf % capacity for leaf, _ in batch])
        priorities = np.array([p for _, p in batch])
        heap.update(leaves, priorities, validate=validate)
        for leaf, p in zip(leaves, priorities, strict=True):  # sequential writes: the last one wins
            expected[int(leaf)] = p
        stored, stored_priorities = assert_valid_heap(heap)
        assert heap.size == len(expected)
        assert set(stored.tolist()) == set(expected)
        np.testing.assert_array_equal(stored_priorities, [expected[leaf] for leaf in stored])


@pytest.mark.parametrize("capacity", [3000, 4096])
def test_heap_stays_exact_over_a_million_updates(capacity):
    rng = np.random.default_rng(capacity)
    heap = RankHeap(capacity, 0.6, resort_interval=97)
    expected = np.zeros(capacity)
    present = np.zeros(capacity, dtype=bool)
    for step in range(4000):  # 4000 batches of 256: ~1e6 writes, duplicates included
        leaves = rng.integers(0, capacity, 256)
        # Alternate continuous priorities with heavily tied ones and a spread over many decades.
        kind = step % 3
        if kind == 0:
            priorities = rng.random(256)
        elif kind == 1:
            priorities = rng.integers(0, 3, 256).astype(np.float64)
        else:
            priorities = 10.0 ** rng.uniform(-8, 8, 256)
        heap.update(leaves, priorities, validate=False)
        expected[leaves] = priorities  # numpy fancy assignment: the last duplicate wins too
        present[leaves] = True
        if step % 500 == 0:
            assert_valid_heap(heap)
    stored, stored_priorities = assert_valid_heap(heap)
    assert heap.size == present.sum()
    np.testing.assert_array_equal(stored_priorities, expected[stored])
    np.testing.assert_array_equal(heap[np.arange(capacity)], np.where(present, expected, 0.0))


def test_duplicate_leaves_in_one_batch_take_the_last_priority():
    heap = RankHeap(5, 1.0)
    heap.update(np.array([3, 1, 3, 3, 1]), np.array([9.0, 2.0, 7.0, 0.5, 4.0]))
    assert heap.size == 2
    np.testing.assert_array_equal(heap[np.array([3, 1])], [0.5, 4.0])
    np.testing.assert_array_equal(heap.position(np.array([1, 3, 0])), [0, 1, -1])


@pytest.mark.parametrize(("capacity", "n"), [(1, 1), (2, 2), (100, 37), (1000, 1000), (1023, 700)])
def test_sort_makes_the_array_descending_and_keeps_every_leaf_and_priority(capacity, n):
    heap = filled_heap(capacity, n, 0.7, seed=n)
    leaves_before, priorities_before = heap_array(heap)
    expected = dict(zip(leaves_before.tolist(), priorities_before.tolist(), strict=True))
    heap.sort()
    leaves, priorities = assert_valid_heap(heap)
    assert (np.diff(priorities) <= 0).all()
    assert dict(zip(leaves.tolist(), priorities.tolist(), strict=True)) == expected


def test_sort_with_ties_still_yields_a_descending_valid_heap():
    heap = RankHeap(64, 0.5)
    heap.update(np.arange(64), np.random.default_rng(1).integers(0, 4, 64).astype(np.float64))
    heap.sort()
    _, priorities = assert_valid_heap(heap)
    assert (np.diff(priorities) <= 0).all()


def test_sort_orders_priorities_that_differ_only_in_their_last_bits_and_signed_zeros():
    # sort() sorts keys made of a priority's high bits and the entry's position: priorities a few ulps
    # apart share those high bits and must still come out in exact order. -0.0 must sort as 0.0.
    rng = np.random.default_rng(4)
    capacity = 3000
    ulps = np.nextafter(1.0, 2.0) - 1.0
    priorities = np.concatenate(
        [
            1.0 + rng.permutation(2000) * ulps,
            [0.0, -0.0, 5e-324, 1e-310, 1e-300, -0.0, 2.0, np.nextafter(2.0, 0.0)],
            rng.random(992),
        ]
    )
    order = rng.permutation(capacity)
    heap = RankHeap(capacity, 0.7)
    heap.update(order, priorities)
    for _ in range(2):  # the second sort runs on the swapped scratch arrays
        heap.sort()
        leaves, sorted_priorities = assert_valid_heap(heap)
        assert (np.diff(sorted_priorities) <= 0).all()
        np.testing.assert_array_equal(np.sort(sorted_priorities), np.sort(priorities))
        lookup = dict(zip(order.tolist(), priorities.tolist(), strict=True))
        np.testing.assert_array_equal(sorted_priorities, [lookup[leaf] for leaf in leaves.tolist()])
        heap.update(order[:50], rng.random(50) * 3)
        priorities[:50] = heap[order[:50]]


def test_rank_frequencies_match_the_power_law_chi_square():
    n, capacity, alpha, k, batches = 50, 64, 0.7, 8, 25_000
    heap = filled_heap(capacity, n, alpha, seed=3)
    heap.sort()
    rng = np.random.default_rng(12345)
    counts = np.zeros(n, dtype=np.int64)
    for _ in range(batches):
        ranks = heap.position(heap.sample(rng.random(k))) + 1
        counts += np.bincount(ranks - 1, minlength=n)
    expected_p = rank_probabilities(n, alpha)
    leaves, _ = heap_array(heap)
    np.testing.assert_allclose(heap.probabilities(leaves), expected_p, rtol=1e-12)
    result = chisquare(counts, expected_p * counts.sum())
    assert result.pvalue > 1e-3, f"chi-square p-value {result.pvalue:.2e}; counts {counts[:10]}..."
    # And the test would notice a wrong exponent.
    assert chisquare(counts, rank_probabilities(n, alpha + 0.05) * counts.sum()).pvalue < 1e-3


def test_each_slot_draws_the_smallest_rank_whose_cdf_exceeds_its_stratified_threshold():
    rng = np.random.default_rng(7)
    for n, alpha, k in [(1, 0.7, 4), (2, 0.7, 3), (1000, 0.7, 256), (777, 0.0, 32), (5000, 1.3, 64), (300, 8.0, 16)]:
        heap = filled_heap(n + 13, n, alpha, seed=n)
        cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -alpha)
        cdf /= cdf[-1]
        for uniforms in (rng.random(k), np.zeros(k), np.full(k, np.nextafter(1.0, 0.0))):
            ranks = heap.position(heap.sample(uniforms)) + 1
            thresholds = (np.arange(k) + uniforms) / k
            expected = np.array([min(np.argmax(cdf > t) if (cdf > t).any() else n - 1, n - 1) for t in thresholds]) + 1
            np.testing.assert_array_equal(ranks, expected)
            assert (np.diff(ranks) >= 0).all()


def test_sample_returns_what_np_searchsorted_on_the_cumulative_sums_would():
    rng = np.random.default_rng(8)
    for n in (1, 2, 3, 5, 1000, 65_536, 65_537, 200_000):
        heap = filled_heap(200_003, n, 0.7, seed=n)
        cumsum = heap._rank_cumsum[:n]
        leaves, _ = heap_array(heap)
        for k in (1, 7, 256):
            uniforms = rng.random(k)
            thresholds = (np.arange(k) + uniforms) * (cumsum[-1] / k)
            expected = np.minimum(np.searchsorted(cumsum, thresholds, side="right"), n - 1)
            np.testing.assert_array_equal(heap.sample(uniforms), leaves[expected])


def test_uniform_ranks_with_alpha_zero_are_spread_evenly_over_segments():
    heap = filled_heap(10, 10, 0.0)
    np.testing.assert_array_equal(heap.position(heap.sample(np.full(5, 0.5))) + 1, [2, 4, 6, 8, 10])
    np.testing.assert_array_equal(heap.position(heap.sample(np.zeros(5))) + 1, [1, 3, 5, 7, 9])
    # Thresholds landing exactly on a CDF value (alpha = 0: the sums are exact integers): CDF(r) must
    # *exceed* the threshold, so u = 0 in segment i of n picks rank i + 1, for every size.
    for n in range(1, 70):
        heap = filled_heap(n, n, 0.0, seed=n)
        np.testing.assert_array_equal(heap.position(heap.sample(np.zeros(n))) + 1, np.arange(1, n + 1))


@pytest.mark.parametrize(("n", "alpha"), [(1, 0.7), (100, 0.7), (100, 0.0), (1000, 2.0), (200_000, 0.7)])
def test_probabilities_are_the_normalised_power_law_of_heap_positions(n, alpha):
    heap = filled_heap(n + 5, n, alpha, seed=n)
    leaves, _ = heap_array(heap)
    probabilities = heap.probabilities(leaves)
    assert probabilities.dtype == np.float64
    assert probabilities.sum() == pytest.approx(1.0, rel=1e-12)
    np.testing.assert_allclose(probabilities, rank_probabilities(n, alpha), rtol=1e-10)
    assert heap.min_probability == pytest.approx(rank_probabilities(n, alpha)[-1], rel=1e-10)
    assert heap.min_probability == probabilities.min()
    # In any order, for any subset.
    subset = leaves[::-7]
    np.testing.assert_array_equal(heap.probabilities(subset), probabilities[::-7])


def test_probabilities_follow_the_current_size():
    heap = filled_heap(10, 4, 1.0)
    assert heap.min_probability == pytest.approx(0.25 / (1 + 1 / 2 + 1 / 3 + 1 / 4))
    heap.update(np.array([9]), np.array([0.0]))  # lowest priority: lands at the last position
    assert heap.position(9)[()] == 4
    assert heap.min_probability == pytest.approx(0.2 / (1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5))


@pytest.mark.parametrize("alpha", [0.0, 0.7, 5.0])
def test_sampled_leaves_are_always_among_the_stored_ones(alpha):
    rng = np.random.default_rng(11)
    capacity = 100
    heap = RankHeap(capacity, alpha, resort_interval=4)
    stored = set()
    for _ in range(30):
        leaves = rng.integers(0, capacity, 3)
        heap.update(leaves, rng.random(3))
        stored.update(leaves.tolist())
        for uniforms in (rng.random(32), np.zeros(32), np.full(32, np.nextafter(1.0, 0.0))):
            assert set(heap.sample(uniforms).tolist()) <= stored
    assert heap.size < capacity


def test_a_leaf_written_at_or_above_the_maximum_priority_ends_at_position_zero():
    rng = np.random.default_rng(5)
    heap = filled_heap(500, 300, 0.7, seed=5)
    free = np.setdiff1d(np.arange(500), np.flatnonzero(heap.position(np.arange(500)) >= 0))
    for leaf in free[:50]:
        top = heap[np.arange(500)].max()
        heap.update(np.array([leaf]), np.array([top if rng.random() < 0.5 else top + rng.random()]))
        assert heap.position(leaf)[()] == 0
    assert_valid_heap(heap)
    # Also an existing leaf raised to the maximum, and a new one among all-equal priorities.
    deep = heap_array(heap)[0][-1]
    heap.update(np.array([deep]), np.array([heap[np.arange(500)].max()]))
    assert heap.position(deep)[()] == 0
    flat = RankHeap(20, 0.7)
    flat.update(np.arange(19), np.ones(19))
    flat.update(np.array([19]), np.array([1.0]))
    assert flat.position(19)[()] == 0


def test_automatic_resort_every_resort_interval_updates():
    rng = np.random.default_rng(2)
    heap = RankHeap(200, 0.7, resort_interval=5)
    assert RankHeap(10, 0.7).resort_interval == DEFAULT_RESORT_INTERVAL

    def is_sorted() -> bool:
        _, priorities = assert_valid_heap(heap)
        return bool((np.diff(priorities) <= 0).all())

    heap.update(np.arange(200), rng.random(200))  # update 1
    for _ in range(3):  # updates 2-4
        assert not is_sorted()
        heap.update(rng.integers(0, 200, 20), rng.random(20))
    assert not is_sorted()
    heap.update(rng.integers(0, 200, 20), rng.random(20))  # update 5: re-sort
    assert is_sorted()
    for _ in range(2):  # a manual sort restarts the count
        heap.update(rng.integers(0, 200, 20), rng.random(20))
    heap.sort()
    for _ in range(4):
        heap.update(rng.integers(0, 200, 20), rng.random(20))
    assert not is_sorted()
    heap.update(rng.integers(0, 200, 20), rng.random(20))
    assert is_sorted()


def test_getitem_position_and_clear():
    heap = RankHeap(6, 0.5)
    heap.update(np.array([4, 1]), np.array([2.0, 3.0]))
    np.testing.assert_array_equal(heap[np.array([1, 4, 0])], [3.0, 2.0, 0.0])
    np.testing.assert_array_equal(heap.position(np.array([1, 4, 0])), [0, 1, -1])
    heap.clear()
    assert heap.size == 0
    np.testing.assert_array_equal(heap.position(np.arange(6)), -1)
    with pytest.raises(ValueError, match="empty"):
        heap.sample(np.array([0.5]))
    heap.update(np.array([2]), np.array([1.0]))
    assert heap.size == 1
    np.testing.assert_array_equal(heap.sample(np.array([0.0, 0.99])), [2, 2])
    assert heap.min_probability == 1.0


@pytest.mark.parametrize(
    ("leaves", "priorities", "message"),
    [
        ([0, 8], [1.0, 1.0], "leaf 8 is out of range"),
        ([-1, 2], [1.0, 1.0], "leaf -1 is out of range"),
        ([0.0, 1.5], [1.0, 1.0], "leaves must be integers"),
        ([0, 1, 2], [1.0, 1.0], "priorities has 2 values but leaves has 3"),
        ([0, 1], [1.0, np.nan], "priorities must be finite, got nan"),
        ([0, 1], [np.inf, 1.0], "priorities must be finite, got inf"),
        ([0, 1], [1.0, -0.5], "priorities must be non-negative, got -0.5"),
    ],
)
def test_bad_update_raises_and_changes_nothing(leaves, priorities, message):
    heap = filled_heap(8, 5, 0.7, resort_interval=2)
    before = heap_state(heap)
    with pytest.raises(ValueError, match=message):
        heap.update(np.array(leaves), np.array(priorities))
    assert_same_state(before, heap_state(heap))


@pytest.mark.parametrize("uniforms", [[0.5, 1.0], [-0.1], [np.nan, 0.2], [np.inf]])
def test_uniforms_outside_unit_interval_raise(uniforms):
    heap = filled_heap(8, 5, 0.7)
    before = heap_state(heap)
    with pytest.raises(ValueError, match=r"uniforms must lie in \[0, 1\)"):
        heap.sample(np.array(uniforms))
    assert_same_state(before, heap_state(heap))


def test_probabilities_of_absent_leaf_and_empty_heap_raise():
    heap = RankHeap(8, 0.7)
    with pytest.raises(ValueError, match="empty"):
        _ = heap.min_probability
    heap.update(np.array([1]), np.array([1.0]))
    with pytest.raises(ValueError, match="leaf 3 is not in the heap"):
        heap.probabilities(np.array([1, 3]))
    with pytest.raises(ValueError, match="leaf 9 is out of range"):
        heap.probabilities(np.array([9]))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"capacity": 0, "alpha": 0.7}, "capacity"),
        ({"capacity": 2.5, "alpha": 0.7}, "capacity"),
        ({"capacity": True, "alpha": 0.7}, "capacity"),
        ({"capacity": "10", "alpha": 0.7}, "capacity"),
        ({"capacity": 10, "alpha": -0.1}, "alpha"),
        ({"capacity": 10, "alpha": np.nan}, "alpha"),
        ({"capacity": 10, "alpha": np.inf}, "alpha"),
        ({"capacity": 10, "alpha": "high"}, "alpha"),
        ({"capacity": 10, "alpha": 0.7, "resort_interval": 0}, "resort_interval"),
        ({"capacity": 10, "alpha": 0.7, "resort_interval": 2.5}, "resort_interval"),
        ({"capacity": 10, "alpha": 0.7, "resort_interval": -4}, "resort_interval"),
    ],
)
def test_bad_constructor_arguments_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        RankHeap(**kwargs)


def test_lookups_check_their_leaves_and_keep_the_input_shape():
    heap = filled_heap(6, 6, 0.5)
    assert heap.position(3).shape == ()
    assert heap[np.array([[0, 1], [2, 3]])].shape == (2, 2)
    for lookup in (heap.position, heap.__getitem__):
        with pytest.raises(ValueError, match="leaf -1 is out of range"):
            lookup(np.array([0, -1]))
        with pytest.raises(ValueError, match="leaves must be integers"):
            lookup(np.array([0.5]))


def test_whole_number_arguments_are_accepted():
    heap = RankHeap(1e3, 1, resort_interval=np.int64(7))
    assert (heap.capacity, heap.alpha, heap.resort_interval) == (1000, 1.0, 7)
    assert isinstance(heap.capacity, int)

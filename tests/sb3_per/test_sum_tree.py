import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sb3_per.sum_tree import SumTree


def tree_with(priorities) -> SumTree:
    tree = SumTree(len(priorities))
    tree.update(np.arange(len(priorities)), np.asarray(priorities, dtype=np.float64))
    return tree


def tree_state(tree: SumTree) -> tuple[np.ndarray, np.ndarray]:
    return tree._sums.copy(), tree._mins.copy()


@settings(max_examples=60, deadline=None)
@given(
    capacity=st.integers(1, 300),
    batches=st.lists(
        st.lists(st.tuples(st.integers(0, 10_000), st.floats(0.0, 1e6, allow_nan=False)), min_size=1, max_size=40),
        min_size=1,
        max_size=8,
    ),
)
def test_root_is_sum_and_min_is_smallest_nonzero_leaf_after_batch_updates(capacity, batches):
    tree = SumTree(capacity)
    expected = np.zeros(capacity)
    for batch in batches:
        indices = np.array([i % capacity for i, _ in batch])
        values = np.array([v for _, v in batch])
        tree.update(indices, values)
        for i, v in zip(indices, values, strict=True):  # sequential writes: the last one wins
            expected[i] = v
    np.testing.assert_array_equal(tree[np.arange(capacity)], expected)
    assert tree.total == pytest.approx(expected.sum(), rel=1e-12, abs=1e-12)
    nonzero = expected[expected > 0]
    assert tree.min == (nonzero.min() if nonzero.size else np.inf)


def test_duplicate_indices_in_one_batch_take_the_last_value():
    tree = SumTree(4)
    tree.update(np.array([1, 2, 1, 1]), np.array([5.0, 3.0, 7.0, 2.0]))
    assert tree[1] == 2.0
    assert tree.total == 5.0


def test_find_maps_prefix_sums_to_the_leaf_whose_interval_holds_them():
    tree = tree_with([1.0, 0.0, 2.0, 3.0, 0.0])  # cumulative edges 0, 1, 1, 3, 6, 6
    prefix = np.array([0.0, 0.999, 1.0, 2.999, 3.0, 5.999, 6.0, 100.0])
    np.testing.assert_array_equal(tree.find(prefix), [0, 0, 2, 2, 3, 3, 3, 3])


@pytest.mark.parametrize("capacity", [1, 2, 3, 7, 100, 1000, 1023, 1025])
def test_find_never_returns_a_zero_priority_leaf_even_at_the_total_and_under_rounding(capacity):
    rng = np.random.default_rng(capacity)
    priorities = rng.exponential(1.0, capacity) * 10.0 ** rng.uniform(-12, 6, capacity)
    priorities[rng.random(capacity) < 0.4] = 0.0
    priorities[rng.integers(capacity)] = 0.3  # at least one positive leaf
    # Filled region: the tail is zero, as in a buffer that is not full yet.
    filled = max(1, capacity * 2 // 3)
    priorities[filled:] = 0.0
    if not priorities[:filled].any():
        priorities[0] = 1.0
    tree = tree_with(priorities)
    total = tree.total
    edges = np.cumsum(priorities)
    prefix = np.concatenate(
        [
            rng.uniform(0, total, 5000),
            edges,
            np.nextafter(edges, 0.0),
            np.nextafter(edges, np.inf),
            [0.0, total, np.nextafter(total, 0.0), np.nextafter(total, np.inf), total * 2],
        ]
    )
    leaves = tree.find(prefix)
    assert (leaves >= 0).all() and (leaves < capacity).all()
    assert (priorities[leaves] > 0).all()


def test_root_stays_exact_over_a_million_random_updates():
    rng = np.random.default_rng(0)
    capacity = 10_007
    tree = SumTree(capacity)
    leaves = np.zeros(capacity)
    batch = 256
    for _ in range(1_000_000 // batch + 1):
        indices = rng.integers(0, capacity, batch)
        values = rng.exponential(1.0, batch) * 10.0 ** rng.uniform(-6, 3, batch)
        tree.update(indices, values)
        leaves[indices] = values  # numpy fancy assignment: also the last duplicate wins
    assert abs(tree.total - leaves.sum()) <= 1e-9 * tree.total
    assert tree.min == leaves[leaves > 0].min()


def test_unvalidated_update_writes_the_same_tree_as_the_validated_one():
    rng = np.random.default_rng(3)
    checked, unchecked = SumTree(50), SumTree(50)
    for _ in range(20):
        indices, values = rng.integers(0, 50, 16), rng.random(16)
        checked.update(indices, values)
        unchecked.update(indices, values, validate=False)
    np.testing.assert_array_equal(tree_state(checked)[0], tree_state(unchecked)[0])
    np.testing.assert_array_equal(tree_state(checked)[1], tree_state(unchecked)[1])


@pytest.mark.parametrize(
    ("indices", "values", "message"),
    [
        ([0, 1], [1.0, np.nan], "finite"),
        ([0, 1], [1.0, np.inf], "finite"),
        ([0, 1], [1.0, -0.5], "non-negative"),
        ([0, 10], [1.0, 1.0], "out of range"),
        ([-1, 0], [1.0, 1.0], "out of range"),
        ([0, 1], [1.0], "must match"),
        ([0.5, 1.0], [1.0, 1.0], "integers"),
    ],
)
def test_bad_update_raises_and_leaves_the_tree_unchanged(indices, values, message):
    tree = tree_with(np.arange(1.0, 11.0))
    before = tree_state(tree)
    with pytest.raises(ValueError, match=message):
        tree.update(np.array(indices), np.array(values))
    after = tree_state(tree)
    np.testing.assert_array_equal(before[0], after[0])
    np.testing.assert_array_equal(before[1], after[1])


def test_find_rejects_an_all_zero_tree_and_bad_prefix_sums():
    with pytest.raises(ValueError, match="all zero"):
        SumTree(4).find(np.array([0.0]))
    tree = tree_with([1.0, 2.0])
    for bad in (np.nan, -1.0, np.inf):
        with pytest.raises(ValueError, match="prefix_sums"):
            tree.find(np.array([0.5, bad]))


@pytest.mark.parametrize("capacity", [0, -3, 2.5])
def test_capacity_must_be_a_positive_integer(capacity):
    with pytest.raises(ValueError, match="capacity"):
        SumTree(capacity)


def test_scaling_by_a_power_of_two_keeps_every_node_the_exact_sum_of_its_children():
    priorities = np.random.default_rng(4).exponential(1.0, 37)
    tree = tree_with(priorities)
    tree.scale(2.0**-64)
    rebuilt = tree_with(priorities * 2.0**-64)
    np.testing.assert_array_equal(tree_state(tree)[0], tree_state(rebuilt)[0])
    np.testing.assert_array_equal(tree_state(tree)[1], tree_state(rebuilt)[1])
    for bad in (0.0, -2.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="factor"):
            tree.scale(bad)


def test_update_returns_what_each_write_replaced_in_order():
    tree = tree_with([1.0, 2.0, 3.0])
    previous = tree.update(np.array([2, 0, 2]), np.array([5.0, 7.0, 9.0]))
    np.testing.assert_array_equal(previous, [3.0, 1.0, 5.0])

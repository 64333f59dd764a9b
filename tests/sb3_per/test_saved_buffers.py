"""
Buffers pickled by an earlier version (commit 1250200, before the priority sampler was taken out of the buffer) still
load, and go on exactly as that version's did: same priorities, beta, largest priority, seeded sample and weights, and
the same priorities after a write-back and an add. The fixtures and ``expected.npz`` were made by
``data/make_saved_buffers.py`` with that version's code.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from stable_baselines3.common.save_util import load_from_pkl
from stable_baselines3.common.utils import set_random_seed

from sb3_per import PrioritizedDictReplayBuffer, PrioritizedReplayBuffer

DATA = Path(__file__).parent / "data"
BATCH_SIZE, SEED = 8, 3  # as data/make_saved_buffers.py sampled them


@pytest.fixture(scope="module")
def expected() -> dict[str, np.ndarray]:
    with np.load(DATA / "expected.npz") as saved:
        return dict(saved)


@pytest.mark.parametrize(
    ("file", "prefix", "buffer_class"),
    [
        ("prioritized_replay_buffer.pkl", "flat_", PrioritizedReplayBuffer),
        ("prioritized_dict_replay_buffer.pkl", "dict_", PrioritizedDictReplayBuffer),
    ],
)
def test_a_saved_buffer_loads_with_its_priorities_beta_and_seeded_sample(file, prefix, buffer_class, expected):
    buffer = load_from_pkl(DATA / file)
    assert type(buffer) is buffer_class
    np.testing.assert_array_equal(
        buffer.priorities_at(np.arange(buffer.n_transitions)), expected[f"{prefix}priorities"]
    )
    assert buffer.beta == expected[f"{prefix}beta"]
    assert buffer.max_priority == expected[f"{prefix}max_priority"]
    set_random_seed(SEED)
    batch = buffer.sample(BATCH_SIZE)
    np.testing.assert_array_equal(batch.indices, expected[f"{prefix}indices"])
    np.testing.assert_array_equal(batch.weights.numpy(), expected[f"{prefix}weights"])
    np.testing.assert_array_equal(batch.stamps, expected[f"{prefix}stamps"])
    observations = batch.observations["position"] if isinstance(batch.observations, dict) else batch.observations
    np.testing.assert_array_equal(observations.numpy(), expected[f"{prefix}observations"])


def test_a_saved_faded_tagged_buffer_goes_on_as_it_would_have(expected):
    buffer = load_from_pkl(DATA / "prioritized_replay_buffer.pkl")
    shares = expected["flat_tag_shares"]
    assert buffer.tag_priority_shares() == pytest.approx(dict(zip(shares[:, 0].astype(int), shares[:, 1], strict=True)))
    set_random_seed(SEED)
    batch = buffer.sample(BATCH_SIZE)
    buffer.update_priorities(batch.indices, np.linspace(0.0, 5.0, BATCH_SIZE), batch.stamps)
    obs = np.zeros((2, 3), np.float32)
    buffer.add(obs, obs, np.zeros((2, 1), np.float32), np.zeros(2), np.zeros(2), [{"regime": 1}, {}])
    np.testing.assert_array_equal(
        buffer.priorities_at(np.arange(buffer.n_transitions)), expected["flat_priorities_after_add"]
    )
    # the inverse tree came along: sampling by 1 / priority favours the smallest priority
    set_random_seed(SEED)
    inverse = buffer.sample(1000, inverse=True)
    smallest = np.argmin(expected["flat_priorities_after_add"])
    assert np.bincount(inverse.indices, minlength=buffer.n_transitions).argmax() == smallest

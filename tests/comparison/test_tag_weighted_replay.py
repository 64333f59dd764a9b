"""A replay buffer that samples each tag in proportion to a fixed weight, uniformly within a tag (a PER ablation)."""

import pickle
import re

import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.utils import set_random_seed

from comparison.ablation_buffers import TagWeightedReplayBuffer, checked_tag_weights
from sb3_per.replay_tags import UNKNOWN_TAG

OBS_SPACE = spaces.Box(-np.inf, np.inf, (3,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)
WEIGHTS = {0: 1.0, 1: 4.0, 2: 0.5, UNKNOWN_TAG: 2.0}  # tag 3 is not listed: weight 1


def weighted_buffer(add_tagged_steps, n_envs: int, n_steps: int, tag_weights=WEIGHTS, seed: int = 0):
    buffer = TagWeightedReplayBuffer(
        20 * n_envs, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=n_envs, tag_key="regime", tag_weights=tag_weights
    )
    return buffer, add_tagged_steps([buffer], n_envs, n_steps, seed=seed)


def leaf_frequencies(buffer, n_draws: int) -> np.ndarray:
    n_stored = buffer.size() * buffer.n_envs
    return np.bincount(buffer.sample(n_draws).indices, minlength=n_stored) / n_draws


def assert_frequencies_match(frequencies: np.ndarray, probabilities: np.ndarray, n_draws: int) -> None:
    # each leaf's frequency within 5 binomial standard deviations of its probability
    tolerance = 5 * np.sqrt(probabilities * (1 - probabilities) / n_draws) + 1e-12
    assert np.all(np.abs(frequencies - probabilities) <= tolerance), np.abs(frequencies - probabilities) / tolerance


@pytest.mark.parametrize("n_envs", [1, 2])
@pytest.mark.parametrize("n_steps", [9, 31])  # partly filled; wrapped (an overwritten leaf takes its new weight)
def test_each_transition_is_drawn_with_probability_its_tag_weight_over_the_total(
    n_envs, n_steps, stored_tags, add_tagged_steps
):
    buffer, tags = weighted_buffer(add_tagged_steps, n_envs, n_steps, seed=n_steps)
    leaf_tags = stored_tags(buffer, tags)
    weights = np.array([WEIGHTS.get(int(tag), 1.0) for tag in leaf_tags])
    set_random_seed(1)
    n_draws = 200_000
    assert_frequencies_match(leaf_frequencies(buffer, n_draws), weights / weights.sum(), n_draws)


def test_without_weights_every_stored_transition_is_drawn_alike(add_tagged_steps):
    buffer, _ = weighted_buffer(add_tagged_steps, n_envs=2, n_steps=31, tag_weights=None)
    set_random_seed(2)
    n_draws, n_stored = 100_000, buffer.size() * 2
    assert_frequencies_match(leaf_frequencies(buffer, n_draws), np.full(n_stored, 1 / n_stored), n_draws)


def test_samples_are_the_stored_transitions_at_their_indices_and_carry_no_weights(stored_tags, add_tagged_steps):
    buffer, tags = weighted_buffer(add_tagged_steps, n_envs=3, n_steps=25)
    batch = buffer.sample(64)
    env_indices, positions = batch.indices % 3, batch.indices // 3
    np.testing.assert_array_equal(batch.observations.numpy(), buffer.observations[positions, env_indices])
    np.testing.assert_array_equal(batch.next_observations.numpy(), buffer.next_observations[positions, env_indices])
    np.testing.assert_array_equal(batch.actions.numpy(), buffer.actions[positions, env_indices])
    np.testing.assert_array_equal(batch.rewards.numpy().ravel(), buffer.rewards[positions, env_indices])
    np.testing.assert_array_equal(buffer.tags_at(batch.indices), stored_tags(buffer, tags)[batch.indices])
    assert not hasattr(batch, "weights")


def test_seeded_sampling_repeats_and_survives_pickling(add_tagged_steps):
    buffer, _ = weighted_buffer(add_tagged_steps, n_envs=2, n_steps=31)
    restored = pickle.loads(pickle.dumps(buffer))
    set_random_seed(3)
    first = buffer.sample(50).indices
    set_random_seed(3)
    np.testing.assert_array_equal(restored.sample(50).indices, first)


@pytest.mark.parametrize("batch_size", [0, -1, 1.5, "32", None, True])
def test_a_bad_batch_size_raises_a_value_error_naming_it(add_tagged_steps, batch_size):
    buffer, _ = weighted_buffer(add_tagged_steps, n_envs=2, n_steps=9)
    with pytest.raises(ValueError, match=rf"batch_size .*{re.escape(repr(batch_size))}"):
        buffer.sample(batch_size)


def test_an_empty_buffer_cannot_be_sampled_and_reset_empties_it(add_tagged_steps):
    buffer = TagWeightedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, device="cpu", tag_key="regime")
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(4)
    add_tagged_steps([buffer], 1, 5, seed=0)
    assert buffer.sample(4).indices.max() < 5
    buffer.reset()
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(4)


@pytest.mark.parametrize(
    ("tag_weights", "message"),
    [
        ([1.0, 2.0], "tag_weights must be a mapping"),
        ({1.0: 2.0}, "keys must be integer tags, got 1.0"),
        ({True: 2.0}, "keys must be integer tags, got True"),
        ({"stress": 2.0}, "keys must be integer tags, got 'stress'"),
        ({1: 0.0}, r"tag_weights\[1\] must be a finite number > 0, got 0.0"),
        ({1: -1.0}, r"tag_weights\[1\] must be a finite number > 0, got -1.0"),
        ({1: float("nan")}, r"tag_weights\[1\] must be a finite number > 0, got nan"),
        ({1: float("inf")}, r"tag_weights\[1\] must be a finite number > 0, got inf"),
        ({1: True}, r"tag_weights\[1\] must be a finite number > 0, got True"),
        ({1: "2"}, r"tag_weights\[1\] must be a finite number > 0, got '2'"),
    ],
)
def test_bad_tag_weights_raise_naming_the_parameter(tag_weights, message):
    with pytest.raises(ValueError, match=message):
        TagWeightedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, device="cpu", tag_key="regime", tag_weights=tag_weights)


def test_the_memory_saving_layout_and_a_missing_tag_key_are_refused():
    with pytest.raises(ValueError, match="optimize_memory_usage=True"):
        TagWeightedReplayBuffer(
            10,
            OBS_SPACE,
            ACTION_SPACE,
            device="cpu",
            tag_key="regime",
            optimize_memory_usage=True,
            handle_timeout_termination=False,
        )
    with pytest.raises(ValueError, match="needs tag_key"):
        TagWeightedReplayBuffer(10, OBS_SPACE, ACTION_SPACE, device="cpu", tag_weights={1: 2.0})


def test_a_model_with_the_buffer_saves_and_loads(tmp_path):
    """A saved model's JSON data turns the integer tag keys into strings: loading turns them back."""
    from sb3_per import SAC

    kwargs = {"tag_key": "regime", "tag_weights": {0: 1.0, 1: 1.5, -1: 2.0}}
    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=TagWeightedReplayBuffer, replay_buffer_kwargs=kwargs)
    model.save(tmp_path / "model.zip")
    loaded = SAC.load(tmp_path / "model.zip")
    assert loaded.replay_buffer.tag_weights == {0: 1.0, 1: 1.5, -1: 2.0}
    assert checked_tag_weights({"1": 2.0, "-1": 0.5}) == {1: 2.0, -1: 0.5}
    with pytest.raises(ValueError, match=r"keys must be integer tags, got '1\.5'"):
        checked_tag_weights({"1.5": 2.0})

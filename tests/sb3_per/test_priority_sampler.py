"""The priority sampler on its own, without a buffer: what it draws, its weights, beta's schedule, fading and reset."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3.common.utils import set_random_seed

from sb3_per.fading import FADE_RESCALE_DOUBLINGS
from sb3_per.priority_sampler import BetaSchedule, PrioritySampler


def sampler(**overrides) -> PrioritySampler:
    settings = dict(
        buffer_size=8,
        n_envs=1,
        alpha=1.0,
        beta_start=0.5,
        beta_end=1.0,
        beta_anneal_steps=4,
        epsilon=1e-6,
        weight_normalization="buffer",
        prioritization="proportional",
        inverse_sampling=False,
        priority_half_life=None,
        optimize_memory_usage=False,
        n_steps=1,
    )
    return PrioritySampler(**(settings | overrides))


def test_draw_samples_in_proportion_to_the_written_priorities_with_weights_from_the_smallest():
    priorities = sampler()
    leaves = np.arange(4)
    priorities.write(leaves, priorities.stored(priorities.priorities_of(np.array([1.0, 2.0, 3.0, 4.0]), "values")))
    set_random_seed(0)
    drawn, weights = priorities.draw(10_000)
    shares = np.bincount(drawn, minlength=8) / len(drawn)
    np.testing.assert_allclose(shares[:4], np.array([1, 2, 3, 4]) / 10, atol=0.01)
    assert shares[4:].sum() == 0.0  # leaves at priority 0 are never drawn
    raised = (np.array([1.0, 2.0, 3.0, 4.0]) + 1e-6) ** 1.0
    np.testing.assert_allclose(weights, (raised[drawn] / raised.min()) ** -0.5)  # beta_start at the first call


def test_beta_anneals_over_the_draws_counted_by_its_schedule_and_inverse_draws_do_not_count():
    priorities = sampler(inverse_sampling=True)
    priorities.write(np.arange(8), np.ones(8))
    betas = []
    for _ in range(6):
        betas.append(priorities.beta_schedule.value)
        priorities.draw(2)
        priorities.draw_inverse(2)
    assert betas == [0.5, 0.625, 0.75, 0.875, 1.0, 1.0]
    assert priorities.beta_schedule.n_calls == 6


def test_a_schedule_that_follows_progress_refuses_a_value_before_any_and_a_counted_one_refuses_progress():
    auto = BetaSchedule(0.4, 1.0, "auto")
    with pytest.raises(ValueError, match="set_beta_progress"):
        _ = auto.value
    auto.set_progress(0.5)
    assert auto.value == pytest.approx(0.7)
    with pytest.raises(ValueError, match="progress"):
        auto.set_progress(1.5)
    assert auto.progress == 0.5
    with pytest.raises(ValueError, match="beta_anneal_steps=10"):
        BetaSchedule(0.4, 1.0, 10).set_progress(0.5)


@pytest.mark.parametrize(
    ("name", "value"),
    [("alpha", -1.0), ("prioritization", "ranked"), ("inverse_sampling", 1), ("priority_half_life", 0.0)],
)
def test_a_bad_parameter_is_refused_naming_it(name, value):
    with pytest.raises(ValueError, match=name):
        sampler(**{name: value})


def test_the_fading_clock_rescales_the_store_by_whole_doublings_and_keeps_the_effective_priorities():
    priorities = sampler(priority_half_life=1.0, inverse_sampling=True)
    priorities.write(np.arange(8), priorities.stored(np.full(8, 2.0)))
    rescaled = [priorities.tick() for _ in range(FADE_RESCALE_DOUBLINGS + 1)]
    assert rescaled == [False] * FADE_RESCALE_DOUBLINGS + [True]
    assert priorities.fading.offset == FADE_RESCALE_DOUBLINGS + 1
    # written at add-count 0, faded by one half per tick since
    expected = 2.0 * 2.0 ** -(FADE_RESCALE_DOUBLINGS + 1)
    np.testing.assert_allclose(priorities.effective(priorities.tree[np.arange(8)]), expected, rtol=1e-15)
    assert priorities.mean_priority(8) == pytest.approx(expected, rel=1e-15)


def test_reset_empties_the_indices_and_counts_but_keeps_the_training_progress():
    priorities = sampler(beta_anneal_steps="auto", prioritization="rank")
    priorities.beta_schedule.set_progress(0.25)
    priorities.write(np.arange(8), np.arange(1.0, 9.0))
    priorities.draw(4)
    priorities.count_update(np.array([5.0]))
    priorities.reset()
    assert priorities.tree.total == 0.0 and priorities.rank_index.total == 0.0
    assert (priorities.max_priority, priorities.n_priority_updates, priorities.beta_schedule.n_calls) == (1.0, 0, 0)
    assert priorities.sampling_index is priorities.rank_index
    assert priorities.beta_schedule.progress == 0.25


def test_a_counted_update_raises_the_largest_priority_and_an_empty_one_only_counts():
    priorities = sampler()
    priorities.count_update(np.array([0.5, 3.0]))
    priorities.count_update(np.empty(0))
    assert (priorities.max_priority, priorities.n_priority_updates) == (3.0, 2)

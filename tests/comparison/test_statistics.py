"""Probability of improvement, same-seed sign test, ratio of medians and censored steps, against hand computations
and in summary.md."""

import re

import numpy as np
import pytest
from scipy.stats import mannwhitneyu

from comparison.statistics import (
    iqm,
    median_ratio_ci,
    normalised_iqm_ci,
    probability_of_improvement,
    probability_of_improvement_ci,
    same_seed_comparison,
)
from comparison.summary import write_summary_md
from comparison.tables import censored_steps_to_threshold, final_returns


def test_probability_of_improvement_hand_computed():
    # pairs (x, y): 3>1, 3>2, 3=3 (half), 1<2... : x = [3, 1], y = [1, 2, 3]
    # x=3 beats 1 and 2, ties 3 -> 2.5; x=1 ties 1, loses to 2 and 3 -> 0.5; total 3 of 6 pairs
    assert probability_of_improvement([3, 1], [1, 2, 3]) == pytest.approx(3 / 6)
    assert probability_of_improvement([5, 6], [1, 2, 3]) == 1.0
    assert probability_of_improvement([1, 2, 3], [5, 6]) == 0.0
    assert probability_of_improvement([2, 2], [2]) == 0.5


@pytest.mark.parametrize(("n", "m"), [(7, 5), (5, 5), (8, 8), (10, 10), (20, 20)])
def test_probability_of_improvement_is_mann_whitney_u_over_n_m(n, m):
    # rliable's probability_of_improvement on one task: U / (n m), and 1/2 for two equal samples
    rng = np.random.default_rng(n)
    x, y = np.round(rng.normal(size=n), 1), np.round(rng.normal(size=m), 1)  # rounded: with ties
    assert probability_of_improvement(x, y) == pytest.approx(mannwhitneyu(x, y).statistic / (n * m))
    assert probability_of_improvement(x, rng.permutation(x)) == 0.5


def test_probability_of_improvement_ci_brackets_it_and_is_degenerate_without_spread():
    rng = np.random.default_rng(1)
    x, y = rng.normal(0.5, 1, size=10), rng.normal(0, 1, size=10)
    p, (low, high) = probability_of_improvement_ci(x, y, rng=3)
    assert low <= p <= high and 0.0 <= low < high <= 1.0
    assert probability_of_improvement_ci(x, y, rng=3) == (p, (low, high))
    assert probability_of_improvement_ci([2.0, 2.0], [1.0, 1.0]) == (1.0, (1.0, 1.0))


def test_same_seed_comparison_pairs_only_shared_seeds_and_drops_ties_from_the_sign_test():
    reference = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0}
    compared = {0: 2.0, 1: 1.0, 2: 3.0, 5: 9.0}  # seed 0 above, 1 below, 2 level; 3 and 5 unshared
    result = same_seed_comparison(reference, compared)
    assert (result.above, result.below, result.ties, result.seeds) == (1, 1, 1, 3)
    assert result.p_value == 1.0  # one of two
    all_below = same_seed_comparison({s: 1.0 for s in range(10)}, {s: 0.5 for s in range(10)})
    assert (all_below.above, all_below.below) == (0, 10)
    assert all_below.p_value == pytest.approx(2 / 2**10)  # two-sided: 10 of 10 either way
    nine_of_ten = same_seed_comparison({s: 1.0 for s in range(10)}, {s: 0.5 + (s == 4) for s in range(10)})
    assert nine_of_ten.p_value == pytest.approx(2 * 11 / 2**10)  # P(<= 1 of 10) twice
    assert same_seed_comparison({0: 1.0}, {1: 1.0}).seeds == 0
    with pytest.raises(ValueError, match="NaN"):
        same_seed_comparison({0: 1.0}, {0: float("nan")})


def test_median_ratio_hand_computed():
    ratio, (low, high) = median_ratio_ci([10, 20, 30], [30, 60, 90], rng=0)
    assert ratio == pytest.approx(3.0)  # 60 / 20
    assert 1.0 <= low <= 3.0 <= high <= 9.0  # resampled apart: from 30 / 30 to 90 / 10 at the extremes
    assert median_ratio_ci([10, 10, 10], [25, 25]) == (2.5, (2.5, 2.5))
    with pytest.raises(ValueError, match="a_values must be > 0"):
        median_ratio_ci([0, 10], [5, 5])


def test_censored_steps_count_a_run_that_never_reaches_the_return_at_its_last_evaluation(tiny_evaluations):
    table = censored_steps_to_threshold(tiny_evaluations(), 1.0).set_index("run")
    assert table.loc["uniform_s0", "steps"] == 200 and table.loc["uniform_s0", "reached"]
    assert table.loc["per_s1", "steps"] == 200 and not table.loc["per_s1", "reached"]  # its last step: censored


def test_summary_reports_probability_of_improvement_and_steps_ratio_of_the_data(
    tmp_path, synthetic_evaluations, synthetic_baselines
):
    evals = synthetic_evaluations(np.random.default_rng(1234))
    text = write_summary_md(evals, synthetic_baselines(), tmp_path / "s.md", command="c", seeds=[0, 1, 2])
    final = final_returns(evals)
    returns = {v: final.loc[final["variant"] == v, "mean_return"] for v in ("uniform", "per")}
    expected = probability_of_improvement(returns["per"], returns["uniform"])
    match = re.search(r"^- P\(per > uniform\), final return: (\d\.\d\d) \[", text, re.MULTILINE)
    assert match and float(match.group(1)) == pytest.approx(expected, abs=0.005), text
    steps = censored_steps_to_threshold(evals, 0.15)
    medians = {v: steps.loc[steps["variant"] == v, "steps"].median() for v in ("uniform", "per")}
    match = re.search(r"^- Steps to zscore return, per / uniform: .*; ratio (\d+\.\d\d) \[", text, re.MULTILINE)
    assert match and float(match.group(1)) == pytest.approx(medians["per"] / medians["uniform"], abs=0.005), text


def test_summary_counts_the_seeds_on_which_a_variant_ends_below_uniforms_run_of_that_seed(
    tmp_path, synthetic_evaluations, synthetic_baselines
):
    evals = synthetic_evaluations(np.random.default_rng(1234))
    text = write_summary_md(evals, synthetic_baselines(), tmp_path / "s.md", command="c", seeds=[0, 1, 2])
    final = final_returns(evals).set_index(["variant", "seed"])["mean_return"]
    differences = final["per"] - final["uniform"]
    below, above = int((differences < 0).sum()), int((differences > 0).sum())
    assert below != above  # so that swapping the two would fail
    expected = f"- Same seed, per vs uniform, final return: below on {below}, above on {above} of 3 seeds"
    assert expected in text, text


def test_normalised_iqm_divides_each_task_by_its_references_iqm():
    value, _ = normalised_iqm_ci([([100.0, 200.0, 300.0], [150.0, 250.0, 250.0]), ([10.0, 10.0, 10.0], [20.0, 30.0])])
    assert value == pytest.approx(iqm([0.75, 1.25, 1.25, 2.0, 3.0]))


def test_normalised_iqm_resamples_each_task_on_its_own():
    # Every resample holds two runs of each task, so its IQM is that of [1, 1, 3, 3]: 2. A pooled bootstrap would
    # draw resamples of one task alone, stretching the interval to about [1, 3].
    value, interval = normalised_iqm_ci([([1.0, 1.0], [1.0, 1.0]), ([1.0, 1.0], [3.0, 3.0])])
    assert value == 2.0 and interval == (2.0, 2.0)


def test_normalised_iqm_interval_carries_the_references_spread():
    values = [90.0, 100.0, 110.0, 120.0, 130.0]
    _, fixed = normalised_iqm_ci([([110.0] * 5, values)])
    _, spread = normalised_iqm_ci([([60.0, 80.0, 110.0, 140.0, 160.0], values)])
    assert spread[1] - spread[0] > 2 * (fixed[1] - fixed[0])


def test_normalised_iqm_refuses_no_task_and_a_reference_near_zero():
    with pytest.raises(ValueError, match="at least one"):
        normalised_iqm_ci([])
    with pytest.raises(ValueError, match=r"task 1's reference IQM must be >= near_zero=0\.001, got 0"):
        normalised_iqm_ci([([1.0, 1.0], [1.0, 2.0]), ([0.0, 0.0], [1.0, 2.0])])
    with pytest.raises(ValueError, match="near_zero must be > 0, got 0"):
        normalised_iqm_ci([([1.0, 1.0], [1.0, 2.0])], near_zero=0)

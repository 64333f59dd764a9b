"""How fast a variant learns against uniform, seed against seed: the mean return over shared evaluation steps."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from comparison.curve_gap import curve_gap_main
from comparison.schema import EVALUATION_COLUMNS
from comparison.statistics import paired_mean_difference_ci
from comparison.summary import curve_gap_lines, write_summary_md
from comparison.tables import curve_means, shared_steps

STEPS = (0, 5_000, 10_000, 15_000)


@pytest.fixture
def curves(eval_row) -> Callable[..., pd.DataFrame]:
    """``curves(returns, steps=STEPS)``: evaluations of one run per (variant, seed), its mean returns at ``steps`` (a
    shorter list: a shorter run)."""

    def make(returns: dict[tuple[str, int], list[float]], steps: tuple[int, ...] = STEPS) -> pd.DataFrame:
        rows = [
            eval_row(f"{variant}_s{seed}", variant, seed, step, value)
            for (variant, seed), values in returns.items()
            for step, value in zip(steps, values, strict=False)
        ]
        return pd.DataFrame(rows, columns=list(EVALUATION_COLUMNS))

    return make


def test_paired_difference_is_the_mean_over_shared_seeds_only() -> None:
    reference = {0: 1.0, 1: 2.0, 2: 3.0, 7: 100.0}
    compared = {0: 1.5, 1: 2.0, 2: 4.0, 9: -100.0}
    gap, (low, high) = paired_mean_difference_ci(reference, compared, n_resamples=500, rng=3)
    assert gap == pytest.approx((0.5 + 0.0 + 1.0) / 3)
    assert 0.0 <= low <= gap <= high <= 1.0  # a mean of resampled differences lies within their range


def test_paired_difference_of_a_constant_shift_has_a_degenerate_interval() -> None:
    reference = {seed: float(seed) for seed in range(6)}
    compared = {seed: seed + 0.25 for seed in range(6)}
    gap, (low, high) = paired_mean_difference_ci(reference, compared)
    assert gap == pytest.approx(0.25) and low == pytest.approx(0.25) and high == pytest.approx(0.25)


def test_paired_difference_without_a_shared_seed_names_both_seed_sets() -> None:
    with pytest.raises(ValueError, match=r"share no seed.*\[0, 1\].*\[2\]"):
        paired_mean_difference_ci({0: 1.0, 1: 1.0}, {2: 1.0})


def test_shared_steps_are_those_every_run_evaluated_within_the_bounds(curves) -> None:
    evals = curves({("uniform", 0): [0, 1, 2, 3], ("per", 0): [0, 1, 2]})  # per stops before 15k
    assert shared_steps(evals) == [0, 5_000, 10_000]
    assert shared_steps(evals, 5_000, 15_000) == [5_000, 10_000]
    assert shared_steps(evals, low=10_000) == [10_000]


@pytest.mark.parametrize(
    ("low", "high", "message"), [(10_000, 5_000, "low must be <= high"), (11_000, 14_000, "no step")]
)
def test_shared_steps_reject_an_empty_or_reversed_window(low: int, high: int, message: str, curves) -> None:
    evals = curves({("uniform", 0): [0, 1, 2, 3]})
    with pytest.raises(ValueError, match=message):
        shared_steps(evals, low, high)


def test_curve_means_average_each_run_over_the_shared_steps(curves) -> None:
    evals = curves({("uniform", 0): [0.0, 1.0, 2.0, 30.0], ("per", 0): [0.0, 2.0, 4.0]})
    means = curve_means(evals, shared_steps(evals, low=5_000)).set_index("run")["mean_return"]
    assert means.to_dict() == {"uniform_s0": pytest.approx(1.5), "per_s0": pytest.approx(3.0)}


def test_gap_lines_report_a_constant_lead_exactly_and_count_seeds(curves) -> None:
    returns = {}
    for seed in range(4):
        base = [0.0, 0.01 * seed, 0.02, 0.03]
        returns["uniform", seed] = base
        returns["lap", seed] = [value + 0.002 for value in base]
        returns["per", seed] = [value - (0.004 if seed < 3 else -0.001) for value in base]
    lap, per = curve_gap_lines(curves(returns), low=5_000, high=10_000)  # in the report's variant order
    assert lap == (
        "- Same seed, lap vs uniform, mean return over the 2 evaluations from 5k to 10k env steps: below on 0, above "
        "on 4 of 4 seeds; sign test p = 0.125; difference +0.0020 [+0.0020, +0.0020] (95% CI)."
    )
    head, interval = per.split(" [")
    assert head == (
        "- Same seed, per vs uniform, mean return over the 2 evaluations from 5k to 10k env steps: below on 3, above "
        f"on 1 of 4 seeds; sign test p = 0.625; difference {(-0.004 * 3 + 0.001) / 4:+.4f}"
    )
    low, high = (float(bound) for bound in interval.removesuffix("] (95% CI).").split(", "))
    assert -0.004 <= low < (-0.004 * 3 + 0.001) / 4 < high <= 0.001


def test_gap_lines_need_the_reference_variant(curves) -> None:
    assert curve_gap_lines(curves({("per", 0): [0.0, 1.0]})) == []


def test_summary_reports_the_whole_run_gap(tmp_path: Path, synthetic_baselines, curves) -> None:
    returns = {
        (variant, seed): [0.0, 0.01, 0.02, 0.03 + lead]
        for variant, lead in (("uniform", 0.0), ("per", -0.04))
        for seed in range(3)
    }
    text = write_summary_md(
        curves(returns), synthetic_baselines(), tmp_path / "summary.md", command="c", seeds=[0, 1, 2]
    )
    assert (
        "- Same seed, per vs uniform, mean return over the 4 evaluations from 0 to 15k env steps: below on 3, above on "
        "0 of 3 seeds; sign test p = 0.25; difference -0.0100 [-0.0100, -0.0100] (95% CI)." in text
    )


def test_script_restricts_to_the_given_seeds_and_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], curves
) -> None:
    returns = {("uniform", 0): [0.0, 0.1, 0.2, 0.3], ("lap", 0): [0.0, 0.2, 0.2, 0.3]}
    returns |= {("uniform", 1): [0.0, 0.1, 0.2, 0.3], ("lap", 1): [0.0, 0.0, 0.0, 0.0]}
    curves(returns).to_csv(tmp_path / "evaluations.csv", index=False)
    lines = curve_gap_main([str(tmp_path), "--seeds", "0", "--from", "5000", "--to", "5000"])
    assert lines == [
        "- Same seed, lap vs uniform, mean return over the evaluation at 5k env steps: below on 0, above "
        "on 1 of 1 seeds; sign test p = 1; difference +0.1000 [+0.1000, +0.1000] (95% CI)."
    ]
    assert capsys.readouterr().out.strip() == lines[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seeds", "5"], r"--seeds: no run of seed \[5\]"),
        (["--from", "9000", "--to", "1000"], "--from 9000 --to 1000: low must be <= high"),
    ],
)
def test_script_names_the_bad_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str, curves
) -> None:
    curves({("uniform", 0): [0.0, 0.1], ("lap", 0): [0.0, 0.2]}).to_csv(tmp_path / "evaluations.csv", index=False)
    with pytest.raises(SystemExit):
        curve_gap_main([str(tmp_path), *argv])
    assert re.search(message, capsys.readouterr().err)

"""Tests for comparison.report: statistics, per-run tables, summary.md and plots, on synthetic CSVs."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.image import imread
from scipy.stats import trim_mean

from comparison.report import write_report
from comparison.schema import EVALUATION_COLUMNS
from comparison.statistics import bootstrap_ci, iqm, keyed_generator, relative_difference_ci
from comparison.summary import write_summary_md
from comparison.tables import final_returns, steps_to_threshold, summary_table, variant_order

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The steps and seeds of the synthetic_evaluations fixture (conftest.py)
STEPS = (2_000, 4_000, 6_000, 8_000, 10_000)
SEEDS = (0, 1, 2)


@pytest.fixture()
def out_dir(tmp_path: Path, synthetic_evaluations, synthetic_baselines) -> Path:
    synthetic_evaluations(np.random.default_rng(1234)).to_csv(tmp_path / "evaluations.csv", index=False)
    synthetic_baselines().to_csv(tmp_path / "baselines.csv", index=False)
    return tmp_path


# ---------------------------------------------------------------------------------------------------------------------
# iqm / bootstrap_ci
# ---------------------------------------------------------------------------------------------------------------------


def test_iqm_hand_computed() -> None:
    assert iqm([1, 2, 3, 4]) == pytest.approx(2.5)
    assert iqm([4, 1, 3, 2]) == pytest.approx(2.5)  # order does not matter
    # n=5: drop one from each end -> mean(2, 3, 4); the outlier 100 is ignored, unlike the mean (22).
    assert iqm([1, 2, 3, 4, 100]) == pytest.approx(3.0)
    # n=8: drop two from each end -> mean(3, 4, 5, 6)
    assert iqm([-50, 2, 3, 4, 5, 6, 7, 1000]) == pytest.approx(4.5)
    # n <= 3: nothing trimmed, IQM is the mean
    assert iqm([7.0]) == 7.0
    assert iqm([1, 2, 9]) == pytest.approx(4.0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8, 10, 13, 20])  # 5, 8, 10, 20: the studies' seed counts
def test_iqm_matches_scipy_trim_mean(n: int) -> None:
    values = np.random.default_rng(n).normal(size=n)
    assert iqm(values) == pytest.approx(trim_mean(values, 0.25))


def test_iqm_rejects_empty_and_nan() -> None:
    with pytest.raises(ValueError, match="empty"):
        iqm([])
    with pytest.raises(ValueError, match="NaN"):
        iqm([1.0, math.nan, 2.0, 3.0])


def test_bootstrap_ci_contains_estimate_and_is_deterministic() -> None:
    values = np.random.default_rng(0).normal(1.0, 0.5, size=10)
    low, high = bootstrap_ci(values, iqm, rng=7)
    assert low < iqm(values) < high
    assert bootstrap_ci(values, iqm, rng=7) == (low, high)
    assert bootstrap_ci(values, np.mean, rng=7)[0] < np.mean(values) < bootstrap_ci(values, np.mean, rng=7)[1]
    # a different seed gives a (slightly) different interval
    assert bootstrap_ci(values, iqm, rng=8) != (low, high)


def test_bootstrap_ci_custom_statistic_matches_vectorised_path() -> None:
    values = np.random.default_rng(3).normal(size=7)
    fast = bootstrap_ci(values, np.mean, n_resamples=500, rng=1)
    slow = bootstrap_ci(values, lambda sample: float(np.mean(sample)), n_resamples=500, rng=1)
    assert fast == pytest.approx(slow)
    assert bootstrap_ci(values, iqm, n_resamples=500, rng=1) == pytest.approx(
        bootstrap_ci(values, lambda sample: float(trim_mean(sample, 0.25)), n_resamples=500, rng=1)
    )


def test_bootstrap_ci_narrows_with_more_data() -> None:
    rng = np.random.default_rng(42)
    small = rng.normal(0.0, 1.0, size=5)
    large = rng.normal(0.0, 1.0, size=500)
    small_low, small_high = bootstrap_ci(small, np.mean, rng=0)
    large_low, large_high = bootstrap_ci(large, np.mean, rng=0)
    assert large_high - large_low < 0.5 * (small_high - small_low)


def test_bootstrap_ci_small_samples() -> None:
    assert bootstrap_ci([0.42], iqm, rng=0) == (0.42, 0.42)
    low, high = bootstrap_ci([1.0, 3.0], np.mean, rng=0)
    assert 1.0 <= low < 2.0 < high <= 3.0
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0, 2.0], confidence=1.5)


def test_bootstrap_ci_wider_with_higher_confidence() -> None:
    values = np.random.default_rng(5).normal(size=12)
    low90, high90 = bootstrap_ci(values, np.mean, confidence=0.9, rng=0)
    low99, high99 = bootstrap_ci(values, np.mean, confidence=0.99, rng=0)
    assert low99 < low90 and high90 < high99


# ---------------------------------------------------------------------------------------------------------------------
# per-run tables
# ---------------------------------------------------------------------------------------------------------------------


def test_variant_order_puts_uniform_first() -> None:
    assert variant_order(["per", "per", "uniform", "rank", "uniform"]) == ["uniform", "per", "rank"]
    assert variant_order(["b", "a", "b"]) == ["b", "a"]


def test_final_returns_picks_last_step_per_run(tiny_evaluations) -> None:
    final = final_returns(tiny_evaluations())
    assert final["run"].tolist() == ["uniform_s0", "per_s0", "per_s1"]
    assert final["step"].tolist() == [300, 300, 200]
    assert final["mean_return"].tolist() == [0.9, 1.5, 0.3]
    assert final["variant"].tolist() == ["uniform", "per", "per"]
    assert final["seed"].tolist() == [0, 0, 1]


def test_final_returns_ignores_duplicated_index_labels(tiny_evaluations) -> None:
    evals = tiny_evaluations()
    evals.index = [0] * len(evals)  # e.g. a pd.concat of frames without ignore_index
    assert final_returns(evals)["mean_return"].tolist() == [0.9, 1.5, 0.3]


def test_steps_to_threshold_hand_checked(tiny_evaluations) -> None:
    table = steps_to_threshold(tiny_evaluations(), 1.0).set_index("run")
    assert table.loc["uniform_s0", "steps_to_threshold"] == 200  # exactly equal counts as reached
    assert table.loc["per_s0", "steps_to_threshold"] == 200
    assert math.isnan(table.loc["per_s1", "steps_to_threshold"])
    assert table.loc["per_s1", "variant"] == "per"
    assert table.loc["per_s1", "seed"] == 1
    # a lower threshold is reached at the first evaluation
    assert steps_to_threshold(tiny_evaluations(), 0.0)["steps_to_threshold"].tolist() == [100, 100, 100]


# ---------------------------------------------------------------------------------------------------------------------
# relative difference
# ---------------------------------------------------------------------------------------------------------------------


def test_relative_difference_exactly_thirty_percent() -> None:
    uniform = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    diff = relative_difference_ci(uniform, 1.3 * uniform, rng=0)
    assert diff.relative_defined
    assert diff.relative == pytest.approx(0.3)
    assert diff.absolute == pytest.approx(0.3 * iqm(uniform))
    assert diff.relative_ci[0] < 0.3 < diff.relative_ci[1]
    assert diff.absolute_ci[0] < diff.absolute < diff.absolute_ci[1]
    # determinism
    assert relative_difference_ci(uniform, 1.3 * uniform, rng=0) == diff


def test_relative_difference_degenerate_ci_and_negative_reference() -> None:
    diff = relative_difference_ci([2.0, 2.0, 2.0], [2.6, 2.6, 2.6], rng=0)
    assert diff.relative == pytest.approx(0.3)
    assert diff.relative_ci == pytest.approx((0.3, 0.3))
    assert diff.absolute_ci == pytest.approx((0.6, 0.6))
    # reference -1, compared -0.5: improvement of +50% of |reference|
    assert relative_difference_ci([-1.0] * 3, [-0.5] * 3).relative == pytest.approx(0.5)


def test_relative_difference_near_zero_reference_reports_absolute_only() -> None:
    diff = relative_difference_ci([0.0004, -0.0002, 0.0001], [0.2, 0.25, 0.3], rng=0, near_zero=1e-3)
    assert not diff.relative_defined
    assert math.isnan(diff.relative)
    assert all(math.isnan(bound) for bound in diff.relative_ci)
    assert diff.absolute == pytest.approx(0.25 - 0.0001)
    assert diff.absolute_ci[0] > 0.1
    # the same data with a looser rule is reported as relative
    assert relative_difference_ci([0.0004, -0.0002, 0.0001], [0.2, 0.25, 0.3], near_zero=1e-5).relative_defined


def test_summary_md_states_near_zero_rule(tmp_path: Path, eval_row, synthetic_baselines) -> None:
    rows = [eval_row(f"uniform_s{s}", "uniform", s, 100, 0.0) for s in SEEDS]
    rows += [eval_row(f"per_s{s}", "per", s, 100, 0.1 + 0.01 * s) for s in SEEDS]
    evals = pd.DataFrame(rows, columns=list(EVALUATION_COLUMNS))
    text = write_summary_md(evals, synthetic_baselines(), tmp_path / "summary.md", command="x", seeds=SEEDS)
    line = next(line for line in text.splitlines() if "**per vs uniform**" in line)
    assert "relative difference not reported" in line
    assert "absolute +0.110" in line


def test_summary_md_refuses_two_runs_of_one_variant_and_seed(tmp_path: Path, eval_row, synthetic_baselines) -> None:
    rows = [eval_row(f"uniform_s{s}", "uniform", s, 100, 0.1) for s in SEEDS]
    rows.append(eval_row("uniform_s1_again", "uniform", 1, 100, 0.2))
    evals = pd.DataFrame(rows, columns=list(EVALUATION_COLUMNS))
    with pytest.raises(ValueError, match="two runs of variant 'uniform' have seed 1"):
        write_summary_md(evals, synthetic_baselines(), tmp_path / "summary.md", command="x", seeds=SEEDS)
    assert not (tmp_path / "summary.md").exists()


# ---------------------------------------------------------------------------------------------------------------------
# write_report on a synthetic out_dir
# ---------------------------------------------------------------------------------------------------------------------


def _table_cells(markdown: str, first_cell: str) -> list[str]:
    for line in markdown.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no table row for {first_cell!r} in:\n{markdown}")


def test_write_report_creates_files(out_dir: Path) -> None:
    command = "python scripts/compare.py --seeds 0 1 2 --steps 10000"
    paths = write_report(out_dir, command=command, seeds=SEEDS)
    assert set(paths) == {"summary", "learning_curves", "regime_returns"}
    assert paths["summary"] == out_dir / "summary.md"
    for key in ("learning_curves", "regime_returns"):
        data = paths[key].read_bytes()
        assert data[:8] == PNG_SIGNATURE
        assert len(data) > 1024
        image = imread(paths[key])
        assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    text = paths["summary"].read_text(encoding="utf-8")
    assert command in text
    assert "Seeds: 0, 1, 2" in text
    assert "Warning" not in text


def test_summary_figures_match_csv(out_dir: Path) -> None:
    paths = write_report(out_dir, command="cmd", seeds=SEEDS)
    text = paths["summary"].read_text(encoding="utf-8")
    evals = pd.read_csv(out_dir / "evaluations.csv")
    baselines = pd.read_csv(out_dir / "baselines.csv")
    number = r"([+-]\d+\.\d+)"

    finals = {}
    for variant in ("uniform", "per"):
        runs = evals[evals["variant"] == variant]
        final = runs.loc[runs.groupby("run")["step"].idxmax()]
        finals[variant] = final
        cells = _table_cells(text, variant)
        assert cells[1] == "3"
        match = re.fullmatch(rf"{number} \[{number}, {number}\]", cells[2])
        assert match, cells[2]
        printed_iqm, low, high = (float(group) for group in match.groups())
        expected = iqm(final["mean_return"])
        assert abs(printed_iqm - expected) <= 0.0005 + 1e-12
        assert low <= printed_iqm <= high
        mean_match = re.fullmatch(rf"{number} ± (\d+\.\d+)", cells[3])
        assert mean_match, cells[3]
        assert float(mean_match.group(1)) == pytest.approx(final["mean_return"].mean(), abs=5e-4)
        assert float(mean_match.group(2)) == pytest.approx(final["mean_return"].std(ddof=1), abs=5e-4)
        # steps to reach the z-score baseline's mean return, recomputed here
        threshold = float(baselines.loc[baselines["variant"] == "zscore", "mean_return"].iloc[0])
        first = runs[runs["mean_return"] >= threshold].groupby("run")["step"].min()
        if len(first):
            assert cells[4] == f"{first.median() / 1000:.1f}".rstrip("0").rstrip(".") + f"k ({len(first)}/3)"
        else:
            assert cells[4] == "never (0/3)"
        assert float(cells[5]) == pytest.approx(final["sharpe"].mean(), abs=5e-3)
        for cell, regime in zip(cells[6:9], ("normal", "stress", "break"), strict=True):
            assert float(cell) == pytest.approx(final[f"return_{regime}"].mean(), abs=5e-4)

    for baseline in baselines.itertuples(index=False):
        cells = _table_cells(text, f"{baseline.variant} (baseline)")
        assert float(cells[2]) == pytest.approx(baseline.mean_return, abs=5e-4)
        assert float(cells[5]) == pytest.approx(baseline.sharpe, abs=5e-3)
        assert float(cells[8]) == pytest.approx(baseline.return_break, abs=5e-4)

    # per learns faster in the synthetic data: the relative difference line is there and its figures recomputable
    line = next(line for line in text.splitlines() if "**per vs uniform**" in line)
    rel = relative_difference_ci(finals["uniform"]["mean_return"], finals["per"]["mean_return"])
    match = re.search(r"relative ([+-]\d+\.\d)%", line)
    assert match, line
    assert float(match.group(1)) == pytest.approx(100 * rel.relative, abs=0.05 + 1e-9)
    assert rel.relative > 0.2
    assert f"absolute {rel.absolute:+.3f}" in line


def test_summary_table_is_deterministic_and_ordered(out_dir: Path) -> None:
    evals = pd.read_csv(out_dir / "evaluations.csv")
    baselines = pd.read_csv(out_dir / "baselines.csv")
    table = summary_table(evals, baselines, rng=3)
    assert table["policy"].tolist() == ["uniform", "per", "zscore", "flat"]
    assert table["kind"].tolist() == ["learned", "learned", "baseline", "baseline"]
    pd.testing.assert_frame_equal(table, summary_table(evals, baselines, rng=3))


def test_an_interval_does_not_move_when_the_report_gains_a_variant(
    tmp_path: Path, synthetic_evaluations, synthetic_baselines
) -> None:
    evals = synthetic_evaluations(np.random.default_rng(1234))
    extra = evals.loc[evals["variant"] == "per"].assign(
        variant="lap", run=lambda f: f["run"].str.replace("per", "lap"), mean_return=lambda f: f["mean_return"] + 0.01
    )
    baselines = synthetic_baselines()

    def per_lines(frame: pd.DataFrame, name: str) -> list[str]:
        text = write_summary_md(frame, baselines, tmp_path / name, command="test", seeds=SEEDS, rng=5)
        return [
            line
            for line in text.splitlines()
            if line.startswith(("| per ", "| uniform ")) or "per vs" in line or "P(per" in line or ", per /" in line
        ]

    alone = per_lines(evals, "alone.md")
    # two table rows, the difference, P(improvement), the same-seed count, the steps ratio, the curve gap
    assert len(alone) == 7
    assert per_lines(pd.concat([extra, evals], ignore_index=True), "with_lap.md") == alone


def test_keyed_generators_depend_on_the_seed_and_key_alone() -> None:
    draw = lambda seed, *key: keyed_generator(seed, *key).random(4).tolist()  # noqa: E731
    assert draw(0, "iqm", "per") == draw(0, "iqm", "per")
    assert len({tuple(draw(0, "iqm", "per")), tuple(draw(1, "iqm", "per")), tuple(draw(0, "iqm", "lap"))}) == 3
    assert draw(0, "iqm", "per") != draw(0, "iqmper")
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="seed must be an integer >= 0"):
            keyed_generator(bad, "iqm")


def test_summary_flags_seed_mismatch_and_uneven_runs(
    tmp_path: Path, synthetic_evaluations, synthetic_baselines
) -> None:
    evals = synthetic_evaluations(np.random.default_rng(0))
    evals = evals[~((evals["run"] == "per_s2") & (evals["step"] == STEPS[-1]))]  # one run stops early
    text = write_summary_md(evals, synthetic_baselines(), tmp_path / "s.md", command="c", seeds=[0, 1, 2, 3])
    assert "**Warning:**" in text
    assert "different steps (8k, 10k env steps)" in text


def test_learning_curves_robust_to_short_run(out_dir: Path) -> None:
    evals = pd.read_csv(out_dir / "evaluations.csv")
    evals = evals[~((evals["run"] == "uniform_s1") & (evals["step"] >= 8_000))]
    evals.to_csv(out_dir / "evaluations.csv", index=False)
    paths = write_report(out_dir, command="c", seeds=SEEDS)
    assert paths["learning_curves"].read_bytes()[:8] == PNG_SIGNATURE


# ---------------------------------------------------------------------------------------------------------------------
# input validation
# ---------------------------------------------------------------------------------------------------------------------


def test_missing_column_raises_naming_file_and_column(out_dir: Path) -> None:
    evals = pd.read_csv(out_dir / "evaluations.csv").drop(columns=["return_stress"])
    evals.to_csv(out_dir / "evaluations.csv", index=False)
    with pytest.raises(ValueError, match=r"evaluations\.csv.*return_stress"):
        write_report(out_dir, command="c", seeds=SEEDS)


def test_missing_baseline_column_raises(out_dir: Path) -> None:
    pd.read_csv(out_dir / "baselines.csv").drop(columns=["sharpe"]).to_csv(out_dir / "baselines.csv", index=False)
    with pytest.raises(ValueError, match=r"baselines\.csv.*sharpe"):
        write_report(out_dir, command="c", seeds=SEEDS)


def test_empty_csv_raises_naming_file(out_dir: Path) -> None:
    (out_dir / "baselines.csv").write_text("")
    with pytest.raises(ValueError, match=r"baselines\.csv.*empty"):
        write_report(out_dir, command="c", seeds=SEEDS)


def test_header_only_csv_raises_naming_file(out_dir: Path) -> None:
    (out_dir / "evaluations.csv").write_text(",".join(EVALUATION_COLUMNS) + "\n")
    with pytest.raises(ValueError, match=r"evaluations\.csv has no rows"):
        write_report(out_dir, command="c", seeds=SEEDS)


def test_non_numeric_and_duplicate_rows_raise(out_dir: Path) -> None:
    evals = pd.read_csv(out_dir / "evaluations.csv")
    bad = evals.astype({"sharpe": object})
    bad.loc[0, "sharpe"] = "high"
    bad.to_csv(out_dir / "evaluations.csv", index=False)
    with pytest.raises(ValueError, match="'sharpe' is not numeric"):
        write_report(out_dir, command="c", seeds=SEEDS)
    pd.concat([evals, evals.iloc[[0]]]).to_csv(out_dir / "evaluations.csv", index=False)
    with pytest.raises(ValueError, match=r"duplicated \(run, step\)"):
        write_report(out_dir, command="c", seeds=SEEDS)


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"evaluations\.csv"):
        write_report(tmp_path, command="c", seeds=SEEDS)


def test_report_leaves_matplotlib_global_state_alone(out_dir: Path) -> None:
    import matplotlib

    before = (matplotlib.get_backend(), dict(matplotlib.rcParams))
    write_report(out_dir, command="c", seeds=SEEDS)
    assert (matplotlib.get_backend(), dict(matplotlib.rcParams)) == before


def test_summary_warns_that_intervals_over_few_seeds_are_ranges(
    tmp_path: Path, synthetic_evaluations, synthetic_baselines
) -> None:
    rng = np.random.default_rng(0)
    few = synthetic_evaluations(rng)  # 3 seeds per variant
    text = write_summary_md(few, synthetic_baselines(), tmp_path / "few.md", command="c", seeds=SEEDS)
    variants = list(dict.fromkeys(few["variant"]))
    assert f"**Fewer than 5 seeds** (seeds: {', '.join(f'{v} 3' for v in variants)})" in text
    first = few[few["variant"] == variants[0]]
    uneven = pd.concat([few, first.assign(seed=first["seed"] + 10, run=first["run"] + "_more")], ignore_index=True)
    text = write_summary_md(uneven, synthetic_baselines(), tmp_path / "uneven.md", command="c", seeds=SEEDS)
    (warning,) = [line for line in text.splitlines() if line.startswith("**Fewer than")]
    assert f"{variants[1]} 3" in warning and f"{variants[0]} " not in warning
    many = pd.concat(
        [few.assign(seed=few["seed"] + 10 * k, run=few["run"] + f"_{k}") for k in range(2)], ignore_index=True
    )
    seeds = sorted(many["seed"].unique())
    text = write_summary_md(many, synthetic_baselines(), tmp_path / "many.md", command="c", seeds=seeds)
    assert "Fewer than" not in text

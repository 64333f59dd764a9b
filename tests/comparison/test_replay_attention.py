"""The report's replay attention: the final telemetry per variant over seeds, its summary.md table and its figure."""

import math

import numpy as np
import pandas as pd
import pytest

from comparison.plots import replay_attention_figure
from comparison.report import write_report
from comparison.schema import TELEMETRY_COLUMNS
from comparison.tables import final_telemetry, load_telemetry


def _row(variant: str, seed: int, step: int, tag: int, share: float, priority: float = math.nan) -> dict:
    return dict(
        step=step,
        variant=variant,
        seed=seed,
        tag=tag,
        buffer_share=share,
        priority_share=priority,
        sample_share=share,
        td_error=0.1 * (tag + 1),
        is_ess=math.nan if math.isnan(priority) else 0.8,
    )


def synthetic_telemetry() -> pd.DataFrame:
    """per (seeds 0, 1, the second ending earlier) and uniform (seed 0), regimes 0 and 1, steps 0, 10, 20."""
    rows = []
    for step in (0, 10, 20):
        rows += [_row("per", 0, step, 0, 0.7, 0.6), _row("per", 0, step, 1, 0.3, 0.4)]
        rows += [_row("uniform", 0, step, 0, 0.8), _row("uniform", 0, step, 1, 0.2)]
    rows += [_row("per", 1, 10, 0, 0.5, 0.2), _row("per", 1, 10, 1, 0.5, 0.8)]
    rows.append(_row("per", 1, 0, 0, 0.0, 0.0))  # an earlier step of seed 1 does not count
    return pd.DataFrame(rows, columns=list(TELEMETRY_COLUMNS))


def test_final_telemetry_is_the_mean_over_seeds_of_each_runs_last_evaluation():
    table = final_telemetry(synthetic_telemetry())
    assert list(zip(table["variant"], table["tag"], strict=True)) == [
        ("uniform", 0),
        ("uniform", 1),
        ("per", 0),
        ("per", 1),
    ]
    per = table[table["variant"] == "per"].set_index("tag")
    assert per.loc[0, "priority_share"] == pytest.approx(0.4) and per.loc[1, "priority_share"] == pytest.approx(0.6)
    assert per.loc[0, "buffer_share"] == pytest.approx(0.6) and (per["n_seeds"] == 2).all()
    assert table[table["variant"] == "uniform"]["priority_share"].isna().all()


def test_the_summary_has_the_final_telemetry_table_and_the_report_draws_the_figure(
    tmp_path, synthetic_evaluations, synthetic_baselines
):
    synthetic_evaluations(np.random.default_rng(0)).to_csv(tmp_path / "evaluations.csv", index=False)
    synthetic_baselines().to_csv(tmp_path / "baselines.csv", index=False)
    synthetic_telemetry().to_csv(tmp_path / "telemetry.csv", index=False)
    paths = write_report(tmp_path, command="c", seeds=[0, 1, 2])
    assert paths["replay_attention"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = paths["summary"].read_text()
    assert "| per | normal | 60.0% | 40.0% | 60.0% | 0.1 | 0.800 |" in summary
    assert "|  | stress | 40.0% | 60.0% | 40.0% | 0.2 |  |" in summary
    assert "| uniform | normal | 80.0% | — | 80.0% | 0.1 | — |" in summary


def test_a_comparison_without_telemetry_reports_without_it(tmp_path, synthetic_evaluations, synthetic_baselines):
    synthetic_evaluations(np.random.default_rng(0)).to_csv(tmp_path / "evaluations.csv", index=False)
    synthetic_baselines().to_csv(tmp_path / "baselines.csv", index=False)
    assert "replay_attention" not in write_report(tmp_path, command="c", seeds=[0, 1, 2])
    pd.DataFrame(columns=list(TELEMETRY_COLUMNS)).to_csv(tmp_path / "telemetry.csv", index=False)
    paths = write_report(tmp_path, command="c", seeds=[0, 1, 2])
    assert "replay_attention" not in paths and "attention" not in paths["summary"].read_text()


def test_the_figure_has_a_panel_per_variant_with_a_line_per_share_and_regime():
    figure = replay_attention_figure(synthetic_telemetry())
    visible = [ax for ax in figure.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["uniform (mean of 1 seed)", "per (mean of 2 seeds)"]
    assert all(len(ax.get_lines()) == 3 * 2 for ax in visible)
    per_sample_share_normal = visible[1].get_lines()[0]
    np.testing.assert_allclose(per_sample_share_normal.get_ydata(), [0.35, 0.6, 0.7])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.drop(columns="is_ess"), "missing required column"),
        (lambda t: t.assign(sample_share="high"), "'sample_share' is not numeric"),
        (lambda t: t.assign(tag=np.nan), "'tag' must hold integers"),
        (lambda t: pd.concat([t, t.head(1)]), "duplicated"),
    ],
)
def test_a_bad_telemetry_file_is_refused_naming_what_is_wrong(change, message, tmp_path):
    change(synthetic_telemetry()).to_csv(tmp_path / "telemetry.csv", index=False)
    with pytest.raises(ValueError, match=message):
        load_telemetry(tmp_path / "telemetry.csv")

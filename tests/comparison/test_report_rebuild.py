"""Rebuilding a report from unchanged runs rewrites nothing; prices without regime labels get no regime figures."""

import pandas as pd

from comparison.report import write_report
from comparison.runner import run_comparison


def _files(directory) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir()) if path.is_file()}


def test_rebuilding_an_unchanged_report_with_another_command_rewrites_no_file(tmp_path, finished_run, tiny_config):
    configs = [tiny_config(variant=variant, seed=seed) for seed in (0, 1) for variant in ("uniform", "per")]
    for config in configs:
        finished_run(tmp_path, config)
    run_comparison(configs, tmp_path, workers=1, command="python scripts/compare.py --first", progress=False)
    # the baselines as another CPU computes them: equal but for the last bit
    computed = pd.read_csv(tmp_path / "baselines.csv")
    baselines = computed.assign(sharpe=computed["sharpe"] * (1 + 2**-52))
    assert baselines["sharpe"].iloc[0] != computed["sharpe"].iloc[0]
    baselines.to_csv(tmp_path / "baselines.csv", index=False)
    before = _files(tmp_path)
    run_comparison(configs, tmp_path, workers=1, command="python scripts/compare.py --report-only", progress=False)
    assert _files(tmp_path) == before
    assert "--first" in (tmp_path / "summary.md").read_text()

    rows = pd.read_csv(tmp_path / "runs" / "per_s1" / "evaluations.csv")
    rows.loc[rows.index[-1], "mean_return"] = 0.5  # a run's figure changed: the report changes
    rows.to_csv(tmp_path / "runs" / "per_s1" / "evaluations.csv", index=False)
    baselines.assign(sharpe=baselines["sharpe"] * 1.001).to_csv(tmp_path / "baselines.csv", index=False)
    run_comparison(configs, tmp_path, workers=1, command="python scripts/compare.py --second", progress=False)
    summary = (tmp_path / "summary.md").read_text()
    assert "--second" in summary and "--first" not in summary
    recomputed = pd.read_csv(tmp_path / "baselines.csv")["sharpe"]
    assert recomputed.tolist() != (baselines["sharpe"] * 1.001).tolist()  # not a rounding difference: rewritten


def test_prices_without_regime_labels_get_no_regime_figures_and_no_regime_chart(tmp_path, finished_run, tiny_config):
    configs = [tiny_config(variant="uniform", seed=seed) for seed in (0, 1)]
    for config in configs:
        telemetry = finished_run(tmp_path, config) / "telemetry.csv"
        frame = pd.read_csv(telemetry)
        frame.loc[frame["tag"] == 0].assign(tag=-1, buffer_share=1.0).to_csv(telemetry, index=False)
    (tmp_path / "regime_returns.png").write_bytes(b"an empty chart of an earlier report")
    paths = run_comparison(configs, tmp_path, workers=1, command="c", progress=False)
    assert "regime_returns" not in paths and not (tmp_path / "regime_returns.png").exists()
    summary = (tmp_path / "summary.md").read_text()
    assert "| uniform | 2 |" in summary and summary.count("| n/a | n/a | n/a |") == 3  # uniform, zscore, flat
    assert "n/a here: these prices have no regime labels" in summary
    # with labels (the synthetic env's regimes), the figures and the chart are there
    for config in configs:
        (tmp_path / "runs" / config.run_name / "telemetry.csv").unlink()
    finished = [finished_run(tmp_path / "labelled", config) for config in configs]
    assert finished and "regime_returns" in run_comparison(configs, tmp_path / "labelled", command="c", progress=False)
    assert "n/a" not in (tmp_path / "labelled" / "summary.md").read_text()
    assert "regime_returns" in write_report(tmp_path / "labelled", command="c", seeds=[0, 1])

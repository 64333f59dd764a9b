"""Fixtures of the comparison tests: a run's files written as a finished run writes them, without training it."""

import itertools
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from comparison.cli import compare_main
from comparison.experiment import RunConfig
from comparison.runner import run_dir
from comparison.schema import METRIC_COLUMNS, TELEMETRY_COLUMNS

#: Settings of a run that trains in seconds.
_TINY_RUN = dict(
    total_steps=200,
    learning_starts=100,
    eval_freq=100,
    eval_episodes=2,
    batch_size=32,
    net_arch=(16, 16),
    env_kwargs={"episode_length": 30},
)


def finished_files(out_dir: Path, config: RunConfig) -> Path:
    """
    Write into ``out_dir`` the files of ``config``'s run as a finished run has them (zero returns, every regime a
    third of the replay), without training it; return the run's directory.
    """
    directory = run_dir(out_dir, config)
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(config.to_json())
    # The schedule of PeriodicEvaluation, written out independently of the code under test.
    steps = sorted({*range(0, config.total_steps + 1, config.eval_freq), config.total_steps})
    metrics = {column: 0.0 for column in METRIC_COLUMNS} | {"n_episodes": config.eval_episodes}
    evaluations = [
        {"run": config.run_name, "variant": config.variant, "seed": config.seed, "step": step, **metrics}
        for step in steps
    ]
    pd.DataFrame(evaluations).to_csv(directory / "evaluations.csv", index=False)
    shares = dict(buffer_share=1 / 3, priority_share=1 / 3, sample_share=1 / 3, td_error=0.1, is_ess=0.9)
    telemetry = [
        {"step": step, "variant": config.variant, "seed": config.seed, "tag": tag, **shares}
        for step, tag in itertools.product(steps, range(3))
    ]
    pd.DataFrame(telemetry, columns=list(TELEMETRY_COLUMNS)).to_csv(directory / "telemetry.csv", index=False)
    (directory / "progress.csv").write_text("time/total_timesteps\n" + f"{config.total_steps}\n")
    return directory


@pytest.fixture
def finished_run() -> Callable[[Path, RunConfig], Path]:
    """``finished_files``: a finished run's files, written in a moment."""
    return finished_files


@pytest.fixture
def tiny_config() -> Callable[..., RunConfig]:
    """``RunConfig(**fields)`` of a run that trains in seconds (200 steps, 16x16 networks, 2 evaluation episodes)."""

    def make(**fields) -> RunConfig:
        return RunConfig(**{**_TINY_RUN, **fields})

    return make


@pytest.fixture
def planned(monkeypatch) -> Callable[[list[str]], tuple[list[RunConfig], Path]]:
    """``planned(argv)``: the configs and output directory that ``compare_main(argv)`` hands to the runner, which is
    not run."""

    def plan(argv: list[str]) -> tuple[list[RunConfig], Path]:
        given = {}

        def capture(configs, out, **_):
            given.update(configs=configs, out=out)
            raise SystemExit(0)

        with monkeypatch.context() as patch:
            patch.setattr("comparison.runner.run_comparison", capture)
            with pytest.raises(SystemExit):
                compare_main(argv)
        return given["configs"], given["out"]

    return plan

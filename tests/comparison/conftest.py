"""
Fixtures of the comparison tests: a run's files written as a finished run writes them, without training it; the
arguments and configs of runs that train in seconds; synthetic evaluations and baselines for the report's tests.
"""

import itertools
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from comparison import checkpoints
from comparison.cli import compare_main
from comparison.experiment import RunConfig
from comparison.runner import run_dir
from comparison.schema import BASELINE_COLUMNS, EVALUATION_COLUMNS, METRIC_COLUMNS, TELEMETRY_COLUMNS

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


@pytest.fixture(scope="session")
def tiny_run_argv() -> Callable[..., list[str]]:
    """
    ``argv(total_steps=, learning_starts=, eval_freq=, eval_episodes=, episode_length=)``: ``compare.py`` /
    ``train.py`` arguments for a run of seconds, with batches of 32, 16x16 networks and episodes of
    ``episode_length`` steps.
    """

    def argv(
        *, total_steps: int, learning_starts: int, eval_freq: int, eval_episodes: int, episode_length: int
    ) -> list[str]:
        return [
            *("--total-steps", str(total_steps), "--learning-starts", str(learning_starts)),
            *("--eval-freq", str(eval_freq), "--eval-episodes", str(eval_episodes)),
            *("--batch-size", "32", "--net-arch", "16", "16"),
            *("--env-kwargs", json.dumps({"episode_length": episode_length})),
        ]

    return argv


#: The evaluation steps and seeds of ``synthetic_evaluations``.
SYNTHETIC_STEPS = (2_000, 4_000, 6_000, 8_000, 10_000)
SYNTHETIC_SEEDS = (0, 1, 2)


def eval_row_of(run: str, variant: str, seed: int, step: int, mean_return: float, **metrics: float) -> dict:
    """One row of ``evaluations.csv``: the given metrics, the others at fixed values (regime returns from
    ``mean_return``)."""
    row = {
        "run": run,
        "variant": variant,
        "seed": seed,
        "step": step,
        "mean_return": mean_return,
        "std_return": 0.1,
        "sharpe": 1.0,
        "max_drawdown": 0.05,
        "turnover": 2.0,
        "return_normal": mean_return / 2,
        "return_stress": mean_return / 4,
        "return_break": mean_return / 4,
        "n_episodes": 10,
    }
    row.update(metrics)
    return row


def synthetic_evaluations_of(rng: np.random.Generator) -> pd.DataFrame:
    """uniform and per, 3 seeds each (0, 1, 2), 5 evaluation steps (2,000 to 10,000); per learns faster. Columns in
    the documented order."""
    rows = []
    for variant, slope in (("uniform", 0.02), ("per", 0.03)):
        for seed in SYNTHETIC_SEEDS:
            for step in SYNTHETIC_STEPS:
                mean_return = slope * step / 1_000 + rng.normal(0, 0.02)
                rows.append(
                    eval_row_of(
                        f"{variant}_s{seed}",
                        variant,
                        seed,
                        step,
                        mean_return,
                        std_return=abs(rng.normal(0.1, 0.02)),
                        sharpe=rng.normal(1.0, 0.3),
                        max_drawdown=abs(rng.normal(0.05, 0.01)),
                        turnover=abs(rng.normal(2.0, 0.5)),
                        return_normal=mean_return * 0.6 + rng.normal(0, 0.01),
                        return_stress=mean_return * 0.3 + rng.normal(0, 0.01),
                        return_break=mean_return * 0.1 + rng.normal(0, 0.01),
                    )
                )
    return pd.DataFrame(rows, columns=list(EVALUATION_COLUMNS))


def synthetic_baselines_frame() -> pd.DataFrame:
    """``baselines.csv`` of the z-score rule (positive returns) and the flat policy (all zero)."""
    zscore = dict(mean_return=0.15, std_return=0.2, sharpe=0.8, max_drawdown=0.07, turnover=3.0)
    zscore |= dict(return_normal=0.12, return_stress=0.05, return_break=-0.02, n_episodes=10)
    flat = {column: 0.0 for column in METRIC_COLUMNS} | {"n_episodes": 10}
    rows = [{"variant": "zscore", **zscore}, {"variant": "flat", **flat}]
    return pd.DataFrame(rows, columns=list(BASELINE_COLUMNS))


def tiny_evaluations_frame() -> pd.DataFrame:
    """Three runs, rows deliberately out of order; run per_s1 stops early and never reaches 1.0."""
    rows = [
        eval_row_of("per_s0", "per", 0, 300, 1.5),
        eval_row_of("uniform_s0", "uniform", 0, 100, 0.2),
        eval_row_of("per_s0", "per", 0, 100, 0.5),
        eval_row_of("uniform_s0", "uniform", 0, 200, 1.0),
        eval_row_of("uniform_s0", "uniform", 0, 300, 0.9),
        eval_row_of("per_s0", "per", 0, 200, 1.2),
        eval_row_of("per_s1", "per", 1, 100, 0.1),
        eval_row_of("per_s1", "per", 1, 200, 0.3),
    ]
    return pd.DataFrame(rows, columns=list(EVALUATION_COLUMNS))


@pytest.fixture
def eval_row() -> Callable[..., dict]:
    """``eval_row(run, variant, seed, step, mean_return, **metrics)``: one row of ``evaluations.csv``, the metrics not
    given at fixed values."""
    return eval_row_of


@pytest.fixture
def synthetic_evaluations() -> Callable[[np.random.Generator], pd.DataFrame]:
    """``synthetic_evaluations(rng)``: uniform and per, seeds 0, 1, 2, steps 2,000 to 10,000 by 2,000; per learns
    faster."""
    return synthetic_evaluations_of


@pytest.fixture
def synthetic_baselines() -> Callable[[], pd.DataFrame]:
    """``synthetic_baselines()``: ``baselines.csv`` of the z-score rule and the flat policy."""
    return synthetic_baselines_frame


@pytest.fixture
def tiny_evaluations() -> Callable[[], pd.DataFrame]:
    """``tiny_evaluations()``: three runs' rows, out of order; per_s1 stops early and never reaches 1.0."""
    return tiny_evaluations_frame


class Interrupted(Exception):
    """Stands for the end of a session, right after a checkpoint."""


@pytest.fixture
def train_until_a_checkpoint(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[], object]], None]:
    """Runs a training call until it has saved its first checkpoint, then ends it there, as a stopped machine would."""

    def train_until_saved(train: Callable[[], object]) -> None:
        save = checkpoints.save_checkpoint

        def save_then_stop(*args: object, **kwargs: object) -> None:
            save(*args, **kwargs)
            raise Interrupted

        with monkeypatch.context() as patch, pytest.raises(Interrupted):
            patch.setattr(checkpoints, "save_checkpoint", save_then_stop)
            train()

    return train_until_saved

"""
The comparison: seeds x replay variants of ``experiment.train_run`` in parallel worker processes,
resumable, then baselines and the report.

Output directory layout::

    out/runs/{variant}_s{seed}/   one run's files (see comparison.experiment)
    out/evaluations.csv           every run's evaluation rows, in plan order
    out/baselines.csv             z-score rule and flat policy on the same evaluation episodes
    out/summary.md, out/*.png     the report (comparison.report)
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from comparison.experiment import (
    CONFIG_FILE,
    EVALUATIONS_FILE,
    RunConfig,
    baseline_rows,
    configure_torch_threads,
    train_run,
    write_csv_atomically,
)
from comparison.report import BASELINES_FILE, write_report

RUNS_DIR = "runs"


@dataclass(frozen=True)
class Preset:
    """
    A named size of comparison.

    :param n_seeds: seeds per variant (seeds ``0 .. n_seeds - 1``)
    :param overrides: ``RunConfig`` fields this preset sets
    """

    n_seeds: int
    overrides: dict[str, Any]


PRESETS: dict[str, Preset] = {
    # Smoke runs and tests: proves the pipeline, not the question (under a minute on 2 cores).
    "quick": Preset(
        2,
        dict(total_steps=1_500, learning_starts=500, eval_freq=500, eval_episodes=5, net_arch=(32, 32), batch_size=64),
    ),
    # The README's main command: about 10 minutes on 2 cores.
    "default": Preset(2, dict(total_steps=30_000, eval_freq=3_000, eval_episodes=30)),
    # The real answer: evaluation noise is ~0.02 per policy over 50 episodes, so 20 seeds a variant.
    "full": Preset(20, dict(total_steps=100_000, eval_freq=5_000, eval_episodes=50)),
}


def plan_runs(base: RunConfig, variants: Sequence[str], seeds: Sequence[int]) -> list[RunConfig]:
    """One config per (seed, variant), seeds outermost so that a partial comparison stays paired."""
    return [replace(base, variant=variant, seed=seed) for seed in seeds for variant in variants]


def run_dir(out_dir: Path, config: RunConfig) -> Path:
    """Directory of ``config``'s run inside ``out_dir``."""
    return Path(out_dir) / RUNS_DIR / config.run_name


def is_finished(out_dir: Path, config: RunConfig) -> bool:
    """
    Whether ``config``'s run has already finished in ``out_dir``.

    :raises ValueError: the directory holds that run with a different config (a rerun with other
        settings must go to another ``--out`` rather than mix results)
    """
    directory = run_dir(out_dir, config)
    config_path = directory / CONFIG_FILE
    if config_path.exists() and config_path.read_text() != config.to_json():
        raise ValueError(
            f"{config_path} was written with other settings than this comparison's; "
            "use another output directory or delete it"
        )
    return (directory / EVALUATIONS_FILE).exists()


def _train_in_worker(config: RunConfig, directory: Path) -> None:
    configure_torch_threads(1)
    train_run(config, directory)


def run_pending(configs: Sequence[RunConfig], out_dir: Path, workers: int, progress: bool = True) -> dict[str, str]:
    """
    Train every run of ``configs`` not finished yet, ``workers`` at a time, each in its own process
    with one torch thread. A run that fails is reported and the others go on.

    :return: errors of the failed runs, by run name
    """
    pending = [config for config in configs if not is_finished(out_dir, config)]
    failures: dict[str, str] = {}
    if not pending:
        return failures
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"))
    try:
        futures = {pool.submit(_train_in_worker, config, run_dir(out_dir, config)): config for config in pending}
        bar = tqdm(total=len(pending), desc="runs", unit="run", disable=not progress)
        for future in as_completed(futures):
            config = futures[future]
            try:
                future.result()
            except Exception:
                failures[config.run_name] = traceback.format_exc()
                tqdm.write(f"run {config.run_name} failed:\n{failures[config.run_name]}")
            bar.update()
        bar.close()
    except BaseException:
        # Ctrl-C: drop the queued runs instead of waiting hours for them (finished runs are kept).
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return failures


def collect_evaluations(configs: Sequence[RunConfig], out_dir: Path) -> pd.DataFrame:
    """Evaluation rows of the finished runs of ``configs``, in plan order."""
    frames = [
        pd.read_csv(run_dir(out_dir, config) / EVALUATIONS_FILE) for config in configs if is_finished(out_dir, config)
    ]
    if not frames:
        raise ValueError(f"no run of this comparison has finished in {out_dir}")
    return pd.concat(frames, ignore_index=True)


def run_comparison(
    configs: Sequence[RunConfig], out_dir: Path, *, workers: int | None = None, command: str, progress: bool = True
) -> dict[str, Any]:
    """
    Run (or resume) a comparison and write its CSVs and report into ``out_dir``.

    :param configs: the runs, all with the same env and evaluation episodes
    :param out_dir: output directory
    :param workers: parallel runs (default: one per core)
    :param command: the command line, quoted in the report
    :param progress: show a progress bar over runs
    :return: ``failures`` (errors by run name) and the paths of the files written
    """
    if not configs:
        raise ValueError("configs is empty: nothing to compare")
    names = [config.run_name for config in configs]
    if len(set(names)) != len(names):
        raise ValueError(f"each (variant, seed) may appear once, got runs {names}")
    first = configs[0]
    shared = (first.env_id, first.env_kwargs, first.eval_seeds)
    if any((c.env_id, c.env_kwargs, c.eval_seeds) != shared for c in configs):
        raise ValueError("every run of a comparison must use the same env, env_kwargs and evaluation episodes")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    failures = run_pending(configs, out_dir, workers or len(os.sched_getaffinity(0)), progress)
    evaluations = collect_evaluations(configs, out_dir)
    write_csv_atomically(evaluations, out_dir / EVALUATIONS_FILE)
    write_csv_atomically(baseline_rows(first.env_id, first.env_kwargs, first.eval_seeds), out_dir / BASELINES_FILE)
    seeds = sorted({config.seed for config in configs})
    paths = write_report(out_dir, command=command, seeds=seeds)
    return {"failures": failures, "evaluations": out_dir / EVALUATIONS_FILE, **paths}

"""
The comparison: seeds x replay variants of ``experiment.train_run`` in parallel, resumable, then
baselines and the report.

Two backends run the runs, with the same numbers: ``local`` (worker processes on this machine: the pool of
``comparison.processes`` that every study's ``--workers`` uses) and ``ray`` (one Ray task per run, on a local Ray or an
existing cluster; Ray is imported only then).

Output directory layout: see ``comparison.schema``. A run keeps only its small files (no model, no
TensorBoard events), so a comparison's directory can be committed (the full preset writes into
``docs/results/full``) and resumed from on any machine.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import traceback
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from comparison.experiment import RunConfig, baseline_rows, train_run, write_csv_atomically
from comparison.processes import Record, configure_torch_threads, train_in_processes
from comparison.report import write_report
from comparison.schema import (
    BASELINES_FILE,
    CONFIG_FILE,
    EVALUATIONS_FILE,
    METRIC_COLUMNS,
    PROGRESS_FILE,
    TELEMETRY_COLUMNS,
    TELEMETRY_FILE,
)
from comparison.study import check_runs_once, holds_config, run_dir
from comparison.tables import read_table, validate_evaluations, validate_telemetry

BACKENDS = ("local", "ray")
#: ``unfinished_reason`` of a run that has no folder yet.
NOT_STARTED = "not started"


@dataclass(frozen=True)
class Preset:
    """
    A named size of comparison.

    :param n_seeds: seeds per variant (seeds ``0 .. n_seeds - 1``)
    :param overrides: ``RunConfig`` fields this preset sets
    :param out_dir: where its runs and report go by default
    :param variants: the replay variants it compares
    :param fewer_seeds: the variants run on fewer seeds than ``n_seeds``, and their number of seeds
    """

    n_seeds: int
    overrides: dict[str, Any]
    out_dir: Path
    variants: tuple[str, ...] = ("uniform", "per")
    fewer_seeds: dict[str, int] = field(default_factory=dict)

    def plan(self, variants: Sequence[str] | None = None, seeds: Sequence[int] | None = None) -> dict[str, list[int]]:
        """
        :param variants: the variants to run (default: the preset's)
        :param seeds: the seeds of every variant (default: each variant's ``0 .. n - 1``, ``n`` as the preset says)
        :return: the seeds of each variant, in the order of ``variants``
        """
        chosen = self.variants if variants is None else variants
        if seeds is not None:
            return {variant: list(seeds) for variant in chosen}
        return {variant: list(range(self.fewer_seeds.get(variant, self.n_seeds))) for variant in chosen}

    def describe(self) -> str:
        """The preset's plan and settings in words, e.g. for ``--help``."""
        counts = {variant: self.fewer_seeds.get(variant, self.n_seeds) for variant in self.variants}
        plan = ", ".join(f"{variant} x {n}" for variant, n in counts.items())
        return f"seeds 0.. of {plan}; {self.overrides}"


PRESETS: dict[str, Preset] = {
    # Smoke runs and tests: proves the pipeline, not the question (under a minute on 2 cores).
    "quick": Preset(
        2,
        dict(total_steps=1_500, learning_starts=500, eval_freq=500, eval_episodes=5, net_arch=(32, 32), batch_size=64),
        Path("results/quick"),
    ),
    # The README's main command (scripts/main.sh): about 20 minutes on 2 cores (README, Presets).
    "default": Preset(2, dict(total_steps=30_000, eval_freq=3_000, eval_episodes=30), Path("results/default")),
    # The real answer: evaluation noise is ~0.02 per policy over 50 episodes, so 20 seeds a variant (10 for the two
    # that earlier runs ranked lowest). Its runs take days of core time, so they are committed as they finish, and any
    # machine resumes from them.
    "full": Preset(
        20,
        dict(total_steps=100_000, eval_freq=5_000, eval_episodes=50),
        Path("docs/results/full"),
        variants=("uniform", "per", "lap", "la3p", "faded", "rank", "pal", "relo", "expected_td", "expected_relo_root"),
        fewer_seeds={"rank": 10, "pal": 10},
    ),
}


def plan_runs(base: RunConfig, seeds_by_variant: Mapping[str, Sequence[int]]) -> list[RunConfig]:
    """
    One config per (variant, seed) of ``seeds_by_variant``, seeds outermost (in order of first appearance) and the
    variants of each seed in the mapping's order, so that a partial comparison stays paired. Each config is
    ``RunConfig.canonical``: fields its variant does not use are at their defaults.
    """
    seeds = list(dict.fromkeys(seed for variant_seeds in seeds_by_variant.values() for seed in variant_seeds))
    return [
        replace(base, variant=variant, seed=seed).canonical()
        for seed in seeds
        for variant, variant_seeds in seeds_by_variant.items()
        if seed in variant_seeds
    ]


def is_finished(out_dir: Path, config: RunConfig) -> bool:
    """
    Whether ``config``'s run has finished in ``out_dir`` (see ``unfinished_reason``).

    :raises ValueError: as ``unfinished_reason``
    """
    return unfinished_reason(out_dir, config) is None


def unfinished_reason(out_dir: Path, config: RunConfig) -> str | None:
    """
    Why ``config``'s run in ``out_dir`` is not finished, None if it is: finished means its ``config.json`` holds
    ``config``, and its files hold the whole run (``run_tables``). A run that is not finished is redone.

    :raises ValueError: its ``config.json`` holds other settings (a rerun with other settings must go to another
        ``--out`` rather than mix results), or cannot be read (say, a newer version's): naming the file and what
        differs or is wrong
    """
    return _unfinished_in(run_dir(out_dir, config), config)


def _unfinished_in(directory: Path, config: RunConfig) -> str | None:
    """``unfinished_reason`` of ``config``'s run in its folder ``directory``."""
    try:
        _finished_tables(directory, config)
    except _Unfinished as unfinished:
        return str(unfinished)
    return None


class _Unfinished(Exception):
    """A run that is not finished; its text says why."""


def _finished_tables(directory: Path, config: RunConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """
    ``run_tables`` of ``config``'s run in its folder ``directory``, once its settings are checked
    (``comparison.study.holds_config``).

    :raises _Unfinished: the run is not finished, saying why
    :raises ValueError: as ``unfinished_reason``
    """
    if not directory.exists():
        raise _Unfinished(NOT_STARTED)
    # Both sides canonical: a setting the variant ignores, or a default it ignores that changed since the run was
    # written (say RunConfig.lap_min_priority for a uniform run), does not make it another run.
    if not holds_config(config, directory, same_run=RunConfig.canonical):
        raise _Unfinished(f"{directory / CONFIG_FILE}: no such file (settings unknown)")
    try:
        return run_tables(directory, config)
    except (OSError, ValueError) as problem:
        raise _Unfinished(str(problem)) from None


def run_tables(directory: Path, config: RunConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """
    The evaluations and telemetry of ``config``'s finished run in ``directory``, as read from its files, after
    checking that they hold the whole run: every evaluation (``RunConfig.evaluation_steps``) with no value missing,
    one telemetry row per tag at each evaluation (none for an untagged buffer), and ``progress.csv``.

    :raises ValueError: naming the file and what is wrong with it (missing, empty, unreadable, cut short, another
        run's rows, a value missing)
    """
    evaluations_path = directory / EVALUATIONS_FILE
    evaluations = read_table(evaluations_path)
    checked = validate_evaluations(evaluations, str(evaluations_path))
    _check_run_columns(checked, config, evaluations_path, ("run", "variant", "seed"))
    steps = checked["step"].tolist()
    expected = config.evaluation_steps
    if steps != expected:
        raise ValueError(
            f"{evaluations_path} holds {len(steps)} evaluation(s) at steps {_steps_span(steps)}, not the run's "
            f"{len(expected)} at steps {_steps_span(expected)}"
        )
    empty = checked[list(METRIC_COLUMNS)].isna()
    if empty.any(axis=None):
        row, column = next(zip(*empty.to_numpy().nonzero(), strict=True))
        raise ValueError(f"{evaluations_path} has no value in column {METRIC_COLUMNS[column]!r} at step {steps[row]}")
    telemetry_path = directory / TELEMETRY_FILE
    telemetry = read_table(telemetry_path)
    checked = validate_telemetry(telemetry, str(telemetry_path))
    _check_run_columns(checked, config, telemetry_path, ("variant", "seed"))
    n_tags = checked["tag"].nunique()
    if not checked.empty and (set(checked["step"]) != set(expected) or len(checked) != n_tags * len(expected)):
        raise ValueError(
            f"{telemetry_path} does not hold one row per tag at each of the run's evaluations (steps "
            f"{_steps_span(expected)})"
        )
    progress_path = directory / PROGRESS_FILE
    if not progress_path.is_file():
        raise ValueError(f"{progress_path}: no such file")
    return evaluations, telemetry


def _check_run_columns(table: pd.DataFrame, config: RunConfig, path: Path, columns: Sequence[str]) -> None:
    """Raise ``ValueError`` unless every row of ``table`` has ``config``'s value in each of ``columns``."""
    values = {"run": config.run_name, "variant": config.variant, "seed": config.seed}
    for column in columns:
        if (table[column] != values[column]).any():
            raise ValueError(f"{path} has rows whose {column} is not the run's {values[column]!r}")


def _steps_span(steps: Sequence[int]) -> str:
    """Env steps in short: ``0, 500, ..., 1500``, or all of them when there are four or fewer."""
    shown = [*steps[:2], "...", steps[-1]] if len(steps) > 4 else steps
    return ", ".join(map(str, shown)) if steps else "(none)"


def check_backend(backend: str, ray_address: str | None = None) -> None:
    """
    Check the options of the backend that runs the runs.

    :param backend: a name in ``BACKENDS``
    :param ray_address: the Ray cluster to join, only for the ray backend
    :raises ValueError: ``backend`` is not one of ``BACKENDS``, or a Ray address is given to another backend
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    if ray_address is not None and backend != "ray":
        raise ValueError(f"a Ray address ({ray_address!r}) is only used by the ray backend, not by {backend!r}")


def _train_and_pack(config: RunConfig) -> dict[str, bytes]:
    """
    A Ray task: train ``config``'s run in a temporary directory of whichever machine runs it, and return
    the run's files (path relative to the run directory -> content), since the driver may not see that
    machine's disk.
    """
    configure_torch_threads(1)
    with tempfile.TemporaryDirectory(prefix="sb3_per_run_") as tmp:
        directory = Path(tmp) / config.run_name
        train_run(config, directory)
        files = sorted(path for path in directory.rglob("*") if path.is_file())
        return {path.relative_to(directory).as_posix(): path.read_bytes() for path in files}


def _unpack_run(files: dict[str, bytes], directory: Path) -> None:
    """Write a run's files returned by ``_train_and_pack`` into ``directory``, the evaluations last."""
    if EVALUATIONS_FILE not in files:
        raise ValueError(f"the run returned no {EVALUATIONS_FILE}, only {sorted(files)}")
    outside = [name for name in files if Path(name).is_absolute() or ".." in Path(name).parts]
    if outside:
        raise ValueError(f"the run returned files outside its directory: {outside}")
    # What an interrupted earlier attempt left would mix with this run's files.
    shutil.rmtree(directory, ignore_errors=True)
    for name, content in files.items():
        if name != EVALUATIONS_FILE:
            path = directory / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    # Written last and atomically: a run directory with this file is a finished run (``is_finished``).
    tmp = directory / (EVALUATIONS_FILE + ".tmp")
    tmp.write_bytes(files[EVALUATIONS_FILE])
    os.replace(tmp, directory / EVALUATIONS_FILE)


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def _run_on_ray(pending: Sequence[RunConfig], out_dir: Path, ray_address: str | None, record: Record) -> None:
    try:
        import ray
    except ImportError as missing:
        raise ImportError('the ray backend needs Ray: pip install -e ".[ray]" from the clone') from missing
    started_here = not ray.is_initialized()
    if started_here:
        # No address: RAY_ADDRESS, else a Ray started on this machine by `ray start`, else a new local Ray.
        ray.init(address=ray_address)
    try:
        task = ray.remote(num_cpus=1)(_train_and_pack)
        configs = {task.remote(config): config for config in pending}
        remaining = list(configs)
        try:
            while remaining:
                done, remaining = ray.wait(remaining, num_returns=1)
                config = configs[done[0]]
                try:
                    _unpack_run(ray.get(done[0]), run_dir(out_dir, config))
                    error = None
                except ray.exceptions.RayError as failure:  # the task's exception, with its remote traceback
                    error = _ANSI_ESCAPE.sub("", str(failure))
                except Exception:
                    error = traceback.format_exc()
                record(config, error)
        except BaseException:
            # Ctrl-C: stop the runs still queued or training (finished runs are kept).
            for ref in remaining:
                ray.cancel(ref, force=True)
            raise
    finally:
        if started_here:
            ray.shutdown()


def run_pending(
    configs: Sequence[RunConfig],
    out_dir: Path,
    workers: int,
    progress: bool = True,
    backend: str = "local",
    ray_address: str | None = None,
) -> dict[str, str]:
    """
    Train every run of ``configs`` not finished yet, each with one torch thread, and write its files into
    ``out_dir``. Runs are reported as they finish; a run that fails is reported and the others go on.

    :param configs: the runs
    :param out_dir: output directory (runs in ``out_dir/runs/{variant}_s{seed}``)
    :param workers: parallel worker processes of the local backend (the ray backend runs as many runs at
        once as the Ray cluster has free CPUs)
    :param progress: show a progress bar over the env steps of all runs, with an ETA
    :param backend: ``"local"``: a pool of ``workers`` processes on this machine; ``"ray"``: one Ray task
        (one CPU) per run, trained in a temporary directory of the node that runs it, whose files are
        sent back and written here
    :param ray_address: Ray cluster to join (e.g. ``"auto"`` or ``"ray://head:10001"``); with none, Ray
        finds one as ``ray.init`` does or starts locally. A Ray already initialised in this process is
        used as it is (and left running); one started here is shut down at the end.
    :return: errors of the failed runs, by run name
    """
    check_backend(backend, ray_address)
    reasons = {config.run_name: unfinished_reason(out_dir, config) for config in configs}
    pending = [config for config in configs if reasons[config.run_name] is not None]
    for config in pending:
        if reasons[config.run_name] != NOT_STARTED:
            print(f"redoing {config.run_name}: {reasons[config.run_name]}", file=sys.stderr)
    failures: dict[str, str] = {}
    if not pending:
        return failures
    # Over the env steps of all runs, with an ETA; the local backend's runs report their steps as they go, a Ray
    # run all of them as it ends.
    bar = tqdm(
        total=sum(config.total_steps for config in pending),
        desc="env steps",
        unit="step",
        unit_scale=True,
        disable=not progress,
        postfix=f"0/{len(pending)} runs",
    )
    steps_done = {config.run_name: 0 for config in pending}
    ended: list[str] = []

    def advance(config: RunConfig, steps: int) -> None:
        steps_done[config.run_name] += steps
        bar.update(steps)

    def record(config: RunConfig, error: str | None) -> None:
        left = config.total_steps - steps_done[config.run_name]
        if error is None:
            bar.update(left)
        else:  # the steps it will not take come off the total, so that the ETA stays right
            failures[config.run_name] = error
            tqdm.write(f"run {config.run_name} failed:\n{error}")
            bar.total -= left
        ended.append(config.run_name)
        bar.set_postfix_str(f"{len(ended)}/{len(pending)} runs")

    try:
        if backend == "ray":
            _run_on_ray(pending, out_dir, ray_address, record)
        else:
            train_in_processes(
                train_run, [(config, run_dir(out_dir, config)) for config in pending], workers, record, advance
            )
    finally:
        bar.close()
    return failures


def collect_runs(configs: Sequence[RunConfig], out_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """
    The evaluation rows and the telemetry rows (columns ``TELEMETRY_COLUMNS``) of the finished runs of ``configs``,
    in plan order, each run's checked whole (``run_tables``) before any is combined.

    :raises ValueError: no run of ``configs`` has finished in ``out_dir``
    """
    tables = []
    for config in configs:
        with suppress(_Unfinished):
            tables.append(_finished_tables(run_dir(out_dir, config), config))
    if not tables:
        raise ValueError(f"no run of this comparison has finished in {out_dir}")
    # An untagged buffer's table is empty: left out, as concatenating an empty frame would lose the columns' types.
    telemetry = [frame for _, frame in tables if not frame.empty]
    return (
        pd.concat([evaluations for evaluations, _ in tables], ignore_index=True),
        pd.concat(telemetry, ignore_index=True) if telemetry else pd.DataFrame(columns=list(TELEMETRY_COLUMNS)),
    )


def _holds_figures(path: Path, table: pd.DataFrame) -> bool:
    """
    Whether the CSV file ``path`` holds ``table`` up to float rounding (the baselines recomputed on another CPU may
    differ in their last bit): such a file is kept as it is, so that an unchanged comparison rewrites nothing.
    """
    if not path.is_file():
        return False
    stored = pd.read_csv(path)
    if list(stored.columns) != list(table.columns) or len(stored) != len(table):
        return False
    numbers = table.select_dtypes("number").columns
    labels = table.columns.difference(numbers)
    try:
        close = np.allclose(stored[numbers].to_numpy(float), table[numbers].to_numpy(float), rtol=1e-12, atol=0.0)
    except ValueError:  # a stored cell that is not a number
        return False
    return close and stored[labels].astype(str).equals(table[labels].astype(str))


def run_comparison(
    configs: Sequence[RunConfig],
    out_dir: Path,
    *,
    workers: int | None = None,
    command: str,
    progress: bool = True,
    backend: str = "local",
    ray_address: str | None = None,
) -> dict[str, Any]:
    """
    Run (or resume) a comparison and write its CSVs and report into ``out_dir``.

    :param configs: the runs, all with the same env and evaluation episodes
    :param out_dir: output directory
    :param workers: parallel runs of the local backend (default: one per core)
    :param command: the command line, quoted in the report
    :param progress: show a progress bar over the env steps of all runs, with an ETA
    :param backend: ``"local"`` (worker processes on this machine) or ``"ray"`` (Ray tasks); see ``run_pending``
    :param ray_address: Ray cluster to join with the ray backend (default: as ``ray.init`` finds one, else local)
    :return: ``failures`` (errors by run name) and the paths of the files written (``evaluations``,
        ``telemetry``, ``baselines``, and the report's)
    """
    check_backend(backend, ray_address)
    if not configs:
        raise ValueError("configs is empty: nothing to compare")
    check_runs_once(configs)
    first = configs[0]
    shared = (first.env_id, first.env_kwargs, first.evaluation_env_kwargs, first.eval_seeds)
    if any((c.env_id, c.env_kwargs, c.evaluation_env_kwargs, c.eval_seeds) != shared for c in configs):
        raise ValueError(
            "every run of a comparison must use the same env, env_kwargs, eval_env_kwargs and evaluation episodes"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    workers = workers or len(os.sched_getaffinity(0))
    failures = run_pending(configs, out_dir, workers, progress, backend=backend, ray_address=ray_address)
    return {"failures": failures, **write_comparison_report(configs, out_dir, command)}


def write_comparison_report(configs: Sequence[RunConfig], out_dir: Path, command: str) -> dict[str, Path]:
    """
    Write the comparison's CSVs (its finished runs' rows, in plan order, and the baselines) and its report into
    ``out_dir``.

    :param configs: the plan, all with the same env and evaluation episodes
    :param out_dir: the comparison's folder
    :param command: the command that runs the plan, quoted in the report
    :return: the paths of the files written: ``evaluations``, ``telemetry``, ``baselines`` and the report's
    :raises ValueError: no run of ``configs`` has finished in ``out_dir``
    """
    evaluations, telemetry = collect_runs(configs, out_dir)
    first = configs[0]
    write_csv_atomically(evaluations, out_dir / EVALUATIONS_FILE)
    write_csv_atomically(telemetry, out_dir / TELEMETRY_FILE)
    baselines = baseline_rows(first.env_id, first.evaluation_env_kwargs, first.eval_seeds)
    if not _holds_figures(out_dir / BASELINES_FILE, baselines):
        write_csv_atomically(baselines, out_dir / BASELINES_FILE)
    seeds = sorted({config.seed for config in configs})
    paths = write_report(out_dir, command=command, seeds=seeds)
    return {
        "evaluations": out_dir / EVALUATIONS_FILE,
        "telemetry": out_dir / TELEMETRY_FILE,
        "baselines": out_dir / BASELINES_FILE,
        **paths,
    }


class PairsStudy:
    """
    The pairs-env comparison's runs as a ``comparison.study.Study``: ``train``, ``finished`` and ``report`` of
    ``RunConfig`` runs, so that ``comparison.study.run_study`` and ``pending`` drive them one at a time like any
    study's, by the same resume rule as ``run_comparison``. ``run_comparison`` trains a plan with its own backends
    instead (a pool of processes or Ray, with a progress bar and interrupts), and ``scripts/compare.py`` keeps its
    own command line (presets, variants, walk-forward), which the commands quoted in its reports use.
    """

    name = "compare"

    def train(self, config: RunConfig, run_dir: Path) -> None:
        """
        Train ``config``'s run into ``run_dir`` from its start (``comparison.experiment.train_run``).

        :raises ValueError: ``run_dir`` holds another run's config
        """
        train_run(config, run_dir)

    def finished(self, config: RunConfig, run_dir: Path) -> bool:
        """
        Whether ``run_dir`` holds ``config``'s finished run (``unfinished_reason``).

        :raises ValueError: as ``unfinished_reason``
        """
        return _unfinished_in(run_dir, config) is None

    def report(self, configs: Sequence[RunConfig], out_dir: Path, command: str) -> Path:
        """The report of the finished runs of ``configs`` in ``out_dir`` (``write_comparison_report``): its summary."""
        return write_comparison_report(configs, Path(out_dir), command)["summary"]

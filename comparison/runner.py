"""
The comparison: seeds x replay variants of ``experiment.train_run`` in parallel, resumable, then
baselines and the report.

Two backends run the runs, with the same numbers: ``local`` (worker processes on this machine) and
``ray`` (one Ray task per run, on a local Ray or an existing cluster; Ray is imported only then).

Output directory layout: see ``comparison.schema``. A run keeps only its small files (no model, no
TensorBoard events), so a comparison's directory can be committed (the full preset writes into
``docs/results/full``) and resumed from on any machine.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from comparison.experiment import RunConfig, baseline_rows, configure_torch_threads, train_run, write_csv_atomically
from comparison.report import write_report
from comparison.schema import (
    BASELINES_FILE,
    CONFIG_FILE,
    EVALUATIONS_FILE,
    RUNS_DIR,
    TELEMETRY_COLUMNS,
    TELEMETRY_FILE,
)

BACKENDS = ("local", "ray")
# Seconds a terminated run process has to exit before it is killed.
_GRACE_SECONDS = 5.0


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
    # The README's main command: about 10 minutes on 2 cores.
    "default": Preset(2, dict(total_steps=30_000, eval_freq=3_000, eval_episodes=30), Path("results/default")),
    # The real answer: evaluation noise is ~0.02 per policy over 50 episodes, so 20 seeds a variant (10 for the two
    # that earlier runs ranked lowest). Its runs take days of core time, so they are committed as they finish, and any
    # machine resumes from them.
    "full": Preset(
        20,
        dict(total_steps=100_000, eval_freq=5_000, eval_episodes=50),
        Path("docs/results/full"),
        variants=("uniform", "per", "lap", "la3p", "faded", "rank", "pal"),
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
    if config_path.exists():
        # Both sides canonical: a setting the variant ignores, or a default it ignores that changed since the run
        # was written (say RunConfig.lap_min_priority for a uniform run), does not make it another run.
        stored = _stored_config(config_path)
        if stored is None or stored.canonical() != config.canonical():
            raise ValueError(
                f"{config_path} was written with other settings than this comparison's; "
                "use another output directory or delete it"
            )
    return (directory / EVALUATIONS_FILE).exists()


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


# Called once per run as it ends: its config and None, or its config and its error text.
_Record = Callable[[RunConfig, str | None], None]


def _stored_config(path: Path) -> RunConfig | None:
    """The config a run directory holds (fields added since it was written take their defaults); None if unreadable."""
    try:
        return RunConfig.from_json(path.read_text())
    except ValueError:
        return None


def _train_in_child(config: RunConfig, directory: Path, errors: Connection) -> None:
    """
    A run in its own process; sends its error text (None when it finished) to the parent, then ends. It starts with
    SIGINT blocked (see ``_start_child``) and keeps it so: Ctrl-C in a terminal reaches every process of the group,
    and the parent alone decides, ending its children with SIGTERM.
    """
    # Ignored too, not only blocked: a library may unblock it in a thread it starts (then the run's exit, still
    # in its clean-up, would print a KeyboardInterrupt).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_torch_threads(1)
    try:
        train_run(config, directory)
        errors.send(None)
    except Exception:
        errors.send(traceback.format_exc())


class RunsInterrupted(BaseException):
    """
    A comparison stopped by a signal (like ``KeyboardInterrupt``, not an ``Exception``, so that no handler of a
    run's failure catches it).

    :param signum: the signal, e.g. ``signal.SIGINT`` or ``signal.SIGTERM``
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """
    Within the block, the first SIGINT (Ctrl-C) or SIGTERM raises ``RunsInterrupted`` in the main thread (which
    ends the running runs: see ``_run_in_processes``), and later ones are ignored while that unwinds, so a second
    Ctrl-C cannot cut the clean-up short. The previous handlers are restored after the block.
    """
    stopping = (signal.SIGINT, signal.SIGTERM)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        for other in stopping:
            signal.signal(other, signal.SIG_IGN)
        raise RunsInterrupted(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in stopping}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _end_processes(processes: Iterable[BaseProcess]) -> None:
    """Terminate the processes and wait for them (killing any that outlive the grace period)."""
    processes = list(processes)
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + _GRACE_SECONDS
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _start_child(process: BaseProcess) -> None:
    """
    Start ``process`` with SIGINT blocked, a mask it inherits from the very start (a Ctrl-C while it imports would
    otherwise print its traceback); a SIGINT arriving here meanwhile is delivered to this process right after.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _run_in_processes(pending: Sequence[RunConfig], out_dir: Path, workers: int, record: _Record) -> None:
    """
    Each run in a fresh process, ``workers`` at a time. On any exception here (Ctrl-C, SIGTERM turned into one
    by the command line) the running children are terminated at once, so no run goes on or starts after it;
    a child ended mid-run leaves no ``evaluations.csv``, so it is redone next time.
    """
    context = get_context("spawn")
    queue = list(pending)
    running: dict[BaseProcess, tuple[RunConfig, Connection]] = {}
    try:
        while queue or running:
            while queue and len(running) < workers:
                config = queue.pop(0)
                receiver, sender = context.Pipe(duplex=False)
                process: BaseProcess = context.Process(
                    target=_train_in_child, args=(config, run_dir(out_dir, config), sender)
                )
                _start_child(process)
                sender.close()  # the child holds the sending end: EOF here once it is gone
                running[process] = (config, receiver)
            # Ready when a child has sent its outcome, or has died without (end of file): never blocks a child
            # on a full pipe, as waiting for its exit first would with a long traceback.
            for ready in wait([receiver for _, receiver in running.values()]):
                process = next(p for p, (_, receiver) in running.items() if receiver is ready)
                config, receiver = running.pop(process)
                try:
                    error = receiver.recv()
                except EOFError:
                    error = None
                process.join()
                receiver.close()
                if error is None and process.exitcode != 0:
                    error = f"the run's process ended with exit code {process.exitcode} before it finished"
                record(config, error)
    finally:
        _end_processes(running)


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


def _run_on_ray(pending: Sequence[RunConfig], out_dir: Path, ray_address: str | None, record: _Record) -> None:
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
    :param progress: show a progress bar over runs
    :param backend: ``"local"``: a pool of ``workers`` processes on this machine; ``"ray"``: one Ray task
        (one CPU) per run, trained in a temporary directory of the node that runs it, whose files are
        sent back and written here
    :param ray_address: Ray cluster to join (e.g. ``"auto"`` or ``"ray://head:10001"``); with none, Ray
        finds one as ``ray.init`` does or starts locally. A Ray already initialised in this process is
        used as it is (and left running); one started here is shut down at the end.
    :return: errors of the failed runs, by run name
    """
    check_backend(backend, ray_address)
    pending = [config for config in configs if not is_finished(out_dir, config)]
    failures: dict[str, str] = {}
    if not pending:
        return failures
    bar = tqdm(total=len(pending), desc="runs", unit="run", disable=not progress)

    def record(config: RunConfig, error: str | None) -> None:
        if error is not None:
            failures[config.run_name] = error
            tqdm.write(f"run {config.run_name} failed:\n{error}")
        bar.update()

    try:
        if backend == "ray":
            _run_on_ray(pending, out_dir, ray_address, record)
        else:
            _run_in_processes(pending, out_dir, workers, record)
    finally:
        bar.close()
    return failures


def collect_evaluations(configs: Sequence[RunConfig], out_dir: Path) -> pd.DataFrame:
    """Evaluation rows of the finished runs of ``configs``, in plan order."""
    frames = [
        pd.read_csv(run_dir(out_dir, config) / EVALUATIONS_FILE) for config in configs if is_finished(out_dir, config)
    ]
    if not frames:
        raise ValueError(f"no run of this comparison has finished in {out_dir}")
    return pd.concat(frames, ignore_index=True)


def collect_telemetry(configs: Sequence[RunConfig], out_dir: Path) -> pd.DataFrame:
    """Telemetry rows of the finished runs of ``configs``, in plan order (columns ``TELEMETRY_COLUMNS``)."""
    paths = [run_dir(out_dir, config) / TELEMETRY_FILE for config in configs if is_finished(out_dir, config)]
    # An untagged buffer's table is empty: left out, as concatenating an empty frame would lose the columns' types.
    frames = [frame for frame in map(pd.read_csv, paths) if not frame.empty]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(TELEMETRY_COLUMNS))


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
    :param progress: show a progress bar over runs
    :param backend: ``"local"`` (worker processes on this machine) or ``"ray"`` (Ray tasks); see ``run_pending``
    :param ray_address: Ray cluster to join with the ray backend (default: as ``ray.init`` finds one, else local)
    :return: ``failures`` (errors by run name) and the paths of the files written (``evaluations``,
        ``telemetry``, and the report's)
    """
    check_backend(backend, ray_address)
    if not configs:
        raise ValueError("configs is empty: nothing to compare")
    names = [config.run_name for config in configs]
    if len(set(names)) != len(names):
        raise ValueError(f"each (variant, seed) may appear once, got runs {names}")
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
    evaluations = collect_evaluations(configs, out_dir)
    write_csv_atomically(evaluations, out_dir / EVALUATIONS_FILE)
    write_csv_atomically(collect_telemetry(configs, out_dir), out_dir / TELEMETRY_FILE)
    baselines = baseline_rows(first.env_id, first.evaluation_env_kwargs, first.eval_seeds)
    write_csv_atomically(baselines, out_dir / BASELINES_FILE)
    seeds = sorted({config.seed for config in configs})
    paths = write_report(out_dir, command=command, seeds=seeds)
    return {
        "failures": failures,
        "evaluations": out_dir / EVALUATIONS_FILE,
        "telemetry": out_dir / TELEMETRY_FILE,
        **paths,
    }

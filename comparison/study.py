"""
A study: a plan of runs, each trained into a folder of its own, that any process can resume, and a report over the
runs that have finished. ``Study`` is what a study implements (``comparison/mujoco.py`` is one); ``run_study`` trains
the unfinished runs of a plan, and ``study_main`` is the command line of a study's script
(``scripts/<name>_study.py``: ``run``, ``report``, ``pending``).

Layout of a study's output folder::

    runs/<run_name>/   config.json (written first), what the run logs, its result file (written last), and whatever
                       the study keeps to resume the run (a checkpoint) until then

A run is finished when its folder holds its config and a complete result file: ``Study.finished`` checks that, and
never trusts a file's presence alone. The folder of a run that holds another config raises ``ValueError`` rather
than being trained over. This module imports nothing heavy (torch comes in only to train), so that the command line
refuses a bad argument at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import shutil
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, fields
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

RUNS_DIR = "runs"
CONFIG_FILE = "config.json"
#: Where a study's results go unless ``--out`` says otherwise: ``docs/results/<name>``.
RESULTS_DIR = Path("docs/results")
ACTIONS = ("run", "report", "pending", "finished")
#: The command line's own options (``args`` attributes); any other attribute is one of the study's options.
COMMON_OPTIONS = frozenset({"action", "seeds", "first_seed", "max_runs", "workers", "shard", "out"})


class StudyConfig(Protocol):
    """
    One run of a study: a frozen dataclass that determines the run, with ``run_name``, ``seed``, ``to_json()`` (what
    ``config.json`` holds) and the classmethod ``from_json(text)`` that reads it back (``ValueError`` on a text that
    is not such a config).
    """

    @property
    def run_name(self) -> str: ...

    @property
    def seed(self) -> int: ...

    def to_json(self) -> str: ...

    @classmethod
    def from_json(cls, text: str) -> Any: ...


ConfigT = TypeVar("ConfigT", bound=StudyConfig)


class JsonConfig:
    """
    ``to_json`` and ``from_json`` of ``StudyConfig`` for a frozen dataclass whose fields JSON holds as they are (a
    tuple comes back as a list: the dataclass turns it back in ``__post_init__``).
    """

    def to_json(self) -> str:
        """The config as sorted JSON (what ``config.json`` holds)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)  # type: ignore[call-overload]

    @classmethod
    def from_json(cls, text: str) -> Self:
        """
        The config ``to_json`` wrote.

        :param text: the JSON text
        :raises ValueError: the text is not such a config
        """
        try:
            return cls(**json.loads(text))
        except (TypeError, json.JSONDecodeError) as error:
            raise ValueError(f"not a {cls.__name__}: {error}") from None


class Study(Protocol[ConfigT]):
    """
    What a study implements.

    ``name`` names its script, ``scripts/<name>_study.py``, and its default output folder, ``docs/results/<name>``.
    """

    name: str

    def plan(self, seeds: Sequence[int], **options: Any) -> list[ConfigT]:
        """
        The runs of the study, in the order they train.

        :param seeds: the seeds of the plan
        :param options: the study's options, as ``plan_options`` gives them
        :raises ValueError: an option is not valid
        """
        ...

    def train(self, config: ConfigT, run_dir: Path) -> None:
        """
        Train ``config``'s run into ``run_dir``: ``config.json`` first, its result file last, resuming from a
        checkpoint that ``run_dir`` holds if there is one.

        :raises ValueError: ``run_dir`` holds another config
        """
        ...

    def finished(self, config: ConfigT, run_dir: Path) -> bool:
        """
        Whether ``run_dir`` holds ``config``'s finished run: its ``config.json``, its result file complete, every
        required value finite (checked, never trusted).

        :raises ValueError: naming the file, if ``run_dir`` holds another config
        """
        ...

    def report(self, configs: Sequence[ConfigT], out_dir: Path, command: str) -> Path:
        """
        Write the report of the finished runs of ``configs`` into ``out_dir``.

        :param configs: the plan
        :param out_dir: the study's folder
        :param command: the command that runs the whole plan, quoted in the report
        :return: the report's main file
        """
        ...

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """
        Add the study's own options to its command line. Give each one long option and no ``dest``, so that the
        command quoted in the report (``run_command``) can spell it out again from its value.
        """
        ...

    def plan_options(self, args: argparse.Namespace) -> dict[str, Any]:
        """The options of ``plan`` that the parsed ``args`` of ``add_arguments`` give."""
        ...


def run_dir(out_dir: Path, config: StudyConfig) -> Path:
    """Folder of ``config``'s run inside the study's folder ``out_dir``."""
    return Path(out_dir) / RUNS_DIR / config.run_name


def write_config(config: StudyConfig, directory: Path) -> None:
    """Write ``config.json`` of ``config`` into ``directory`` (complete or not at all)."""
    from comparison.experiment import write_text_atomically  # not at load: it brings torch

    write_text_atomically(config.to_json(), Path(directory) / CONFIG_FILE)


def restart_run_dir(config: ConfigT, directory: Path, same_run: Callable[[ConfigT], ConfigT] | None = None) -> None:
    """
    Empty ``directory`` of what an attempt at a run left (making it if there is none) and write ``config``'s
    ``config.json`` into it: the start of a run trained from its first step.

    :param config: the run
    :param directory: its folder
    :param same_run: the form in which a config found there is compared with ``config`` (``holds_config``)
    :raises ValueError: naming the file, if ``directory`` holds another config (left as it is)
    """
    holds_config(config, directory, same_run)
    shutil.rmtree(directory, ignore_errors=True)
    Path(directory).mkdir(parents=True)
    write_config(config, directory)


def holds_config(config: ConfigT, directory: Path, same_run: Callable[[ConfigT], ConfigT] | None = None) -> bool:
    """
    Whether ``directory`` holds ``config``'s ``config.json`` (False if it holds none).

    :param config: the run
    :param directory: its folder
    :param same_run: the form in which the stored config and ``config`` are compared (None: as they are), e.g. one
        with the settings the run ignores at their defaults, so that a changed default it never reads leaves a
        finished run finished
    :raises ValueError: naming the file, if it holds another config (naming each setting that differs), or a text
        that is no config
    """
    path = Path(directory) / CONFIG_FILE
    if not path.exists():
        return False
    try:
        stored = type(config).from_json(path.read_text())
    except ValueError as error:
        raise ValueError(
            f"{path} is no config of this study ({error}): delete its folder or use another output folder"
        ) from None
    if same_run is not None:
        stored, config = same_run(stored), same_run(config)
    if stored != config:
        raise ValueError(
            f"{path} holds a config with other settings than the run {config.run_name}'s of this plan "
            f"({'; '.join(setting_differences(stored, config))}): delete its folder or use another output folder"
        )
    return True


def setting_differences(stored: Any, wanted: Any) -> list[str]:
    """
    Each field on which the dataclass configs ``stored`` and ``wanted`` differ, as ``name: stored value there,
    wanted value now``.
    """
    names = [item.name for item in fields(stored)]
    return [
        f"{name}: {getattr(stored, name)!r} there, {getattr(wanted, name)!r} now"
        for name in names
        if getattr(stored, name) != getattr(wanted, name)
    ]


def check_integer_fields(instance: Any, names: Iterable[str], minimum: int) -> None:
    """
    Raise ``ValueError``, naming the field and its value, unless each field ``names`` of ``instance`` is an integer
    (not a bool) of at least ``minimum``.
    """
    for name in names:
        value = getattr(instance, name)
        if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


@dataclass(frozen=True)
class ResultColumns:
    """
    The columns of a study's result file, a row per evaluation of one run (``check_result_rows``).

    :param names: every column, in order, ``labels`` and ``step`` among them
    :param finite: the columns that must be finite in every row
    :param episodes: the column of the number of episodes each evaluation played (None: none to check)
    :param labels: the columns that name the run: its task, variant and seed (empty: the rows carry no labels)
    :param step: the column of the step of each evaluation
    """

    names: tuple[str, ...]
    finite: tuple[str, ...]
    episodes: str | None
    labels: tuple[str, ...] = ("task", "variant", "seed")
    step: str = "step"


def check_result_rows(
    rows: pd.DataFrame,
    columns: ResultColumns,
    run: Mapping[str, object],
    steps: Sequence[int],
    episodes: int,
    source: Path | str,
) -> None:
    """
    Check that ``rows`` are one run's evaluations: the columns ``columns.names``, one row per step of ``steps`` in
    order, the run's labels, finite values in ``columns.finite`` and ``episodes`` episodes in each evaluation.

    :param rows: the rows read
    :param columns: the study's result columns
    :param run: the run's labels, by the names of ``columns.labels``
    :param steps: the steps of the evaluations expected
    :param episodes: the episodes each evaluation plays (unused where ``columns.episodes`` is None)
    :param source: the file the rows come from, named in the error
    :raises ValueError: naming ``source`` and what is wrong
    """
    missing = [column for column in columns.names if column not in rows.columns]
    if missing:
        raise ValueError(f"{source} lacks the columns {missing}")
    if list(rows[columns.step]) != list(steps):
        raise ValueError(f"{source} holds the {columns.step}s {list(rows[columns.step])}, expected {list(steps)}")
    labels = rows[list(columns.labels)].drop_duplicates().values.tolist()
    expected = [run[label] for label in columns.labels]
    if columns.labels and labels != [expected]:
        raise ValueError(f"{source} holds rows of {labels}, expected {expected}")
    values = rows[list(columns.finite)].to_numpy(dtype=float)
    if not np.isfinite(values).all():
        raise ValueError(f"{source} has a missing or infinite value in {list(columns.finite)}")
    if columns.episodes is not None and (rows[columns.episodes] != episodes).any():
        raise ValueError(f"{source} has evaluations without {episodes} episodes")


def finished_result_rows(
    config: ConfigT, directory: Path, file_name: str, check: Callable[[pd.DataFrame, ConfigT, Path], None]
) -> pd.DataFrame | None:
    """
    The rows of ``config``'s result file ``file_name`` in ``directory`` if the run has finished, None if not (no
    folder, or one that an interrupted attempt left: no result file, or one that ``check`` refuses). Only the result
    file counts, which a run writes last.

    :param config: the run
    :param directory: its folder
    :param file_name: its result file's name
    :param check: raises ``ValueError`` unless the rows read from the path are the finished run's
    :raises ValueError: naming the file, if ``directory`` holds another config
    """
    import pandas as pd  # not at load: the command line checks its arguments first

    if not holds_config(config, directory):
        return None
    path = Path(directory) / file_name
    try:
        rows = pd.read_csv(path)
        check(rows, config, path)
    except (OSError, ValueError, pd.errors.ParserError):
        return None
    return rows


def check_shard(index: int, count: int) -> None:
    """:raises ValueError: naming ``index`` and ``count``, unless 0 <= ``index`` < ``count``"""
    if not 0 <= index < count:
        raise ValueError(f"a shard needs 0 <= index < count, got index={index!r}, count={count!r}")


def shard_plan(configs: Sequence[ConfigT], index: int, count: int) -> list[ConfigT]:
    """
    The runs of ``configs`` that shard ``index`` of ``count`` trains, in plan order: ``count`` processes given the
    same plan and the indices 0 .. ``count - 1`` share it without overlap. Each seed's runs are dealt to the shards in
    turn, the ``k``-th seed's first run to shard ``k % count``, so that the seeds of one setting (task, variant) are
    spread over the shards rather than all trained by one: a queue's failures, resumes and machine load then fall on
    every variant alike.

    :raises ValueError: naming ``index`` and ``count``, unless 0 <= ``index`` < ``count``
    """
    check_shard(index, count)
    seed_ranks = {seed: rank for rank, seed in enumerate(dict.fromkeys(config.seed for config in configs))}
    dealt: Counter[int] = Counter()
    chosen = []
    for config in configs:
        if (seed_ranks[config.seed] + dealt[config.seed]) % count == index:
            chosen.append(config)
        dealt[config.seed] += 1
    return chosen


def pending(study: Study[ConfigT], configs: Sequence[ConfigT], out_dir: Path) -> list[ConfigT]:
    """
    The runs of ``configs`` that have not finished in ``out_dir``, in plan order.

    :raises ValueError: a run's folder holds another config
    """
    return [config for config in configs if not study.finished(config, run_dir(out_dir, config))]


def check_runs_once(configs: Sequence[StudyConfig]) -> None:
    """:raises ValueError: naming the plan's runs, if a run appears in ``configs`` twice (one folder for two runs)"""
    names = [config.run_name for config in configs]
    if len(set(names)) != len(names):
        raise ValueError(f"each run may appear once in the plan, got {names}")


@dataclass
class StudyProgress:
    """
    What ``run_study`` did.

    :param trained: the runs it trained, by name
    :param pending: the runs of the plan still unfinished after it, by name
    :param failed: the error text of each run that failed in a process of its own (``workers > 1``), by name
    """

    trained: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def run_study(
    study: Study[ConfigT],
    configs: Sequence[ConfigT],
    out_dir: Path,
    max_runs: int | None = None,
    workers: int = 1,
    announce: Callable[[str], None] = print,
) -> StudyProgress:
    """
    Train the unfinished runs of ``configs`` in plan order, each with one torch thread: one at a time in this process
    (``workers`` 1, where a failure raises), or each in a fresh process of its own, ``workers`` at a time
    (``comparison.processes``, where a failure is recorded and the other runs go on). Parallel processes may also each
    take a shard of the plan (``shard_plan``).

    :param study: the study (with ``workers > 1`` it must pickle, as a plain class's instance does)
    :param configs: the plan
    :param out_dir: the study's folder
    :param max_runs: train at most this many runs, then stop (None: all)
    :param workers: how many runs train at once
    :param announce: called with a line as each run starts and ends
    :return: the runs trained, those that failed and those still pending
    :raises ValueError: ``max_runs`` is not a positive integer or None, ``workers`` not a positive integer, a run
        appears twice in the plan, or a run's folder holds another config
    """
    if max_runs is not None and (isinstance(max_runs, bool) or int(max_runs) != max_runs or max_runs < 1):
        raise ValueError(f"max_runs must be a positive integer or None, got {max_runs!r}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    check_runs_once(configs)
    to_train = pending(study, configs, out_dir)[:max_runs]
    progress = StudyProgress()
    if workers == 1:
        from comparison.processes import configure_torch_threads

        configure_torch_threads(1)
        for config in to_train:
            announce(f"run {config.run_name}: training")
            started = time.monotonic()
            study.train(config, run_dir(out_dir, config))
            announce(f"run {config.run_name}: done in {time.monotonic() - started:.0f} s")
            progress.trained.append(config.run_name)
    else:
        from comparison.processes import train_in_processes

        start_times: dict[str, float] = {}

        def start(config: ConfigT) -> None:
            announce(f"run {config.run_name}: training")
            start_times[config.run_name] = time.monotonic()

        def record(config: ConfigT, error: str | None) -> None:
            seconds = time.monotonic() - start_times[config.run_name]
            if error is None:
                announce(f"run {config.run_name}: done in {seconds:.0f} s")
                progress.trained.append(config.run_name)
            else:
                announce(f"run {config.run_name}: failed after {seconds:.0f} s:\n{error}")
                progress.failed[config.run_name] = error

        runs = [(config, run_dir(out_dir, config)) for config in to_train]
        train_in_processes(
            partial(train_study_run, study), runs, workers, record, advance=lambda config, steps: None, on_start=start
        )
    progress.pending = [config.run_name for config in pending(study, configs, out_dir)]
    return progress


def train_study_run(
    study: Study[ConfigT], config: ConfigT, directory: Path, on_steps: Callable[[int], None] | None = None
) -> None:
    """``study.train(config, directory)`` in a run's own process (``comparison.processes``; ``on_steps`` unused)."""
    study.train(config, directory)


def positive_integer(text: str) -> int:
    """An argparse type: an integer >= 1 (its error names the value; argparse adds the option)."""
    return _integer_at_least(text, 1)


def natural_number(text: str) -> int:
    """An argparse type: an integer >= 0 (its error names the value; argparse adds the option)."""
    return _integer_at_least(text, 0)


def _integer_at_least(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}")
    return value


def study_parser(study: Study[Any]) -> argparse.ArgumentParser:
    """The command line of ``study``: the common actions and options, then the study's own."""
    parser = argparse.ArgumentParser(
        prog=f"scripts/{study.name}_study.py",
        description=f"The {study.name} study, resumable: run trains the unfinished runs of the plan (one at a time, "
        "or --workers at once; each resuming from its checkpoint if it has one) and writes the report; report only "
        "writes it; pending prints how many runs are unfinished; finished prints the folder of each finished run.",
        allow_abbrev=False,
    )
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("--seeds", type=positive_integer, default=5, help="how many seeds: FIRST .. FIRST + N - 1")
    parser.add_argument("--first-seed", type=natural_number, default=0, help="the first seed (default 0)")
    parser.add_argument("--max-runs", type=positive_integer, default=None, help="train at most this many runs")
    parser.add_argument(
        "--workers",
        type=positive_integer,
        default=1,
        help="runs that train at once, each in a process of its own (default 1: one at a time, in this process)",
    )
    parser.add_argument(
        "--shard",
        nargs=2,
        type=natural_number,
        default=(0, 1),
        metavar=("INDEX", "COUNT"),
        help="train (and count) only shard INDEX (0-based) of COUNT: each seed's runs dealt to the shards in turn",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / study.name, help="the study's folder")
    study.add_arguments(parser)
    return parser


def study_option_tokens(args: argparse.Namespace) -> list[str]:
    """The study's own options in ``args``, spelt as arguments (``--name value ...``; a None value left out)."""
    tokens: list[str] = []
    for name, value in vars(args).items():
        if name in COMMON_OPTIONS or value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        if value is True:
            tokens.append(flag)
        elif isinstance(value, list | tuple):
            tokens += [flag, *map(str, value)]
        else:
            tokens += [flag, str(value)]
    return tokens


def run_command(study: Study[Any], args: argparse.Namespace) -> str:
    """The command that runs the whole plan of ``args`` (no shard, no limit on the runs), as the report quotes it."""
    return shlex.join(
        [
            *("python", f"scripts/{study.name}_study.py", "run", "--seeds", str(args.seeds)),
            *(("--first-seed", str(args.first_seed)) if args.first_seed else ()),
            *("--out", str(args.out), *study_option_tokens(args)),
        ]
    )


def study_main(study: Study[Any], argv: Sequence[str] | None = None) -> int:
    """
    Command line of ``scripts/<name>_study.py``: ``run`` trains the unfinished runs of the plan (in order; one at a
    time unless ``--workers``) and writes the report; ``report`` only writes it; ``pending`` prints how many runs
    are unfinished; ``finished`` prints the folder of each finished run of the whole plan, a line each (what
    ``scripts/study_queue.sh`` commits). ``--shard INDEX COUNT`` gives ``run`` and ``pending`` shard INDEX (0-based) of
    COUNT (``shard_plan``: each seed's runs dealt to the shards in turn), so that COUNT processes, one per core, given
    the same plan (every other argument the same) share it without training a run twice; ``--workers N`` has one
    command train N runs at once, each in a process of its own (a run that fails is reported, the others go on, and
    the exit status is 1); the report always covers the whole plan. Bad values are argparse errors (exit status 2)
    that name the option and the value, before anything is read or trained.

    :param study: the study
    :param argv: arguments (``sys.argv[1:]`` when None)
    :return: the exit status
    """
    parser = study_parser(study)
    args = parser.parse_args(argv)
    try:
        check_shard(*args.shard)
    except ValueError as error:
        parser.error(f"--shard INDEX COUNT: {error}")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    try:
        configs = study.plan(seeds, **study.plan_options(args))
    except ValueError as error:
        parser.error(str(error))
    shard = shard_plan(configs, *args.shard)
    if args.action == "pending":
        print(len(pending(study, shard, args.out)))
        return 0
    if args.action == "finished":  # of the whole plan, as the report
        for config in configs:
            if study.finished(config, run_dir(args.out, config)):
                print(run_dir(args.out, config))
        return 0
    status = 0
    if args.action == "run":
        from comparison.processes import RunsInterrupted, exit_status_interrupted, stop_on_signals

        try:
            # With runs in processes of their own, a signal ends them; one run in this process ends with it as ever.
            with stop_on_signals() if args.workers > 1 else nullcontext():
                progress = run_study(study, shard, args.out, max_runs=args.max_runs, workers=args.workers)
        except RunsInterrupted as stop:
            status = exit_status_interrupted(stop)
            print(f"{study.name}: interrupted; rerun the same command to resume", file=sys.stderr)
            return status
        print(f"trained {len(progress.trained)} run(s); {len(progress.pending)} pending", flush=True)
        for name in progress.failed:
            print(f"run {name} FAILED (its error is above)", flush=True)
        status = 1 if progress.failed else 0
    print(f"report: {study.report(configs, args.out, run_command(study, args))}")
    return status

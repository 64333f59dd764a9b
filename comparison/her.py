"""
The goal-conditioned study (``scripts/her_study.py``, issue 48): hindsight experience replay with SB3's uniform
``HerReplayBuffer`` against ``sb3_per.PrioritizedHerReplayBuffer``, on a robotics task and on SB3's bit-flipping task,
in success rate. A plug-in of ``comparison.study``; a run takes minutes at most, so an interrupted one is trained
again from its start (no checkpoints).

Tasks (``TASKS``):

- ``fetch_reach``: ``FetchReach-v4`` of gymnasium-robotics (the ``robotics`` extra), ``sb3_per.SAC`` with
  ``MultiInputPolicy`` and the RL Zoo's settings for FetchReach (rl-baselines3-zoo 2.9, ``hyperparams/sac.yml``,
  ``FetchReach-v1``: 20,000 steps, buffer 1e6, batch 256, gamma 0.95, learning rate 1e-3, networks [64, 64], entropy
  coefficient learnt, ``learning_starts=1000``, HER with ``n_sampled_goal=4`` and ``"future"`` goals, and
  ``normalize: True``: a ``VecNormalize`` of observations and rewards with gamma 0.95; SB3's SAC defaults
  otherwise). The Zoo's ``FetchReach-v1`` is the same task on ``mujoco_py``; ``-v4`` runs on the ``mujoco`` bindings,
  with two bugs of its reset fixed (gymnasium-robotics' version history). One env.
- ``bit_flipping``: SB3's ``BitFlippingEnv`` with 10 bits and discrete actions, ``sb3_per.DQN`` with the settings of
  SB3's HER performance test as ``scripts/her_priorities.py`` runs it (2 envs, learning rate 2e-3, batch 32, buffer
  1e5, a gradient step per env per step, ``learning_starts=20``, final exploration 0.02, target update every 100
  steps, HER with ``n_sampled_goal=5`` and ``"future"`` goals; SB3's DQN defaults otherwise), for 4,000 env steps
  instead of 1,500, so that the curves show when each variant reaches full success (seeds 0 and 1 of both variants
  did so within 2,200 steps, where 1,500 leaves SB3's uniform buffer short of it on 4 seeds of 10:
  ``docs/guide/her.md``); the exploration and beta schedules stretch with the run (fractions of it).

Variants (``comparison.her_training.VARIANT_SETTINGS``):

- ``her``: SB3's ``HerReplayBuffer``, SB3's own training step (``replay_scheme=None``);
- ``per_her``: ``PrioritizedHerReplayBuffer`` with PER's settings (alpha 0.6, beta 0.4 annealed to 1 over the run,
  ``beta_anneal_steps="auto"``) and ``sb3_per.PER()``; HER's settings as ``her``'s.

Evaluation: at step 0 and every ``eval_freq`` env steps, ``eval_episodes`` episodes of the deterministic policy on an
env of its own, episode ``i`` reset with the seed ``EVAL_SEED + i`` (the same for every run and evaluation, apart
from the training seeds 0, 1, ...); on FetchReach the policy sees the observations normalized by the training env's
``VecNormalize`` statistics of the moment. The success rate is the share of episodes whose last step's
``info["is_success"]`` is true.

Layout of the output folder (``docs/results/her`` by default)::

    runs/<task>_<variant>_s<seed>/   config.json; progress.csv (SB3's logger, a row per evaluation); evaluations.csv
                                     (written last: a run is finished when it is whole)
    success.csv, summary.md, success_curves.png   the report

This module only defines the study (it loads without torch, so that the command line checks its arguments at once):
the training is in ``comparison.her_training``, the report in ``comparison.her_report``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from comparison.study import (
    JsonConfig,
    ResultColumns,
    check_integer_fields,
    check_result_rows,
    finished_result_rows,
)


@dataclass(frozen=True)
class HerTask:
    """
    One task of the study, and the defaults of its runs.

    :param env_id: the env (a Gymnasium id, or ``BitFlippingEnv``: SB3's, with ``n_bits`` bits)
    :param algorithm: ``"sac"`` or ``"dqn"`` (``sb3_per``'s)
    :param n_envs: training envs (each step of them counts ``n_envs`` env steps)
    :param total_steps: env steps of a run
    :param eval_freq: env steps between evaluations
    :param eval_episodes: episodes per evaluation
    :param learning_starts: env steps stored before the first gradient step
    :param buffer_size: replay capacity
    """

    env_id: str
    algorithm: str
    n_envs: int
    total_steps: int
    eval_freq: int
    eval_episodes: int
    learning_starts: int
    buffer_size: int


#: SB3's BitFlippingEnv, as SB3's HER performance test and ``scripts/her_priorities.py`` use it.
BIT_FLIPPING_ID = "BitFlippingEnv"
N_BITS = 10
#: The tasks, by the name runs use.
TASKS: dict[str, HerTask] = {
    "bit_flipping": HerTask(
        BIT_FLIPPING_ID,
        "dqn",
        n_envs=2,
        total_steps=4_000,
        eval_freq=100,
        eval_episodes=50,
        learning_starts=20,
        buffer_size=100_000,
    ),
    "fetch_reach": HerTask(
        "FetchReach-v4",
        "sac",
        n_envs=1,
        total_steps=20_000,
        eval_freq=1_000,
        eval_episodes=20,
        learning_starts=1_000,
        buffer_size=1_000_000,
    ),
}
#: The variants, in the order each seed and task runs them (their settings: ``comparison.her_training``).
VARIANTS = ("her", "per_her")
#: The reference variant of every comparison.
REFERENCE = "her"
#: The tasks of the default plan, in the order each seed runs them (the quick one first).
STUDY_TASKS = ("bit_flipping", "fetch_reach")
#: Reset seed of the first evaluation episode; episode ``i`` uses ``EVAL_SEED + i``, the same for every run.
EVAL_SEED = 10**6

EVALUATIONS_FILE = "evaluations.csv"
#: Columns of a run's ``evaluations.csv``: one row per evaluation step (0, ``eval_freq``, ..., ``total_steps``).
EVALUATION_COLUMNS: tuple[str, ...] = (
    "task",
    "variant",
    "seed",
    "step",
    "success_rate",
    "mean_return",
    "n_episodes",
    "elapsed_s",
)
RESULT_COLUMNS = ResultColumns(
    EVALUATION_COLUMNS, finite=("step", "success_rate", "mean_return", "n_episodes", "elapsed_s"), episodes="n_episodes"
)
#: The fields of ``HerConfig`` that take the task's default (``HerTask``) when None.
TASK_DEFAULTS = ("total_steps", "eval_freq", "eval_episodes", "learning_starts", "buffer_size")


@dataclass(frozen=True)
class HerConfig(JsonConfig):
    """
    One run of the study: everything that determines it. The fields left None take the task's defaults
    (``TASKS[task]``), so that ``config.json`` records them.

    :param task: a key of ``TASKS``
    :param variant: one of ``VARIANTS``
    :param seed: seed of the model, the training envs and the replay sampling
    :param total_steps: env steps to train for
    :param eval_freq: env steps between evaluations: divides ``total_steps``, a multiple of the task's ``n_envs``
    :param eval_episodes: episodes per evaluation, >= 1
    :param learning_starts: env steps stored before the first gradient step, below ``total_steps``
    :param buffer_size: replay capacity
    """

    task: str = "fetch_reach"
    variant: str = "her"
    seed: int = 0
    # None: the task's default, filled in by __post_init__ (an int from then on)
    total_steps: int = None  # type: ignore[assignment]
    eval_freq: int = None  # type: ignore[assignment]
    eval_episodes: int = None  # type: ignore[assignment]
    learning_starts: int = None  # type: ignore[assignment]
    buffer_size: int = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {sorted(TASKS)}, got {self.task!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {list(VARIANTS)}, got {self.variant!r}")
        for name in TASK_DEFAULTS:
            if getattr(self, name) is None:
                object.__setattr__(self, name, getattr(TASKS[self.task], name))
        check_integer_fields(self, ("total_steps", "eval_freq", "eval_episodes", "buffer_size"), minimum=1)
        check_integer_fields(self, ("seed", "learning_starts"), minimum=0)
        steps, every, n_envs = self.total_steps, self.eval_freq, TASKS[self.task].n_envs
        if steps % every:
            raise ValueError(f"eval_freq={every!r} must divide total_steps={steps!r}")
        if every % n_envs:
            raise ValueError(f"eval_freq must be a multiple of {self.task}'s {n_envs} envs, got {every!r}")
        if self.learning_starts >= steps:
            raise ValueError(f"learning_starts must be below total_steps={steps!r}, got {self.learning_starts!r}")

    @property
    def run_name(self) -> str:
        """Name of the run's folder, e.g. ``fetch_reach_per_her_s3``."""
        return f"{self.task}_{self.variant}_s{self.seed}"

    def evaluation_steps(self) -> list[int]:
        """The steps ``evaluations.csv`` holds a row for: 0, ``eval_freq``, ..., ``total_steps``."""
        return list(range(0, self.total_steps + 1, self.eval_freq))


def check_evaluations(rows: pd.DataFrame, config: HerConfig, source: Path | str) -> None:
    """
    Check that ``rows`` are ``config``'s finished evaluations: the columns ``EVALUATION_COLUMNS``, one row per
    evaluation step in order, that task, variant and seed, ``eval_episodes`` episodes each, finite values, and
    success rates in [0, 1].

    :raises ValueError: naming ``source`` and what is wrong
    """
    run = {"task": config.task, "variant": config.variant, "seed": config.seed}
    check_result_rows(rows, RESULT_COLUMNS, run, config.evaluation_steps(), config.eval_episodes, source)
    if not rows["success_rate"].between(0.0, 1.0).all():
        raise ValueError(f"{source} has a success_rate outside [0, 1]")


def finished_evaluations(config: HerConfig, run_dir: Path) -> pd.DataFrame | None:
    """
    The rows of ``config``'s run in ``run_dir`` if it has finished (its ``evaluations.csv``, written last, passes
    ``check_evaluations``), None if not.

    :raises ValueError: naming the file, if ``run_dir`` holds another config
    """
    return finished_result_rows(config, run_dir, EVALUATIONS_FILE, check_evaluations)


def plan_runs(
    seeds: Iterable[int],
    tasks: Iterable[str] = STUDY_TASKS,
    variants: Iterable[str] = VARIANTS,
    steps: Mapping[str, int] | None = None,
    **settings: Any,
) -> list[HerConfig]:
    """
    One config per (seed, task, variant), seeds outermost and the variants of a task and seed side by side, so that
    a partial study stays paired.

    :param seeds: the seeds
    :param tasks: keys of ``TASKS``
    :param variants: of ``VARIANTS``
    :param steps: ``total_steps`` of some tasks (the others: their defaults)
    :param settings: further ``HerConfig`` fields of every run (e.g. ``eval_episodes``)
    :raises ValueError: a task, a variant or a setting is not valid
    """
    tasks, variants, steps = list(tasks), list(variants), dict(steps or {})
    unknown = sorted(set(steps) - set(tasks))
    if unknown:
        raise ValueError(f"steps names tasks that are not planned: {unknown} (planned: {tasks})")
    return [
        HerConfig(task=task, variant=variant, seed=seed, **{"total_steps": steps.get(task), **settings})
        for seed in seeds
        for task in tasks
        for variant in variants
    ]


def steps_option(task: str) -> str:
    """The command line's option of ``task``'s env steps per run, e.g. ``--fetch-reach-steps``."""
    return f"--{task.replace('_', '-')}-steps"


def steps_argument(task: str) -> Any:
    """An argparse type of ``task``'s env steps: a multiple of its evaluation interval above its learning_starts."""
    defaults = TASKS[task]

    def checked(text: str) -> int:
        try:
            steps = int(text)
        except ValueError:
            steps = -1
        if steps <= defaults.learning_starts or steps % defaults.eval_freq:
            raise argparse.ArgumentTypeError(
                f"must be a multiple of {task}'s evaluation interval {defaults.eval_freq} above its learning_starts "
                f"{defaults.learning_starts}, got {text!r}"
            )
        return steps

    return checked


class HerStudy:
    """The goal-conditioned study as ``comparison.study.Study`` (see this module's docstring)."""

    name = "her"

    def plan(self, seeds: Sequence[int], **options: Any) -> list[HerConfig]:
        """``plan_runs(seeds, **options)``."""
        return plan_runs(seeds, **options)

    def train(self, config: HerConfig, run_dir: Path) -> None:
        """Train ``config``'s run into ``run_dir`` from its start (``comparison.her_training.train_run``)."""
        from comparison.her_training import train_run  # torch (and MuJoCo) only when training

        train_run(config, run_dir)

    def finished(self, config: HerConfig, run_dir: Path) -> bool:
        """Whether ``run_dir`` holds ``config``'s finished run (``finished_evaluations``)."""
        return finished_evaluations(config, run_dir) is not None

    def report(self, configs: Sequence[HerConfig], out_dir: Path, command: str) -> Path:
        """Write the report (``comparison.her_report.write_report``); return the summary's path."""
        from comparison.her_report import write_report  # matplotlib and SciPy only when reporting

        return write_report(configs, out_dir, command)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--tasks``, ``--variants`` and each task's ``--<task>-steps``."""
        parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(STUDY_TASKS))
        parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
        for task, defaults in TASKS.items():
            parser.add_argument(
                steps_option(task),
                type=steps_argument(task),
                default=defaults.total_steps,
                help=f"env steps per run of {task} (default {defaults.total_steps})",
            )

    def plan_options(self, args: argparse.Namespace) -> dict[str, Any]:
        """The tasks, the variants and the env steps per run of each planned task."""
        steps = {task: getattr(args, f"{task}_steps") for task in args.tasks}
        return {"tasks": args.tasks, "variants": args.variants, "steps": steps}

"""
The MuJoCo study (``scripts/mujoco_study.py``), for SAC users: ``sb3_per.SAC`` with SB3's uniform replay, PER, ReLo
and LA3P on Gymnasium's MuJoCo tasks, resumable from a checkpoint in the middle of a run (a run of the default length
takes about 90 minutes on one core, longer than a session may last). The first plug-in of ``comparison.study``.

Tasks (``TASKS``): ``hopper`` (``Hopper-v5``), ``halfcheetah`` (``HalfCheetah-v5``), ``walker`` (``Walker2d-v5``) and
``hopper_noisy``: Hopper with N(0, 1) added to each training reward (``RewardNoise`` of ``comparison.minatar``,
outside SB3's ``Monitor``, so the training returns logged and every evaluation are the task's own reward), the
noisy-TV case where a priority that follows TD errors meets noise that no critic can learn. Sigma = 1 was fixed in
advance, not tuned: about a third of a good Hopper policy's reward per step (healthy bonus 1 plus a forward speed of
about 2); each run's ``config.json`` records it.

Every variant trains ``sb3_per.SAC`` with the RL Zoo's MuJoCo settings: SB3's SAC defaults (two hidden layers of 256
units, learning rate 3e-4, batch 256, replay 1e6, tau 0.005, gamma 0.99, entropy coefficient learnt from 1
(``"auto"``), a gradient step per env step) with 10,000 env steps of uniformly random actions first
(``learning_starts``), on the CPU. The variants (``comparison.mujoco_training.VARIANT_SETTINGS``):

- ``uniform``: SB3's ``ReplayBuffer``, SB3's own SAC training step.
- ``per``: ``PrioritizedReplayBuffer(alpha=0.6, beta_start=0.4, beta_end=1.0, beta_anneal_steps="auto")`` and
  ``sb3_per.PER()``: Schaul et al.'s alpha and beta, beta reaching 1 at the end of the run, priority ``(|TD error| +
  1e-6) ** alpha`` (the TD errors of the twin critics averaged), IS weights divided by the largest any stored
  transition could get.
- ``relo``: ``PrioritizedReplayBuffer(alpha=0.5, epsilon=1e-5, weight_normalization="batch", beta_start=0.4,
  beta_end=1.0, beta_anneal_steps="auto")`` and ``sb3_per.ReLo()``: the ReLo authors' SAC settings.
- ``la3p``: ``PrioritizedReplayBuffer(alpha=0.4, inverse_sampling=True, beta_anneal_steps="auto")`` and
  ``sb3_per.LA3P(min_priority=0.2)``: the LA3P authors' LAP exponent 0.4, prioritized share 0.5, larger of the twin
  critics' errors, and their priority floor (also LAP's and PAL's loss threshold) 1 on rewards scaled by 5, that is
  0.2 on the task's own rewards (``mujoco_training.LA3P_MIN_PRIORITY``).

Deviations from the papers:

- Every variant shares the RL Zoo's SAC settings above (each paper's baseline has its own: the LA3P authors' SAC
  takes 25,000 random steps first, a fixed entropy coefficient 0.2, and multiplies every reward by 5 before it is
  stored, which no variant here does), and runs 300,000 env steps (``total_steps``; the papers' runs: 1M) with seeds
  0-4.
- ReLo: beta anneals linearly over the run (the authors' SAC compounds a per-step increase that reaches about 0.99
  within 3,000 steps); SAC's critic loss keeps SB3's factor 0.5; the authors ran the DeepMind Control Suite, not
  Gymnasium's MuJoCo tasks (see ``sb3_per.ReLo``).
- LA3P: ``budget="matched"`` (``LA3P()``'s default, this library's): one critic and one actor step per env step on
  batches of 256, as uniform SAC makes, where the authors' schedule (``budget="paper"``) makes two of each (both on
  the uniform half, then the critic on the prioritized half and the actor on the inverse-priority one); the smaller
  deviations are on ``docs/methods/la3p.md``. Its buffer's beta is unused (PAL's and LAP's losses stand in for
  importance weights).
- PER: the paper's settings for DQN, on SAC as ``sb3_per.PER`` trains it (see there).
- An evaluation of ``eval_episodes`` episodes of the deterministic policy every ``eval_freq`` steps, on the reset
  seeds ``EVAL_SEED + i`` (the same for every run), on the task's own reward; step 0 is the untrained policy.
- A resumed run is not bit-identical to an uninterrupted one: the training episode under way at the checkpoint is
  dropped (the env is reset, its partial return never logged), and the env, the replay sampling and the policy's
  noise continue from generators seeded anew at the resume (``comparison.checkpoints.resume_seed``). Each
  resume is recorded in the run's ``resumed.json``.

Layout of the output folder (``docs/results/mujoco`` by default)::

    runs/<task>_<variant>_s<seed>/   config.json; settings.json (SAC's and the variant's settings, the buffer's
                                     defaults, the packages' builds: a resume refuses other ones, the report names
                                     runs of other ones);
                                     progress.csv (SB3's logger, a row per evaluation); checkpoint/
                                     (model.zip, replay_buffer.pkl, rows.csv, progress.csv, state.json: every
                                     checkpoint_freq steps, replaced whole, not committed); resumed.json (the steps
                                     the run resumed from, if any); evaluations.csv (written last: then the checkpoint
                                     is deleted)
    returns.csv, summary.md, learning_curves.png   the report

This module only defines the study (it loads without torch, so that the command line checks its arguments at once):
the training is in ``comparison.mujoco_training``, the report in ``comparison.mujoco_report``.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
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
class MuJoCoTask:
    """
    One task of the study.

    :param env_id: its Gymnasium id
    :param reward_noise_std: standard deviation of the Gaussian noise added to each training reward (0: none)
    :param variants: the variants that the default plan runs on it
    """

    env_id: str
    reward_noise_std: float = 0.0
    variants: tuple[str, ...] = ("uniform", "per", "relo", "la3p")

    @property
    def noisy(self) -> bool:
        """Whether noise is added to the task's training rewards."""
        return self.reward_noise_std > 0.0


#: The tasks, by the name runs use. ``hopper_noisy`` is no published task; LA3P is left out of its default plan (five
#: more runs of 90 minutes), not out of reach (``--variants``).
TASKS: dict[str, MuJoCoTask] = {
    "hopper": MuJoCoTask("Hopper-v5"),
    "halfcheetah": MuJoCoTask("HalfCheetah-v5"),
    "walker": MuJoCoTask("Walker2d-v5"),
    "hopper_noisy": MuJoCoTask("Hopper-v5", reward_noise_std=1.0, variants=("uniform", "per", "relo")),
}
#: The variants, in the order each seed and task runs them (their settings: ``comparison.mujoco_training``).
VARIANTS = ("uniform", "per", "relo", "la3p")
#: The tasks of the default plan.
STUDY_TASKS = ("hopper", "halfcheetah", "hopper_noisy")
#: Reset seed of the first evaluation episode; episode ``i`` uses ``EVAL_SEED + i``, the same for every run.
EVAL_SEED = 10**6
DEFAULT_TOTAL_STEPS = 300_000
DEFAULT_EVAL_FREQ = 10_000
DEFAULT_LEARNING_STARTS = 10_000

EVALUATIONS_FILE = "evaluations.csv"
#: A run's record of the settings it trained with (``comparison.mujoco_training.recorded_settings``).
SETTINGS_FILE = "settings.json"
#: Columns of a run's ``evaluations.csv``: one row per evaluation step (0, ``eval_freq``, ..., ``total_steps``).
EVALUATION_COLUMNS: tuple[str, ...] = (
    "task",
    "variant",
    "seed",
    "step",
    "eval_return_mean",
    "eval_return_std",
    "eval_episodes",
    "train_return_mean",
    "elapsed_s",
)
#: The columns that must be finite in every row (``train_return_mean`` is NaN where no training episode ended).
FINITE_COLUMNS = ("step", "eval_return_mean", "eval_return_std", "eval_episodes", "elapsed_s")
RESULT_COLUMNS = ResultColumns(EVALUATION_COLUMNS, FINITE_COLUMNS, episodes="eval_episodes")


@dataclass(frozen=True)
class MuJoCoConfig(JsonConfig):
    """
    One run of the study: everything that determines it.

    :param task: a key of ``TASKS``
    :param variant: one of ``VARIANTS``
    :param seed: seed of the model, the training env and the replay sampling
    :param total_steps: env steps to train for
    :param eval_freq: env steps between evaluations; divides ``total_steps``
    :param eval_episodes: episodes per evaluation, >= 1
    :param learning_starts: env steps of uniformly random actions stored before the first gradient step
    :param checkpoint_freq: env steps between checkpoints, a multiple of ``eval_freq`` (none at ``total_steps``: the
        run then writes its results)
    :param buffer_size: replay capacity
    :param reward_noise_std: the task's reward noise, ``TASKS[task].reward_noise_std`` (filled in when None; another
        value raises), kept so that ``config.json`` records it
    """

    task: str = "hopper"
    variant: str = "uniform"
    seed: int = 0
    total_steps: int = DEFAULT_TOTAL_STEPS
    eval_freq: int = DEFAULT_EVAL_FREQ
    eval_episodes: int = 10
    learning_starts: int = DEFAULT_LEARNING_STARTS
    checkpoint_freq: int = 50_000
    buffer_size: int = 1_000_000
    reward_noise_std: float | None = None

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {sorted(TASKS)}, got {self.task!r}")
        noise = TASKS[self.task].reward_noise_std
        if self.reward_noise_std is None:
            object.__setattr__(self, "reward_noise_std", noise)
        elif self.reward_noise_std != noise:
            raise ValueError(f"reward_noise_std must be {self.task}'s {noise}, got {self.reward_noise_std!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {list(VARIANTS)}, got {self.variant!r}")
        positive = ("total_steps", "eval_freq", "eval_episodes", "checkpoint_freq", "buffer_size")
        check_integer_fields(self, positive, minimum=1)
        check_integer_fields(self, ("seed", "learning_starts"), minimum=0)
        if self.total_steps % self.eval_freq:
            raise ValueError(f"eval_freq={self.eval_freq!r} must divide total_steps={self.total_steps!r}")
        if self.checkpoint_freq % self.eval_freq:
            raise ValueError(
                f"checkpoint_freq must be a multiple of eval_freq={self.eval_freq!r}, got {self.checkpoint_freq!r}"
            )
        if self.learning_starts >= self.total_steps:
            raise ValueError(
                f"learning_starts must be below total_steps={self.total_steps!r}, got {self.learning_starts!r}"
            )

    @property
    def run_name(self) -> str:
        """Name of the run's folder, e.g. ``hopper_per_s3``."""
        return f"{self.task}_{self.variant}_s{self.seed}"

    def evaluation_steps(self, until: int | None = None) -> list[int]:
        """The steps ``evaluations.csv`` holds a row for: 0, ``eval_freq``, ..., ``until`` (``total_steps``)."""
        return list(range(0, (self.total_steps if until is None else until) + 1, self.eval_freq))


def check_evaluations(rows: pd.DataFrame, config: MuJoCoConfig, source: Path | str, until: int | None = None) -> None:
    """
    Check that ``rows`` are ``config``'s evaluations up to step ``until`` (``total_steps``): the columns
    ``EVALUATION_COLUMNS``, one row per evaluation step in order, that task, variant and seed, the episodes asked for,
    and finite values in ``FINITE_COLUMNS`` (``comparison.study.check_result_rows``).

    :raises ValueError: naming ``source`` and what is wrong
    """
    run = {"task": config.task, "variant": config.variant, "seed": config.seed}
    check_result_rows(rows, RESULT_COLUMNS, run, config.evaluation_steps(until), config.eval_episodes, source)


def differing_settings(saved: Any, current: Any, prefix: str = "") -> list[str]:
    """The dotted keys (e.g. ``sac.replay_buffer_kwargs.alpha``) at which two JSON records of settings differ."""
    if isinstance(saved, dict) and isinstance(current, dict):
        keys = sorted(set(saved) | set(current))
        return [
            key for name in keys for key in differing_settings(saved.get(name), current.get(name), prefix + name + ".")
        ]
    return [] if saved == current else [prefix.rstrip(".") or "(the whole record)"]


def finished_evaluations(config: MuJoCoConfig, run_dir: Path) -> pd.DataFrame | None:
    """
    The rows of ``config``'s run in ``run_dir`` if it has finished, None if not (no folder, or one that an
    interrupted attempt left: no ``evaluations.csv``, or one that fails ``check_evaluations``). A checkpoint never
    counts: only ``evaluations.csv`` does, which the run writes last.

    :raises ValueError: naming the file, if ``run_dir`` holds another config
    """
    return finished_result_rows(config, run_dir, EVALUATIONS_FILE, check_evaluations)


def plan_runs(
    seeds: Iterable[int],
    tasks: Iterable[str] = STUDY_TASKS,
    variants: Iterable[str] | None = None,
    **settings: Any,
) -> list[MuJoCoConfig]:
    """
    One config per (seed, task, variant), seeds outermost, so that a partial study stays paired; the tasks with
    reward noise after all the others.

    :param seeds: the seeds
    :param tasks: keys of ``TASKS``
    :param variants: the variants of every task (None: each task's own, ``MuJoCoTask.variants``)
    :param settings: further ``MuJoCoConfig`` fields (e.g. ``total_steps``)
    """
    tasks = list(tasks)
    chosen = None if variants is None else list(variants)
    configs = [
        MuJoCoConfig(task=task, variant=variant, seed=seed, **settings)
        for seed in seeds
        for task in tasks
        for variant in (TASKS[task].variants if chosen is None else chosen)
    ]
    return sorted(configs, key=lambda config: TASKS[config.task].noisy)  # stable: seed-major within each part


def steps_argument(text: str) -> int:
    """An argparse type for ``--steps``: a multiple of ``DEFAULT_EVAL_FREQ`` above ``DEFAULT_LEARNING_STARTS``."""
    try:
        steps = int(text)
    except ValueError:
        steps = -1
    if steps <= DEFAULT_LEARNING_STARTS or steps % DEFAULT_EVAL_FREQ:
        raise argparse.ArgumentTypeError(
            f"must be a multiple of the evaluation interval {DEFAULT_EVAL_FREQ} above learning_starts "
            f"{DEFAULT_LEARNING_STARTS}, got {text!r}"
        )
    return steps


class MuJoCoStudy:
    """The MuJoCo study as ``comparison.study.Study`` (see this module's docstring)."""

    name = "mujoco"

    def plan(self, seeds: Sequence[int], **options: Any) -> list[MuJoCoConfig]:
        """``plan_runs(seeds, **options)``."""
        return plan_runs(seeds, **options)

    def train(self, config: MuJoCoConfig, run_dir: Path) -> None:
        """Train (or resume) ``config``'s run into ``run_dir`` (``comparison.mujoco_training.train_run``)."""
        from comparison.mujoco_training import train_run  # torch and MuJoCo only when training

        train_run(config, run_dir)

    def finished(self, config: MuJoCoConfig, run_dir: Path) -> bool:
        """Whether ``run_dir`` holds ``config``'s finished run (``finished_evaluations``)."""
        return finished_evaluations(config, run_dir) is not None

    def report(self, configs: Sequence[MuJoCoConfig], out_dir: Path, command: str) -> Path:
        """Write the report (``comparison.mujoco_report.write_report``); return the summary's path."""
        from comparison.mujoco_report import write_report  # matplotlib and SciPy only when reporting

        return write_report(configs, out_dir, command)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--tasks``, ``--variants`` and ``--steps``."""
        parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(STUDY_TASKS))
        parser.add_argument(
            "--variants", nargs="+", choices=list(VARIANTS), default=None, help="default: each task's own"
        )
        parser.add_argument("--steps", type=steps_argument, default=DEFAULT_TOTAL_STEPS, help="env steps per run")

    def plan_options(self, args: argparse.Namespace) -> dict[str, Any]:
        """The tasks, the variants and ``total_steps`` of the parsed arguments."""
        return {"tasks": args.tasks, "variants": args.variants, "total_steps": args.steps}

"""
The training of the MuJoCo study's runs (``comparison/mujoco.py`` defines the study and its settings): the training
env, ``sb3_per.SAC`` with each variant's replay, the evaluations, and the checkpoints a run resumes from.

A run's folder, while it trains: ``config.json`` first; SB3's ``progress.csv`` (a row per evaluation); every
``checkpoint_freq`` steps a checkpoint (``comparison.checkpoints``); at the end ``evaluations.csv``, after which the
checkpoint is deleted.
"""

from __future__ import annotations

import functools
import importlib.metadata
import inspect
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecEnv

from comparison import checkpoints
from comparison.checkpoints import PROGRESS_FILE, joined, read_progress, remove_checkpoints
from comparison.experiment import write_csv_atomically, write_text_atomically
from comparison.minatar import RewardNoise
from comparison.mujoco import (
    EVAL_SEED,
    EVALUATION_COLUMNS,
    EVALUATIONS_FILE,
    SETTINGS_FILE,
    TASKS,
    MuJoCoConfig,
    check_evaluations,
    differing_settings,
)
from comparison.study import holds_config, restart_run_dir
from comparison.study_training import play_episodes
from sb3_per import LA3P, PER, SAC, PrioritizedReplayBuffer, ReLo

#: The packages whose versions a run records: those that simulate the task and train the model.
PACKAGES = ("gymnasium", "mujoco", "numpy", "stable_baselines3", "torch")

#: LA3P's priority floor and loss threshold on the task's own rewards: the authors' 1 on rewards they scale by 5
#: (``reward_scale`` in their SAC's ``main.py``), so the same threshold against the TD errors of unscaled rewards.
LA3P_MIN_PRIORITY = 1.0 / 5.0

#: Each variant's keyword arguments of ``sb3_per.SAC`` (made fresh for each run: SAC gives its buffer's its gamma).
VARIANT_SETTINGS: dict[str, Callable[[], dict[str, Any]]] = {
    "uniform": dict,
    "per": lambda: dict(
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=dict(alpha=0.6, beta_start=0.4, beta_end=1.0, beta_anneal_steps="auto"),
        replay_scheme=PER(),
    ),
    "relo": lambda: dict(
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=dict(
            alpha=0.5,
            epsilon=1e-5,
            weight_normalization="batch",
            beta_start=0.4,
            beta_end=1.0,
            beta_anneal_steps="auto",
        ),
        replay_scheme=ReLo(),
    ),
    "la3p": lambda: dict(
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=dict(alpha=0.4, inverse_sampling=True, beta_anneal_steps="auto"),
        replay_scheme=LA3P(min_priority=LA3P_MIN_PRIORITY),
    ),
}


def make_training_env(config: MuJoCoConfig) -> VecEnv:
    """
    ``config``'s training env: a VecEnv of one task env, seeded, SB3's ``Monitor`` recording the task's own returns,
    and outside it the task's reward noise, if any.
    """
    task = TASKS[config.task]
    if not task.noisy:
        return make_vec_env(task.env_id, n_envs=1, seed=config.seed)
    add_noise = functools.partial(RewardNoise, std=task.reward_noise_std)
    return make_vec_env(task.env_id, n_envs=1, seed=config.seed, wrapper_class=add_noise)


def model_settings(config: MuJoCoConfig) -> dict[str, Any]:
    """The keyword arguments of ``sb3_per.SAC`` besides the policy and env: the RL Zoo's MuJoCo settings and
    ``config``'s variant, on the CPU."""
    return dict(
        learning_rate=3e-4,
        buffer_size=config.buffer_size,
        learning_starts=config.learning_starts,
        batch_size=256,
        tau=0.005,
        gamma=0.99,
        train_freq=1,
        gradient_steps=1,
        ent_coef="auto",
        policy_kwargs=dict(net_arch=[256, 256]),
        seed=config.seed,
        device="cpu",
        **VARIANT_SETTINGS[config.variant](),
    )


def make_model(config: MuJoCoConfig, env: VecEnv) -> SAC:
    """``sb3_per.SAC`` with ``model_settings(config)`` on ``env``."""
    return SAC("MlpPolicy", env, **model_settings(config))


def as_json(value: Any) -> Any:
    """``value`` as JSON holds it: a class by its qualified name, any other object but a number, string or
    container by its ``repr`` (a replay scheme's repr names all its settings), a tuple as a list."""
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, dict):
        return {str(key): as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def keyword_defaults(cls: type) -> dict[str, Any]:
    """The defaults of ``cls``'s constructor: what its instances take where their keyword arguments are silent."""
    parameters = inspect.signature(cls).parameters.values()
    return {parameter.name: parameter.default for parameter in parameters if parameter.default is not parameter.empty}


def installed_version(package: str) -> str:
    """``package``'s installed version (as ``importlib.metadata`` gives it, e.g. ``2.13.0+cpu``), or ``"absent"``."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def recorded_settings(config: MuJoCoConfig) -> dict[str, Any]:
    """
    What a run's ``settings.json`` holds (``as_json``): ``model_settings``, the defaults of its replay buffer's
    constructor (which its ``replay_buffer_kwargs`` leave in force), and the versions of the packages that simulate
    the task and train the model (``PACKAGES``, the exact build: a CUDA build of torch differs from a CPU one).
    sb3_per's own code is not in it: the queue's commit of each run names the commit that trained it.
    """
    settings = model_settings(config)
    return {
        "sac": as_json(settings),
        "buffer_defaults": as_json(keyword_defaults(settings.get("replay_buffer_class", ReplayBuffer))),
        "packages": {name: installed_version(name) for name in PACKAGES},
    }


def check_settings(config: MuJoCoConfig, run_dir: Path) -> None:
    """
    :raises ValueError: naming the file and what differs, unless ``run_dir``'s ``settings.json`` records
        ``recorded_settings(config)``
    """
    path = Path(run_dir) / SETTINGS_FILE
    try:
        saved = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} cannot be read ({error})") from None
    differing = differing_settings(saved, recorded_settings(config))
    if differing:
        raise ValueError(f"{path} records other settings than this code's: {', '.join(differing)}")


def evaluation_returns(model: Any, env: gym.Env, episodes: int) -> list[float]:
    """
    The return of each of ``episodes`` episodes of ``model``'s deterministic policy on ``env``, episode ``i`` reset
    with the seed ``EVAL_SEED + i`` (the tasks' time limit ends every episode).

    :param model: anything with SB3's ``predict``
    :param env: one env (not vectorized), the task's own
    :param episodes: how many episodes
    """
    return [outcome.total for outcome in play_episodes(model, env, range(EVAL_SEED, EVAL_SEED + episodes))]


@dataclass
class RunStart:
    """
    Where a run starts: nothing done, or what its checkpoint holds.

    :param rows: the evaluation rows so far
    :param progress: SB3's logged rows so far
    :param elapsed_s: seconds trained so far
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    progress: pd.DataFrame = field(default_factory=pd.DataFrame)
    elapsed_s: float = 0.0


class EvaluationLog(BaseCallback):
    """
    At step 0 and every ``eval_freq`` steps, evaluates the policy into a row of ``EVALUATION_COLUMNS`` and dumps SB3's
    logger; every ``checkpoint_freq`` steps (between 0 and ``total_steps``) saves a checkpoint. Both happen at the
    start of a rollout, once the step's transition is stored and trained on, so that a checkpoint is the whole state of
    the run there; ``record_due`` does them after ``learn`` for the last step. Keeps the training episodes' returns
    (the task's own reward: SB3's ``Monitor`` sits inside the reward noise).

    :param config: the run
    :param run_dir: its folder
    :param eval_env: the env of the evaluations, the task's own
    :param start: where the run starts
    """

    model: SAC  # what train_run gives it

    def __init__(self, config: MuJoCoConfig, run_dir: Path, eval_env: gym.Env, start: RunStart) -> None:
        super().__init__()
        self.config, self.run_dir, self.eval_env = config, run_dir, eval_env
        self.rows = list(start.rows)
        self.progress_before = start.progress
        self.elapsed_before = start.elapsed_s
        self._started = time.monotonic()
        self._since_last: list[float] = []

    def elapsed_s(self) -> float:
        """Seconds the run has trained, over all its attempts up to its checkpoint and this one."""
        return self.elapsed_before + time.monotonic() - self._started

    def progress(self) -> pd.DataFrame:
        """SB3's logged rows of the whole run so far: the checkpoint's, then this attempt's."""
        return joined(self.progress_before, read_progress(self.run_dir / PROGRESS_FILE))

    def record_due(self) -> None:
        """Evaluate (and save a checkpoint) if the model's step is due one and not yet evaluated."""
        step = self.model.num_timesteps
        if step % self.config.eval_freq or (self.rows and self.rows[-1]["step"] >= step):
            return
        self._evaluate(step)
        if 0 < step < self.config.total_steps and step % self.config.checkpoint_freq == 0:
            save_checkpoint(self.model, self)

    def _evaluate(self, step: int) -> None:
        returns = evaluation_returns(self.model, self.eval_env, self.config.eval_episodes)
        train_return = float(np.mean(self._since_last)) if self._since_last else math.nan
        self.rows.append(
            {
                "task": self.config.task,
                "variant": self.config.variant,
                "seed": self.config.seed,
                "step": step,
                "eval_return_mean": float(np.mean(returns)),
                "eval_return_std": float(np.std(returns)),
                "eval_episodes": len(returns),
                "train_return_mean": train_return,
                "elapsed_s": self.elapsed_s(),
            }
        )
        self._since_last = []
        self.logger.record("time/total_timesteps", step)
        self.logger.record("time/elapsed_s", self.rows[-1]["elapsed_s"])
        self.logger.record("eval/return_mean", self.rows[-1]["eval_return_mean"])
        self.logger.record("rollout/train_return_mean", train_return)
        self.logger.dump(step)

    def _on_rollout_start(self) -> None:
        self.record_due()

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
            if done:
                self._since_last.append(float(info["episode"]["r"]))
        return True


def save_checkpoint(model: SAC, log: EvaluationLog) -> None:
    """
    Save the run's state into ``checkpoint/`` of its folder (``comparison.checkpoints.save_checkpoint``): the model,
    its replay buffer, the evaluation rows and SB3's logged rows so far, the step and the seconds trained.
    """
    rows = pd.DataFrame(log.rows, columns=list(EVALUATION_COLUMNS))
    checkpoints.save_checkpoint(model, log.run_dir, rows, log.progress(), {"elapsed_s": log.elapsed_s()})


def fresh_start(config: MuJoCoConfig, run_dir: Path) -> tuple[SAC, RunStart]:
    """A new model for ``config``'s run, in ``run_dir`` emptied of what an attempt left and holding its config and
    its ``settings.json``."""
    restart_run_dir(config, run_dir)
    write_text_atomically(json.dumps(recorded_settings(config), indent=2, sort_keys=True), run_dir / SETTINGS_FILE)
    return make_model(config, make_training_env(config)), RunStart()


def resumed_start(config: MuJoCoConfig, run_dir: Path, checkpoint: Path) -> tuple[SAC, RunStart]:
    """
    The model and state of ``config``'s run as its ``checkpoint`` holds them, on a new training env
    (``comparison.checkpoints.load_checkpoint``).

    :raises ValueError: the run's ``settings.json`` records other settings than this code's (``check_settings``), or
        the checkpoint's rows are not the run's up to its step
    """
    check_settings(config, run_dir)
    env = make_training_env(config)
    model, saved = checkpoints.load_checkpoint(
        checkpoint, run_dir, lambda path: SAC.load(path, env=env, device="cpu"), config.seed
    )
    check_evaluations(saved.rows, config, checkpoint / checkpoints.ROWS_FILE, until=saved.step)
    return model, RunStart(saved.rows.to_dict("records"), saved.progress, float(saved.state["elapsed_s"]))


def train_run(config: MuJoCoConfig, run_dir: Path) -> pd.DataFrame:
    """
    Train one run into ``run_dir``, from its checkpoint if it holds one (and ``config.json`` of ``config``), else
    from scratch: ``config.json``, ``progress.csv``, checkpoints, then ``evaluations.csv``, then the checkpoint is
    deleted.

    :param config: the run
    :param run_dir: its folder
    :return: its ``evaluations.csv`` rows
    :raises ValueError: ``run_dir`` holds another config (a checkpoint that cannot be read is deleted and the run
        starts from its first step: ``comparison.checkpoints.resumed_or_none``)
    """
    run_dir = Path(run_dir)
    resume = functools.partial(resumed_start, config, run_dir)
    resumed = checkpoints.resumed_or_none(run_dir, resume) if holds_config(config, run_dir) else None
    model, start = fresh_start(config, run_dir) if resumed is None else resumed
    model.set_logger(configure(str(run_dir), ["csv"]))
    log = EvaluationLog(config, run_dir, gym.make(TASKS[config.task].env_id), start)
    remaining = config.total_steps - model.num_timesteps
    model.learn(remaining, callback=log, log_interval=None, reset_num_timesteps=False)  # type: ignore[arg-type]
    log.record_due()
    model.logger.close()
    rows = pd.DataFrame(log.rows, columns=list(EVALUATION_COLUMNS))
    check_evaluations(rows, config, run_dir / EVALUATIONS_FILE)
    write_csv_atomically(log.progress(), run_dir / PROGRESS_FILE)
    write_csv_atomically(rows, run_dir / EVALUATIONS_FILE)
    remove_checkpoints(run_dir)
    return rows

"""
The training of the goal-conditioned study's runs (``comparison/her.py`` defines the study and its settings): the
envs, ``sb3_per.SAC`` or ``sb3_per.DQN`` with each variant's HER buffer, and the evaluations of success.

A run's folder, while it trains: ``config.json`` first; SB3's ``progress.csv`` (a row per evaluation); at the end
``evaluations.csv``. A run is short (minutes), so one that an interruption left unfinished is trained again from
its start: its folder is emptied first.
"""

from __future__ import annotations

import functools
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from stable_baselines3 import HerReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import BitFlippingEnv
from stable_baselines3.common.logger import configure
from stable_baselines3.common.vec_env import VecEnv, VecNormalize

from comparison.experiment import write_csv_atomically
from comparison.her import (
    BIT_FLIPPING_ID,
    EVAL_SEED,
    EVALUATION_COLUMNS,
    EVALUATIONS_FILE,
    N_BITS,
    TASKS,
    HerConfig,
    check_evaluations,
)
from comparison.study import restart_run_dir
from comparison.study_training import play_episodes
from sb3_per import DQN, PER, SAC, PrioritizedHerReplayBuffer

#: HER's settings of each algorithm's task: the RL Zoo's for FetchReach (SAC), SB3's HER test's for bit flipping (DQN).
HER_SETTINGS: dict[str, dict[str, Any]] = {
    "sac": dict(n_sampled_goal=4, goal_selection_strategy="future"),
    "dqn": dict(n_sampled_goal=5, goal_selection_strategy="future"),
}
#: SAC's discount on FetchReach, and its ``VecNormalize``'s (the RL Zoo's ``normalize: True`` takes the model's).
SAC_GAMMA = 0.95
#: PER's settings of ``per_her``'s buffer: Schaul et al.'s alpha and beta, beta reaching 1 at the end of the run.
PER_SETTINGS: dict[str, Any] = dict(alpha=0.6, beta_start=0.4, beta_end=1.0, beta_anneal_steps="auto")


def uniform_her(algorithm: str) -> dict[str, Any]:
    """``her``'s keyword arguments of ``algorithm``'s model: SB3's ``HerReplayBuffer``, SB3's own training step."""
    return dict(replay_buffer_class=HerReplayBuffer, replay_buffer_kwargs=dict(HER_SETTINGS[algorithm]))


def prioritized_her(algorithm: str) -> dict[str, Any]:
    """``per_her``'s keyword arguments of ``algorithm``'s model: ``PrioritizedHerReplayBuffer`` and ``PER()``."""
    return dict(
        replay_buffer_class=PrioritizedHerReplayBuffer,
        replay_buffer_kwargs={**HER_SETTINGS[algorithm], **PER_SETTINGS},
        replay_scheme=PER(),
    )


#: Each variant's keyword arguments of the model, by algorithm (made fresh for each run).
VARIANT_SETTINGS: dict[str, Callable[[str], dict[str, Any]]] = {"her": uniform_her, "per_her": prioritized_her}


def mujoco_joint_types_match_numpy(mujoco: Any) -> bool:
    """Whether ``mujoco``'s joint types compare equal to the NumPy integers of a model's ``jnt_type`` (mujoco 4's
    enums do not, which gymnasium-robotics 1.4's ``mujoco_utils`` counts on)."""
    hinge = mujoco.mjtJoint.mjJNT_HINGE
    return np.int32(int(hinge)) in (hinge,)


class IntegerJointTypes:
    """
    The ``mujoco`` module as gymnasium-robotics' ``mujoco_utils`` sees it where its joint types do not compare equal
    to NumPy integers (``mujoco_joint_types_match_numpy``): the module itself, but ``mjtJoint`` holds the joint types
    as plain integers, which do.

    :param mujoco: the ``mujoco`` module
    """

    def __init__(self, mujoco: Any) -> None:
        self._mujoco = mujoco
        joint_types = {name: int(value) for name, value in mujoco.mjtJoint.__members__.items()}
        self.mjtJoint = types.SimpleNamespace(**joint_types)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._mujoco, name)


def register_robotics_envs() -> None:
    """
    Register gymnasium-robotics' envs with Gymnasium (the ``robotics`` extra). With mujoco 4, whose joint types no
    longer compare equal to NumPy integers, the Fetch envs fail an assertion of gymnasium-robotics 1.4 as they reset
    (``set_joint_qpos``): its ``mujoco_utils`` is then given ``IntegerJointTypes`` in place of the ``mujoco`` module,
    which changes nothing else.
    """
    import gymnasium_robotics  # the robotics extra: only for FetchReach
    from gymnasium_robotics.utils import mujoco_utils

    if not mujoco_joint_types_match_numpy(mujoco_utils.mujoco):
        mujoco_utils.mujoco = IntegerJointTypes(mujoco_utils.mujoco)
    gym.register_envs(gymnasium_robotics)


def make_task_env(config: HerConfig) -> gym.Env:
    """One env of ``config``'s task, unseeded."""
    env_id = TASKS[config.task].env_id
    if env_id == BIT_FLIPPING_ID:
        return BitFlippingEnv(n_bits=N_BITS, continuous=False)
    register_robotics_envs()
    return gym.make(env_id)


def make_training_env(config: HerConfig) -> VecEnv:
    """
    ``config``'s training envs: a seeded VecEnv of the task's ``n_envs`` envs, each in SB3's ``Monitor``; SAC's
    (FetchReach) in a ``VecNormalize`` of observations and rewards with SAC's gamma, as the RL Zoo's
    ``normalize: True``.
    """
    task = TASKS[config.task]
    env = make_vec_env(functools.partial(make_task_env, config), n_envs=task.n_envs, seed=config.seed)
    return VecNormalize(env, gamma=SAC_GAMMA) if task.algorithm == "sac" else env


def make_model(config: HerConfig, env: VecEnv) -> SAC | DQN:
    """``config``'s model on ``env``, on the CPU: its task's algorithm and settings, its variant's buffer."""
    task = TASKS[config.task]
    variant = VARIANT_SETTINGS[config.variant](task.algorithm)
    common: dict[str, Any] = dict(
        buffer_size=config.buffer_size, learning_starts=config.learning_starts, seed=config.seed
    )
    if task.algorithm == "sac":
        return SAC(
            "MultiInputPolicy",
            env,
            learning_rate=1e-3,
            batch_size=256,
            gamma=SAC_GAMMA,
            ent_coef="auto",
            policy_kwargs=dict(net_arch=[64, 64]),
            device="cpu",
            **common,
            **variant,
        )
    return DQN(
        "MultiInputPolicy",
        env,
        learning_rate=2e-3,
        batch_size=32,
        train_freq=1,
        gradient_steps=task.n_envs,
        exploration_final_eps=0.02,
        target_update_interval=100,
        device="cpu",
        **common,
        **variant,
    )


def observation_normalizer(model: SAC | DQN) -> Callable[[Any], Any] | None:
    """What the evaluated policy sees of an observation: normalized as the training env's ``VecNormalize`` does
    (None without one)."""
    normalizer = model.get_vec_normalize_env()
    return None if normalizer is None else normalizer.normalize_obs


class SuccessLog(BaseCallback):
    """
    At step 0 and every ``eval_freq`` env steps, evaluates the policy into a row of ``EVALUATION_COLUMNS`` and dumps
    SB3's logger there, at the start of a rollout (once the step's transitions are stored and trained on);
    ``record_due`` evaluates the last step after ``learn``.

    :param config: the run
    :param eval_env: the env of the evaluations, the task's own
    """

    model: SAC | DQN  # what train_run gives it

    def __init__(self, config: HerConfig, eval_env: gym.Env) -> None:
        super().__init__()
        self.config, self.eval_env = config, eval_env
        self.rows: list[dict[str, Any]] = []
        self._started = time.monotonic()

    def record_due(self) -> None:
        """Evaluate if the model's step is due an evaluation and not yet evaluated."""
        step = self.model.num_timesteps
        if step % self.config.eval_freq == 0 and not (self.rows and self.rows[-1]["step"] >= step):
            self._evaluate(step)

    def _evaluate(self, step: int) -> None:
        seeds = range(EVAL_SEED, EVAL_SEED + self.config.eval_episodes)
        outcomes = play_episodes(self.model, self.eval_env, seeds, observation_normalizer(self.model))
        row = {
            "task": self.config.task,
            "variant": self.config.variant,
            "seed": self.config.seed,
            "step": step,
            "success_rate": float(np.mean([bool(outcome.info["is_success"]) for outcome in outcomes])),
            "mean_return": float(np.mean([outcome.total for outcome in outcomes])),
            "n_episodes": len(outcomes),
            "elapsed_s": time.monotonic() - self._started,
        }
        self.rows.append(row)
        self.logger.record("time/total_timesteps", step)
        self.logger.record("time/elapsed_s", row["elapsed_s"])
        self.logger.record("eval/success_rate", row["success_rate"])
        self.logger.record("eval/mean_return", row["mean_return"])
        self.logger.dump(step)

    def _on_rollout_start(self) -> None:
        self.record_due()

    def _on_step(self) -> bool:
        return True


def train_run(config: HerConfig, run_dir: Path) -> pd.DataFrame:
    """
    Train one run into ``run_dir`` from its start (emptying the folder an interrupted attempt left):
    ``config.json``, ``progress.csv``, then ``evaluations.csv``.

    :param config: the run
    :param run_dir: its folder
    :return: its ``evaluations.csv`` rows
    :raises ValueError: ``run_dir`` holds another config
    """
    run_dir = Path(run_dir)
    restart_run_dir(config, run_dir)
    model = make_model(config, make_training_env(config))
    model.set_logger(configure(str(run_dir), ["csv"]))
    log = SuccessLog(config, make_task_env(config))
    model.learn(config.total_steps, callback=log, log_interval=None)  # type: ignore[arg-type]
    log.record_due()
    model.logger.close()
    rows = pd.DataFrame(log.rows, columns=list(EVALUATION_COLUMNS))
    check_evaluations(rows, config, run_dir / EVALUATIONS_FILE)
    write_csv_atomically(rows, run_dir / EVALUATIONS_FILE)
    return rows

"""
Deep-RL control: DQN, PER-DQN and ReLo-DQN on MinAtar Breakout and Seaquest, with the
settings of the ReLo authors' MinAtar code (github.com/shivakanthsujit/reducible-loss, ``MinAtar/examples/dqn.py``,
``per_dqn.py``, ``relo_dqn.py``, ``per_buffer.py``), where their released results show PER-DQN ahead of DQN on
Breakout and collapsing on Seaquest.

Their settings, kept here in Stable-Baselines3's terms (``sb3_per.DQN``):

- Network: conv 16 filters 3x3 stride 1, ReLU, fully connected 128, ReLU, a linear output per action
  (``MinAtarCNN`` as the features extractor, ``net_arch=[]``). Observations are 10x10xC booleans, cast to float by
  SB3's preprocessing.
- Batch 32, replay 100,000, gamma 0.99, a gradient step every frame once 5,000 frames are stored (uniformly random
  actions before), the target network copied every 1,000 updates (SB3 counts env steps: with one update per frame,
  the same).
- Centered RMSProp, learning rate 2.5e-4, squared-gradient decay 0.95, epsilon 0.01; Huber loss (mean over the
  batch); no gradient clipping (``max_grad_norm=inf``).
- Epsilon-greedy exploration: 1.0 at frame 5,000, linearly to 0.1 at frame 105,000, 0.1 after
  (``EpsilonSchedule``).
- MinAtar's defaults: sticky actions with probability 0.1, difficulty ramping, the full action set of 6 actions
  (their code plays ``minatar.Environment`` directly: the Gymnasium id ``MinAtar/<Game>-v0``; ``-v1`` would be the
  minimal action set), no time limit on training episodes.
- PER: proportional, alpha 0.6, priority epsilon 1e-5, new transitions at the largest priority so far (which starts
  at 1), stratified sampling, importance-sampling weights ``(N P(i)) ** -beta`` divided by the batch's largest,
  beta from 0.4 towards 1 by ``0.6 / (5,000,000 - 5,000)`` per sample (their 5M-frame schedule: at 1M frames beta
  is about 0.52, as in their runs at that point).
- Their metric: the exponential moving average (decay 0.99, starting at 0) of the training episodes' returns, read at
  fixed frames (``train_return_ema``).

Beyond their tasks, ``breakout_noisy``: Breakout with N(0, 1) added to every training reward (``RewardNoise``, outside
SB3's ``Monitor``, so the returns logged and the greedy evaluations are the game's own), the noisy-TV case where a
priority that follows TD errors meets noise that no network can learn. One brick is worth 1, so the noise is as large
as the game's rewards; the level is set by that, not tuned. It runs after the published tasks in the plan.

Deviations (also on the results page):

- PER's priority is theirs, ``(Huber loss + 1e-5) ** 0.6`` (``PER(priority="loss")``), not Schaul et al.'s
  ``(|TD error| + 1e-5) ** 0.6`` (``sb3_per``'s default); ReLo-DQN is ``sb3_per.ReLo`` (``relu(Huber_online -
  Huber_target)``, the same buffer settings).
- Seeds 0-4 (theirs 1-5; the generators differ anyway). Their replay samples without replacement within a batch,
  SB3's with replacement (32 of up to 100,000: rarely a repeat).
- Runs stop at ``total_frames`` (1M by default: their runs went to 5M, so their figures are read at our frames).
- Added: a greedy evaluation of ``eval_episodes`` episodes at every logged frame, on fixed episode seeds (capped at
  ``EVAL_MAX_FRAMES`` frames each); their code has none.

A plug-in of ``comparison.study`` (``MinAtarStudy``, run by ``scripts/minatar_study.py``). A run saves a checkpoint
every ``CHECKPOINT_ROWS`` logged rows (``comparison.checkpoints``), from which it resumes when a stopped machine
interrupted it; a resumed run is not bit-identical to an uninterrupted one (the episode under way is dropped, the
env, the replay sampling and the exploration continue from generators seeded anew), and the report names it. Layout
of the output folder (``docs/results/minatar`` by default; small files, committed as runs finish; any machine resumes
from them)::

    runs/{game}_{variant}_s{seed}/   config.json, progress.csv (SB3's logger at each logged frame), checkpoint/ (while
                                     it trains; not committed), resumed.json (the frames it resumed from, if any),
                                     returns.csv (written last: a run is finished when it holds every row it should)
    returns.csv, summary.md, learning_curves.png   the report (``comparison.minatar_report``)
"""

from __future__ import annotations

import argparse
import functools
import math
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import VecEnv

from comparison import checkpoints
from comparison.checkpoints import PROGRESS_FILE
from comparison.experiment import write_csv_atomically
from comparison.study import (
    JsonConfig,
    ResultColumns,
    check_integer_fields,
    check_result_rows,
    finished_result_rows,
    holds_config,
    natural_number,
    positive_integer,
    restart_run_dir,
)
from comparison.study_training import play_episodes
from sb3_per import DQN, PER, ExpectedReLo, PrioritizedReplayBuffer, ReLo


@dataclass(frozen=True)
class MinAtarGame:
    """
    One game of the study.

    :param env_id: its Gymnasium id (``-v0``: the full action set, as the authors' code)
    :param reward_noise_std: standard deviation of the Gaussian noise added to each training reward (0: none); the
        returns logged and the greedy evaluations are the game's own
    """

    env_id: str
    reward_noise_std: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.reward_noise_std < math.inf:
            raise ValueError(f"reward_noise_std must be a finite number >= 0, got {self.reward_noise_std!r}")

    @property
    def noisy(self) -> bool:
        """Whether noise is added to the game's training rewards."""
        return self.reward_noise_std > 0.0


#: The games, by the name runs use. ``breakout_noisy`` is no published task: Breakout with N(0, 1) added to every
#: training reward (one brick's worth), where a priority that follows TD errors meets noise it cannot learn.
GAMES: dict[str, MinAtarGame] = {
    "breakout": MinAtarGame("MinAtar/Breakout-v0"),
    "seaquest": MinAtarGame("MinAtar/Seaquest-v0"),
    "breakout_noisy": MinAtarGame("MinAtar/Breakout-v0", reward_noise_std=1.0),
}
#: Frames a greedy evaluation episode may last before it is cut (a policy that never loses would never end).
EVAL_MAX_FRAMES = 10_000
#: Seed of the first evaluation episode; episode ``i`` uses ``EVAL_SEED + i``, the same for every run.
EVAL_SEED = 1_000_000
#: Second key of the reward noise's generator (the first is the reset seed), apart from the seeds SB3 derives.
NOISE_STREAM = 71_077_345
#: Length of the authors' runs, over which their beta anneals.
THEIR_TOTAL_FRAMES = 5_000_000

RETURNS_FILE = "returns.csv"
#: The ``info`` key of ``EventTag``'s tags, and its tags: a frame with no reward that goes on, one whose game reward is
#: not 0, and one with no reward that ends the episode
EVENT_KEY = "replay_event"
NO_EVENT, REWARD_EVENT, END_EVENT = 0, 1, 2
#: Logged rows between checkpoints (100,000 frames at the default ``log_interval``: a few minutes of a run).
CHECKPOINT_ROWS = 2
#: Columns of a run's ``returns.csv``: one row per logged frame (0, ``log_interval``, ..., ``total_frames``).
RETURN_COLUMNS: tuple[str, ...] = (
    "game",
    "variant",
    "seed",
    "frame",
    "train_episodes",
    "train_return_ema",
    "train_return_mean",
    "eval_return_mean",
    "eval_return_std",
    "eval_episodes",
)


@dataclass(frozen=True)
class DQNVariant:
    """
    How one variant of the study replays.

    :param replay_buffer_class: ``sb3_per.DQN``'s ``replay_buffer_class``: None for SB3's ``ReplayBuffer``
    :param model_kwargs: further keyword arguments of ``sb3_per.DQN`` (a replay scheme), made fresh for each run
    """

    replay_buffer_class: type[ReplayBuffer] | None
    model_kwargs: Callable[[], dict[str, Any]] = dict

    @property
    def prioritized(self) -> bool:
        """Whether the variant's buffer is prioritized (it then takes the PER settings of ``MinAtarConfig``)."""
        return self.replay_buffer_class is not None


#: The variants, in the order each seed runs them.
VARIANTS: dict[str, DQNVariant] = {
    # DQN with SB3's uniform ReplayBuffer
    "dqn": DQNVariant(None),
    # Proportional PER as the authors' PER-DQN: IS-weighted Huber loss, priorities from the Huber loss itself
    "per": DQNVariant(PrioritizedReplayBuffer, lambda: {"replay_scheme": PER(priority="loss")}),
    # ReLo-DQN: PER's sampling and weights, priorities relu(Huber online - Huber target)
    "relo": DQNVariant(PrioritizedReplayBuffer, lambda: {"replay_scheme": ReLo()}),
    # This library's ExpectedReLo: ReLo's priority at the expected target (a regressor of the signed TD errors)
    "expected_relo": DQNVariant(PrioritizedReplayBuffer, lambda: {"replay_scheme": ExpectedReLo()}),
    # The same, its priority's square root (the screen's noise-test survivor)
    "expected_relo_root": DQNVariant(
        PrioritizedReplayBuffer, lambda: {"replay_scheme": ExpectedReLo(signal="expected_root")}
    ),
}
#: The variants of the study (the command line's default): DQN, PER-DQN, ReLo-DQN, and ExpectedReLo-DQN (square-root
#: signal), whose runs are issue 46's MinAtar confirmation
STUDY_VARIANTS = ("dqn", "per", "relo", "expected_relo_root")


@dataclass(frozen=True)
class MinAtarConfig(JsonConfig):
    """
    One run of the study: everything that determines it (the defaults are the ReLo authors' settings).

    :param game: a key of ``GAMES``
    :param variant: a key of ``VARIANTS``
    :param seed: seed of the model, the training env and the replay sampling
    :param total_frames: frames (env steps) to train for
    :param log_interval: frames between logged rows (and evaluations); divides ``total_frames``
    :param eval_episodes: greedy evaluation episodes per logged row (0: none)
    :param batch_size: minibatch size
    :param buffer_size: replay capacity
    :param learning_starts: frames of uniformly random actions stored before the first gradient step
    :param target_update_interval: frames between copies of the online network into the target network
    :param learning_rate: RMSProp's step size
    :param rmsprop_alpha: RMSProp's squared-gradient decay
    :param rmsprop_eps: RMSProp's epsilon
    :param gamma: discount factor
    :param epsilon_start: exploration rate at ``learning_starts``
    :param epsilon_end: exploration rate after ``learning_starts + epsilon_frames``
    :param epsilon_frames: frames over which the exploration rate falls, from ``learning_starts``
    :param alpha: priority exponent of the prioritized variants
    :param beta_start: importance-sampling exponent at the first sample
    :param beta_anneal_samples: samples over which beta reaches 1 (their 5M-frame runs' schedule)
    :param priority_epsilon: added to each priority's base before the exponent
    :param ema_decay: decay of the moving average of training returns
    :param reward_noise_std: the game's reward noise, ``GAMES[game].reward_noise_std`` (filled in when None; another
        value raises), kept so that ``config.json`` records it and a run made at another level never counts as this
        one's
    """

    game: str = "breakout"
    variant: str = "dqn"
    seed: int = 0
    total_frames: int = 1_000_000
    log_interval: int = 50_000
    eval_episodes: int = 10
    batch_size: int = 32
    buffer_size: int = 100_000
    learning_starts: int = 5_000
    target_update_interval: int = 1_000
    learning_rate: float = 2.5e-4
    rmsprop_alpha: float = 0.95
    rmsprop_eps: float = 0.01
    gamma: float = 0.99
    epsilon_start: float = 1.0
    epsilon_end: float = 0.1
    epsilon_frames: int = 100_000
    alpha: float = 0.6
    beta_start: float = 0.4
    beta_anneal_samples: int = THEIR_TOTAL_FRAMES - 5_000
    priority_epsilon: float = 1e-5
    ema_decay: float = 0.99
    reward_noise_std: float | None = None

    def __post_init__(self) -> None:
        if self.game not in GAMES:
            raise ValueError(f"game must be one of {sorted(GAMES)}, got {self.game!r}")
        noise = GAMES[self.game].reward_noise_std
        if self.reward_noise_std is None:
            object.__setattr__(self, "reward_noise_std", noise)
        elif self.reward_noise_std != noise:
            raise ValueError(f"reward_noise_std must be {self.game}'s {noise}, got {self.reward_noise_std!r}")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {self.variant!r}")
        positive = ("total_frames", "log_interval", "batch_size", "buffer_size", "target_update_interval")
        check_integer_fields(self, (*positive, "epsilon_frames", "beta_anneal_samples"), minimum=1)
        check_integer_fields(self, ("seed", "eval_episodes", "learning_starts"), minimum=0)
        if self.total_frames % self.log_interval:
            raise ValueError(f"log_interval={self.log_interval!r} must divide total_frames={self.total_frames!r}")
        if self.learning_starts >= self.total_frames:
            raise ValueError(
                f"learning_starts must be below total_frames={self.total_frames}, got {self.learning_starts}"
            )
        for name in ("epsilon_start", "epsilon_end", "beta_start", "ema_decay"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)!r}")
        for name in ("learning_rate", "rmsprop_eps", "alpha", "priority_epsilon"):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if not 0.0 < self.gamma <= 1.0 or not 0.0 < self.rmsprop_alpha < 1.0:
            raise ValueError(
                f"gamma must be in (0, 1] and rmsprop_alpha in (0, 1), got {self.gamma}, {self.rmsprop_alpha}"
            )

    @property
    def run_name(self) -> str:
        """Name of the run's directory, e.g. ``breakout_per_s3``."""
        return f"{self.game}_{self.variant}_s{self.seed}"

    @property
    def logged_frames(self) -> list[int]:
        """The frames ``returns.csv`` holds a row for: 0, ``log_interval``, ..., ``total_frames``."""
        return list(range(0, self.total_frames + 1, self.log_interval))


@dataclass(frozen=True)
class EpsilonSchedule:
    """
    The authors' exploration rate as SB3's schedule (a function of the progress remaining, 1 -> 0): 1 until
    ``start``, then linear to ``end`` over ``frames`` frames, then ``end``.

    :param total_frames: frames of the run (progress 0)
    :param start: frame at which the decay starts
    :param frames: frames it lasts
    :param initial: rate until ``start``
    :param end: rate after it
    """

    total_frames: int
    start: int
    frames: int
    initial: float
    end: float

    def __call__(self, progress_remaining: float) -> float:
        frame = (1.0 - progress_remaining) * self.total_frames
        fraction = min(1.0, max(0.0, (frame - self.start) / self.frames))
        return self.initial + fraction * (self.end - self.initial)


class MinAtarCNN(BaseFeaturesExtractor):
    """
    The authors' MinAtar network before its output layer: conv 16 filters 3x3 stride 1, ReLU, fully connected
    ``features_dim`` units, ReLU. Takes SB3's float observations, channels last (N, 10, 10, C).

    :param observation_space: a Box of shape (10, 10, C)
    :param features_dim: units of the hidden fully connected layer
    """

    def __init__(self, observation_space: spaces.Box, features_dim: int = 128) -> None:
        if len(observation_space.shape) != 3:
            raise ValueError(f"observation_space must be (height, width, channels), got {observation_space.shape}")
        super().__init__(observation_space, features_dim)
        height, width, channels = observation_space.shape
        self.conv = th.nn.Conv2d(channels, 16, kernel_size=3, stride=1)
        self.hidden = th.nn.Linear(16 * (height - 2) * (width - 2), features_dim)

    def forward(self, observations: th.Tensor) -> th.Tensor:
        x = th.relu(self.conv(observations.permute(0, 3, 1, 2)))
        return th.relu(self.hidden(x.flatten(start_dim=1)))


class RewardNoise(gym.Wrapper[Any, Any, Any, Any]):
    """
    Adds N(0, ``std`` ** 2) to each reward, from a generator of its own seeded at each seeded reset (so the game's own
    randomness is the same with and without the noise).

    :param env: the env
    :param std: the noise's standard deviation, > 0
    """

    def __init__(self, env: gym.Env, std: float) -> None:
        if not std > 0.0 or not math.isfinite(std):
            raise ValueError(f"std must be a positive finite number, got {std!r}")
        super().__init__(env)
        self.std = std
        self._noise = np.random.default_rng()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._noise = np.random.default_rng([seed, NOISE_STREAM])
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, float(reward) + self.std * float(self._noise.standard_normal()), terminated, truncated, info


class EventTag(gym.Wrapper[Any, Any, Any, Any]):
    """
    Tags each step in its ``info`` (``EVENT_KEY``) by what happened in it: ``REWARD_EVENT`` where the game's reward is
    not 0, else ``END_EVENT`` where the episode terminated, else ``NO_EVENT``; a tagged replay buffer
    (``tag_key=EVENT_KEY``) then reports how much of its priority mass and of its batches each kind of frame gets. It
    draws nothing and changes nothing else.
    """

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        event = REWARD_EVENT if reward != 0 else END_EVENT if terminated else NO_EVENT
        return observation, float(reward), terminated, truncated, {**info, EVENT_KEY: event}


def wrapped(env: gym.Env, wrappers: Sequence[Callable[[gym.Env], gym.Env]]) -> gym.Env:
    """``env`` inside each of ``wrappers`` in turn, the first innermost."""
    return functools.reduce(lambda inner, wrapper: wrapper(inner), wrappers, env)


def make_training_env(config: MinAtarConfig, tag_events: bool = False) -> VecEnv:
    """
    ``config``'s training env: a VecEnv of one game, seeded, SB3's ``Monitor`` recording the game's own returns, and
    outside it the game's reward noise, if any.

    :param tag_events: also tag each step by the game's own reward (``EventTag``, inside the noise)
    """
    game = GAMES[config.game]
    wrappers: list[Callable[[gym.Env], gym.Env]] = [EventTag] if tag_events else []
    if game.noisy:
        wrappers.append(functools.partial(RewardNoise, std=game.reward_noise_std))
    if not wrappers:
        return make_vec_env(game.env_id, n_envs=1, seed=config.seed)
    return make_vec_env(
        game.env_id, n_envs=1, seed=config.seed, wrapper_class=functools.partial(wrapped, wrappers=wrappers)
    )


def register_minatar() -> None:
    """Register the MinAtar ids with Gymnasium (``minatar`` is an optional extra: GPL-3.0)."""
    try:
        import minatar.gym
    except ImportError as missing:
        raise ImportError('the MinAtar study needs MinAtar: pip install -e ".[minatar]"') from missing
    if GAMES["breakout"].env_id not in gym.registry:
        minatar.gym.register_envs()
    # Gymnasium calls -v0 out of date at every make: it is the full action set, the authors' choice, on purpose.
    warnings.filterwarnings("ignore", message=r".*MinAtar/\w+-v0 is out of date", category=DeprecationWarning)


def make_model(config: MinAtarConfig, env: Any, tag_key: str | None = None) -> DQN:
    """
    ``sb3_per.DQN`` with the authors' settings for ``config`` on ``env`` (a VecEnv of one MinAtar env), on the CPU.

    :param tag_key: the ``info`` key that tags each stored transition (``EVENT_KEY`` of a ``tag_events`` env), for
        the replay telemetry; a prioritized variant's only
    :raises ValueError: a ``tag_key`` for a variant with SB3's uniform buffer
    """
    variant = VARIANTS[config.variant]
    if tag_key is not None and not variant.prioritized:
        raise ValueError(
            f"tag_key is for a prioritized variant's buffer, got tag_key={tag_key!r} for {config.variant!r}"
        )
    buffer_kwargs = (
        dict(
            alpha=config.alpha,
            beta_start=config.beta_start,
            beta_end=1.0,
            beta_anneal_steps=config.beta_anneal_samples,
            epsilon=config.priority_epsilon,
            weight_normalization="batch",
            **({} if tag_key is None else {"tag_key": tag_key}),
        )
        if variant.prioritized
        else None
    )
    model = DQN(
        "MlpPolicy",
        env,
        learning_rate=config.learning_rate,
        buffer_size=config.buffer_size,
        learning_starts=config.learning_starts,
        batch_size=config.batch_size,
        tau=1.0,
        gamma=config.gamma,
        train_freq=1,
        gradient_steps=1,
        replay_buffer_class=variant.replay_buffer_class,
        replay_buffer_kwargs=buffer_kwargs,
        target_update_interval=config.target_update_interval,
        exploration_initial_eps=config.epsilon_start,
        exploration_final_eps=config.epsilon_end,
        max_grad_norm=math.inf,
        policy_kwargs=dict(
            features_extractor_class=MinAtarCNN,
            features_extractor_kwargs=dict(features_dim=128),
            net_arch=[],
            optimizer_class=th.optim.RMSprop,
            optimizer_kwargs=dict(alpha=config.rmsprop_alpha, eps=config.rmsprop_eps, centered=True),
        ),
        seed=config.seed,
        device="cpu",
        **variant.model_kwargs(),
    )
    model.exploration_schedule = epsilon_schedule(config)
    return model


def epsilon_schedule(config: MinAtarConfig) -> EpsilonSchedule:
    """``config``'s exploration rate: SB3's linear schedule starts at frame 0, the authors' at ``learning_starts``."""
    return EpsilonSchedule(
        config.total_frames, config.learning_starts, config.epsilon_frames, config.epsilon_start, config.epsilon_end
    )


def load_model(config: MinAtarConfig, path: Path, env: VecEnv) -> DQN:
    """
    The model of ``config``'s run saved at ``path``, on ``env``, with the authors' exploration schedule (SB3's ``load``
    sets up its own linear one).
    """
    model = DQN.load(path, env=env, device="cpu")
    model.exploration_schedule = epsilon_schedule(config)
    return model


class ReturnLog(BaseCallback):
    """
    Keeps the training episodes' returns, their moving average as the authors log it, and at frame 0 and every
    ``config.log_interval`` frames a row of ``RETURN_COLUMNS`` (with a greedy evaluation); dumps SB3's logger there.
    Every ``CHECKPOINT_ROWS`` logged rows (between frame 0 and the last) it saves a checkpoint, at the start of the
    next rollout, once the frame's transition is stored and trained on, so that the checkpoint is the whole state of
    the run there.

    :param config: the run
    :param run_dir: its folder
    :param eval_env: the env of the greedy evaluations
    :param start: the checkpoint the run resumes from (None: it starts at frame 0)
    """

    def __init__(
        self, config: MinAtarConfig, run_dir: Path, eval_env: gym.Env, start: checkpoints.Checkpoint | None = None
    ) -> None:
        super().__init__()
        self.config, self.run_dir, self.eval_env = config, run_dir, eval_env
        self.rows: list[dict[str, Any]] = [] if start is None else start.rows.to_dict("records")
        self.progress_before = pd.DataFrame() if start is None else start.progress
        kept = {} if start is None else start.state
        self.episodes, self.ema = int(kept.get("train_episodes", 0)), float(kept.get("train_return_ema", 0.0))
        self._since_last: list[float] = list(kept.get("since_last_row", []))
        self.start_frame = 0 if start is None else start.step
        self._saved_at = self.start_frame
        self._started = time.monotonic()

    def progress(self) -> pd.DataFrame:
        """SB3's logged rows of the whole run so far: the checkpoint's, then this attempt's."""
        return checkpoints.joined(self.progress_before, checkpoints.read_progress(self.run_dir / PROGRESS_FILE))

    def _log_row(self) -> None:
        seeds = range(EVAL_SEED, EVAL_SEED + self.config.eval_episodes)
        episodes = play_episodes(self.model, self.eval_env, seeds, max_steps=EVAL_MAX_FRAMES)
        evaluation = [episode.total for episode in episodes]
        self.rows.append(
            {
                "game": self.config.game,
                "variant": self.config.variant,
                "seed": self.config.seed,
                "frame": self.num_timesteps,
                "train_episodes": self.episodes,
                "train_return_ema": self.ema,
                "train_return_mean": float(np.mean(self._since_last)) if self._since_last else math.nan,
                "eval_return_mean": float(np.mean(evaluation)) if evaluation else math.nan,
                "eval_return_std": float(np.std(evaluation)) if evaluation else math.nan,
                "eval_episodes": len(evaluation),
            }
        )
        self._since_last = []
        frames = self.num_timesteps - self.start_frame
        self.logger.record("time/frames_per_second", frames / (time.monotonic() - self._started))
        self.logger.record("rollout/train_return_ema", self.ema)
        self.logger.record("eval/return_mean", self.rows[-1]["eval_return_mean"])
        self.logger.dump(self.num_timesteps)

    def _on_training_start(self) -> None:
        if not self.rows:  # a resumed run has its rows up to its checkpoint
            self._log_row()

    def _on_rollout_start(self) -> None:
        frame = self.num_timesteps
        interval = CHECKPOINT_ROWS * self.config.log_interval
        if frame % interval or not self._saved_at < frame < self.config.total_frames:
            return
        state = {"train_episodes": self.episodes, "train_return_ema": self.ema, "since_last_row": self._since_last}
        rows = pd.DataFrame(self.rows, columns=list(RETURN_COLUMNS))
        checkpoints.save_checkpoint(self.model, self.run_dir, rows, self.progress(), state)
        self._saved_at = frame

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
            if done:
                episode_return = float(info["episode"]["r"])
                self.episodes += 1
                self.ema = self.config.ema_decay * self.ema + (1.0 - self.config.ema_decay) * episode_return
                self._since_last.append(episode_return)
        if self.num_timesteps % self.config.log_interval == 0:
            self._log_row()
        return True


def train_run(config: MinAtarConfig, run_dir: Path) -> pd.DataFrame:
    """
    Train one run into ``run_dir``, from its checkpoint if it holds one (and ``config.json`` of ``config``), else from
    its start (emptying the folder an interrupted attempt left): ``config.json``, ``progress.csv``, checkpoints
    (``comparison.checkpoints``), then ``returns.csv``, then the checkpoint is deleted.

    :param config: the run
    :param run_dir: its folder
    :return: its ``returns.csv`` rows
    :raises ValueError: ``run_dir`` holds another config (a checkpoint that cannot be read is deleted and the run
        starts from its first frame: ``comparison.checkpoints.resumed_or_none``)
    """
    register_minatar()
    run_dir = Path(run_dir)
    resume = functools.partial(resumed_run, config, run_dir)
    resumed = checkpoints.resumed_or_none(run_dir, resume) if holds_config(config, run_dir) else None
    start = None
    if resumed is None:
        restart_run_dir(config, run_dir)
        model = make_model(config, make_training_env(config))
    else:
        model, start = resumed
    model.set_logger(configure(str(run_dir), ["csv"]))
    log = ReturnLog(config, run_dir, gym.make(GAMES[config.game].env_id), start)
    remaining = config.total_frames - model.num_timesteps
    model.learn(remaining, callback=log, log_interval=None, reset_num_timesteps=False)  # type: ignore[arg-type]
    rows = pd.DataFrame(log.rows, columns=list(RETURN_COLUMNS))
    check_returns(rows, config, run_dir / RETURNS_FILE)
    if start is not None:  # SB3's logger wrote this attempt's rows only
        model.logger.close()
        write_csv_atomically(log.progress(), run_dir / PROGRESS_FILE)
    write_csv_atomically(rows, run_dir / RETURNS_FILE)
    checkpoints.remove_checkpoints(run_dir)
    return rows


def resumed_run(config: MinAtarConfig, run_dir: Path, checkpoint: Path) -> tuple[DQN, checkpoints.Checkpoint]:
    """
    The model of ``config``'s run as its ``checkpoint`` holds it, on a new training env, and the rest of the checkpoint
    (``comparison.checkpoints.load_checkpoint``).

    :raises ValueError: the checkpoint's rows are not the run's up to its frame
    """
    env = make_training_env(config)
    model, start = checkpoints.load_checkpoint(
        checkpoint, run_dir, lambda path: load_model(config, path, env), config.seed
    )
    check_returns(start.rows, config, checkpoint / checkpoints.ROWS_FILE, until=start.step)
    return model, start


def check_returns(rows: pd.DataFrame, config: MinAtarConfig, source: Path | str, until: int | None = None) -> None:
    """
    Check that ``rows`` are ``config``'s run up to frame ``until`` (``total_frames``: the finished run): the columns
    ``RETURN_COLUMNS``, one row per logged frame, in order, of that game, variant and seed, finite moving averages
    (and evaluations, if it makes any), and the evaluation episodes asked for (``comparison.study.check_result_rows``).

    :raises ValueError: naming ``source`` and what is wrong
    """
    finite = ("train_return_ema", "eval_return_mean") if config.eval_episodes else ("train_return_ema",)
    columns = ResultColumns(RETURN_COLUMNS, finite, "eval_episodes", labels=("game", "variant", "seed"), step="frame")
    run = {"game": config.game, "variant": config.variant, "seed": config.seed}
    frames = [frame for frame in config.logged_frames if until is None or frame <= until]
    check_result_rows(rows, columns, run, frames, config.eval_episodes, source)


def finished_returns(config: MinAtarConfig, run_dir: Path) -> pd.DataFrame | None:
    """
    The rows of ``config``'s run in ``run_dir`` if it has finished, None if not (no folder, or one that an
    interrupted attempt left: no ``returns.csv``, or one that fails ``check_returns``).

    :raises ValueError: naming the file, if ``run_dir`` holds another config
    """
    return finished_result_rows(config, run_dir, RETURNS_FILE, check_returns)


def plan_runs(
    seeds: Iterable[int], games: Iterable[str] = tuple(GAMES), variants: Iterable[str] = STUDY_VARIANTS, **settings: Any
) -> list[MinAtarConfig]:
    """
    One config per (seed, game, variant), seeds outermost, so that a partial study stays paired; the games with
    reward noise after all the others (a control that runs once the published tasks are done).

    :param seeds: the seeds
    :param games: keys of ``GAMES``
    :param variants: keys of ``VARIANTS``
    :param settings: further ``MinAtarConfig`` fields (e.g. ``total_frames``)
    :raises ValueError: a game, a variant or a setting is not valid
    """
    games, variants = list(games), list(variants)  # each is walked once per seed (per game)
    configs = [
        MinAtarConfig(game=game, variant=variant, seed=seed, **settings)
        for seed in seeds
        for game in games
        for variant in variants
    ]
    return sorted(configs, key=lambda config: GAMES[config.game].noisy)  # stable: seed-major within each part


class MinAtarStudy:
    """The MinAtar study as ``comparison.study.Study`` (see this module's docstring)."""

    name = "minatar"

    def plan(self, seeds: Sequence[int], **options: Any) -> list[MinAtarConfig]:
        """``plan_runs(seeds, **options)``."""
        return plan_runs(seeds, **options)

    def train(self, config: MinAtarConfig, run_dir: Path) -> None:
        """Train ``config``'s run into ``run_dir`` from its start (``train_run``)."""
        train_run(config, run_dir)

    def finished(self, config: MinAtarConfig, run_dir: Path) -> bool:
        """Whether ``run_dir`` holds ``config``'s finished run (``finished_returns``)."""
        return finished_returns(config, run_dir) is not None

    def report(self, configs: Sequence[MinAtarConfig], out_dir: Path, command: str) -> Path:
        """Write the report (``comparison.minatar_report.write_report``); return the summary's path."""
        from comparison.minatar_report import write_report  # matplotlib and SciPy only when reporting

        return write_report(configs, out_dir, command)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--games``, ``--variants``, ``--frames``, ``--log-interval`` and ``--eval-episodes``."""
        parser.add_argument("--games", nargs="+", choices=sorted(GAMES), default=list(GAMES))
        parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(STUDY_VARIANTS))
        parser.add_argument("--frames", type=positive_integer, default=1_000_000, help="frames per run")
        parser.add_argument("--log-interval", type=positive_integer, default=50_000, help="frames between logged rows")
        parser.add_argument("--eval-episodes", type=natural_number, default=10, help="greedy episodes per logged row")

    def plan_options(self, args: argparse.Namespace) -> dict[str, Any]:
        """The games, the variants, and the frames, log interval and evaluation episodes of every run."""
        return {
            "games": args.games,
            "variants": args.variants,
            "total_frames": args.frames,
            "log_interval": args.log_interval,
            "eval_episodes": args.eval_episodes,
        }

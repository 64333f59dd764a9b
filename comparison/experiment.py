"""
One training run of the comparison: its configuration, the policy evaluation, and the run itself.

A run trains ``sb3_per.SAC`` with one replay variant on one seed, evaluates the policy every
``eval_freq`` env steps on a fixed list of held-out episode seeds (the same for every run and
baseline, so differences between variants are not differences between episodes), and writes into
its own directory: ``config.json``, SB3's logs (``progress.csv``, and TensorBoard events if asked),
``model.zip`` if asked, ``telemetry.csv`` (where the replay's attention goes, per regime: ``comparison.telemetry``)
and last, ``evaluations.csv``, whose presence marks the run as finished.

Every variant's buffer is tagged by the env's ``info["regime"]`` (``TAG_KEY``): the uniform ones are
``sb3_per.TaggedReplayBuffer``, which samples exactly what SB3's ``ReplayBuffer`` samples, so that uniform runs
report the same telemetry as the prioritized ones and still train as SB3's SAC does.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback, CallbackList
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

import envs  # noqa: F401  (registers PairsTrading-v0)
from comparison.ablation_buffers import RewardPrioritizedReplayBuffer, TagWeightedReplayBuffer, check_reward_floor
from comparison.ablation_schemes import OnlineLossReLo
from comparison.schema import EVALUATIONS_FILE, METRIC_COLUMNS, MODEL_FILE, TELEMETRY_FILE
from comparison.study import restart_run_dir
from comparison.telemetry import telemetry_rows, telemetry_table
from envs import SUMMARY_KEYS, FlatPolicy, ZScorePolicy
from envs.price_data import price_file_sha256
from envs.regime_model import N_REGIMES
from sb3_per import (
    LA3P,
    LAP,
    PAL,
    PER,
    SAC,
    TQC,
    UPER,
    ExpectedReLo,
    ExpectedTD,
    PrioritizedBufferMixin,
    PrioritizedReplayBuffer,
    ReLo,
    TaggedReplayBuffer,
)
from sb3_per.checks import is_sampling_weight
from sb3_per.fading import check_priority_half_life
from sb3_per.priority_sampler import check_fading_weights, check_per_parameters
from sb3_per.schemes import ReplayScheme

DEFAULT_ENV_ID = "envs:PairsTrading-v0"
#: The ``info`` key every run's replay buffer tags its transitions by (the env's hidden regime).
TAG_KEY = "regime"


def _no_scheme(config: RunConfig) -> ReplayScheme | None:
    """No replay scheme of the variant's own: sb3_per's default (PER on a prioritized or tagged buffer)."""
    return None


def _no_buffer_options(config: RunConfig) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class ReplayVariant:
    """
    How one variant of the comparison replays: its buffer, its replay scheme, and the ``RunConfig`` fields they use.

    :param buffer_class: the replay buffer class
    :param fields: the ``REPLAY_FIELDS`` of ``RunConfig`` that the variant's runs depend on
    :param scheme: the ``sb3_per.SAC`` ``replay_scheme`` of a run, from its config
    :param buffer_options: what the variant sets in a prioritized buffer's ``replay_buffer_kwargs`` beyond PER's
        (``RunConfig.replay_kwargs``), from a run's config
    :param algorithm: ``sb3_per.SAC`` (default) or ``sb3_per.TQC``
    """

    buffer_class: type[ReplayBuffer]
    fields: frozenset[str] = frozenset()
    scheme: Callable[[RunConfig], ReplayScheme | None] = _no_scheme
    buffer_options: Callable[[RunConfig], dict[str, Any]] = _no_buffer_options
    algorithm: type[SAC] | type[TQC] = SAC


# The RunConfig fields that only some variants use (see ``ReplayVariant.fields``).
REPLAY_FIELDS = frozenset(
    {
        "alpha",
        "beta_start",
        "beta_end",
        "epsilon",
        "lap_alpha",
        "lap_min_priority",
        "la3p_fraction",
        "half_life",
        "regime_weights",
        "reward_floor",
        "relo_alpha",
        "relo_epsilon",
        "regressor_learning_rate",
    }
)
# What PER's priorities and IS weights use, what LAP's priorities use, and ReLo's
PER_FIELDS = frozenset({"alpha", "epsilon", "beta_start", "beta_end"})
LAP_FIELDS = frozenset({"lap_alpha", "lap_min_priority", "epsilon"})
RELO_FIELDS = frozenset({"relo_alpha", "relo_epsilon", "beta_start", "beta_end"})
# What the TD-error regressor of ExpectedTD and ExpectedReLo uses
REGRESSOR_FIELDS = frozenset({"regressor_learning_rate"})


def _lap_buffer(config: RunConfig) -> dict[str, Any]:
    """LAP's priority exponent (0.4 in the paper), not PER's."""
    return {"alpha": config.lap_alpha}


def _relo_buffer(config: RunConfig) -> dict[str, Any]:
    """ReLo's priority exponent and offset, and IS weights normalised by the batch, as its authors' SAC."""
    return {"alpha": config.relo_alpha, "epsilon": config.relo_epsilon, "weight_normalization": "batch"}


# Replay variants by name.
VARIANTS: dict[str, ReplayVariant] = {
    # SB3's uniform replay (TaggedReplayBuffer: the same samples, plus their tags)
    "uniform": ReplayVariant(TaggedReplayBuffer),
    # Schaul et al. 2016, proportional: P(i) ~ p_i ** alpha, IS-weighted critic loss
    "per": ReplayVariant(PrioritizedReplayBuffer, PER_FIELDS),
    # Schaul et al. 2016, rank-based: P(i) ~ (1 / rank(i)) ** alpha, IS-weighted critic loss
    "rank": ReplayVariant(PrioritizedReplayBuffer, PER_FIELDS, buffer_options=lambda c: {"prioritization": "rank"}),
    # Fujimoto et al. 2020: P(i) ~ max(|d_i|, kappa) ** alpha, unweighted Huber loss
    "lap": ReplayVariant(
        PrioritizedReplayBuffer,
        LAP_FIELDS,
        scheme=lambda c: LAP(min_priority=c.lap_min_priority),
        buffer_options=_lap_buffer,
    ),
    # Fujimoto et al. 2020: uniform replay with the loss whose expected gradient is LAP's
    "pal": ReplayVariant(
        TaggedReplayBuffer,
        frozenset({"lap_alpha", "lap_min_priority"}),
        scheme=lambda c: PAL(alpha=c.lap_alpha, min_priority=c.lap_min_priority),
    ),
    # Saglam et al. 2023: critic on uniform (PAL loss) + LAP-prioritized parts, actor on uniform + 1/p parts
    "la3p": ReplayVariant(
        PrioritizedReplayBuffer,
        LAP_FIELDS | {"la3p_fraction"},
        scheme=lambda c: LA3P(fraction=c.la3p_fraction, pal_alpha=c.lap_alpha, min_priority=c.lap_min_priority),
        buffer_options=lambda c: {**_lap_buffer(c), "inverse_sampling": True},
    ),
    # Proportional PER whose priorities fade: p_i * 2 ** (-age_i / half_life), age in env steps since written
    "faded": ReplayVariant(
        PrioritizedReplayBuffer,
        PER_FIELDS | {"half_life"},
        buffer_options=lambda c: {"priority_half_life": c.half_life},
    ),
    # Sujit et al. 2023: PER's sampling and IS-weighted losses (critic and actor), priorities relu(L_online - L_target)
    "relo": ReplayVariant(
        PrioritizedReplayBuffer,
        RELO_FIELDS,
        scheme=lambda c: ReLo(),
        buffer_options=_relo_buffer,
    ),
    # Panahi et al. 2024: PER with priorities |h(s, a)|, h a regressor of the signed TD errors
    "expected_td": ReplayVariant(
        PrioritizedReplayBuffer,
        PER_FIELDS | REGRESSOR_FIELDS,
        scheme=lambda c: ExpectedTD(learning_rate=c.regressor_learning_rate),
    ),
    # This library's: ReLo's priority at the expected target (ExpectedTD's regressor), ReLo's buffer settings
    "expected_relo": ReplayVariant(
        PrioritizedReplayBuffer,
        RELO_FIELDS | REGRESSOR_FIELDS,
        scheme=lambda c: ExpectedReLo(learning_rate=c.regressor_learning_rate),
        buffer_options=_relo_buffer,
    ),
    # The same, its priority's square root (a TD error's scale, not a squared one's)
    "expected_relo_root": ReplayVariant(
        PrioritizedReplayBuffer,
        RELO_FIELDS | REGRESSOR_FIELDS,
        scheme=lambda c: ExpectedReLo(signal="expected_root", learning_rate=c.regressor_learning_rate),
        buffer_options=_relo_buffer,
    ),
    # ReLo's own priority times the share of the TD error's second moment that its mean explains (a regressor of both)
    "signal_share_relo": ReplayVariant(
        PrioritizedReplayBuffer,
        RELO_FIELDS | REGRESSOR_FIELDS,
        scheme=lambda c: ExpectedReLo(signal="signal_share", learning_rate=c.regressor_learning_rate),
        buffer_options=_relo_buffer,
    ),
    # The same with ReLo's own priority times the share of the TD error that its expectation explains
    "gated_relo": ReplayVariant(
        PrioritizedReplayBuffer,
        RELO_FIELDS | REGRESSOR_FIELDS,
        scheme=lambda c: ExpectedReLo(signal="gated", learning_rate=c.regressor_learning_rate),
        buffer_options=_relo_buffer,
    ),
    # sb3-contrib's TQC with SB3's uniform replay (TaggedReplayBuffer), the reference of tqc_uper
    "tqc": ReplayVariant(TaggedReplayBuffer, algorithm=TQC),
    # Carrasco-Davis et al. 2025 on TQC: priorities 0.5 log(1 + (epistemic + target error) / aleatoric)
    "tqc_uper": ReplayVariant(PrioritizedReplayBuffer, PER_FIELDS, scheme=lambda c: UPER(), algorithm=TQC),
    # Ablations of PER (not in the presets: they answer why PER does as it does on this env)
    # PER's sampling, SB3's unweighted loss: beta 0 throughout
    "per_no_is": ReplayVariant(
        PrioritizedReplayBuffer,
        frozenset({"alpha", "epsilon"}),
        buffer_options=lambda c: {"beta_start": 0.0, "beta_end": 0.0},
    ),
    # No TD priorities: each regime sampled in proportion to RunConfig.regime_weights, uniformly within it
    "regime_weighted": ReplayVariant(TagWeightedReplayBuffer, frozenset({"regime_weights"})),
    # PER for the critic only: its batch, IS-weighted loss and priorities as PER's; the actor's batch uniform
    "per_critic_only": ReplayVariant(
        PrioritizedReplayBuffer, PER_FIELDS, scheme=lambda c: PER(uniform_actor_batch=True)
    ),
    # PER's sampling and IS weights with priorities (|reward| + epsilon) ** alpha, set at write, no TD errors
    "per_reward_priority": ReplayVariant(RewardPrioritizedReplayBuffer, PER_FIELDS),
    # per_reward_priority with every |reward| below RunConfig.reward_floor counted as the floor
    "per_reward_floor": ReplayVariant(
        RewardPrioritizedReplayBuffer,
        PER_FIELDS | {"reward_floor"},
        buffer_options=lambda c: {"reward_floor": c.reward_floor},
    ),
    # An ablation of ReLo: its priority without the target critics' loss (the online loss), all else ReLo's
    "relo_online_loss": ReplayVariant(
        PrioritizedReplayBuffer, RELO_FIELDS, scheme=lambda c: OnlineLossReLo(), buffer_options=_relo_buffer
    ),
}


@dataclass(frozen=True)
class RunConfig:
    """
    Everything that determines one training run (two runs with equal configs compute the same thing).

    :param variant: replay variant, a key of ``VARIANTS``
    :param seed: seed of SAC, the training env and the replay sampling
    :param total_steps: env steps to train for
    :param env_id: Gymnasium id of the env
    :param env_kwargs: keyword arguments of the training env
    :param eval_env_kwargs: keyword arguments of the evaluation env (and the baselines'); None: ``env_kwargs``
        (a walk-forward comparison trains on earlier prices than it evaluates on)
    :param eval_freq: evaluate every this many env steps (and at step 0 and at the end)
    :param eval_episodes: evaluation episodes per evaluation
    :param eval_seed: seed of the first evaluation episode; episode ``i`` uses ``eval_seed + i``
    :param alpha: priority exponent of the variants with PER's priorities (Schaul et al. 2016): per, rank, faded,
        per_no_is, per_critic_only, per_reward_priority and per_reward_floor
    :param beta_start: importance-sampling exponent of the prioritized variants at the start; annealed to
        ``beta_end`` with the run's training progress (``beta_anneal_steps="auto"``, not a fixed 200k-call
        schedule that a short run would never finish)
    :param beta_end: importance-sampling exponent at the end of the run
    :param epsilon: priority offset
    :param lap_alpha: exponent of the ``lap``, ``pal`` and ``la3p`` variants (0.4, as in Fujimoto et al. 2020
        and Saglam et al. 2023)
    :param lap_min_priority: LAP's priority floor and Huber threshold, for ``lap``, ``pal`` and ``la3p`` (0.01: the
        authors' continuous-control 1 is far above this env's TD errors, which makes LAP uniform SAC; 0.01 was the
        best of 0.003, 0.01, 0.03 and 1 by mean final return of ``lap`` on validation seeds 100 and 101,
        validation episodes from 2,000,000, 30k steps; docs/results/lap_validation)
    :param la3p_fraction: LA3P's prioritized share of each batch, in (0, 1] (0.5, as its authors)
    :param half_life: half-life of the ``faded`` variant's priorities, in env steps (40,000: the best of 2,500,
        10,000 and 40,000 by mean final return on validation seeds 100 and 101, validation episodes from 2,000,000,
        30k steps; docs/results/faded_validation)
    :param regime_weights: sampling weight of each regime (``envs.NORMAL``, ``STRESS``, ``BREAK``) in the
        ``regime_weighted`` ablation, relative to its stored share. Default 1, 1.5, 1.2: PER's sampled-to-stored
        share of each regime, 0.92, 1.38 and 1.10 (mean over the evaluations of the validation runs, seeds 100 and
        101, 30k steps; docs/results/faded_validation/per), relative to the normal regime's and rounded
    :param reward_floor: the ``per_reward_floor`` ablation's floor: every |reward| below it has the floor's priority
        (0.003: the median |reward| of
        uniform SAC's critic samples on validation seed 100, 30k steps: ``python scripts/td_error_scale.py --variant
        uniform --seed 100``)
    :param relo_alpha: the priority exponent of the ``relo`` variant and its ablation ``relo_online_loss`` (0.5, its
        authors' for SAC)
    :param relo_epsilon: their priority offset (1e-7: its authors' 1e-5 is the size of this env's squared TD errors;
        of 1e-5, 1e-6 and 1e-7, the highest mean final return on validation seeds 100 and 101,
        docs/results/scheme_validation/README.md)
    :param regressor_learning_rate: the Adam learning rate of the TD-error regressor of ``expected_td`` and the
        ``expected_relo`` variants (1e-3, ExpectedTD's default)
    :param net_arch: hidden layers of the actor and critics
    :param learning_rate: Adam learning rate
    :param learning_starts: env steps collected before training starts
    :param batch_size: minibatch size
    :param buffer_size: replay capacity
    :param gamma: discount factor
    :param ent_coef: SAC entropy coefficient (``"auto_0.1"``: learned, starting at 0.1)
    :param prices_sha256: SHA-256 of the price CSV the envs replay (``prices_sha256``), so that a run trained on
        a file since edited in place is told apart from one on its new content; None: no price file (synthetic
        prices), or not recorded
    """

    variant: str = "per"
    seed: int = 0
    total_steps: int = 30_000
    env_id: str = DEFAULT_ENV_ID
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    eval_env_kwargs: dict[str, Any] | None = None
    eval_freq: int = 5_000
    eval_episodes: int = 30
    eval_seed: int = 1_000_000
    alpha: float = 0.6
    beta_start: float = 0.4
    beta_end: float = 1.0
    epsilon: float = 1e-6
    lap_alpha: float = 0.4
    lap_min_priority: float = 0.01
    la3p_fraction: float = 0.5
    half_life: float = 40_000.0
    regime_weights: tuple[float, ...] = (1.0, 1.5, 1.2)
    reward_floor: float = 0.003
    relo_alpha: float = 0.5
    relo_epsilon: float = 1e-7
    regressor_learning_rate: float = 1e-3
    net_arch: tuple[int, ...] = (64, 64)
    learning_rate: float = 3e-4
    learning_starts: int = 1_000
    batch_size: int = 256
    buffer_size: int = 1_000_000
    gamma: float = 0.99
    ent_coef: str = "auto_0.1"
    prices_sha256: str | None = None

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {self.variant!r}")
        for name in ("total_steps", "eval_freq", "eval_episodes", "batch_size", "buffer_size"):
            value = getattr(self, name)
            if int(value) != value or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if self.learning_starts < 0 or self.learning_starts >= self.total_steps:
            raise ValueError(
                f"learning_starts must be in [0, total_steps={self.total_steps}), got {self.learning_starts!r}"
            )
        if self.seed < 0 or self.eval_seed < 0:
            raise ValueError(f"seed and eval_seed must be >= 0, got seed={self.seed!r}, eval_seed={self.eval_seed!r}")
        if self.eval_seed <= self.seed < self.eval_seed + self.eval_episodes:
            # The training env's first episode would be one of the evaluation episodes.
            raise ValueError(
                f"seed={self.seed} is one of the evaluation episodes' seeds "
                f"[{self.eval_seed}, {self.eval_seed + self.eval_episodes}): pick a training seed outside them"
            )
        if not 0.0 < self.gamma <= 1.0:
            raise ValueError(f"gamma must be in (0, 1], got {self.gamma!r}")
        if not self.learning_rate > 0.0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not self.net_arch or any(int(size) != size or size < 1 for size in self.net_arch):
            raise ValueError(f"net_arch must be one or more positive layer sizes, got {self.net_arch!r}")
        _check_ent_coef(self.ent_coef)
        check_per_parameters(self.alpha, self.beta_start, self.beta_end, epsilon=self.epsilon)
        check_per_parameters(self.lap_alpha, self.beta_start, self.beta_end, epsilon=self.epsilon)
        check_per_parameters(self.relo_alpha, self.beta_start, self.beta_end, epsilon=self.relo_epsilon)
        variant = VARIANTS[self.variant]
        variant.scheme(self)  # its parameters checked by the scheme's constructor
        if "half_life" in variant.fields:  # only the variants that use it (see `canonical`)
            check_priority_half_life(self.half_life, self.buffer_size)
            self._check_fading()
        if "reward_floor" in variant.fields:
            check_reward_floor(self.reward_floor)
        if not _are_regime_weights(self.regime_weights):
            raise ValueError(f"regime_weights must be {N_REGIMES} finite weights > 0, got {self.regime_weights!r}")
        object.__setattr__(self, "net_arch", tuple(self.net_arch))
        object.__setattr__(self, "regime_weights", tuple(self.regime_weights))

    def canonical(self) -> RunConfig:
        """
        This config with the ``REPLAY_FIELDS`` its variant does not use at their defaults: runs that compute the same
        thing then have equal configs, so a comparison resumed with another setting of such a field (say
        ``half_life``) keeps the finished runs of the variants that ignore it.
        """
        unused = REPLAY_FIELDS - VARIANTS[self.variant].fields
        defaults: dict[str, Any] = {
            field.name: field.default for field in dataclasses.fields(self) if field.name in unused
        }
        return dataclasses.replace(self, **defaults)

    @property
    def run_name(self) -> str:
        """Directory name of the run: ``{variant}_s{seed}``."""
        return f"{self.variant}_s{self.seed}"

    @property
    def evaluation_env_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the evaluation and baseline envs."""
        return self.env_kwargs if self.eval_env_kwargs is None else self.eval_env_kwargs

    @property
    def eval_seeds(self) -> list[int]:
        """Seeds of the evaluation episodes."""
        return [self.eval_seed + i for i in range(self.eval_episodes)]

    @property
    def evaluation_steps(self) -> list[int]:
        """The env steps at which the run is evaluated (``PeriodicEvaluation``): 0, every ``eval_freq``, the last."""
        return sorted({*range(0, self.total_steps + 1, self.eval_freq), self.total_steps})

    def to_json(self) -> str:
        """The config as JSON (tuples become lists)."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunConfig:
        """
        The config that ``to_json`` wrote; fields it lacks (written before they existed) take their defaults.

        :raises ValueError: saying what is wrong: the text is not JSON, not a JSON object, has a key that is no
            field of RunConfig, or a value that field refuses
        """
        try:
            fields = json.loads(text)
        except json.JSONDecodeError as error:
            raise ValueError(f"not JSON ({error})") from None
        if not isinstance(fields, dict):
            raise ValueError(f"a JSON {type(fields).__name__}, not an object of RunConfig's fields")
        unknown = sorted(set(fields) - {field.name for field in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"unknown key(s) {unknown}: not fields of RunConfig (written by another version?)")
        try:
            return cls(**fields)
        except TypeError as error:  # a value of the wrong type, compared or converted in __post_init__
            raise ValueError(f"a value of the wrong type ({error})") from None

    def _check_fading(self) -> None:
        """
        The buffer's own check of a faded variant's settings (``check_fading_weights``), on the kwargs the run will
        pass it, so that a half-life the buffer would refuse is refused with the config, not in every run.
        """
        kwargs = self.replay_kwargs()
        try:
            check_fading_weights(kwargs["alpha"], kwargs["epsilon"], kwargs["priority_half_life"], self.buffer_size)
        except ValueError as error:
            raise ValueError(
                f"half_life={self.half_life!r} is too short for the {self.variant} variant's buffer of "
                f"buffer_size={self.buffer_size!r}: use a longer half-life (the buffer: {error})"
            ) from None

    def replay_kwargs(self) -> dict[str, Any]:
        """
        ``replay_buffer_kwargs`` of the variant: the tag key (a plain SB3 ``ReplayBuffer`` has none), and a
        prioritized buffer's parameters, beta annealed over this run, with what the variant sets.
        """
        variant = VARIANTS[self.variant]
        if issubclass(variant.buffer_class, TagWeightedReplayBuffer):
            return dict(tag_key=TAG_KEY, tag_weights=dict(enumerate(self.regime_weights)))
        if not issubclass(variant.buffer_class, PrioritizedBufferMixin):
            return dict(tag_key=TAG_KEY) if issubclass(variant.buffer_class, TaggedReplayBuffer) else {}
        per_kwargs = dict(
            alpha=self.alpha,
            beta_start=self.beta_start,
            beta_end=self.beta_end,
            beta_anneal_steps="auto",
            epsilon=self.epsilon,
            tag_key=TAG_KEY,
        )
        return {**per_kwargs, **variant.buffer_options(self)}


def prices_sha256(*env_kwargs: Mapping[str, Any]) -> str | None:
    """
    ``RunConfig.prices_sha256`` of runs whose envs take ``env_kwargs``: the SHA-256 of each distinct price CSV they
    replay (``prices_csv``), in order, joined by commas; None if none replays one.
    """
    paths = dict.fromkeys(str(kwargs["prices_csv"]) for kwargs in env_kwargs if kwargs.get("prices_csv") is not None)
    return ",".join(price_file_sha256(path) for path in paths) or None


def _are_regime_weights(weights: Any) -> bool:
    """Whether ``weights`` is one finite number > 0 per regime."""
    return (
        isinstance(weights, Sequence)
        and len(weights) == N_REGIMES
        and all(is_sampling_weight(weight) for weight in weights)
    )


def _check_ent_coef(ent_coef: str) -> None:
    """Raise ``ValueError`` unless ``ent_coef`` is what SAC accepts: ``auto``, ``auto_<x>`` or a number, all > 0."""
    text = str(ent_coef)
    number = text.split("_", 1)[1] if text.startswith("auto_") else ("1" if text == "auto" else text)
    try:
        valid = float(number) > 0
    except ValueError:
        valid = False
    if not valid:
        raise ValueError(f"ent_coef must be 'auto', 'auto_<initial value>' or a number, all > 0, got {ent_coef!r}")


def make_model(config: RunConfig, env: Any) -> SAC | TQC:
    """
    ``sb3_per.SAC`` (or ``TQC``, as the variant says) for ``config`` on ``env`` (a VecEnv), seeded with
    ``config.seed``; only the settings its variant uses reach it (``RunConfig.canonical``).
    """
    config = config.canonical()
    return VARIANTS[config.variant].algorithm(
        "MlpPolicy",
        env,
        learning_rate=config.learning_rate,
        buffer_size=config.buffer_size,
        learning_starts=config.learning_starts,
        batch_size=config.batch_size,
        gamma=config.gamma,
        ent_coef=config.ent_coef,
        replay_buffer_class=VARIANTS[config.variant].buffer_class,
        replay_buffer_kwargs=config.replay_kwargs(),
        replay_scheme=VARIANTS[config.variant].scheme(config),
        policy_kwargs=dict(net_arch=list(config.net_arch)),
        seed=config.seed,
        device="cpu",
    )


def episode_summaries(policy: Any, eval_envs: Sequence[gym.Env], seeds: Sequence[int]) -> list[dict[str, float]]:
    """
    Play one episode per seed, all in lockstep so the policy predicts for the whole batch at once,
    and return each episode's ``info["episode_summary"]``.

    :param policy: anything with SB3's ``predict`` (an SB3 model, ``ZScorePolicy``, ...), used
        deterministically
    :param eval_envs: one env per seed (reused across evaluations)
    :param seeds: the episodes' reset seeds
    """
    if len(eval_envs) != len(seeds):
        raise ValueError(f"need one env per seed, got {len(eval_envs)} envs and {len(seeds)} seeds")
    observations = np.stack([env.reset(seed=seed)[0] for env, seed in zip(eval_envs, seeds, strict=True)])
    summaries: list[dict[str, float] | None] = [None] * len(seeds)
    running = list(range(len(seeds)))
    while running:
        actions, _ = policy.predict(observations[running], deterministic=True)
        for action, i in zip(actions, running, strict=True):
            observations[i], _, terminated, truncated, info = eval_envs[i].step(action)
            if terminated or truncated:
                summaries[i] = info["episode_summary"]
        running = [i for i in running if summaries[i] is None]
    return summaries  # type: ignore[return-value]


def summarize_episodes(summaries: Sequence[dict[str, float]]) -> dict[str, float]:
    """Evaluation metrics (``METRIC_COLUMNS``) from episode summaries: means over episodes."""
    frame = pd.DataFrame(list(summaries), columns=list(SUMMARY_KEYS))
    # Episode return: the sum of the log-equity rewards (what SAC maximises), = log(final equity).
    log_returns = np.log1p(frame["cumulative_return"])
    return {
        "mean_return": float(log_returns.mean()),
        "std_return": float(log_returns.std(ddof=0)),
        "sharpe": float(frame["sharpe"].mean()),
        "max_drawdown": float(frame["max_drawdown"].mean()),
        "turnover": float(frame["turnover"].mean()),
        "return_normal": float(frame["return_normal"].mean()),
        "return_stress": float(frame["return_stress"].mean()),
        "return_break": float(frame["return_break"].mean()),
        "n_episodes": len(frame),
    }


def make_eval_envs(env_id: str, env_kwargs: dict[str, Any], n_envs: int) -> list[gym.Env]:
    """``n_envs`` independent evaluation envs."""
    return [gym.make(env_id, **env_kwargs) for _ in range(n_envs)]


def evaluate(policy: Any, eval_envs: Sequence[gym.Env], seeds: Sequence[int]) -> dict[str, float]:
    """Metrics of ``policy`` over one episode per seed."""
    return summarize_episodes(episode_summaries(policy, eval_envs, seeds))


class PeriodicEvaluation(BaseCallback):
    """
    Evaluates the model at step 0, every ``eval_freq`` env steps, and at the end of training,
    on fixed episode seeds; keeps the rows and records ``eval/*`` through the model's logger. Before each
    evaluation's dump it also keeps the replay telemetry the model logged (``comparison.telemetry``), for
    every tag its buffer holds (none for an untagged buffer).

    :param eval_envs: one env per evaluation seed
    :param seeds: evaluation episode seeds
    :param eval_freq: env steps between evaluations
    """

    def __init__(self, eval_envs: Sequence[gym.Env], seeds: Sequence[int], eval_freq: int) -> None:
        super().__init__()
        self.eval_envs, self.seeds, self.eval_freq = eval_envs, list(seeds), eval_freq
        self.rows: list[dict[str, float]] = []
        self.telemetry_rows: list[dict[str, float]] = []
        self._next_eval = 0

    def _stored_tags(self) -> list[int]:
        """The tags in the model's replay buffer (as of its last training call: nothing is added before the next)."""
        buffer: Any = getattr(self.model, "replay_buffer", None)  # an off-policy algorithm's
        return list(buffer.tag_buffer_shares()) if getattr(buffer, "tagged", False) else []

    def _evaluate(self) -> None:
        # Read before this evaluation's dump, which clears them with the logger's values.
        model: Any = self.model
        self.telemetry_rows += telemetry_rows(model.replay_telemetry, self.num_timesteps, self._stored_tags())
        metrics = evaluate(self.model, self.eval_envs, self.seeds)
        self.rows.append({"step": self.num_timesteps, **metrics})
        for key in ("mean_return", "sharpe", "max_drawdown"):
            self.logger.record(f"eval/{key}", metrics[key])
        # Written now, at this step: SB3 itself dumps only every few episodes.
        self.logger.dump(self.num_timesteps)
        model.replay_telemetry.clear()
        self._next_eval = self.num_timesteps + self.eval_freq

    def _on_training_start(self) -> None:
        self._evaluate()

    def _on_step(self) -> bool:
        if self.num_timesteps >= self._next_eval:
            self._evaluate()
        return True

    def _on_training_end(self) -> None:
        if self.rows[-1]["step"] != self.num_timesteps:
            self._evaluate()


class StepReports(BaseCallback):
    """
    Tells ``report`` how many env steps were taken since it last did, at most every ``interval`` seconds and at the
    end of training: a progress bar's feed from another process. It reads the step count only, so training is as
    without it.

    :param report: called with the number of env steps taken since the previous call
    :param interval: the least time between two calls during training, in seconds
    """

    def __init__(self, report: Callable[[int], None], interval: float = 1.0) -> None:
        super().__init__()
        self.report, self.interval = report, interval
        self._reported = 0
        self._reported_at = time.monotonic()

    def _send(self) -> None:
        self.report(self.num_timesteps - self._reported)
        self._reported, self._reported_at = self.num_timesteps, time.monotonic()

    def _on_step(self) -> bool:
        if time.monotonic() - self._reported_at >= self.interval:
            self._send()
        return True

    def _on_training_end(self) -> None:
        self._send()


def train_run(
    config: RunConfig,
    run_dir: Path,
    *,
    progress_bar: bool = False,
    log_formats: Sequence[str] = ("csv",),
    save_model: bool = False,
    on_steps: Callable[[int], None] | None = None,
) -> pd.DataFrame:
    """
    Train and evaluate one run; write its files into ``run_dir`` (``telemetry.csv``, then ``evaluations.csv``
    last) and return its evaluation rows.

    :param config: the run
    :param run_dir: its output directory (created)
    :param progress_bar: show SB3's progress bar
    :param log_formats: SB3 logger outputs (``"stdout"``, ``"csv"`` for ``progress.csv``, ``"tensorboard"``)
    :param save_model: also write the trained model as ``model.zip``
    :param on_steps: called with the env steps taken since its previous call, about every second and at the end
        of training (``StepReports``)
    :return: one row per evaluation, columns ``run, variant, seed, step`` and ``METRIC_COLUMNS``
    :raises ValueError: naming the file, if ``run_dir`` holds another run's ``config.json``
    """
    run_dir = Path(run_dir)
    # What an unfinished earlier attempt left (logs, a model) would mix with this run's; another run's is refused.
    restart_run_dir(config, run_dir, same_run=RunConfig.canonical)
    env = make_vec_env(config.env_id, n_envs=1, seed=config.seed, env_kwargs=config.env_kwargs)
    model = make_model(config, env)
    model.set_logger(configure(str(run_dir), list(log_formats)))
    eval_envs = make_eval_envs(config.env_id, config.evaluation_env_kwargs, config.eval_episodes)
    evaluation = PeriodicEvaluation(eval_envs, config.eval_seeds, config.eval_freq)
    callback = evaluation if on_steps is None else CallbackList([evaluation, StepReports(on_steps)])
    model.learn(config.total_steps, callback=callback, progress_bar=progress_bar)
    if save_model:
        model.save(run_dir / MODEL_FILE)
    rows = pd.DataFrame(evaluation.rows)
    rows.insert(0, "run", config.run_name)
    rows.insert(1, "variant", config.variant)
    rows.insert(2, "seed", config.seed)
    rows = rows[["run", "variant", "seed", "step", *METRIC_COLUMNS]]
    telemetry = telemetry_table(evaluation.telemetry_rows, list(rows["step"]), config.variant, config.seed)
    write_csv_atomically(telemetry, run_dir / TELEMETRY_FILE)
    write_csv_atomically(rows, run_dir / EVALUATIONS_FILE)
    return rows


def baseline_rows(env_id: str, env_kwargs: dict[str, Any], seeds: Sequence[int]) -> pd.DataFrame:
    """Metrics of the fixed policies (z-score rule, flat) on the evaluation episodes ``seeds``."""
    policies: dict[str, Callable[[], Any]] = {"zscore": ZScorePolicy, "flat": FlatPolicy}
    eval_envs = make_eval_envs(env_id, env_kwargs, len(seeds))
    rows = [{"variant": name, **evaluate(make(), eval_envs, seeds)} for name, make in policies.items()]
    return pd.DataFrame(rows, columns=["variant", *METRIC_COLUMNS])


def write_csv_atomically(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` to ``path`` so that the file either does not exist or is complete."""
    write_text_atomically(frame.to_csv(index=False), path)


def write_text_atomically(text: str, path: Path) -> None:
    """Write ``text`` to ``path`` so that the file either does not exist or is complete."""
    write_atomically(path, lambda partial: partial.write_text(text))


def write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """
    Make ``path`` by calling ``write`` on a partial file beside it, then putting that in its place: a reader sees the
    old file or the new one, never a part. The partial file is named after the process, so that two processes writing
    the same file do not write into each other's.
    """
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    write(partial)
    os.replace(partial, path)

"""
The noise test: where each replay scheme's attention goes when a known share of the transitions carries pure reward
noise (``NoisyBandit-v0``), and how fast each learns what can be learned.

Every variant trains SAC (or TQC) on ``NoisyBandit-v0`` with a buffer tagged by ``info["noisy"]``. At each evaluation
a run records the noisy transitions' share of the buffer, of its priority mass (prioritized buffers) and of the
transitions sampled since the previous evaluation (``model.replay_telemetry``), and the learnable reward its
deterministic policy earns on fixed held-out contexts, noise-free and noisy (1 is the best). A priority that chases
noise gives the noisy transitions far more than their buffer share of the priority mass; one that does not gives
them about their share, or less.

A plug-in of ``comparison.study`` (``NoiseTestStudy``, run by ``scripts/noise_test_study.py``); a run takes seconds,
so one that an interruption left unfinished is trained again from its start::

    python scripts/noise_test_study.py run                  # every variant, seeds 0-4, into docs/results/noise_test
    python scripts/noise_test_study.py run --variants per relo --seeds 2 --first-seed 100 --out results/noise_validation

Layout of the output folder (``docs/results/noise_test`` by default)::

    runs/{variant}_s{seed}/   config.json, evaluations.csv (written last: a run is finished when it holds a row for
                              every evaluation step, its rewards finite)
    summary.md                the report: per variant, the final shares and rewards as means over seeds with
                              bootstrap CIs
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

import envs
from comparison.experiment import write_csv_atomically, write_text_atomically
from comparison.statistics import bootstrap_ci
from comparison.study import (
    JsonConfig,
    ResultColumns,
    check_integer_fields,
    check_result_rows,
    finished_result_rows,
    positive_integer,
    restart_run_dir,
)
from comparison.study_report import collect_rows
from comparison.td_error_scale import rank_correlation
from sb3_per import (
    PER,
    SAC,
    TQC,
    UPER,
    ExpectedReLo,
    ExpectedTD,
    PrioritizedReplayBuffer,
    ReLo,
    ReplayScheme,
    TaggedReplayBuffer,
)

NOISY_TAG = 1
#: The figures of a run's ``evaluations.csv``, one row per evaluation (NaN where a figure does not apply or was not
#: logged)
COLUMNS = (
    "step",
    "noisy_buffer_share",
    "noisy_priority_share",
    "noisy_sample_share",
    "clean_reward",
    "noisy_reward",
    "priority_error_correlation",
)
#: What a finished run's rows hold: ``COLUMNS``, finite rewards (the rows carry no labels nor episode counts)
RESULT_COLUMNS = ResultColumns(COLUMNS, ("clean_reward", "noisy_reward"), episodes=None, labels=())
EVALUATIONS_FILE = "evaluations.csv"
SUMMARY_FILE = "summary.md"
HELD_OUT_CONTEXTS = 256


@dataclass(frozen=True)
class NoiseVariant:
    """
    How one variant of the noise test learns.

    :param algorithm: ``sb3_per.SAC`` or ``sb3_per.TQC``
    :param scheme: its replay scheme (``None``: uniform replay through ``TaggedReplayBuffer``)
    """

    algorithm: Any
    scheme: Callable[[], ReplayScheme] | None = None


#: The variants, in the order each seed runs them (the command line's default: all).
VARIANTS: dict[str, NoiseVariant] = {
    "uniform": NoiseVariant(SAC),
    "per": NoiseVariant(SAC, PER),
    "relo": NoiseVariant(SAC, ReLo),
    "expected_td": NoiseVariant(SAC, ExpectedTD),
    "expected_relo": NoiseVariant(SAC, ExpectedReLo),
    "gated_relo": NoiseVariant(SAC, lambda: ExpectedReLo(signal="gated")),
    "expected_relo_root": NoiseVariant(SAC, lambda: ExpectedReLo(signal="expected_root")),
    "signal_share_relo": NoiseVariant(SAC, lambda: ExpectedReLo(signal="signal_share")),
    "tqc": NoiseVariant(TQC),
    "tqc_per": NoiseVariant(TQC, PER),
    "tqc_uper": NoiseVariant(TQC, UPER),
}


@dataclass(frozen=True)
class NoiseTestConfig(JsonConfig):
    """
    One run of the noise test: everything that determines it.

    :param variant: a key of ``VARIANTS``
    :param seed: the run's seed (SB3's, the env's, the sampling's)
    :param total_steps: env steps (= transitions: every episode is one step)
    :param learning_starts: steps before training starts
    :param eval_freq: steps between evaluations (and at the end)
    :param noise_share: the env's share of noisy contexts
    :param noise_std: the env's reward noise
    :param alpha: the prioritized buffer's priority exponent
    :param epsilon: its priority offset
    :param net_arch: hidden layers of the actor and critics (a list, as ``config.json`` holds it, becomes a tuple)
    :param batch_size: minibatch size
    """

    variant: str = "per"
    seed: int = 0
    total_steps: int = 4_000
    learning_starts: int = 500
    eval_freq: int = 500
    noise_share: float = 0.5
    noise_std: float = 1.0
    alpha: float = 0.6
    epsilon: float = 1e-6
    net_arch: tuple[int, ...] = (64, 64)
    batch_size: int = 256

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {self.variant!r}")
        check_integer_fields(self, ("total_steps", "eval_freq", "batch_size"), minimum=1)
        check_integer_fields(self, ("seed", "learning_starts"), minimum=0)
        if not 0 <= self.learning_starts < self.total_steps:
            raise ValueError(f"learning_starts must be in [0, {self.total_steps}), got {self.learning_starts!r}")
        if not 0.0 <= self.noise_share <= 1.0:
            raise ValueError(f"noise_share must be in [0, 1], got {self.noise_share!r}")
        for name in ("noise_std", "alpha", "epsilon"):
            if not 0.0 < getattr(self, name) < math.inf:
                raise ValueError(f"{name} must be a finite number > 0, got {getattr(self, name)!r}")
        object.__setattr__(self, "net_arch", tuple(self.net_arch))
        if not self.net_arch or not all(isinstance(units, int) and units > 0 for units in self.net_arch):
            raise ValueError(f"net_arch must be positive layer widths, got {self.net_arch!r}")

    @property
    def run_name(self) -> str:
        """``{variant}_s{seed}``"""
        return f"{self.variant}_s{self.seed}"

    @property
    def eval_steps(self) -> list[int]:
        """The steps at which the run evaluates: every ``eval_freq`` from 0, and the last."""
        return sorted({*range(0, self.total_steps, self.eval_freq), self.total_steps})


def make_model(config: NoiseTestConfig) -> BaseAlgorithm:
    """The variant's model on ``NoisyBandit-v0``, its buffer tagged by ``info["noisy"]``."""
    variant = VARIANTS[config.variant]
    env = make_vec_env(
        envs.NOISY_BANDIT_ID,
        n_envs=1,
        seed=config.seed,
        # render_mode=None: SB3's make_vec_env asks for "rgb_array" unless told otherwise
        env_kwargs={"noise_share": config.noise_share, "noise_std": config.noise_std, "render_mode": None},
    )
    buffer: dict[str, Any] = dict(
        replay_buffer_class=TaggedReplayBuffer, replay_buffer_kwargs={"tag_key": envs.NOISY_KEY}
    )
    if variant.scheme is not None:
        buffer = dict(
            replay_buffer_class=PrioritizedReplayBuffer,
            replay_buffer_kwargs=dict(
                tag_key=envs.NOISY_KEY,
                alpha=config.alpha,
                epsilon=config.epsilon,
                beta_anneal_steps="auto",
                # the common settings of every scheme here, over what a scheme would set (ReLo's "batch")
                weight_normalization="buffer",
            ),
            replay_scheme=variant.scheme(),
        )
    return variant.algorithm(
        "MlpPolicy",
        env,
        learning_starts=config.learning_starts,
        batch_size=config.batch_size,
        policy_kwargs=dict(net_arch=list(config.net_arch)),
        seed=config.seed,
        device="cpu",
        **buffer,
    )


def critic_value(model: Any, observations: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """The critics' mean Q(s, a) (TQC: also over its quantiles) of each (observation, action)."""
    with th.no_grad():
        values = model.critic(th.as_tensor(observations), th.as_tensor(actions))
        if isinstance(values, th.Tensor):  # TQC: (batch, critics, quantiles)
            return values.mean(dim=(1, 2)).numpy()
        return th.cat(values, dim=1).mean(dim=1).numpy()


def priority_error_correlation(model: Any) -> float:
    """
    How well a prioritized buffer's priorities rank the learnable error: the rank correlation (Spearman) over the
    stored transitions of their priority with ``|E[y | s, a] - Q(s, a)|``, the absolute expected TD error, known
    exactly here (one-step episodes: ``E[y | s, a]`` is the learnable reward). NaN for a buffer that is not
    prioritized.
    """
    buffer = model.replay_buffer
    if not isinstance(buffer, PrioritizedReplayBuffer) or buffer.n_transitions < 2:
        return math.nan
    n = buffer.n_transitions
    observations, actions = buffer.observations[: buffer.size(), 0], buffer.actions[: buffer.size(), 0]
    expected_error = np.abs(envs.learnable_reward(observations, actions) - critic_value(model, observations, actions))
    return rank_correlation(buffer.priorities_at(np.arange(n)), expected_error)


def learnable_reward_of(model: BaseAlgorithm, contexts: np.ndarray) -> float:
    """The mean learnable reward (no noise) of ``model``'s deterministic actions on ``contexts``."""
    actions, _ = model.predict(contexts, deterministic=True)
    return float(np.mean(envs.learnable_reward(contexts, actions)))


class NoiseTestEvaluation(BaseCallback):
    """
    Records a row of ``COLUMNS`` at each of the config's evaluation steps, then clears the model's replay telemetry
    (so that each row's sample share is over the training calls since the previous one).

    :param config: the run
    """

    def __init__(self, config: NoiseTestConfig) -> None:
        super().__init__()
        self.config = config
        self.rows: list[dict[str, float]] = []
        self.contexts = {
            noisy: envs.held_out_contexts(HELD_OUT_CONTEXTS, noisy, config.noise_share) for noisy in (False, True)
        }
        self._pending = list(config.eval_steps)

    def _record(self) -> None:
        model: Any = self.model
        buffer: ReplayBuffer = model.replay_buffer
        telemetry = model.replay_telemetry
        shares = buffer.tag_buffer_shares() if buffer.size() else {}  # type: ignore[attr-defined]
        priority_shares = (
            buffer.tag_priority_shares() if isinstance(buffer, PrioritizedReplayBuffer) and buffer.size() else {}
        )
        self.rows.append(
            {
                "step": self.num_timesteps,
                "noisy_buffer_share": shares.get(NOISY_TAG, math.nan),
                "noisy_priority_share": priority_shares.get(NOISY_TAG, math.nan),
                "noisy_sample_share": telemetry.value(NOISY_TAG, "sample_share"),
                "clean_reward": learnable_reward_of(model, self.contexts[False]),
                "noisy_reward": learnable_reward_of(model, self.contexts[True]),
                "priority_error_correlation": priority_error_correlation(model),
            }
        )
        telemetry.clear()
        self._pending.pop(0)

    def _on_training_start(self) -> None:
        self._record()

    def _on_step(self) -> bool:
        if self._pending and self.num_timesteps >= self._pending[0]:
            self._record()
        return True


def run(config: NoiseTestConfig) -> pd.DataFrame:
    """Train and evaluate one run; its rows (``COLUMNS``, one per evaluation step)."""
    model = make_model(config)
    evaluation = NoiseTestEvaluation(config)
    model.learn(config.total_steps, callback=evaluation)
    return pd.DataFrame(evaluation.rows, columns=list(COLUMNS))


def train_run(config: NoiseTestConfig, run_dir: Path) -> pd.DataFrame:
    """
    Train one run into ``run_dir`` from its start (emptying the folder an interrupted attempt left): ``config.json``,
    then ``evaluations.csv``.

    :param config: the run
    :param run_dir: its folder
    :return: its ``evaluations.csv`` rows
    :raises ValueError: ``run_dir`` holds another config
    """
    run_dir = Path(run_dir)
    restart_run_dir(config, run_dir)
    rows = run(config)
    check_evaluations(rows, config, run_dir / EVALUATIONS_FILE)
    write_csv_atomically(rows, run_dir / EVALUATIONS_FILE)
    return rows


def check_evaluations(rows: pd.DataFrame, config: NoiseTestConfig, source: Path | str) -> None:
    """
    Check that ``rows`` are a finished run of ``config``: the columns ``COLUMNS``, one row per evaluation step, in
    order, and finite rewards (``comparison.study.check_result_rows``).

    :param rows: the rows read
    :param config: the run
    :param source: the file the rows come from, named in the error
    :raises ValueError: naming ``source`` and what is wrong
    """
    check_result_rows(rows, RESULT_COLUMNS, {}, config.eval_steps, 0, source)


def finished_evaluations(config: NoiseTestConfig, run_dir: Path) -> pd.DataFrame | None:
    """
    The rows of ``config``'s run in ``run_dir``, with its ``variant`` and ``seed`` columns, if it has finished; None if
    not (no folder, or one that an interrupted attempt left: no ``evaluations.csv``, or one that fails
    ``check_evaluations``).

    :param config: the run
    :param run_dir: its folder
    :raises ValueError: naming the file, if ``run_dir`` holds another config
    """
    rows = finished_result_rows(config, run_dir, EVALUATIONS_FILE, check_evaluations)
    return None if rows is None else rows.assign(variant=config.variant, seed=config.seed)


def plan_runs(
    seeds: Iterable[int], variants: Iterable[str] = tuple(VARIANTS), **settings: Any
) -> list[NoiseTestConfig]:
    """
    One config per (seed, variant), seeds outermost, so that a partial test stays paired.

    :param seeds: the seeds
    :param variants: keys of ``VARIANTS``, in the order the report lists them
    :param settings: further ``NoiseTestConfig`` fields (e.g. ``total_steps``)
    :raises ValueError: a variant or a setting is not valid
    """
    variants = list(variants)  # walked once per seed
    return [NoiseTestConfig(variant=variant, seed=seed, **settings) for seed in seeds for variant in variants]


def mean_ci(values: np.ndarray) -> tuple[float, float, float] | None:
    """``(mean, low, high)`` of the finite per-seed values (bootstrap over seeds), or None where none is finite."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None
    low, high = bootstrap_ci(finite, statistic=np.mean)
    return float(finite.mean()), low, high


def mean_and_ci(values: np.ndarray) -> str:
    """``mean [low, high]`` of per-seed values (``mean_ci``), or ``n/a`` where none is finite."""
    figure = mean_ci(values)
    return "n/a" if figure is None else f"{figure[0]:.3f} [{figure[1]:.3f}, {figure[2]:.3f}]"


def final_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """The last evaluation of each seed of one variant's rows (in the order the summary's intervals resample)."""
    return rows.sort_values("step").groupby("seed").tail(1)


def summary_table(rows: pd.DataFrame) -> str:
    """
    The summary's table: per variant, the noisy transitions' final buffer, priority-mass and sample shares, the
    final learnable reward on the noise-free and the noisy contexts, and the noise-free reward averaged over every
    evaluation after the first (how fast it learns), each a mean over seeds with a 95% bootstrap CI.

    :param rows: the finished runs' rows, with ``variant`` and ``seed`` columns
    """
    header = (
        "| Variant | Seeds | Noisy: buffer share | Noisy: priority share | Noisy: sample share | "
        "Noise-free reward, final | Noise-free reward, mean over the run | Noisy-context reward, final | "
        "Priority vs expected error (Spearman) |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    lines = []
    for variant, frame in rows.groupby("variant", sort=False):
        final = final_rows(frame)
        over_run = frame[frame["step"] > 0].groupby("seed")["clean_reward"].mean().to_numpy()
        cells = [
            mean_and_ci(final[column].to_numpy(dtype=float))
            for column in ("noisy_buffer_share", "noisy_priority_share", "noisy_sample_share", "clean_reward")
        ]
        cells += [mean_and_ci(over_run)]
        cells += [
            mean_and_ci(final[column].to_numpy(dtype=float))
            for column in ("noisy_reward", "priority_error_correlation")
        ]
        lines.append(f"| {variant} | {final['seed'].nunique()} | " + " | ".join(cells) + " |")
    return header + "\n".join(lines) + "\n"


def write_report(configs: Sequence[NoiseTestConfig], out_dir: Path, command: str) -> Path:
    """
    Write ``summary.md`` into ``out_dir``: the settings of the plan (those of its first run: a plan shares them) and
    the table of its finished runs (``summary_table``).

    :param configs: the plan
    :param out_dir: the test's folder
    :param command: the command that runs the whole plan, quoted in the summary
    :return: the summary's path
    """
    rows = collect_rows(configs, out_dir, finished_evaluations, [*COLUMNS, "variant", "seed"])
    base = configs[0]
    summary = (
        "# Noise test: where each replay scheme's attention goes\n\n"
        f"`NoisyBandit-v0`, noise share {base.noise_share}, noise N(0, {base.noise_std}^2); {base.total_steps} steps, "
        f"learning from {base.learning_starts}; SAC or TQC with {list(base.net_arch)} networks, batch "
        f"{base.batch_size}; prioritized buffers alpha {base.alpha}, epsilon {base.epsilon}, beta 0.4 -> 1 over the "
        f"run. Means over seeds {sorted({config.seed for config in configs})} with 95% bootstrap CIs; shares at the "
        "last evaluation (sample share over the training calls since the one before); rewards are the learnable "
        f"reward (1 at best) of the deterministic policy on {HELD_OUT_CONTEXTS} held-out contexts of each kind.\n\n"
        f"{summary_table(rows)}\nCommand: `{command}`\n"
    )
    path = Path(out_dir) / SUMMARY_FILE
    write_text_atomically(summary, path)
    return path


class NoiseTestStudy:
    """The noise test as ``comparison.study.Study`` (see this module's docstring)."""

    name = "noise_test"

    def plan(self, seeds: Sequence[int], **options: Any) -> list[NoiseTestConfig]:
        """``plan_runs(seeds, **options)``."""
        return plan_runs(seeds, **options)

    def train(self, config: NoiseTestConfig, run_dir: Path) -> None:
        """Train ``config``'s run into ``run_dir`` from its start (``train_run``)."""
        train_run(config, run_dir)

    def finished(self, config: NoiseTestConfig, run_dir: Path) -> bool:
        """Whether ``run_dir`` holds ``config``'s finished run (``finished_evaluations``)."""
        return finished_evaluations(config, run_dir) is not None

    def report(self, configs: Sequence[NoiseTestConfig], out_dir: Path, command: str) -> Path:
        """Write the summary (``write_report``); return its path."""
        return write_report(configs, out_dir, command)

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--variants``, ``--total-steps`` and ``--epsilon``."""
        parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
        parser.add_argument(
            "--total-steps", type=positive_integer, default=NoiseTestConfig.total_steps, help="env steps per run"
        )
        parser.add_argument(
            "--epsilon", type=float, default=NoiseTestConfig.epsilon, help="the prioritized buffers' priority offset"
        )

    def plan_options(self, args: argparse.Namespace) -> dict[str, Any]:
        """The variants, and the steps and priority offset of every run."""
        return {"variants": args.variants, "total_steps": args.total_steps, "epsilon": args.epsilon}

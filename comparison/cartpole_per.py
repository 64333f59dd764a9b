"""
What a new user first tries: DQN on CartPole-v1 with the RL Zoo's tuned hyperparameters (rl_zoo3's
``hyperparams/dqn.yml``: learning rate 2.3e-3, batch 64, replay 100,000, 1,000 random steps, gamma 0.99, target
update every 10 steps, a training call every 256 steps of 128 gradient steps, exploration 1 -> 0.04 over 16% of the
run, 256x256 MLP), with SB3's uniform ``ReplayBuffer`` against ``sb3_per``'s ``PrioritizedReplayBuffer`` at several
alphas (beta 0.4 -> 1 over the run, ``beta_anneal_steps="auto"``, as ``sb3_per/hyperparams/per_dqn.yml``).

The control ``per_a0`` is the prioritized buffer with alpha 0: every priority is 1, so it samples uniformly (one
transition per stratum of the sum tree) and every importance-sampling weight is 1. It differs from SB3's buffer only
in how the uniform draws are made, so if the two score alike, a gap between PER and uniform comes from
prioritizing, not from a defect of the buffer or of ``sb3_per.DQN``'s training step.

Every run trains ``total_steps`` env steps (20,000 by default: the zoo's own budget is 50,000) with the same number
of gradient steps, then its deterministic policy is evaluated on fixed episode seeds at every ``eval_freq`` steps.

A plug-in of ``comparison.study`` (``CartPolePerStudy``, run by ``scripts/cartpole_per_study.py``); a run (a minute)
is trained again from its start when an interruption left it unfinished. Layout of the output folder
(``docs/results/cartpole_per`` by default; small files, committed as runs finish)::

    runs/{variant}_s{seed}/   config.json, evaluations.csv (written last: a run is finished when it holds every row)
    evaluations.csv, summary.md, cartpole_per.png   the report (every finished run's rows, in plan order)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy.stats import mannwhitneyu
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from comparison.experiment import write_csv_atomically, write_text_atomically
from comparison.statistics import (
    DEFAULT_BOOTSTRAP,
    bootstrap_ci,
    iqm,
    keyed_generator,
    relative_difference_ci,
    same_seed_comparison,
)
from comparison.study import (
    JsonConfig,
    ResultColumns,
    check_integer_fields,
    check_result_rows,
    finished_result_rows,
    holds_config,
    positive_integer,
    restart_run_dir,
)
from comparison.study_report import collect_rows
from comparison.study_training import play_episodes
from sb3_per import DQN, PrioritizedReplayBuffer

ENV_ID = "CartPole-v1"
#: rl_zoo3's dqn.yml for CartPole-v1 (rl_zoo3 2.7), without its n_timesteps (5e4) and policy (MlpPolicy).
ZOO_HYPERPARAMETERS: dict[str, Any] = dict(
    learning_rate=2.3e-3,
    batch_size=64,
    buffer_size=100_000,
    learning_starts=1_000,
    gamma=0.99,
    target_update_interval=10,
    train_freq=256,
    gradient_steps=128,
    exploration_fraction=0.16,
    exploration_final_eps=0.04,
    policy_kwargs=dict(net_arch=[256, 256]),
)
#: Variants by name: None for SB3's uniform buffer, else the prioritized buffer's alpha.
VARIANT_ALPHAS: dict[str, float | None] = {
    "uniform": None,
    "per_a0": 0.0,
    "per_a0.2": 0.2,
    "per_a0.4": 0.4,
    "per_a0.6": 0.6,
}
#: Seed of the first evaluation episode; episode ``i`` uses ``EVAL_SEED + i`` in every run.
EVAL_SEED = 1_000_000
EVALUATIONS_FILE = "evaluations.csv"
EVALUATION_COLUMNS = ("variant", "seed", "step", "mean_return", "std_return", "n_episodes")


@dataclass(frozen=True)
class CartPoleConfig(JsonConfig):
    """
    One run.

    :param variant: its replay, a key of ``VARIANT_ALPHAS``
    :param seed: seed of the model, the env and the replay sampling
    :param total_steps: env steps
    :param eval_freq: steps between evaluations (and at the end); divides ``total_steps``
    :param eval_episodes: deterministic episodes per evaluation
    """

    variant: str
    seed: int
    total_steps: int = 20_000
    eval_freq: int = 5_000
    eval_episodes: int = 20

    def __post_init__(self) -> None:
        check_variant(self.variant)
        check_integer_fields(self, ("seed",), minimum=0)
        check_integer_fields(self, ("total_steps", "eval_freq", "eval_episodes"), minimum=1)
        if self.total_steps % self.eval_freq:
            raise ValueError(f"eval_freq={self.eval_freq} must divide total_steps={self.total_steps}")

    @property
    def run_name(self) -> str:
        """Name of the run's folder, e.g. ``per_a0.6_s3``."""
        return f"{self.variant}_s{self.seed}"

    @property
    def eval_steps(self) -> list[int]:
        """The steps the run is evaluated at: ``eval_freq``, ..., ``total_steps``."""
        return list(range(self.eval_freq, self.total_steps + 1, self.eval_freq))


def check_variant(variant: str) -> None:
    """Raise ``ValueError``, naming it, unless ``variant`` is a key of ``VARIANT_ALPHAS``."""
    if variant not in VARIANT_ALPHAS:
        raise ValueError(f"variant must be one of {list(VARIANT_ALPHAS)}, got {variant!r}")


def make_model(variant: str, seed: int, env: Any) -> DQN:
    """``sb3_per.DQN`` with the zoo's CartPole settings and ``variant``'s replay, on the CPU."""
    check_variant(variant)
    alpha = VARIANT_ALPHAS[variant]
    prioritized: dict[str, Any] = (
        {}
        if alpha is None
        else dict(
            replay_buffer_class=PrioritizedReplayBuffer,
            replay_buffer_kwargs=dict(alpha=alpha, beta_start=0.4, beta_end=1.0, beta_anneal_steps="auto"),
        )
    )
    return DQN("MlpPolicy", env, seed=seed, device="cpu", **ZOO_HYPERPARAMETERS, **prioritized)


class StepEvaluations(BaseCallback):
    """
    Evaluates the model greedily every ``config.eval_freq`` steps, one episode per seed ``EVAL_SEED + i``.

    :param config: the run
    """

    def __init__(self, config: CartPoleConfig) -> None:
        super().__init__()
        self.config = config
        self.rows: list[dict[str, float]] = []
        self._eval_env = gym.make(ENV_ID)

    def _on_step(self) -> bool:
        if self.num_timesteps % self.config.eval_freq == 0:
            seeds = range(EVAL_SEED, EVAL_SEED + self.config.eval_episodes)
            returns = [episode.total for episode in play_episodes(self.model, self._eval_env, seeds)]
            self.rows.append(
                dict(step=self.num_timesteps, mean_return=float(np.mean(returns)), std_return=float(np.std(returns)))
            )
        return True


def check_evaluations(rows: pd.DataFrame, config: CartPoleConfig, source: Path | str) -> None:
    """
    Check that ``rows`` are a finished run of ``config``: the columns ``EVALUATION_COLUMNS``, one row per step of
    ``config.eval_steps``, in order, of its variant and seed, finite mean returns, and ``config.eval_episodes``
    episodes in each evaluation (``comparison.study.check_result_rows``).

    :raises ValueError: naming ``source`` and what is wrong
    """
    columns = ResultColumns(EVALUATION_COLUMNS, ("mean_return",), "n_episodes", labels=("variant", "seed"))
    run = {"variant": config.variant, "seed": config.seed}
    check_result_rows(rows, columns, run, config.eval_steps, config.eval_episodes, source)


def finished_evaluations(config: CartPoleConfig, run_dir: Path) -> pd.DataFrame | None:
    """
    ``config``'s ``evaluations.csv`` rows if ``run_dir`` holds its finished run (``check_evaluations`` passes),
    else None.

    :raises ValueError: naming the file, if ``run_dir`` holds another config
    """
    return finished_result_rows(config, run_dir, EVALUATIONS_FILE, check_evaluations)


def final_returns(evaluations: pd.DataFrame, step: int) -> dict[str, dict[int, float]]:
    """The mean evaluation return at ``step`` of each variant, by seed."""
    return returns_by_seed(evaluations[evaluations["step"] == step])


def returns_by_seed(evaluations: pd.DataFrame) -> dict[str, dict[int, float]]:
    """Each variant's mean over ``evaluations``' rows of the mean evaluation return, by seed."""
    means = evaluations.groupby(["variant", "seed"], sort=False)["mean_return"].mean()
    scores: dict[str, dict[int, float]] = {}
    for (variant, seed), value in means.items():
        scores.setdefault(str(variant), {})[int(seed)] = float(value)
    return scores


def solved_share(values: Sequence[float], threshold: float = 475.0) -> float:
    """Share of ``values`` at or above ``threshold`` (CartPole-v1's reward threshold); NaN for none."""
    return float(np.mean(np.asarray(values) >= threshold)) if len(values) else math.nan


def summary_lines(scores: dict[str, dict[int, float]], seed: int = 0) -> list[str]:
    """
    Markdown tables of scores by variant and seed: each variant's seeds, IQM with its bootstrap interval, mean, share
    of seeds at 475 or more, and values per seed; then each variant against uniform: IQM difference with its
    interval, the same-seed split with its sign test, and the Mann-Whitney U test's p-value (same distribution?).
    """
    lines = [
        f"| variant | seeds | IQM [{DEFAULT_BOOTSTRAP.level} CI] | mean | seeds >= 475 | per seed (0, 1, ...) |",
        "|---|---|---|---|---|---|",
    ]
    for variant, by_seed in scores.items():
        values = [by_seed[s] for s in sorted(by_seed)]
        low, high = bootstrap_ci(values, iqm, rng=keyed_generator(seed, variant))
        lines.append(
            f"| {variant} | {len(values)} | {iqm(values):.0f} [{low:.0f}, {high:.0f}] | {np.mean(values):.0f} "
            f"| {solved_share(values):.0%} | {', '.join(f'{v:.0f}' for v in values)} |"
        )
    reference = scores.get("uniform")
    if reference is None:
        return lines
    lines += [
        "",
        "| variant vs uniform | IQM difference [CI] | same seed: above/below (sign test p) | Mann-Whitney p |",
        "|---|---|---|---|",
    ]
    for variant, by_seed in scores.items():
        if variant == "uniform":
            continue
        difference = relative_difference_ci(
            list(reference.values()), list(by_seed.values()), rng=keyed_generator(seed, "vs", variant)
        )
        split = same_seed_comparison(reference, by_seed)
        u_test = mannwhitneyu(list(by_seed.values()), list(reference.values()), alternative="two-sided")
        low, high = difference.absolute_ci
        lines.append(
            f"| {variant} | {difference.absolute:+.0f} [{low:+.0f}, {high:+.0f}] "
            f"| {split.above}/{split.below} (p={split.p_value:.3f}) | {u_test.pvalue:.3f} |"
        )
    return lines


def plot_cartpole(evaluations: pd.DataFrame, path: Path) -> None:
    """Left: each variant's mean evaluation return against steps; right: its final returns, one point per seed."""
    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    curves_ax, final_ax = fig.subplots(1, 2)
    last = int(evaluations["step"].max())
    for position, (variant, rows) in enumerate(evaluations.groupby("variant", sort=False)):
        mean = rows.groupby("step")["mean_return"].mean()
        curves_ax.plot(mean.index, mean.values, "o-", label=str(variant))
        final = rows.loc[rows["step"] == last, "mean_return"]
        jitter = np.linspace(-0.15, 0.15, len(final))
        final_ax.plot(position + jitter, final, "o", alpha=0.7)
        final_ax.plot([position - 0.25, position + 0.25], [iqm(final)] * 2, "k-")
    curves_ax.set(xlabel="env steps", ylabel="mean evaluation return", title="mean over seeds")
    curves_ax.legend(fontsize=8)
    variants = list(dict.fromkeys(evaluations["variant"]))
    final_ax.set_xticks(range(len(variants)), variants)
    final_ax.set(ylabel=f"evaluation return at {last:,} steps", title="per seed (bar: IQM)")
    for ax in (curves_ax, final_ax):
        ax.grid(True, alpha=0.3)
    fig.suptitle("DQN on CartPole-v1, RL Zoo hyperparameters: SB3's uniform buffer vs sb3_per's PER at several alphas")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


class CartPolePerStudy:
    """The CartPole study as ``comparison.study.Study`` (see this module's docstring)."""

    name = "cartpole_per"

    def plan(
        self, seeds: Sequence[int], variants: Iterable[str] = tuple(VARIANT_ALPHAS), **settings: Any
    ) -> list[CartPoleConfig]:
        """
        One config per (seed, variant), seeds outermost, so that a partial study stays paired.

        :param seeds: the seeds
        :param variants: keys of ``VARIANT_ALPHAS``
        :param settings: further ``CartPoleConfig`` fields (e.g. ``total_steps``)
        :raises ValueError: a variant or a setting is not valid
        """
        variants = list(variants)  # walked once per seed
        return [CartPoleConfig(variant, seed, **settings) for seed in seeds for variant in variants]

    def train(self, config: CartPoleConfig, run_dir: Path) -> None:
        """
        Train ``config``'s run into ``run_dir`` from its start (emptying the folder an interrupted attempt left):
        ``config.json``, then ``evaluations.csv``.

        :raises ValueError: ``run_dir`` holds another config
        """
        run_dir = Path(run_dir)
        holds_config(config, run_dir)  # raises if the folder is another run's
        restart_run_dir(config, run_dir)
        model = make_model(config.variant, config.seed, make_vec_env(ENV_ID, n_envs=1, seed=config.seed))
        evaluations = StepEvaluations(config)
        model.learn(config.total_steps, callback=evaluations)
        rows = pd.DataFrame(evaluations.rows)
        rows.insert(0, "variant", config.variant)
        rows.insert(1, "seed", config.seed)
        rows["n_episodes"] = config.eval_episodes
        rows = rows[list(EVALUATION_COLUMNS)]
        check_evaluations(rows, config, run_dir / EVALUATIONS_FILE)
        write_csv_atomically(rows, run_dir / EVALUATIONS_FILE)

    def finished(self, config: CartPoleConfig, run_dir: Path) -> bool:
        """Whether ``run_dir`` holds ``config``'s finished run (``finished_evaluations``)."""
        return finished_evaluations(config, run_dir) is not None

    def report(self, configs: Sequence[CartPoleConfig], out_dir: Path, command: str) -> Path:
        """
        Write the report of the finished runs of ``configs`` into ``out_dir``: ``evaluations.csv`` (their rows, in
        plan order), ``summary.md`` and ``cartpole_per.png``.

        :param configs: the plan (its runs share their settings but variant and seed)
        :param out_dir: the study's folder
        :param command: the command that runs the whole plan, quoted in the summary
        :return: the summary's path
        """
        out_dir = Path(out_dir)
        evaluations = collect_rows(configs, out_dir, finished_evaluations, EVALUATION_COLUMNS)
        write_csv_atomically(evaluations, out_dir / EVALUATIONS_FILE)
        run = configs[0]
        lines = [
            "# DQN on CartPole-v1 with the RL Zoo's hyperparameters: uniform replay vs PER",
            "",
            f"Written by `{command}`; the settings are in `comparison/cartpole_per.py`'s docstring.",
            "",
            f"Final greedy evaluation return at {run.total_steps:,} steps ({run.eval_episodes} episodes, fixed seeds):",
            "",
            *summary_lines(final_returns(evaluations, run.total_steps)),
            "",
            f"Mean of the evaluation returns at steps {', '.join(map(str, run.eval_steps))} (less noisy than the "
            "last):",
            "",
            *summary_lines(returns_by_seed(evaluations)),
            "",
            "![evaluation returns](cartpole_per.png)",
            "",
        ]
        path = out_dir / "summary.md"
        write_text_atomically("\n".join(lines), path)
        if len(evaluations):
            plot_cartpole(evaluations, out_dir / "cartpole_per.png")
        return path

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--variants``, ``--steps``, ``--eval-freq`` and ``--eval-episodes``; 10 seeds unless ``--seeds`` says."""
        parser.add_argument("--variants", nargs="+", choices=list(VARIANT_ALPHAS), default=list(VARIANT_ALPHAS))
        parser.add_argument("--steps", type=positive_integer, default=20_000, help="env steps per run")
        parser.add_argument("--eval-freq", type=positive_integer, default=5_000, help="steps between evaluations")
        parser.add_argument("--eval-episodes", type=positive_integer, default=20, help="episodes per evaluation")
        parser.set_defaults(seeds=10)

    def plan_options(self, args: argparse.Namespace) -> dict[str, Any]:
        """The variants, and the steps, evaluation interval and evaluation episodes of every run."""
        return {
            "variants": args.variants,
            "total_steps": args.steps,
            "eval_freq": args.eval_freq,
            "eval_episodes": args.eval_episodes,
        }

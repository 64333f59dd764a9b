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
The results go into one ``evaluations.csv`` (a row per run and evaluation), written after each run, so an
interrupted study resumes where it stopped: a run counts as done only if it has every evaluation row.
"""

from __future__ import annotations

import argparse
import math
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
import torch as th
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from scipy.stats import mannwhitneyu
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.env_util import make_vec_env

from comparison.experiment import write_csv_atomically
from comparison.minatar import greedy_returns
from comparison.statistics import (
    DEFAULT_BOOTSTRAP,
    bootstrap_ci,
    iqm,
    keyed_generator,
    relative_difference_ci,
    same_seed_comparison,
)
from comparison.study import check_integer_fields
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
class CartPoleStudy:
    """
    The settings shared by every run.

    :param total_steps: env steps per run
    :param eval_freq: steps between evaluations (and at the end); divides ``total_steps``
    :param eval_episodes: deterministic episodes per evaluation
    """

    total_steps: int = 20_000
    eval_freq: int = 5_000
    eval_episodes: int = 20

    def __post_init__(self) -> None:
        check_integer_fields(self, ("total_steps", "eval_freq", "eval_episodes"), minimum=1)
        if self.total_steps % self.eval_freq:
            raise ValueError(f"eval_freq={self.eval_freq} must divide total_steps={self.total_steps}")

    @property
    def eval_steps(self) -> list[int]:
        """The steps each run is evaluated at: ``eval_freq``, ..., ``total_steps``."""
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
    Evaluates the model greedily every ``study.eval_freq`` steps, one episode per seed ``EVAL_SEED + i``.

    :param study: the shared settings
    """

    def __init__(self, study: CartPoleStudy) -> None:
        super().__init__()
        self.study = study
        self.rows: list[dict[str, float]] = []
        self._eval_env = gym.make(ENV_ID)

    def _on_step(self) -> bool:
        if self.num_timesteps % self.study.eval_freq == 0:
            seeds = range(EVAL_SEED, EVAL_SEED + self.study.eval_episodes)
            returns = greedy_returns(self.model, self._eval_env, seeds)
            self.rows.append(
                dict(step=self.num_timesteps, mean_return=float(np.mean(returns)), std_return=float(np.std(returns)))
            )
        return True


def train_cartpole_run(variant: str, seed: int, study: CartPoleStudy) -> pd.DataFrame:
    """
    Train one run and return its evaluation rows (``EVALUATION_COLUMNS``).

    :param variant: a key of ``VARIANT_ALPHAS``
    :param seed: seed of the model, the env and the replay sampling
    :param study: the shared settings
    """
    model = make_model(variant, seed, make_vec_env(ENV_ID, n_envs=1, seed=seed))
    evaluations = StepEvaluations(study)
    model.learn(study.total_steps, callback=evaluations)
    rows = pd.DataFrame(evaluations.rows)
    rows.insert(0, "variant", variant)
    rows.insert(1, "seed", seed)
    rows["n_episodes"] = study.eval_episodes
    return rows[list(EVALUATION_COLUMNS)]


def completed_runs(evaluations: pd.DataFrame, study: CartPoleStudy) -> set[tuple[str, int]]:
    """The (variant, seed) pairs of ``evaluations`` that hold a finite row at every step of ``study.eval_steps``."""
    done = set()
    for (variant, seed), rows in evaluations.groupby(["variant", "seed"]):
        complete = sorted(rows["step"]) == study.eval_steps and np.isfinite(rows["mean_return"]).all()
        if complete and (rows["n_episodes"] == study.eval_episodes).all():
            done.add((str(variant), int(seed)))
    return done


def run_cartpole_study(
    variants: Sequence[str],
    seeds: Sequence[int],
    study: CartPoleStudy,
    out_dir: Path,
    announce: Callable[[str], None] = print,
) -> pd.DataFrame:
    """
    Train every (seed, variant) run not done yet in ``out_dir``, seeds outermost, one at a time with one torch
    thread, rewriting ``evaluations.csv`` after each; incomplete rows of earlier attempts are dropped.

    :param variants: keys of ``VARIANT_ALPHAS``
    :param seeds: the seeds
    :param study: the shared settings
    :param out_dir: the study's directory
    :param announce: called with a line as each run ends
    :return: all the evaluation rows of completed runs
    """
    for variant in variants:
        check_variant(variant)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / EVALUATIONS_FILE
    evaluations = pd.read_csv(path) if path.exists() else pd.DataFrame(columns=list(EVALUATION_COLUMNS))
    done = completed_runs(evaluations, study)
    keep = [
        (variant, int(seed)) in done for variant, seed in zip(evaluations["variant"], evaluations["seed"], strict=True)
    ]
    evaluations = evaluations[keep]
    th.set_num_threads(1)
    for seed in seeds:
        for variant in variants:
            if (variant, seed) in done:
                continue
            rows = train_cartpole_run(variant, seed, study)
            evaluations = pd.concat([evaluations, rows], ignore_index=True) if len(evaluations) else rows
            write_csv_atomically(evaluations, path)
            announce(f"{variant} seed {seed}: final mean return {rows['mean_return'].iloc[-1]:.1f}")
    return evaluations


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


def cartpole_main(argv: list[str] | None = None) -> pd.DataFrame:
    """
    Command line of ``scripts/cartpole_per.py``: train the runs not done yet, then write ``summary.md`` and
    ``cartpole_per.png`` beside ``evaluations.csv`` in ``--out``.

    :param argv: arguments (``sys.argv[1:]`` when None)
    :return: the evaluation rows
    """
    parser = argparse.ArgumentParser(description="DQN on CartPole-v1 (RL Zoo settings): uniform vs PER alphas.")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANT_ALPHAS), default=list(VARIANT_ALPHAS))
    parser.add_argument("--seeds", type=int, default=10, help="seeds 0 .. N-1")
    parser.add_argument("--steps", type=int, default=20_000, help="env steps per run")
    parser.add_argument("--eval-freq", type=int, default=5_000)
    parser.add_argument("--eval-episodes", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("docs/results/cartpole_per"))
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be a positive integer, got {args.seeds}")
    study = CartPoleStudy(args.steps, args.eval_freq, args.eval_episodes)
    evaluations = run_cartpole_study(args.variants, range(args.seeds), study, args.out)
    command = shlex.join(
        [
            *("python", "scripts/cartpole_per.py", "--variants", *args.variants, "--seeds", str(args.seeds)),
            *(
                "--steps",
                str(args.steps),
                "--eval-freq",
                str(args.eval_freq),
                "--eval-episodes",
                str(args.eval_episodes),
            ),
        ]
    )
    lines = [
        "# DQN on CartPole-v1 with the RL Zoo's hyperparameters: uniform replay vs PER",
        "",
        f"Written by `{command}`; the settings are in `comparison/cartpole_per.py`'s docstring.",
        "",
        f"Final greedy evaluation return at {study.total_steps:,} steps ({study.eval_episodes} episodes, fixed seeds):",
        "",
        *summary_lines(final_returns(evaluations, study.total_steps)),
        "",
        f"Mean of the evaluation returns at steps {', '.join(map(str, study.eval_steps))} (less noisy than the last):",
        "",
        *summary_lines(returns_by_seed(evaluations)),
        "",
        "![evaluation returns](cartpole_per.png)",
        "",
    ]
    (args.out / "summary.md").write_text("\n".join(lines))
    plot_cartpole(evaluations, args.out / "cartpole_per.png")
    print("\n".join(lines))
    return evaluations

"""Benchmark PairsTrading-v0: steps per second of the unwrapped env with random actions, and reset time.

With ``--baselines N`` it also plays N episodes with the flat, z-score and random policies and prints the mean
episode figures (return = sum of log-equity rewards, the per-regime split, Sharpe, turnover).

    .venv/bin/python scripts/bench_env.py
    .venv/bin/python scripts/bench_env.py --steps 200000 --baselines 50
"""

from __future__ import annotations

import argparse
import time

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)
import numpy as np

from envs import FlatPolicy, PairsTradingEnv, RandomPolicy, ZScorePolicy, run_episodes


def time_resets(env: PairsTradingEnv, n_resets: int, seed: int) -> float:
    """Return the mean wall time of ``env.reset`` in seconds."""
    env.reset(seed=seed)
    start = time.perf_counter()
    for _ in range(n_resets):
        env.reset()
    return (time.perf_counter() - start) / n_resets


def time_steps(env: PairsTradingEnv, n_steps: int, seed: int) -> tuple[float, float]:
    """Return ``(steps/s excluding resets, steps/s including resets)`` with uniform random actions."""
    actions = list(np.random.default_rng(seed).uniform(-1, 1, size=(n_steps, 1)).astype(np.float32))
    env.reset(seed=seed)
    stepping, resetting = 0.0, 0.0
    clock = time.perf_counter
    begin = clock()
    for action in actions:
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            mark = clock()
            env.reset()
            resetting += clock() - mark
    total = clock() - begin
    stepping = total - resetting
    return n_steps / stepping, n_steps / total


def print_baselines(n_episodes: int, seed: int) -> None:
    """Print mean episode figures of the flat, z-score and random policies over ``n_episodes`` each."""
    header = f"{'policy':<8} {'return':>16} {'normal':>8} {'stress':>8} {'break':>8} {'sharpe':>7} {'turnover':>8}"
    print(f"\nbaselines over {n_episodes} episodes (seed {seed}); return = mean sum of log-equity rewards ± SE")
    print(header)
    for name, policy in (("flat", FlatPolicy()), ("zscore", ZScorePolicy()), ("random", RandomPolicy(seed))):
        summaries, _ = run_episodes(PairsTradingEnv(), policy, n_episodes, seed=seed)
        parts = {key: np.array([s[key] for s in summaries]) for key in summaries[0]}
        total = parts["return_normal"] + parts["return_stress"] + parts["return_break"]
        se = total.std(ddof=1) / np.sqrt(len(total))
        print(
            f"{name:<8} {total.mean():>+8.3f} ± {se:.3f} {parts['return_normal'].mean():>+8.3f} "
            f"{parts['return_stress'].mean():>+8.3f} {parts['return_break'].mean():>+8.3f} "
            f"{parts['sharpe'].mean():>7.2f} {parts['turnover'].mean():>8.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1_000_000, help="random-action steps to time")
    parser.add_argument("--resets", type=int, default=2_000, help="resets to time")
    parser.add_argument("--baselines", type=int, default=0, help="episodes per baseline policy (0: skip)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    env = PairsTradingEnv()
    reset_s = time_resets(env, args.resets, args.seed)
    step_rate, overall_rate = time_steps(env, args.steps, args.seed)
    print(f"reset: {reset_s * 1e3:.3f} ms  ({args.resets} resets, {env.warmup + env.episode_length + 1} days each)")
    print(f"step:  {step_rate:,.0f} steps/s excluding resets, {overall_rate:,.0f} steps/s including them")
    print(f"       ({args.steps:,} steps of the unwrapped env with uniform random actions)")
    if args.baselines:
        print_baselines(args.baselines, args.seed)


if __name__ == "__main__":
    main()

"""Benchmark one evaluation of the comparison: its episodes played one after another vs all in lockstep.

``sequential`` plays each held-out episode alone, one policy call per env step (``envs.run_episodes``);
``lockstep`` plays them together with one batched policy call per step for all unfinished episodes
(``comparison.experiment.episode_summaries``, what every evaluation of a run does). The policy is an untrained
``sb3_per.SAC`` of the comparison's size (the time per call does not depend on the weights). Repeats alternate the
modes (so a slow spell of a shared machine hits both), and a second lockstep column, timed the same way, is the
control: its ratio to the first shows the noise of the measurement. Also prints how far the two modes' metrics
differ: a batched forward pass of the network rounds differently from one row at a time (last float32 bit of an
action), so they agree to about 1e-9, not bit for bit.

    .venv/bin/python scripts/bench_eval.py
    .venv/bin/python scripts/bench_eval.py --episodes 50 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)
import gymnasium as gym
import pandas as pd
from stable_baselines3.common.env_util import make_vec_env

from comparison.experiment import RunConfig, episode_summaries, make_eval_envs, make_model, summarize_episodes
from comparison.processes import configure_torch_threads
from envs import run_episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=50, help="evaluation episodes (the full preset's 50)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats of each mode, interleaved")
    args = parser.parse_args()
    configure_torch_threads(1)
    config = RunConfig(eval_episodes=args.episodes)
    model = make_model(config, make_vec_env(config.env_id, n_envs=1, seed=0))
    seeds = config.eval_seeds
    lockstep_envs = make_eval_envs(config.env_id, config.env_kwargs, len(seeds))
    single_env = gym.make(config.env_id, **config.env_kwargs)

    modes: dict[str, Callable[[], list[dict[str, float]]]] = {
        "sequential": lambda: [run_episodes(single_env, model, 1, seed=seed)[0][0] for seed in seeds],
        "lockstep": lambda: episode_summaries(model, lockstep_envs, seeds),
        "lockstep (control)": lambda: episode_summaries(model, lockstep_envs, seeds),
    }
    times: dict[str, list[float]] = {name: [] for name in modes}
    metrics: dict[str, dict[str, float]] = {}
    for _ in range(args.repeats):
        for name, play in modes.items():
            start = time.perf_counter()
            summaries = play()
            times[name].append(time.perf_counter() - start)
            metrics[name] = summarize_episodes(summaries)
    table = pd.DataFrame(metrics).T
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"one evaluation of {args.episodes} episodes, median of {args.repeats} interleaved repeats, 1 torch thread:")
    for name, median in medians.items():
        runs = ", ".join(f"{t:.2f}" for t in times[name])
        print(f"  {name:<20} {median:7.3f} s   ({runs})")
    print(f"speed-up of lockstep over sequential: {medians['sequential'] / medians['lockstep']:.1f}x")
    print(f"control, lockstep / lockstep (control): {medians['lockstep'] / medians['lockstep (control)']:.2f}")
    gap = (table.loc["lockstep"] - table.loc["sequential"]).abs()
    print(f"largest metric difference, lockstep vs sequential: {gap.max():.1e} ({gap.idxmax()})")


if __name__ == "__main__":
    main()

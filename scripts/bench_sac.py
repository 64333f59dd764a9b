"""
Benchmark: wall time per environment step of ``sb3_per.SAC`` with prioritized replay against
``stable_baselines3.SAC`` with SB3's uniform ``ReplayBuffer``, side by side in one process.

Both use the same settings (batch 256, train_freq 1, gradient_steps 1, default MLP, one torch thread).
Each is first run past ``learning_starts`` and a warm-up, then they take turns running chunks of
``learn(chunk, reset_num_timesteps=False)``, round by round, so machine noise hits all alike: many short
rounds pair better than a few long ones on a shared machine. The script prints the milliseconds per step
of each and their ratio to the baseline (targets: PER <= 1.03x uniform, LA3P with the matched budget
<= 1.10x, telemetry on a tagged PER buffer <= 3% over PER, ReLo and ExpectedTD <= 1.10x); with ``--tqc``,
sb3_per.TQC with uniform replay, with PER and with UPER (UPER's target <= 1.05x the uniform TQC; PER's ratio shows
what of UPER's cost is prioritized replay itself; both printed apart).

    python scripts/bench_sac.py                          # Pendulum-v1, 40 rounds x 150 steps
    python scripts/bench_sac.py --control                # also sb3_per.SAC with the uniform buffer
    python scripts/bench_sac.py --la3p --telemetry       # also LA3P (matched) and PER with tagged telemetry
    python scripts/bench_sac.py --env MountainCarContinuous-v0 --rounds 20 --chunk 300
    python scripts/bench_sac.py --control --relo --expected-td --tqc   # the noise-robust schemes
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import stable_baselines3
import torch as th
from stable_baselines3.common.base_class import BaseAlgorithm

import sb3_per
from sb3_per import PrioritizedReplayBuffer

BASELINE = "stable_baselines3.SAC, uniform"
TQC_BASELINE = "sb3_per.TQC, uniform"


def build_models(args: argparse.Namespace) -> dict[str, BaseAlgorithm]:
    """
    The uniform baseline, the prioritized model and, with ``--control``, ``sb3_per.SAC`` with the uniform
    buffer (the baseline's code path, so its ratio shows the noise floor); identical settings and seed.
    """
    settings: dict[str, Any] = {
        "batch_size": args.batch_size,
        "buffer_size": args.buffer_size,
        "learning_starts": args.learning_starts,
        "train_freq": 1,
        "gradient_steps": 1,
        "seed": args.seed,
        "device": args.device,
    }
    models: dict[str, BaseAlgorithm] = {
        BASELINE: stable_baselines3.SAC("MlpPolicy", args.env, **settings),
        "sb3_per.SAC, PER buffer": sb3_per.SAC(
            "MlpPolicy", args.env, replay_buffer_class=PrioritizedReplayBuffer, **settings
        ),
    }
    if args.control:
        models["sb3_per.SAC, uniform (control)"] = sb3_per.SAC("MlpPolicy", args.env, **settings)
    if args.la3p:
        models["sb3_per.SAC, LA3P matched"] = sb3_per.SAC(
            "MlpPolicy",
            args.env,
            replay_scheme=sb3_per.LA3P(),  # which sets the buffer's inverse_sampling=True and alpha 0.4
            replay_buffer_class=PrioritizedReplayBuffer,
            **settings,
        )
    prioritized = dict(replay_buffer_class=PrioritizedReplayBuffer, **settings)
    if args.relo:
        models["sb3_per.SAC, ReLo"] = sb3_per.SAC("MlpPolicy", args.env, replay_scheme=sb3_per.ReLo(), **prioritized)
    if args.expected_td:
        models["sb3_per.SAC, ExpectedTD"] = sb3_per.SAC(
            "MlpPolicy", args.env, replay_scheme=sb3_per.ExpectedTD(), **prioritized
        )
    if args.expected_relo:
        models["sb3_per.SAC, ExpectedReLo root"] = sb3_per.SAC(
            "MlpPolicy", args.env, replay_scheme=sb3_per.ExpectedReLo(signal="expected_root"), **prioritized
        )
    if args.tqc:
        models[TQC_BASELINE] = sb3_per.TQC("MlpPolicy", args.env, **settings)
        models["sb3_per.TQC, PER"] = sb3_per.TQC("MlpPolicy", args.env, **prioritized)
        models["sb3_per.TQC, UPER"] = sb3_per.TQC("MlpPolicy", args.env, replay_scheme=sb3_per.UPER(), **prioritized)
    if args.telemetry:
        # Untagged envs store tag -1 everywhere: the telemetry's whole path runs, with one tag.
        models["sb3_per.SAC, PER, telemetry"] = sb3_per.SAC(
            "MlpPolicy",
            args.env,
            replay_buffer_class=PrioritizedReplayBuffer,
            replay_buffer_kwargs={"tag_key": "regime"},
            **settings,
        )
    return models


def time_interleaved(models: dict[str, BaseAlgorithm], rounds: int, chunk: int) -> dict[str, dict[str, np.ndarray]]:
    """
    Wall and process CPU seconds per environment step of each chunk, the models taking turns (the order
    rotates each round). CPU time is less disturbed than wall time when other processes share the cores.
    """
    times: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in models}
    names = list(models)
    for round_index in range(rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            wall, cpu = time.perf_counter(), time.process_time()
            models[name].learn(chunk, reset_num_timesteps=False)
            times[name]["wall"].append((time.perf_counter() - wall) / chunk)
            times[name]["cpu"].append((time.process_time() - cpu) / chunk)
    return {name: {clock: np.array(values) for clock, values in clocks.items()} for name, clocks in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="Pendulum-v1", help="Gymnasium environment id (continuous actions)")
    parser.add_argument("--rounds", type=int, default=40, help="timed chunks per model")
    parser.add_argument("--chunk", type=int, default=150, help="environment steps per timed chunk")
    parser.add_argument("--learning-starts", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=500, help="untimed training steps after learning_starts")
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--buffer-size", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--control", action="store_true", help="also time sb3_per.SAC with the uniform buffer")
    parser.add_argument("--la3p", action="store_true", help="also time sb3_per.SAC with replay_scheme=LA3P() (matched)")
    parser.add_argument("--telemetry", action="store_true", help="also time PER with a tagged buffer's telemetry")
    parser.add_argument("--relo", action="store_true", help="also time sb3_per.SAC with replay_scheme=ReLo()")
    parser.add_argument("--expected-td", action="store_true", help="also time sb3_per.SAC with ExpectedTD()")
    parser.add_argument(
        "--expected-relo",
        action="store_true",
        help="also time sb3_per.SAC with ExpectedReLo(signal='expected_root') (target <= 1.15x uniform)",
    )
    parser.add_argument("--tqc", action="store_true", help="also time sb3_per.TQC: uniform, with PER() and with UPER()")
    args = parser.parse_args()
    th.set_num_threads(1)

    models = build_models(args)
    for model in models.values():  # fill past learning_starts; the warm-up compiles numba and fills caches
        model.learn(args.learning_starts + args.warmup)
    times = time_interleaved(models, args.rounds, args.chunk)

    print(
        f"SAC on {args.env}, device {args.device}, batch {args.batch_size}, train_freq 1, gradient_steps 1, "
        f"1 torch thread; {args.rounds} interleaved rounds x {args.chunk} steps; ms per environment step"
    )
    header = f"{'':<32} {'wall median':>12} {'wall min':>9} {'cpu median':>11} {'ratio':>7} {'ratio/round':>12}"
    print(header)
    baseline = times[BASELINE]
    for name, clocks in times.items():
        ratio = np.median(clocks["wall"]) / np.median(baseline["wall"])
        ratio_per_round = np.median(clocks["wall"] / baseline["wall"])
        print(
            f"{name:<32} {np.median(clocks['wall']) * 1e3:>12.3f} {clocks['wall'].min() * 1e3:>9.3f} "
            f"{np.median(clocks['cpu']) * 1e3:>11.3f} {ratio:>6.3f}x {ratio_per_round:>11.3f}x"
        )
    if TQC_BASELINE in times:
        tqc_wall = times[TQC_BASELINE]["wall"]
        for name in ("sb3_per.TQC, PER", "sb3_per.TQC, UPER"):
            ratio_per_round = np.median(times[name]["wall"] / tqc_wall)
            print(
                f"{name} / {TQC_BASELINE}: {np.median(times[name]['wall']) / np.median(tqc_wall):.3f}x median, "
                f"{ratio_per_round:.3f}x per round"
            )
    print(
        "ratio: wall median / the baseline's; ratio/round: median over rounds of wall time / the baseline's "
        "in the same round. Targets: PER <= 1.03x, LA3P matched <= 1.10x, PER with telemetry <= 1.03 x PER's ratio."
    )


if __name__ == "__main__":
    main()

"""
Benchmark: env steps (frames) per second of one MinAtar run of the study (comparison/minatar.py), one torch thread,
in this process: the random-action frames before ``learning_starts`` are not timed, then ``--frames`` training frames
(a gradient step each) are. Sizes the study's plan: run it alone on the machine, one game and variant at a time.

    python scripts/bench_minatar.py --game breakout --variant per [--frames 20000]
"""

from __future__ import annotations

import argparse
import time

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)
import torch as th
from stable_baselines3.common.callbacks import BaseCallback

from comparison.minatar import GAMES, VARIANTS, MinAtarConfig, make_model, make_training_env, register_minatar


class TimeAfter(BaseCallback):
    """Notes the time when the run reaches ``frame`` frames."""

    def __init__(self, frame: int) -> None:
        super().__init__()
        self.frame, self.started = frame, 0.0

    def _on_step(self) -> bool:
        if self.num_timesteps == self.frame:
            self.started = time.perf_counter()
        return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", choices=sorted(GAMES), default="breakout")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="dqn")
    parser.add_argument("--frames", type=int, default=20_000, help="timed frames after learning starts")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    th.set_num_threads(1)
    register_minatar()
    config = MinAtarConfig(game=args.game, variant=args.variant, seed=args.seed, eval_episodes=0)
    total = config.learning_starts + args.frames
    config = MinAtarConfig(**{**config.__dict__, "total_frames": total, "log_interval": total})
    model = make_model(config, make_training_env(config))
    timer = TimeAfter(config.learning_starts)
    model.learn(total, callback=timer, log_interval=None)  # type: ignore[arg-type]
    seconds = time.perf_counter() - timer.started
    print(f"{args.game} {args.variant}: {args.frames / seconds:.0f} frames/s ({args.frames} training frames)")


if __name__ == "__main__":
    main()

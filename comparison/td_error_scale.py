"""
How large SAC's TD errors are on a comparison run, beside LAP's priority floor (``lap_min_priority``).

LAP, PAL and LA3P treat every |TD error| below the floor alike (priority = floor, Huber and PAL losses quadratic),
so on a task whose TD errors all stay below it they sample uniformly and train with SAC's own loss. This trains
one run of the comparison (no evaluation) and records the absolute TD error of every critic sample.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

import numpy as np
from stable_baselines3.common.env_util import make_vec_env

from comparison.experiment import VARIANTS, RunConfig, configure_torch_threads, make_model


def critic_td_errors(config: RunConfig) -> list[np.ndarray]:
    """
    Train ``config``'s run and return, for each critic batch in order, its absolute TD errors (as the priorities
    are computed from them: over the twin critics as the variant combines them).

    :param config: the run (its variant must train through sb3_per's own steps: any but SB3's plain buffer)
    :return: one float array per critic batch
    """
    env = make_vec_env(config.env_id, n_envs=1, seed=config.seed, env_kwargs=config.env_kwargs)
    model = make_model(config, env)
    batches: list[np.ndarray] = []
    after_critic_step = model._after_critic_step

    def record(buffer: Any, batch: Any, td_errors: Any, call_record: Any) -> None:
        batches.append(td_errors.detach().cpu().numpy().copy())
        after_critic_step(buffer, batch, td_errors, call_record)

    model._after_critic_step = record  # type: ignore[method-assign,assignment]
    model.learn(config.total_steps)
    return batches


def summarize_td_errors(batches: Sequence[np.ndarray], floor: float) -> dict[str, float]:
    """
    :param batches: absolute TD errors per critic batch, as ``critic_td_errors`` returns them
    :param floor: the priority floor to compare with (LAP's ``lap_min_priority``)
    :return: count, max, 99.9th percentile, median and the share at or above ``floor``
    """
    errors = np.concatenate(batches)
    return {
        "samples": float(errors.size),
        "max": float(errors.max()),
        "p99.9": float(np.quantile(errors, 0.999)),
        "median": float(np.median(errors)),
        "share_at_or_above_floor": float((errors >= floor).mean()),
    }


def td_error_scale_main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """``python scripts/td_error_scale.py``: train one run and print its TD errors' scale beside LAP's floor."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", default="lap", choices=sorted(name for name in VARIANTS if name != "uniform"))
    parser.add_argument("--seed", type=int, default=100, help="training seed (default: a validation seed)")
    parser.add_argument("--total-steps", type=int, default=30_000)
    parser.add_argument("--lap-min-priority", type=float, default=RunConfig.lap_min_priority)
    args = parser.parse_args(argv)
    try:
        config = RunConfig(
            variant=args.variant, seed=args.seed, total_steps=args.total_steps, lap_min_priority=args.lap_min_priority
        )
    except ValueError as error:
        parser.error(str(error))
    configure_torch_threads(1)
    summary = summarize_td_errors(critic_td_errors(config), args.lap_min_priority)
    print(", ".join(f"{key} {value:.4g}" for key, value in summary.items()))
    return summary

"""
How large SAC's TD errors are on a comparison run, beside LAP's priority floor (``lap_min_priority``), and how
closely they follow the rewards the transitions earned.

LAP, PAL and LA3P treat every |TD error| below the floor alike (priority = floor, Huber and PAL losses quadratic),
so on a task whose TD errors all stay below it they sample uniformly and train with SAC's own loss. This trains
one run of the comparison (no evaluation) and records, for every critic sample, its absolute TD error, its
reward and its regime tag.

On the pairs env a day's reward is mostly the spread's unpredictable move: if |TD error| ranks a batch's
transitions as |reward| does, a TD-error priority replays the days with the largest profit or loss, not the
ones the critic has most to learn from. ``td_error_reward_agreement`` measures that ranking's agreement.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from stable_baselines3.common.env_util import make_vec_env

from comparison.experiment import VARIANTS, RunConfig, make_model
from comparison.processes import configure_torch_threads
from envs.regime_model import REGIME_NAMES

MIN_SAMPLES_FOR_RANK_CORRELATION = 10  # a batch's regime with fewer samples gives no correlation
TOP_SHARE = 0.1  # the top-decile overlap compares a batch's largest 10% of |TD error| and of |reward|


class CriticBatchRecord(NamedTuple):
    """One critic batch of a run: the priorities' source and what its transitions earned."""

    abs_td_errors: np.ndarray  # shape (batch_size,), combined over the twin critics as the priorities are
    rewards: np.ndarray  # shape (batch_size,)
    regimes: np.ndarray  # shape (batch_size,), the env's regime tag of each transition (-1: unknown)
    indices: np.ndarray  # shape (batch_size,), the transitions' flat indices in the replay buffer


def record_critic_batches(model: Any) -> list[CriticBatchRecord]:
    """
    Make ``model`` (one of the comparison's, on a tagged buffer) append a record of each critic batch, as it
    trains, to the list returned: its absolute TD errors (as the priorities are computed from them: over the twin
    critics as the variant combines them), rewards, regimes and indices.
    """
    records: list[CriticBatchRecord] = []
    write_back = model._write_back

    def record(scheme: Any, batches: Any, step: Any) -> Any:
        td_errors = write_back(scheme, batches, step)
        batch = step.batch
        records.append(
            CriticBatchRecord(
                abs_td_errors=td_errors.detach().cpu().numpy().copy(),
                rewards=batch.rewards.detach().cpu().numpy().reshape(-1).copy(),
                regimes=batches.buffer.tags_at(batch.indices),
                indices=np.array(batch.indices, copy=True),
            )
        )
        return td_errors

    model._write_back = record
    return records


def critic_batches(config: RunConfig) -> list[CriticBatchRecord]:
    """
    Train ``config``'s run and return a record of each of its critic batches, in order (``record_critic_batches``).

    :param config: the run (any variant: all train through sb3_per's own steps on a tagged buffer)
    :return: one record per critic batch
    """
    env = make_vec_env(config.env_id, n_envs=1, seed=config.seed, env_kwargs=config.env_kwargs)
    model = make_model(config, env)
    records = record_critic_batches(model)
    model.learn(config.total_steps)
    return records


def summarize_td_errors(batches: Sequence[np.ndarray], floor: float) -> dict[str, float]:
    """
    :param batches: absolute TD errors per critic batch (``CriticBatchRecord.abs_td_errors``)
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


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 0..n-1 of a 1-D array's values, tied values sharing the mean of their ranks."""
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + ends - 1) / 2.0)[inverse]


def rank_correlation(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation of two 1-D arrays of the same length (ties at mean ranks; NaN if either is
    constant)."""
    rank_x, rank_y = average_ranks(x), average_ranks(y)
    if rank_x.std() == 0.0 or rank_y.std() == 0.0:
        return float("nan")
    return float(np.corrcoef(rank_x, rank_y)[0, 1])


def top_share_overlap(x: np.ndarray, y: np.ndarray, share: float = TOP_SHARE) -> float:
    """
    Share of the ``share`` largest values of ``x`` that are also among the ``share`` largest of ``y`` (values tied
    at the cut are taken in no particular order; the env's continuous rewards and TD errors rarely tie).
    """
    k = max(1, round(share * len(x)))
    top_x = np.argpartition(x, -k)[-k:]
    top_y = np.argpartition(y, -k)[-k:]
    return len(np.intersect1d(top_x, top_y)) / k


def td_error_reward_agreement(records: Sequence[CriticBatchRecord]) -> dict[str, float]:
    """
    How closely a run's |TD errors| rank its critic batches' transitions as their |rewards| do, batch by batch
    (one critic, one moment of training per batch).

    :param records: the run's critic batches, as ``critic_batches`` returns them
    :return: ``rank_corr``: median over batches of Spearman's correlation of |TD error| and |reward| (batches
        where either is constant left out);
        ``rank_corr_<regime>``: the same within each regime's samples of a batch (batches with fewer than
        ``MIN_SAMPLES_FOR_RANK_CORRELATION`` of them left out; NaN if none has enough); ``top_decile_overlap``:
        mean share of a batch's 10% largest |TD errors| that are among its 10% largest |rewards| (0.1 by chance)
    """
    agreement = {
        "rank_corr": float(np.nanmedian([rank_correlation(r.abs_td_errors, np.abs(r.rewards)) for r in records])),
        "top_decile_overlap": float(np.mean([top_share_overlap(r.abs_td_errors, np.abs(r.rewards)) for r in records])),
    }
    for tag, name in enumerate(REGIME_NAMES):
        within = [
            rank_correlation(r.abs_td_errors[mask], np.abs(r.rewards[mask]))
            for r in records
            if (mask := r.regimes == tag).sum() >= MIN_SAMPLES_FOR_RANK_CORRELATION
        ]
        agreement[f"rank_corr_{name}"] = float(np.nanmedian(within)) if within else float("nan")
    return agreement


def mean_abs_reward_by_regime(records: Sequence[CriticBatchRecord]) -> dict[str, float]:
    """
    :param records: a run's critic batches, as ``critic_batches`` returns them
    :return: ``mean_abs_reward_<regime>``: the mean |reward| of the critic's samples of each regime (NaN if none)
    """
    rewards = np.abs(np.concatenate([r.rewards for r in records]))
    regimes = np.concatenate([r.regimes for r in records])
    return {
        f"mean_abs_reward_{name}": float(rewards[regimes == tag].mean()) if (regimes == tag).any() else float("nan")
        for tag, name in enumerate(REGIME_NAMES)
    }


def median_abs_reward(records: Sequence[CriticBatchRecord]) -> float:
    """
    :param records: a run's critic batches, as ``critic_batches`` returns them
    :return: the median |reward| of all the critic's samples (under uniform replay, the stored transitions'
        typical |reward| over the run: the ``per_reward_floor`` ablation's floor was read from it)
    """
    return float(np.median(np.abs(np.concatenate([r.rewards for r in records]))))


def td_error_scale_main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """
    ``python scripts/td_error_scale.py``: train one run, print its TD errors' scale beside LAP's floor and their
    agreement with the rewards, and the size of the rewards the critic trained on.
    """
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variant", default="lap", choices=sorted(VARIANTS))
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
    records = critic_batches(config)
    summary = summarize_td_errors([r.abs_td_errors for r in records], args.lap_min_priority)
    agreement = td_error_reward_agreement(records)
    rewards = {**mean_abs_reward_by_regime(records), "median_abs_reward": median_abs_reward(records)}
    print("TD errors: " + ", ".join(f"{key} {value:.4g}" for key, value in summary.items()))
    print("|TD error| vs |reward|: " + ", ".join(f"{key} {value:.3f}" for key, value in agreement.items()))
    print("critic samples: " + ", ".join(f"{key} {value:.5f}" for key, value in rewards.items()))
    return {**summary, **agreement, **rewards}

"""
Replay telemetry: where a tagged replay buffer's attention goes, per tag, through the model's SB3 logger.

At each training call of ``sb3_per``'s algorithms with a tagged buffer (``TaggedReplayBuffer``, or a prioritized
buffer with ``tag_key``), for every tag ``k`` stored:

- ``replay/tag_{k}_buffer_share`` (state, ``logger.record``): share of the stored transitions with tag k;
- ``replay/tag_{k}_priority_share`` (state; prioritized buffers only): share of the total priority mass;
- ``replay/tag_{k}_sample_share`` (``logger.record_mean``): share of the call's sampled transitions (each batch
  counted once), averaged over the calls since the last dump;
- ``replay/tag_{k}_td_error`` (``record_mean``; only in calls that sampled tag k): mean absolute TD error of the
  call's critic samples with tag k, averaged over those calls;
- where the actor trains on batches of its own (``per_mode="la3p"``, ``uniform_actor_batch=True``) also
  ``replay/tag_{k}_critic_sample_share`` and ``replay/tag_{k}_actor_sample_share`` (the latter only in calls with
  an actor step: TD3's delayed policy updates skip some);

and ``replay/is_ess`` (``record_mean``; prioritized ``per_mode="per"`` only): the effective sample size of the
call's IS weights, ``(sum w) ** 2 / (sum w ** 2) / n``.

The shares of one dump sum to 1 over the tags once every tag was stored before the first call since the previous
dump (a tag first stored in between counts only from then on). Nothing walks the buffer's leaves: the buffer keeps
per-tag counts and priority sums up to date, and only the sampled transitions' tags are looked up.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch as th
from stable_baselines3.common.logger import Logger

from sb3_per.replay_tags import ReplayTagsMixin

TELEMETRY_PREFIX = "replay/"


def telemetry_key(tag: int, stat: str) -> str:
    """
    :param tag: a stored tag (``-1`` for transitions without one)
    :param stat: ``"buffer_share"``, ``"priority_share"``, ``"sample_share"``, ``"td_error"``, ...
    :return: the logger key of ``stat`` for ``tag``, e.g. ``"replay/tag_2_sample_share"``
    """
    return f"{TELEMETRY_PREFIX}tag_{tag}_{stat}"


IS_ESS_KEY = f"{TELEMETRY_PREFIX}is_ess"


def effective_sample_size(weights: th.Tensor) -> float:
    """
    :param weights: importance-sampling weights (any shape)
    :return: ``(sum w) ** 2 / (sum w ** 2) / n``: 1 for equal weights, towards ``1 / n`` as one weight dominates
    """
    return float(weights.sum() ** 2 / weights.square().sum() / weights.numel())


def tag_shares(tags: np.ndarray, stored_tags: Sequence[int]) -> dict[int, float]:
    """
    :param tags: the tags of some transitions (e.g. a training call's samples), int64
    :param stored_tags: the tags to report, each at least once in the buffer
    :return: share of ``tags`` equal to each of ``stored_tags`` (0 for one not among them)
    """
    values, counts = np.unique(tags, return_counts=True)
    found = dict(zip(values.tolist(), (counts / max(len(tags), 1)).tolist(), strict=True))
    return {tag: found.get(tag, 0.0) for tag in stored_tags}


def mean_by_tag(tags: np.ndarray, values: np.ndarray) -> dict[int, float]:
    """
    :param tags: one tag per value, int64
    :param values: the values (e.g. absolute TD errors)
    :return: the mean of the values of each tag present in ``tags``
    """
    unique, inverse, counts = np.unique(tags, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=values, minlength=len(unique))
    return dict(zip(unique.tolist(), (sums / counts).tolist(), strict=True))


def record_replay_telemetry(
    logger: Logger,
    buffer: ReplayTagsMixin,
    sampled_indices: Sequence[np.ndarray],
    critic_indices: Sequence[np.ndarray],
    td_errors: Sequence[th.Tensor],
    actor_indices: Sequence[np.ndarray] | None = None,
    weights: Sequence[th.Tensor] = (),
) -> None:
    """
    Log one training call's telemetry (see the module's docstring) through ``logger``.

    :param logger: the model's logger
    :param buffer: the tagged replay buffer (``tag_buffer_shares``, ``tags_at``, and ``tag_priority_shares`` where
        prioritized)
    :param sampled_indices: the flat indices of each batch sampled in the call, each batch once
    :param critic_indices: the flat indices of each critic batch, aligned with ``td_errors``
    :param td_errors: each critic batch's absolute TD errors
    :param actor_indices: the flat indices of each actor batch, where they differ from the critic's (LA3P,
        ``uniform_actor_batch``); empty for a call without an actor step
    :param weights: the IS weights of the call's batches, for ``replay/is_ess`` (none: not logged)
    """
    buffer_shares = buffer.tag_buffer_shares()
    for tag, share in buffer_shares.items():
        logger.record(telemetry_key(tag, "buffer_share"), share)
    if hasattr(buffer, "tag_priority_shares"):
        for tag, share in buffer.tag_priority_shares().items():
            logger.record(telemetry_key(tag, "priority_share"), share)
    stored_tags = list(buffer_shares)
    tags_at = buffer.tags_at
    for tag, share in tag_shares(tags_at(np.concatenate(sampled_indices)), stored_tags).items():
        logger.record_mean(telemetry_key(tag, "sample_share"), share)
    critic_tags = tags_at(np.concatenate(critic_indices))
    abs_td_errors = th.cat(tuple(td_errors)).cpu().numpy().astype(np.float64)  # one device sync
    for tag, mean in mean_by_tag(critic_tags, abs_td_errors).items():
        logger.record_mean(telemetry_key(tag, "td_error"), mean)
    if actor_indices is not None:
        for tag, share in tag_shares(critic_tags, stored_tags).items():
            logger.record_mean(telemetry_key(tag, "critic_sample_share"), share)
        if actor_indices:
            for tag, share in tag_shares(tags_at(np.concatenate(actor_indices)), stored_tags).items():
                logger.record_mean(telemetry_key(tag, "actor_sample_share"), share)
    if weights:
        logger.record_mean(IS_ESS_KEY, effective_sample_size(th.cat(tuple(weights))))

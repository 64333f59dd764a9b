"""
Replay telemetry: where a tagged replay buffer's attention goes, per tag.

At each training call of ``sb3_per``'s algorithms with a tagged buffer (``TaggedReplayBuffer``, or a prioritized
buffer with ``tag_key``), ``call_telemetry`` computes the call's figures (a ``CallTelemetry``), which the algorithm

- logs through the model's logger, for every tag ``k`` stored:

  - ``replay/tag_{k}_buffer_share`` (state, ``logger.record``): share of the stored transitions with tag k;
  - ``replay/tag_{k}_priority_share`` (state; prioritized buffers only): share of the total priority mass;
  - ``replay/tag_{k}_sample_share`` (``logger.record_mean``): share of the call's sampled transitions (each batch
    counted once), averaged over the calls since the last dump;
  - ``replay/tag_{k}_td_error`` (``record_mean``; only in calls that sampled tag k): mean absolute TD error of the
    call's critic samples with tag k, averaged over those calls;
  - where the actor trains on batches of its own (``LA3P``, ``uniform_actor_batch=True``) also
    ``replay/tag_{k}_critic_sample_share`` and ``replay/tag_{k}_actor_sample_share`` (the latter only in calls with
    an actor step: TD3's delayed policy updates skip some);

  and ``replay/is_ess`` (``record_mean``; a scheme that uses IS weights with a prioritized buffer): the effective
  sample size of the call's IS weights, ``(sum w) ** 2 / (sum w ** 2) / n``;
- and adds to the model's ``replay_telemetry`` (a ``ReplayTelemetry``), which holds the same figures, with the same
  arithmetic, for a program to read without the logger: ``model.replay_telemetry.value(tag, "sample_share")``. It is
  cleared where the algorithm dumps its logs (``dump_logs``), so it shows what the logger shows.

The shares of one dump sum to 1 over the tags once every tag was stored before the first call since the previous
dump (a tag first stored in between counts only from then on). Nothing walks the buffer's leaves: the buffer keeps
per-tag counts and priority sums up to date, and only the sampled transitions' tags are looked up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch as th
from stable_baselines3.common.logger import Logger

from sb3_per.replay_tags import ReplayTagsMixin

TELEMETRY_PREFIX = "replay/"
IS_ESS_KEY = f"{TELEMETRY_PREFIX}is_ess"
#: The per-tag figures that hold the state after the latest call (``logger.record``) ...
STATE_STATS = ("buffer_share", "priority_share")
#: ... and those averaged over the calls since the last dump (``logger.record_mean``)
MEAN_STATS = ("sample_share", "td_error", "critic_sample_share", "actor_sample_share")


def telemetry_key(tag: int, stat: str) -> str:
    """
    :param tag: a stored tag (``-1`` for transitions without one)
    :param stat: one of ``STATE_STATS`` or ``MEAN_STATS``
    :return: the logger key of ``stat`` for ``tag``, e.g. ``"replay/tag_2_sample_share"``
    """
    return f"{TELEMETRY_PREFIX}tag_{tag}_{stat}"


@dataclass(frozen=True)
class CallTelemetry:
    """
    One training call's replay figures, per tag (see the module docstring).

    :param buffer_share: share of the stored transitions, for every tag stored
    :param priority_share: share of the priority mass (empty for a buffer that is not prioritized)
    :param sample_share: share of the sampled transitions
    :param td_error: mean absolute TD error of the critic samples, for the tags sampled
    :param critic_sample_share: share of the critic's samples (empty unless the actor has batches of its own)
    :param actor_sample_share: share of the actor's samples (empty unless the actor has batches of its own, and
        trained in the call)
    :param is_ess: effective sample size of the call's IS weights (``None``: no IS weights)
    """

    buffer_share: Mapping[int, float]
    priority_share: Mapping[int, float]
    sample_share: Mapping[int, float]
    td_error: Mapping[int, float]
    critic_sample_share: Mapping[int, float]
    actor_sample_share: Mapping[int, float]
    is_ess: float | None


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


def call_telemetry(
    buffer: ReplayTagsMixin,
    sampled_indices: Sequence[np.ndarray],
    critic_indices: Sequence[np.ndarray],
    td_errors: Sequence[th.Tensor],
    actor_indices: Sequence[np.ndarray] | None = None,
    weights: Sequence[th.Tensor] = (),
) -> CallTelemetry:
    """
    One training call's figures (see the module's docstring).

    :param buffer: the tagged replay buffer (``tag_buffer_shares``, ``tags_at``, and ``tag_priority_shares`` where
        prioritized)
    :param sampled_indices: the flat indices of each batch sampled in the call, each batch once
    :param critic_indices: the flat indices of each critic batch, aligned with ``td_errors``
    :param td_errors: each critic batch's absolute TD errors
    :param actor_indices: the flat indices of each actor batch, where they differ from the critic's (LA3P,
        ``uniform_actor_batch``); empty for a call without an actor step
    :param weights: the IS weights of the call's batches, for ``is_ess`` (none: ``None``)
    """
    buffer_shares = buffer.tag_buffer_shares()
    priority_shares = buffer.tag_priority_shares() if hasattr(buffer, "tag_priority_shares") else {}
    stored_tags = list(buffer_shares)
    tags_at = buffer.tags_at
    critic_tags = tags_at(np.concatenate(critic_indices))
    abs_td_errors = th.cat(tuple(td_errors)).cpu().numpy().astype(np.float64)  # one device sync
    separate_actor = actor_indices is not None
    return CallTelemetry(
        buffer_share=buffer_shares,
        priority_share=priority_shares,
        sample_share=tag_shares(tags_at(np.concatenate(sampled_indices)), stored_tags),
        td_error=mean_by_tag(critic_tags, abs_td_errors),
        critic_sample_share=tag_shares(critic_tags, stored_tags) if separate_actor else {},
        actor_sample_share=(tag_shares(tags_at(np.concatenate(actor_indices)), stored_tags) if actor_indices else {}),
        is_ess=effective_sample_size(th.cat(tuple(weights))) if weights else None,
    )


def log_call_telemetry(logger: Logger, figures: CallTelemetry) -> None:
    """Log one training call's figures through the model's logger, under the keys of the module's docstring."""
    for stat in STATE_STATS:
        for tag, value in getattr(figures, stat).items():
            logger.record(telemetry_key(tag, stat), value)
    for stat in MEAN_STATS:
        for tag, value in getattr(figures, stat).items():
            logger.record_mean(telemetry_key(tag, stat), value)
    if figures.is_ess is not None:
        logger.record_mean(IS_ESS_KEY, figures.is_ess)


class ReplayTelemetry:
    """
    The replay figures of the training calls since the last ``clear``: for each tag and figure of ``STATE_STATS``
    the latest call's value, for each of ``MEAN_STATS`` (and ``is_ess``) the mean over the calls that gave one,
    computed as SB3's ``Logger.record_mean`` computes it, so that it equals what the logger shows.
    """

    def __init__(self) -> None:
        self._values: dict[tuple[int, str], float] = {}
        self._counts: dict[tuple[int, str], int] = {}

    def add(self, figures: CallTelemetry) -> None:
        """Take in one training call's figures."""
        for stat in STATE_STATS:
            for tag, value in getattr(figures, stat).items():
                self._values[tag, stat] = value
        for stat in MEAN_STATS:
            for tag, value in getattr(figures, stat).items():
                self._add_to_mean((tag, stat), value)
        if figures.is_ess is not None:
            self._add_to_mean((0, "is_ess"), figures.is_ess)

    def _add_to_mean(self, key: tuple[int, str], value: float) -> None:
        # Logger.record_mean's arithmetic, from 0.0 and count 0, so that the values are the logger's bit for bit.
        old, count = self._values.get(key, 0.0), self._counts.get(key, 0)
        self._values[key] = old * count / (count + 1) + value / (count + 1)
        self._counts[key] = count + 1

    def value(self, tag: int, stat: str) -> float:
        """
        :param tag: a tag
        :param stat: one of ``STATE_STATS`` or ``MEAN_STATS``
        :return: the figure since the last ``clear`` (NaN where no call gave one)
        """
        return self._values.get((tag, stat), math.nan)

    @property
    def is_ess(self) -> float:
        """The mean effective sample size of the IS weights since the last ``clear`` (NaN where none was used)."""
        return self._values.get((0, "is_ess"), math.nan)

    def clear(self) -> None:
        """Forget every figure (the algorithm calls it where it dumps its logs)."""
        self._values.clear()
        self._counts.clear()

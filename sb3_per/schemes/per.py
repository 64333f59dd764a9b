"""PER: prioritized experience replay with an importance-weighted critic loss (Schaul et al. 2016)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.logger import Logger

from sb3_per.buffers import PrioritizedBufferMixin
from sb3_per.checks import checked_bool, checked_choice
from sb3_per.schemes.base import (
    PRIORITY_LOGGER_KEYS,
    BatchSource,
    Critics,
    CriticStep,
    ReplayScheme,
    ReplayUpdate,
    TrainingCallRecord,
    WeightedCriticLoss,
    log_importance_sampling_statistics,
    online_critic_loss,
    prioritized_buffer_for,
)

#: What PER's priorities can be made of (see ``PER``)
PER_PRIORITIES = ("td_error", "loss")


@dataclass(frozen=True)
class PER(ReplayScheme):
    """
    Prioritized experience replay (Schaul, Quan, Antonoglou & Silver, ICLR 2016, https://arxiv.org/abs/1511.05952):
    the default with a prioritized buffer.

    Each gradient step trains the critic (and the actor) on one batch sampled by priority, with the algorithm's own
    critic loss, each sample weighted by its importance-sampling weight; after the critic's optimizer step, each
    sampled transition's priority becomes its absolute TD error ``|d|`` from that forward pass (the buffer stores
    ``(|d| + epsilon) ** alpha``). It changes no buffer setting, and refuses a buffer that is not prioritized. Logs
    ``train/per_beta``, ``train/per_weight_mean``, ``train/per_priority_mean`` and ``train/per_priority_max``.

    Deviations from the paper's DQN (no code released): SB3's training steps, not Double DQN; priorities written back
    after each gradient step.

    The full description, the settings and the deviations: ``docs/methods/per.md``.

    :param td_error_reduction: how the twin critics' absolute TD errors become one per transition: ``"mean"``
        (default) or ``"max"`` of ``|Q_k - y|`` (one critic: both are ``|Q - y|``)
    :param uniform_actor_batch: an ablation: the actor (and SAC's entropy coefficient) trains on a batch of its own,
        sampled uniformly from the prioritized buffer after the critic's batch, so that prioritized replay serves the
        critic only (default False: one batch for both). TD3's and DDPG's steps without an actor update sample none.
    :param priority: what the priority is made of: ``"td_error"`` (default, the paper's ``|d|``) or ``"loss"``, the
        algorithm's per-sample loss averaged over the critics (DQN: ``huber(d)``; SAC, TD3: ``d ** 2``), as the PER
        baselines of the ReLo authors' code (``(loss + epsilon) ** alpha``), sharper on small errors
    """

    uniform_actor_batch: bool = False
    priority: str = "td_error"

    uses_importance_weights: ClassVar[bool] = True
    logger_keys: ClassVar[tuple[str, ...]] = ("train/per_beta", "train/per_weight_mean", *PRIORITY_LOGGER_KEYS)

    def __post_init__(self) -> None:
        super().__post_init__()
        checked_bool("uniform_actor_batch", self.uniform_actor_batch)
        checked_choice("priority", self.priority, PER_PRIORITIES)

    @property
    def separate_actor_batches(self) -> bool:
        return self.uniform_actor_batch

    def check_buffer(self, buffer: ReplayBuffer | None) -> None:
        if not isinstance(buffer, PrioritizedBufferMixin):
            raise ValueError(
                f"{self!r} samples in proportion to its priorities, but the replay buffer is a "
                f"{type(buffer).__name__}, which samples uniformly: use {prioritized_buffer_for(buffer)}, or leave "
                "replay_scheme out for SB3's uniform replay"
            )

    def updates(
        self, batches: BatchSource, batch_size: int, train_actor: bool, weighted_critic_loss: WeightedCriticLoss
    ) -> Iterator[ReplayUpdate]:
        batch = batches.sample(batch_size)
        actor_batch = batch if train_actor else None
        if self.uniform_actor_batch and train_actor:
            actor_batch = batches.sample_uniform(batch_size)
        # A tagged uniform buffer's batches (the default scheme's telemetry) carry no weights: SB3's own loss.
        yield ReplayUpdate(batch, partial(weighted_critic_loss, weights=getattr(batch, "weights", None)), actor_batch)

    def priorities(self, step: CriticStep, td_errors: th.Tensor, critics: Critics) -> th.Tensor:
        if self.priority == "td_error":
            return td_errors
        return online_critic_loss(step, critics)

    def log_statistics(self, logger: Logger, buffer: ReplayBuffer, record: TrainingCallRecord) -> None:
        log_importance_sampling_statistics(logger, buffer, record)

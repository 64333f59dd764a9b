"""LAP: loss-adjusted prioritized replay (Fujimoto, Meger & Precup 2020)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import torch as th
from stable_baselines3.common.buffers import ReplayBuffer

from sb3_per.checks import checked_bool, checked_number
from sb3_per.schemes.base import (
    BatchSource,
    Critics,
    CriticStep,
    ReplayScheme,
    ReplayUpdate,
    WeightedCriticLoss,
    check_prioritized_buffer,
)
from sb3_per.schemes.losses import lap_loss

#: LAP's priority exponent in the paper (and LA3P's), the buffer's ``alpha`` that ``LAP`` and ``LA3P`` set
LAP_ALPHA = 0.4


@dataclass(frozen=True)
class LAP(ReplayScheme):
    """
    Loss-adjusted prioritized replay (Fujimoto, Meger & Precup, NeurIPS 2020, https://arxiv.org/abs/2007.06049):
    batches sampled in proportion to ``max(|d_i|, kappa) ** alpha`` (``kappa = min_priority``), and the critic trained
    on the unweighted Huber loss with threshold ``kappa`` (``lap_loss``), no importance-sampling weights: in
    expectation the gradient of the mean squared error under uniform sampling. Needs a proportional
    ``PrioritizedReplayBuffer``. Logs ``train/per_priority_mean`` and ``train/per_priority_max``.

    Buffer settings, the paper's (under the user's ``replay_buffer_kwargs``): ``alpha`` 0.4.

    Deviations from the authors' code (github.com/sfujim/LAP-PAL): the buffer's ``epsilon`` added to the priority;
    SB3's training steps.

    The full description, the settings and the deviations: ``docs/methods/lap.md``.

    :param min_priority: the priority floor and Huber threshold ``kappa``: 1 in the paper's continuous control (where
        it makes LAP uniform replay whenever every ``|d| < 1``), 0.01 for Atari; set it relative to the task's TD
        errors
    :param td_error_reduction: how the twin critics' absolute TD errors become one per transition: ``"max"``
        (default, the authors') or ``"mean"``
    :param uniform_actor_batch: an ablation, as ``PER``'s: the actor trains on a uniform batch of its own
    """

    min_priority: float = 1.0
    td_error_reduction: str = "max"
    uniform_actor_batch: bool = False

    replaces_critic_loss: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        checked_number("min_priority", self.min_priority, low=0.0, low_open=True)
        checked_bool("uniform_actor_batch", self.uniform_actor_batch)

    @property
    def separate_actor_batches(self) -> bool:
        return self.uniform_actor_batch

    def buffer_settings(self, algorithm: Any) -> dict[str, Any]:
        """The paper's priority exponent, ``alpha=0.4``."""
        return {"alpha": LAP_ALPHA}

    def check_buffer(self, buffer: ReplayBuffer | None) -> None:
        check_prioritized_buffer(self, buffer)

    def updates(
        self, batches: BatchSource, batch_size: int, train_actor: bool, weighted_critic_loss: WeightedCriticLoss
    ) -> Iterator[ReplayUpdate]:
        batch = batches.sample(batch_size)
        actor_batch = batch if train_actor else None
        if self.uniform_actor_batch and train_actor:
            actor_batch = batches.sample_uniform(batch_size)
        yield ReplayUpdate(batch, partial(lap_loss, min_priority=self.min_priority), actor_batch)

    def priorities(self, step: CriticStep, td_errors: th.Tensor, critics: Critics) -> th.Tensor:
        return td_errors.clamp(min=self.min_priority)

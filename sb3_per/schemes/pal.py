"""PAL: the prioritized approximation loss, LAP's expected gradient under uniform sampling (Fujimoto et al. 2020)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

from stable_baselines3.common.buffers import ReplayBuffer

from sb3_per.buffers import PrioritizedBufferMixin
from sb3_per.checks import checked_number
from sb3_per.schemes.base import BatchSource, ReplayScheme, ReplayUpdate, WeightedCriticLoss
from sb3_per.schemes.losses import pal_loss


@dataclass(frozen=True)
class PAL(ReplayScheme):
    """
    Prioritized approximation loss (Fujimoto, Meger & Precup, NeurIPS 2020, https://arxiv.org/abs/2007.06049):
    uniform sampling from a buffer that is *not* prioritized, with ``pal_loss``, whose expected gradient is the one
    LAP's prioritized sampling gives, without a priority structure. It changes no buffer setting, and refuses a
    prioritized buffer. Logs nothing beyond SB3's keys.

    Deviations from the authors' code (github.com/sfujim/LAP-PAL): SB3's training steps.

    The full description, the settings and the deviations: ``docs/methods/pal.md``.

    :param alpha: the exponent (0.4 in the paper, LAP's priority exponent)
    :param min_priority: the threshold ``kappa`` (1 in the paper)
    :param td_error_reduction: how the twin critics' absolute TD errors enter the loss's divisor ``lambda =
        mean(max(|d|, kappa) ** alpha)``: ``"max"`` (default, the authors') or ``"mean"``
    """

    alpha: float = 0.4
    min_priority: float = 1.0
    td_error_reduction: str = "max"

    logger_keys: ClassVar[tuple[str, ...]] = ()

    replaces_critic_loss: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        checked_number("alpha", self.alpha, low=0.0)
        checked_number("min_priority", self.min_priority, low=0.0, low_open=True)

    def check_buffer(self, buffer: ReplayBuffer | None) -> None:
        if isinstance(buffer, PrioritizedBufferMixin):
            raise ValueError(
                f"{self!r} replaces prioritized sampling by its loss and samples uniformly, but the replay buffer is "
                f"a {type(buffer).__name__}: use one that is not prioritized (replay_buffer_class=None)"
            )

    def updates(
        self, batches: BatchSource, batch_size: int, train_actor: bool, weighted_critic_loss: WeightedCriticLoss
    ) -> Iterator[ReplayUpdate]:
        batch = batches.sample(batch_size)
        loss = partial(pal_loss, alpha=self.alpha, reduction=self.td_error_reduction, min_priority=self.min_priority)
        yield ReplayUpdate(batch, loss, batch if train_actor else None)

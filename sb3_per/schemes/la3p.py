"""LA3P: loss-adjusted approximate actor prioritized experience replay (Saglam, Mutlu, Cicek & Kozat 2023)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import numpy as np
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer

from sb3_per.checks import checked_choice, checked_number
from sb3_per.schemes.base import (
    BatchSource,
    CriticLoss,
    Critics,
    CriticStep,
    ReplayScheme,
    ReplayUpdate,
    WeightedCriticLoss,
    check_prioritized_buffer,
)
from sb3_per.schemes.lap import LAP_ALPHA
from sb3_per.schemes.losses import lap_loss, pal_loss

#: LA3P's schedules (see ``LA3P``)
LA3P_BUDGETS = ("matched", "paper")


@dataclass(frozen=True)
class LA3P(ReplayScheme):
    """
    Loss-adjusted approximate actor prioritized experience replay (Saglam, Mutlu, Cicek & Kozat, JAIR 78, 2023,
    https://arxiv.org/abs/2209.00532), for SAC, TD3 and DDPG: the actor does not learn from the transitions the
    critic knows worst. Each gradient step takes a uniform part (critic with PAL's loss, and actor), a critic part
    sampled by LAP's priorities (LAP's loss) and an actor part sampled in proportion to ``1 / priority``; priorities
    ``max(|d|, min_priority)`` are written back from both critic parts. Logs ``train/per_priority_mean`` and
    ``train/per_priority_max``.

    Buffer settings (under the user's ``replay_buffer_kwargs``): ``alpha=pal_alpha`` and ``inverse_sampling=True``.

    Deviations from the authors' code (github.com/baturaysaglam/LA3P): ``budget="matched"`` by default; SAC's
    entropy-coefficient step, and the actor batch's sampling, before the critic step; the batch split as ``max(1,
    int(lambda N))`` prioritized and the rest uniform; the inverse priorities kept in a sum tree in step with the
    priorities.

    The full description, the settings and the deviations: ``docs/methods/la3p.md``.

    :param fraction: the prioritized share ``lambda`` of each batch, in (0, 1] (0.5, as the authors)
    :param budget: ``"matched"`` (default): one critic step on the uniform and prioritized parts and one actor step on
        the uniform and inverse parts, the optimizer steps of uniform replay; or ``"paper"``, the authors' schedule:
        critic and actor steps on the uniform part, then on the prioritized and the inverse part
    :param pal_alpha: the exponent of PAL's loss on the uniform part (0.4, LAP's priority exponent)
    :param min_priority: LAP's priority floor and Huber threshold, also PAL's threshold (1, as the authors)
    :param td_error_reduction: how the twin critics' absolute TD errors become one per transition: ``"max"``
        (default, the authors') or ``"mean"``
    """

    fraction: float = 0.5
    budget: str = "matched"
    pal_alpha: float = LAP_ALPHA
    min_priority: float = 1.0
    td_error_reduction: str = "max"

    needs_actor: ClassVar[bool] = True

    replaces_critic_loss: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        checked_number("fraction", self.fraction, low=0.0, high=1.0, low_open=True)
        checked_choice("budget", self.budget, LA3P_BUDGETS)
        checked_number("pal_alpha", self.pal_alpha, low=0.0)
        checked_number("min_priority", self.min_priority, low=0.0, low_open=True)

    @property
    def separate_actor_batches(self) -> bool:
        return True

    def buffer_settings(self, algorithm: Any) -> dict[str, Any]:
        """``alpha=pal_alpha`` (PAL's loss is LAP's expected gradient at the same exponent) and ``inverse_sampling``."""
        return {"alpha": self.pal_alpha, "inverse_sampling": True}

    def check_buffer(self, buffer: ReplayBuffer | None) -> None:
        check_prioritized_buffer(self, buffer, inverse=True)

    def updates(
        self, batches: BatchSource, batch_size: int, train_actor: bool, weighted_critic_loss: WeightedCriticLoss
    ) -> Iterator[ReplayUpdate]:
        n_prioritized = max(1, int(batch_size * self.fraction))
        n_uniform = batch_size - n_prioritized
        pal = partial(pal_loss, alpha=self.pal_alpha, reduction=self.td_error_reduction, min_priority=self.min_priority)
        lap = partial(lap_loss, min_priority=self.min_priority)
        uniform = batches.sample_uniform(n_uniform) if n_uniform else None
        if self.budget == "paper" and uniform is not None:
            yield ReplayUpdate(uniform, pal, uniform if train_actor else None)
        prioritized = batches.sample(n_prioritized)
        inverse = batches.sample_inverse(n_prioritized) if train_actor else None
        if self.budget == "paper" or uniform is None:
            yield ReplayUpdate(prioritized, lap, inverse)
            return
        critic_batch = concatenate_samples(uniform, prioritized)
        actor_batch = concatenate_samples(uniform, inverse) if inverse is not None else None
        yield ReplayUpdate(critic_batch, partial(la3p_matched_loss, n_uniform=n_uniform, pal=pal, lap=lap), actor_batch)

    def priorities(self, step: CriticStep, td_errors: th.Tensor, critics: Critics) -> th.Tensor:
        return td_errors.clamp(min=self.min_priority)


def la3p_matched_loss(
    current_q_values: Sequence[th.Tensor],
    target_q_values: th.Tensor,
    n_uniform: int,
    pal: CriticLoss,
    lap: CriticLoss,
) -> th.Tensor:
    """
    LA3P's critic loss on a batch whose first ``n_uniform`` transitions were sampled uniformly (PAL's loss) and
    the others by priority (LAP's): the mean over the batch, ``(n_u * PAL + n_p * LAP) / (n_u + n_p)``.
    """
    n_total = target_q_values.shape[0]
    uniform = pal([q[:n_uniform] for q in current_q_values], target_q_values[:n_uniform])
    prioritized = lap([q[n_uniform:] for q in current_q_values], target_q_values[n_uniform:])
    return (n_uniform * uniform + (n_total - n_uniform) * prioritized) / n_total


def concatenate_samples(first: Any, second: Any) -> Any:
    """
    One batch made of two of the same kind (``PrioritizedReplayBufferSamples`` or its Dict counterpart), in order.

    :param first: a batch
    :param second: another batch of the same type
    :return: the batch of ``len(first) + len(second)`` transitions, of the same type
    """

    def joined(a: Any, b: Any) -> Any:
        if a is None:
            return None
        if isinstance(a, dict):
            return {key: th.cat((a[key], b[key])) for key in a}
        if isinstance(a, np.ndarray):
            return np.concatenate((a, b))
        return th.cat((a, b))

    return type(first)(*(joined(a, b) for a, b in zip(first, second, strict=True)))

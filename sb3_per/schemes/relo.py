"""ReLo: prioritize by the reducible loss, what the online critic can still learn (Sujit et al. 2023)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.logger import Logger

from sb3_per.schemes.base import (
    BatchSource,
    Critics,
    CriticStep,
    ReplayScheme,
    ReplayUpdate,
    TrainingCallRecord,
    WeightedCriticLoss,
    check_prioritized_buffer,
    log_importance_sampling_statistics,
    online_critic_loss,
)
from sb3_per.schemes.per import PER

#: The ReLo authors' priority offset, added to the reducible loss (their SAC and DQN)
RELO_EPSILON = 1e-5


def relo_buffer_settings(algorithm: Any) -> dict[str, Any]:
    """
    The ReLo authors' buffer settings for ``algorithm`` (its class): ``alpha`` 0.5 for an actor-critic (their SAC) or
    0.6 without an actor (their DQN), ``epsilon`` 1e-5, IS weights normalised by the batch's largest.
    """
    return {"alpha": 0.5 if algorithm.has_actor else 0.6, "epsilon": RELO_EPSILON, "weight_normalization": "batch"}


def reducible_loss(step: CriticStep, critics: Critics) -> th.Tensor:
    """
    ReLo's priority signal: the online critics' loss minus the target critics' loss, on the step's (s, a) and
    targets, averaged over the critics, clipped at 0.

    :param step: a critic step (the online critics' Q-values from before its optimizer step, and its targets)
    :param critics: the algorithm's critics (its target critics and its per-sample loss)
    :return: ``relu(mean_k L(Q_k(s, a), y) - mean_k L(Q'_k(s, a), y))`` per transition, shape (batch_size,)
    """
    with th.no_grad():
        target = critics.elementwise_critic_loss(critics.target_q_values(step.batch), step.targets).mean(dim=1)
        return th.relu(online_critic_loss(step, critics) - target)


@dataclass(frozen=True)
class ReLo(ReplayScheme):
    """
    Reducible-loss prioritization (Sujit, Nath, Braga & Ebrahimi Kahou, NeurIPS 2023,
    https://arxiv.org/abs/2208.10483): PER's sampling and importance-weighted critic and actor losses, with a priority
    that leaves out what the critic cannot learn. After each critic step, a sampled transition's priority becomes
    ``relu(L_on - L_tgt)`` (``reducible_loss``): the online critics' per-sample loss minus the target critics' on the
    same ``(s, a)`` and TD target, each averaged over the critics. Logs ``PER``'s keys.

    Buffer settings, the authors' (``relo_buffer_settings``, under the user's ``replay_buffer_kwargs``): ``alpha`` 0.5
    with an actor or 0.6 without one, ``epsilon`` 1e-5, IS weights normalised by the batch's largest.

    Deviations from the authors' code (github.com/shivakanthsujit/reducible-loss): beta annealed linearly; SB3's
    critic losses (SAC's with its 0.5); TD3 and DDPG, which they do not use, follow their SAC.

    The full description, the settings and the deviations: ``docs/methods/relo.md``.

    :param td_error_reduction: how the twin critics' absolute TD errors become one per transition for the telemetry
        (``"mean"``, default, or ``"max"``); the priority itself always averages the critics' losses, as the authors
    """

    uses_importance_weights: ClassVar[bool] = True
    logger_keys: ClassVar[tuple[str, ...]] = PER.logger_keys

    def buffer_settings(self, algorithm: Any) -> dict[str, Any]:
        return relo_buffer_settings(algorithm)

    def check_buffer(self, buffer: ReplayBuffer | None) -> None:
        check_prioritized_buffer(self, buffer)

    def updates(
        self, batches: BatchSource, batch_size: int, train_actor: bool, weighted_critic_loss: WeightedCriticLoss
    ) -> Iterator[ReplayUpdate]:
        batch = batches.sample(batch_size)
        loss = partial(weighted_critic_loss, weights=batch.weights)
        yield ReplayUpdate(batch, loss, batch if train_actor else None, batch.weights if train_actor else None)

    def priorities(self, step: CriticStep, td_errors: th.Tensor, critics: Critics) -> th.Tensor:
        return reducible_loss(step, critics)

    def log_statistics(self, logger: Logger, buffer: ReplayBuffer, record: TrainingCallRecord) -> None:
        log_importance_sampling_statistics(logger, buffer, record)

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
    Reducible-loss prioritization (Sujit, Nath, Braga & Ebrahimi Kahou, NeurIPS 2023, "Prioritizing Samples in
    Reinforcement Learning with Reducible Loss", https://arxiv.org/abs/2208.10483; code
    github.com/shivakanthsujit/reducible-loss).

    PER's sampling and importance-weighted critic loss, with a priority that leaves out what the critic cannot learn:
    after each critic step, a sampled transition's priority becomes ``relu(L_on - L_tgt)`` (``reducible_loss``),
    ``L_on`` the online critics' per-sample loss on its ``(s, a)`` and TD target ``y`` (from the forward pass that gave
    the loss, before the optimizer step), ``L_tgt`` the same loss of the target critics on the same ``(s, a)`` and
    ``y`` (one extra forward pass without gradient), each averaged over the critics; the buffer stores
    ``(priority + epsilon) ** alpha``. The loss is the algorithm's own kind: the squared error for SAC, TD3 and DDPG
    (TQC: on the critics' means), the Huber loss for DQN (QR-DQN: on the quantiles' means), as the authors' SAC and
    DQN. The actor's loss is weighted by the batch's IS weights too, as the authors' SAC does (SAC's
    entropy-coefficient loss is not, nor is it there). Logs ``PER``'s keys.

    The authors' settings, which the scheme gives the buffer under the user's ``replay_buffer_kwargs``
    (``relo_buffer_settings``): ``alpha`` 0.5 (SAC) or 0.6 (DQN), ``epsilon`` 1e-5 added to the priority, IS weights
    normalised by the batch's largest (``weight_normalization="batch"``); beta from 0.4, the buffer's default. Set
    ``epsilon`` relative to the task's squared TD errors: on a task whose losses are about 1e-5 (the pairs env) the
    authors' epsilon is as large as the priorities themselves.

    Deviations from the authors' code: beta anneals linearly as the buffer says (``beta_anneal_steps``; theirs
    compounds a per-step increase in SAC, ``beta += t / T * (1 - beta)``, reaching about 0.99 within 3k steps, and is
    linear over the run in DQN); the critic loss is the algorithm's SB3 loss (SAC's ``0.5 * sum_k mean(w * (Q_k -
    y) ** 2)``, theirs without the 0.5); new transitions enter at the largest priority seen so far, as theirs;
    TD3 and DDPG, which they do not use, follow their SAC (mean over the critics, weighted actor loss).

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

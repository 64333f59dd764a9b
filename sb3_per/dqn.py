"""DQN with prioritized experience replay: an IS-weighted Huber loss and priority write-back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import stable_baselines3
import torch as th
from torch.nn import functional as F

from sb3_per.per_algorithm import PrioritizedReplayMixin, constructor_with_replay_scheme
from sb3_per.schemes import BatchSource, CriticStep, ReplayScheme
from sb3_per.schemes.base import CriticLoss
from sb3_per.schemes.losses import weighted_huber_loss


class DQNTrainingSteps(PrioritizedReplayMixin):
    """
    SB3's ``DQN.train`` with its gradient step in ``_critic_step``, which takes its batch as an argument, for
    ``sb3_per.DQN`` and ``sb3_per.QRDQN`` (sb3-contrib's QR-DQN trains as DQN does, with a quantile network: it
    replaces the step).
    """

    # LA3P prioritizes an actor's batches: DQN and QR-DQN have none.
    has_actor = False

    # Set by SB3's DQN or sb3-contrib's QRDQN (the host class)
    policy: Any
    _n_updates: int
    _update_learning_rate: Callable[[list[th.optim.Optimizer] | th.optim.Optimizer], None]

    def elementwise_critic_loss(self, q_values: Sequence[th.Tensor], targets: th.Tensor) -> th.Tensor:
        """SB3's DQN loss (the Huber loss) per sample, shape (batch_size, 1) (QR-DQN: on its quantiles' means)."""
        (q,) = q_values
        return F.smooth_l1_loss(q, targets, reduction="none")

    def _train_with_scheme(
        self, scheme: ReplayScheme, batches: BatchSource, gradient_steps: int, batch_size: int
    ) -> None:
        """
        SB3's ``DQN.train`` (as of stable-baselines3 2.9; sb3-contrib's ``QRDQN.train`` is the same loop), its
        gradient step in ``_critic_step`` on each batch the scheme gives, with the priority write-back after it
        (``PER:``).
        """
        # Switch to train mode (this affects batch norm / dropout)
        self.policy.set_training_mode(True)
        # Update learning rate according to schedule
        self._update_learning_rate(self.policy.optimizer)

        losses = []
        for _ in range(gradient_steps):
            for update in self._updates(scheme, batches, batch_size, False, self.weighted_critic_loss):
                loss, step = self._critic_step(update.critic_batch, update.critic_loss)
                losses.append(loss.item())
                self._write_back(scheme, batches, step)  # PER

        # Increase update counter
        self._n_updates += gradient_steps

        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/loss", np.mean(losses))

    def _critic_step(self, replay_data: Any, loss_of: CriticLoss) -> tuple[th.Tensor, CriticStep]:
        """
        The host algorithm's gradient step on the batch, with the loss the replay scheme gives it: the loss, and what
        the step computed (``sb3_per.DQN``'s and ``sb3_per.QRDQN``'s).
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement its gradient step")


class DQN(DQNTrainingSteps, stable_baselines3.DQN):
    """
    Deep Q-Network (DQN) that makes use of a ``PrioritizedReplayBuffer``: a drop-in subclass of
    ``stable_baselines3.DQN``, with the same parameters.

    With a ``PrioritizedReplayBuffer`` (``replay_buffer_class=PrioritizedReplayBuffer``, with its options
    ``alpha``, ``beta_start``, ... in ``replay_buffer_kwargs``), each gradient step trains as its ``replay_scheme``
    says (``sb3_per.schemes``), ``PER()`` by default:

    - SB3's Huber loss is weighted per sample by the sampled importance-sampling weights ``w``:
      ``mean(w * smooth_l1(Q, y))`` (SB3's ``F.smooth_l1_loss(Q, y)`` when all ``w`` are one), and
    - after the optimizer step, the priorities of the sampled transitions are written back from the TD errors
      ``|Q - y|`` of that same forward pass.

    Gradient clipping, the exploration schedule and the target-network updates are SB3's. Each training call
    also logs the scheme's keys, as ``sb3_per.SAC`` does. With any other replay buffer and ``replay_scheme=None``
    it is exactly ``stable_baselines3.DQN``: its ``train`` runs unchanged.

    The parameters are ``stable_baselines3.DQN``'s, plus:

    :param replay_scheme: What each gradient step trains on, its loss and its priorities: ``PER()``, ``LAP()``
        (its authors use ``min_priority=0.01`` for Atari), ``PAL()``, ``ReLo()``, ``ExpectedTD()`` or
        ``ExpectedReLo()`` (``sb3_per.schemes``); ``LA3P``, which prioritizes an actor's batches, and ``UPER``, which
        needs quantile critics, are refused. ``None`` (default): ``PER()`` with a prioritized buffer, SB3's own
        training with any other
    """

    def weighted_critic_loss(
        self, current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor | None
    ) -> th.Tensor:
        (q_values,) = current_q_values
        return weighted_huber_loss(q_values, target_q_values, weights)

    def target_q_values(self, batch: Any) -> Sequence[th.Tensor]:
        """The target network's Q-values of the batch's actions, shape (batch_size, 1), without gradient."""
        with th.no_grad():
            return (th.gather(self.q_net_target(batch.observations), dim=1, index=batch.actions.long()),)

    __init__ = constructor_with_replay_scheme(stable_baselines3.DQN)

    def _critic_step(self, replay_data: Any, loss_of: CriticLoss) -> tuple[th.Tensor, CriticStep]:
        """
        SB3's gradient step, on the batch, with the loss the replay scheme gives it.

        :param replay_data: the batch
        :param loss_of: its loss, from the Q-values of the batch's actions (a one-element tuple) and the TD targets
        :return: the loss, and what the step computed (Q-values and targets of the same forward pass)
        """
        # For n-step replay, discount factor is gamma**n_steps (when no early termination)
        discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma

        with th.no_grad():
            # Compute the next Q-values using the target network
            next_q_values = self.q_net_target(replay_data.next_observations)
            # Follow greedy policy: use the one with the highest value
            next_q_values, _ = next_q_values.max(dim=1)
            # Avoid potential broadcast issue
            next_q_values = next_q_values.reshape(-1, 1)
            # 1-step TD target
            target_q_values = replay_data.rewards + (1 - replay_data.dones) * discounts * next_q_values

        # Get current Q-values estimates
        current_q_values = self.q_net(replay_data.observations)

        # Retrieve the q-values for the actions from the replay buffer
        current_q_values = th.gather(current_q_values, dim=1, index=replay_data.actions.long())

        # Compute Huber loss (less sensitive to outliers) (PER: as the replay scheme says)
        loss = loss_of((current_q_values,), target_q_values)

        # Optimize the policy
        self.policy.optimizer.zero_grad()
        loss.backward()
        # Clip gradient norm
        th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.policy.optimizer.step()
        return loss, CriticStep(replay_data, (current_q_values,), target_q_values)

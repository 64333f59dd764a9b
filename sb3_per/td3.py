"""TD3 with prioritized experience replay: an IS-weighted twin-critic loss and priority write-back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import stable_baselines3
import torch as th
from stable_baselines3.common.policies import ContinuousCritic
from stable_baselines3.common.utils import polyak_update
from stable_baselines3.td3.policies import Actor, TD3Policy

from sb3_per.per_algorithm import PrioritizedReplayMixin, constructor_with_replay_scheme
from sb3_per.schemes import BatchSource, CriticStep, ReplayScheme
from sb3_per.schemes.base import CriticLoss
from sb3_per.schemes.losses import weighted_mean


class TD3TrainingSteps(PrioritizedReplayMixin):
    """
    SB3's ``TD3.train`` split into a critic step and an actor step that take their batch as an argument, for
    ``sb3_per.TD3`` and ``sb3_per.DDPG`` (SB3's DDPG trains with ``TD3.train``).
    """

    critic_loss_scale: ClassVar[float] = 1.0  # SB3's TD3 loss is the plain sum over critics of their MSEs

    # Set by SB3's TD3 (the host class)
    policy: TD3Policy
    actor: Actor
    actor_target: Actor
    critic: ContinuousCritic
    critic_target: ContinuousCritic
    actor_batch_norm_stats: list[th.Tensor]
    actor_batch_norm_stats_target: list[th.Tensor]
    critic_batch_norm_stats: list[th.Tensor]
    critic_batch_norm_stats_target: list[th.Tensor]
    tau: float
    policy_delay: int
    target_policy_noise: float
    target_noise_clip: float
    _n_updates: int
    _update_learning_rate: Callable[[list[th.optim.Optimizer] | th.optim.Optimizer], None]

    def _train_with_scheme(
        self, scheme: ReplayScheme, batches: BatchSource, gradient_steps: int, batch_size: int
    ) -> None:
        """
        SB3's ``TD3.train`` (as of stable-baselines3 2.9), its gradient step split into ``_critic_step`` and the
        delayed ``_actor_step``, run on each update the scheme gives (one batch for both unless it says otherwise;
        the target networks follow each delayed actor step), with the priority write-back after each critic step
        (``PER:``; every step, not only every ``policy_delay``).
        """
        # Switch to train mode (this affects batch norm / dropout)
        self.policy.set_training_mode(True)

        # Update learning rate according to lr schedule
        self._update_learning_rate([self.actor.optimizer, self.critic.optimizer])

        actor_losses, critic_losses = [], []
        for _ in range(gradient_steps):
            self._n_updates += 1
            # Delayed policy updates
            delayed_update = self._n_updates % self.policy_delay == 0
            for update in self._updates(scheme, batches, batch_size, delayed_update, self.weighted_critic_loss):
                critic_loss, step = self._critic_step(update.critic_batch, update.critic_loss)
                critic_losses.append(critic_loss.item())
                self._write_back(scheme, batches, step)  # PER

                if delayed_update:
                    actor_losses.append(self._actor_step(update.actor_batch, update.actor_weights).item())

                    polyak_update(self.critic.parameters(), self.critic_target.parameters(), self.tau)
                    polyak_update(self.actor.parameters(), self.actor_target.parameters(), self.tau)
                    # Copy running stats, see GH issue #996
                    polyak_update(self.critic_batch_norm_stats, self.critic_batch_norm_stats_target, 1.0)
                    polyak_update(self.actor_batch_norm_stats, self.actor_batch_norm_stats_target, 1.0)

        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        if len(actor_losses) > 0:
            self.logger.record("train/actor_loss", np.mean(actor_losses))
        self.logger.record("train/critic_loss", np.mean(critic_losses))

    def _critic_step(self, replay_data: Any, critic_loss_of: CriticLoss) -> tuple[th.Tensor, CriticStep]:
        """
        SB3's critic step, on the critic's batch, with the loss the replay scheme gives it.

        :param replay_data: the critic's batch
        :param critic_loss_of: its loss, from the critics' Q-values and the TD targets
        :return: the critic loss, and what the step computed (Q-values and targets of the same forward pass)
        """
        # For n-step replay, discount factor is gamma**n_steps (when no early termination)
        discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma

        with th.no_grad():
            # Select action according to policy and add clipped noise
            noise = replay_data.actions.clone().data.normal_(0, self.target_policy_noise)
            noise = noise.clamp(-self.target_noise_clip, self.target_noise_clip)
            next_actions = (self.actor_target(replay_data.next_observations) + noise).clamp(-1, 1)

            # Compute the next Q-values: min over all critics targets
            next_q_values = th.cat(self.critic_target(replay_data.next_observations, next_actions), dim=1)
            next_q_values, _ = th.min(next_q_values, dim=1, keepdim=True)
            target_q_values = replay_data.rewards + (1 - replay_data.dones) * discounts * next_q_values

        # Get current Q-values estimates for each critic network
        current_q_values = self.critic(replay_data.observations, replay_data.actions)

        # Compute critic loss (PER: as the replay scheme says)
        critic_loss = critic_loss_of(current_q_values, target_q_values)

        # Optimize the critics
        self.critic.optimizer.zero_grad()
        critic_loss.backward()
        self.critic.optimizer.step()
        return critic_loss, CriticStep(replay_data, current_q_values, target_q_values)

    def _actor_step(self, replay_data: Any, weights: th.Tensor | None) -> th.Tensor:
        """
        SB3's (delayed) actor step, on the actor's batch.

        :param replay_data: the actor's batch
        :param weights: a weight per sample of the loss, as the replay scheme says (``None``: SB3's mean)
        :return: the actor loss
        """
        # Compute actor loss
        actor_loss = -weighted_mean(
            self.critic.q1_forward(replay_data.observations, self.actor(replay_data.observations)), weights
        )

        # Optimize the actor
        self.actor.optimizer.zero_grad()
        actor_loss.backward()
        self.actor.optimizer.step()
        return actor_loss


class TD3(TD3TrainingSteps, stable_baselines3.TD3):
    """
    Twin Delayed DDPG (TD3) that makes use of a ``PrioritizedReplayBuffer``: a drop-in subclass of
    ``stable_baselines3.TD3``.

    With a ``PrioritizedReplayBuffer`` (``replay_buffer_class=PrioritizedReplayBuffer``), each gradient step trains
    as its ``replay_scheme`` says (``sb3_per.schemes``), ``PER()`` by default:

    - the critic loss is weighted by the sampled importance-sampling weights ``w``:
      ``sum_i mean(w * (Q_i - y) ** 2)`` (SB3's ``sum_i F.mse_loss(Q_i, y)`` when all ``w`` are one;
      the delayed actor loss is unchanged), and
    - after the critics' optimizer step (every step, not only every ``policy_delay``), the priorities of the
      sampled transitions are written back from the TD errors of that same forward pass.

    Each training call also logs the scheme's keys, as ``sb3_per.SAC`` does. With any other replay buffer and
    ``replay_scheme=None`` it is exactly ``stable_baselines3.TD3``: its ``train`` runs unchanged.

    The parameters are those of ``stable_baselines3.TD3`` (``replay_buffer_class=PrioritizedReplayBuffer`` for
    prioritized replay, with its options ``alpha``, ``beta_start``, ... in ``replay_buffer_kwargs``), plus:

    :param replay_scheme: What each gradient step trains on, its critic loss and its priorities: ``PER()``,
        ``LAP()``, ``PAL()``, ``LA3P()``, ``ReLo()``, ``ExpectedTD()`` or ``ExpectedReLo()`` (``sb3_per.schemes``);
        ``UPER`` needs TQC's quantile critics and is refused. ``None`` (default): ``PER()`` with a prioritized
        buffer, SB3's own training with any other
    """

    # SB3's TD3 narrows these two from its base classes' types (BasePolicy, th.nn.Module). mypy requires the
    # mixin's declarations (TD3TrainingSteps') to equal those of every later base, which no one type does,
    # unless the class itself declares them.
    policy: TD3Policy
    actor: Actor

    __init__ = constructor_with_replay_scheme(stable_baselines3.TD3)

"""TQC with prioritized experience replay: an IS-weighted quantile Huber loss and priority write-back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, cast

import sb3_contrib
import torch as th
from sb3_contrib.tqc.policies import TQCPolicy

from sb3_per.per_algorithm import constructor_with_replay_scheme
from sb3_per.sac import PolicySample, SACTrainingSteps
from sb3_per.schemes import CriticStep
from sb3_per.schemes.base import CriticLoss
from sb3_per.schemes.losses import weighted_mean, weighted_quantile_huber_loss


def per_critic_means(quantiles: th.Tensor) -> tuple[th.Tensor, ...]:
    """Each critic's mean over its quantiles: (batch_size, n_critics, n_quantiles) -> n_critics of (batch_size, 1)."""
    return tuple(quantiles.mean(dim=2).split(1, dim=1))


class TQC(SACTrainingSteps, sb3_contrib.TQC):
    """
    Truncated Quantile Critics (TQC) that makes use of a ``PrioritizedReplayBuffer``: a drop-in subclass of
    ``sb3_contrib.TQC``.

    With a ``PrioritizedReplayBuffer`` (``replay_buffer_class=PrioritizedReplayBuffer``), each gradient step trains
    as its ``replay_scheme`` says, ``PER()`` by default:

    - the quantile Huber loss is weighted per sample by the sampled importance-sampling weights ``w``
      (``weighted_quantile_huber_loss``; sb3-contrib's loss when all ``w`` are one), and
    - after the critics' optimizer step, the priorities of the sampled transitions are written back from the TD
      errors of that same forward pass: ``|mean_q Z_k(s, a) - mean_j y_j|`` for each critic ``k`` (its quantiles
      ``Z_k``, the truncated target quantiles ``y_j``), combined over the critics as the scheme says.

    ``UPER()`` prioritizes by the critics' uncertainty instead; ``ReLo()`` compares the online and target critics'
    squared errors on their means. ``LAP``, ``PAL`` and ``LA3P`` replace the critic loss by one on Q-values and are
    refused. With any other replay buffer and ``replay_scheme=None`` it is exactly ``sb3_contrib.TQC``: its ``train``
    runs unchanged.

    The parameters are those of ``sb3_contrib.TQC`` (``replay_buffer_class=PrioritizedReplayBuffer`` for prioritized
    replay, with its options ``alpha``, ``beta_start``, ... in ``replay_buffer_kwargs``), plus:

    :param replay_scheme: What each gradient step trains on, its critic loss and its priorities: ``PER()``,
        ``ReLo()``, ``UPER()``, ``ExpectedTD()`` or ``ExpectedReLo()`` (``sb3_per.schemes``); ``LAP``, ``PAL`` and
        ``LA3P`` are refused. ``None`` (default): ``PER()`` with a prioritized buffer, sb3-contrib's own training with
        any other
    """

    quantile_critics: ClassVar[bool] = True
    quantile_ensemble: ClassVar[bool] = True
    # sb3-contrib's TQC narrows these from its base classes' types; mypy requires the mixin's declarations to equal
    # those of every later base unless the class itself declares them.
    policy: TQCPolicy

    __init__ = constructor_with_replay_scheme(sb3_contrib.TQC)

    def weighted_critic_loss(
        self, current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor | None
    ) -> th.Tensor:
        """sb3-contrib's quantile Huber loss with each sample weighted (here the "Q-values" are the quantiles)."""
        return weighted_quantile_huber_loss(cast(th.Tensor, current_q_values), target_q_values, weights)

    def target_q_values(self, batch: Any) -> Sequence[th.Tensor]:
        """Each target critic's mean over its quantiles for the batch's (observation, action) pairs, no gradient."""
        with th.no_grad():
            return per_critic_means(self.critic_target(batch.observations, batch.actions))

    def _critic_step(
        self, replay_data: Any, critic_loss_of: CriticLoss, policy_sample: PolicySample
    ) -> tuple[th.Tensor, CriticStep]:
        """
        sb3-contrib's critic step (as of sb3-contrib 2.9), on the critic's batch, with the loss the replay scheme
        gives it.

        :param replay_data: the critic's batch
        :param critic_loss_of: its loss, from the critics' quantiles and the target quantiles
        :param policy_sample: the entropy step's output (its entropy coefficient enters the targets)
        :return: the critic loss, and what the step computed: each critic's mean, the targets' mean, and the
            quantiles themselves
        """
        ent_coef = policy_sample.ent_coef
        batch_size = replay_data.rewards.shape[0]
        # For n-step replay, discount factor is gamma**n_steps (when no early termination)
        discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma

        with th.no_grad():
            # Select action according to policy
            next_actions, next_log_prob = self.actor.action_log_prob(replay_data.next_observations)
            # Compute and cut quantiles at the next state
            # batch x nets x quantiles
            next_quantiles = self.critic_target(replay_data.next_observations, next_actions)

            # Sort and drop top k quantiles to control overestimation.
            n_target_quantiles = (
                self.critic.quantiles_total - self.top_quantiles_to_drop_per_net * self.critic.n_critics
            )
            next_quantiles, _ = th.sort(next_quantiles.reshape(batch_size, -1))
            next_quantiles = next_quantiles[:, :n_target_quantiles]

            # td error + entropy term
            target_quantiles = next_quantiles - ent_coef * next_log_prob.reshape(-1, 1)
            target_quantiles = replay_data.rewards + (1 - replay_data.dones) * discounts * target_quantiles
            # Make target_quantiles broadcastable to (batch_size, n_critics, n_target_quantiles).
            target_quantiles.unsqueeze_(dim=1)

        # Get current Quantile estimates using action from the replay buffer
        current_quantiles = self.critic(replay_data.observations, replay_data.actions)
        # Compute critic loss, not summing over the quantile dimension as in the paper (PER: as the scheme says).
        critic_loss = critic_loss_of(cast(Sequence[th.Tensor], current_quantiles), target_quantiles)

        # Optimize the critic
        self.critic.optimizer.zero_grad()
        critic_loss.backward()
        self.critic.optimizer.step()
        detached = current_quantiles.detach()
        step = CriticStep(
            replay_data,
            per_critic_means(detached),
            target_quantiles.mean(dim=2),
            quantiles=(detached, target_quantiles),
        )
        return critic_loss, step

    def _actor_step(self, replay_data: Any, policy_sample: PolicySample, weights: th.Tensor | None) -> th.Tensor:
        """
        sb3-contrib's actor step, on the actor's batch (the one the entropy step sampled actions for).

        :param replay_data: the actor's batch
        :param policy_sample: the entropy step's output
        :param weights: a weight per sample of the loss, as the replay scheme says (``None``: sb3-contrib's mean)
        :return: the actor loss
        """
        # Compute actor loss
        qf_pi = self.critic(replay_data.observations, policy_sample.actions_pi).mean(dim=2).mean(dim=1, keepdim=True)
        actor_loss = weighted_mean(policy_sample.ent_coef * policy_sample.log_prob - qf_pi, weights)

        # Optimize the actor
        self.actor.optimizer.zero_grad()
        actor_loss.backward()
        self.actor.optimizer.step()
        return actor_loss

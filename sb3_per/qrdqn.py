"""QR-DQN with prioritized experience replay: an IS-weighted quantile Huber loss and priority write-back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import sb3_contrib
import torch as th

from sb3_per.dqn import DQNTrainingSteps
from sb3_per.per_algorithm import constructor_with_replay_scheme
from sb3_per.schemes import CriticStep
from sb3_per.schemes.base import CriticLoss
from sb3_per.schemes.losses import weighted_quantile_huber_loss


class QRDQN(DQNTrainingSteps, sb3_contrib.QRDQN):
    """
    Quantile Regression DQN (QR-DQN) that makes use of a ``PrioritizedReplayBuffer``: a drop-in subclass of
    ``sb3_contrib.QRDQN``, with the same parameters.

    With a ``PrioritizedReplayBuffer`` (``replay_buffer_class=PrioritizedReplayBuffer``, with its options ``alpha``,
    ``beta_start``, ... in ``replay_buffer_kwargs``), each gradient step trains as its ``replay_scheme`` says
    (``sb3_per.schemes``), ``PER()`` by default:

    - sb3-contrib's quantile Huber loss (summed over the quantiles, averaged over the target quantiles, as in the
      paper) is weighted per sample by the sampled importance-sampling weights ``w``: ``mean_i(w_i * l_i)``, ``l_i``
      sample ``i``'s loss (``weighted_quantile_huber_loss`` with ``sum_over_quantiles=True``; sb3-contrib's own
      function when all ``w`` are one), and
    - after the optimizer step, the priorities of the sampled transitions are written back from the TD errors of
      that same forward pass: ``|mean_i Z_i(s, a) - mean_j y_j|``, the quantiles ``Z_i`` of the batch's action and
      the target quantiles ``y_j``.

    That priority is the TD error of the Q-values the greedy policy acts on, the quantiles' means: ``|Q - y|``, as
    for ``sb3_per.DQN`` and for the quantile critics of ``sb3_per.TQC``. The per-sample quantile Huber loss would
    stay above 0 when the quantiles are exact, by the width of the return distribution, so that a wide return would
    keep a high priority however well it is learned (Dopamine's prioritized quantile agent writes back the square
    root of that loss). ``PER(priority="loss")`` and ``ReLo()`` use ``sb3_per.DQN``'s per-sample loss, the Huber
    loss, on the same means: ReLo's priority is ``relu(huber(mean_i Z_i - mean_j y_j) - huber(mean_i Z'_i - mean_j
    y_j))``, ``Z'`` the target network's quantiles of the batch's action. ``ExpectedTD()`` and ``ExpectedReLo()``
    learn the same mean TD error. ``LAP``, ``PAL`` and ``LA3P`` replace the loss by one on Q-values (``LA3P`` also
    needs an actor) and are refused; so is ``UPER``, which measures the disagreement of an ensemble of quantile
    critics, where QR-DQN has one network.

    Deviations from sb3-contrib's ``QRDQN.train`` (as of sb3-contrib 2.9) with a replay scheme: the IS-weighted loss
    and the priority write-back above; the quantiles are broadcast over the batch's own length, not over ``train``'s
    ``batch_size`` argument (the same, as the buffer returns that many). Gradient clipping (``max_grad_norm``), the
    exploration schedule and the target-network updates are sb3-contrib's. Each training call also logs the scheme's
    keys, as ``sb3_per.DQN`` does. With any other replay buffer and ``replay_scheme=None`` it is exactly
    ``sb3_contrib.QRDQN``: its ``train`` runs unchanged.

    The parameters are ``sb3_contrib.QRDQN``'s, plus:

    :param replay_scheme: What each gradient step trains on, its loss and its priorities: ``PER()``, ``ReLo()``,
        ``ExpectedTD()`` or ``ExpectedReLo()`` (``sb3_per.schemes``); ``LAP``, ``PAL``, ``LA3P`` and ``UPER`` are
        refused. ``None`` (default): ``PER()`` with a prioritized buffer, sb3-contrib's own training with any other
    """

    quantile_critics: ClassVar[bool] = True

    __init__ = constructor_with_replay_scheme(sb3_contrib.QRDQN)

    def weighted_critic_loss(
        self, current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor | None
    ) -> th.Tensor:
        """sb3-contrib's QR-DQN loss with each sample weighted (here the "Q-values" are the quantiles)."""
        (current_quantiles,) = current_q_values
        return weighted_quantile_huber_loss(current_quantiles, target_q_values, weights, sum_over_quantiles=True)

    def target_q_values(self, batch: Any) -> Sequence[th.Tensor]:
        """The target network's Q-values (its quantiles' means) of the batch's actions, (batch_size, 1), no gradient."""
        with th.no_grad():
            q_values = self.quantile_net_target(batch.observations).mean(dim=1)
            return (th.gather(q_values, dim=1, index=batch.actions.long()),)

    def _critic_step(self, replay_data: Any, loss_of: CriticLoss) -> tuple[th.Tensor, CriticStep]:
        """
        sb3-contrib's gradient step (as of sb3-contrib 2.9), on the batch, with the loss the replay scheme gives it.

        :param replay_data: the batch
        :param loss_of: its loss, from the quantiles of the batch's actions (a one-element tuple, (batch_size,
            n_quantiles)) and the target quantiles (batch_size, n_quantiles)
        :return: the loss, and what the step computed: the quantiles' mean, the target quantiles' mean, and the
            quantiles themselves, (batch_size, 1, n_quantiles) each
        """
        batch_size = replay_data.rewards.shape[0]
        # For n-step replay, discount factor is gamma**n_steps (when no early termination)
        discounts = replay_data.discounts if replay_data.discounts is not None else self.gamma

        with th.no_grad():
            # Compute the quantiles of next observation
            next_quantiles = self.quantile_net_target(replay_data.next_observations)
            # Compute the greedy actions which maximize the next Q values
            next_greedy_actions = next_quantiles.mean(dim=1, keepdim=True).argmax(dim=2, keepdim=True)
            # Make "n_quantiles" copies of actions, and reshape to (batch_size, n_quantiles, 1)
            next_greedy_actions = next_greedy_actions.expand(batch_size, self.n_quantiles, 1)
            # Follow greedy policy: use the one with the highest Q values
            next_quantiles = next_quantiles.gather(dim=2, index=next_greedy_actions).squeeze(dim=2)
            # 1-step TD target
            target_quantiles = replay_data.rewards + (1 - replay_data.dones) * discounts * next_quantiles

        # Get current quantile estimates
        current_quantiles = self.quantile_net(replay_data.observations)

        # Make "n_quantiles" copies of actions, and reshape to (batch_size, n_quantiles, 1).
        actions = replay_data.actions[..., None].long().expand(batch_size, self.n_quantiles, 1)
        # Retrieve the quantiles for the actions from the replay buffer
        current_quantiles = th.gather(current_quantiles, dim=2, index=actions).squeeze(dim=2)

        # Compute Quantile Huber loss, summing over a quantile dimension as in the paper (PER: as the scheme says).
        loss = loss_of((current_quantiles,), target_quantiles)

        # Optimize the policy
        self.policy.optimizer.zero_grad()
        loss.backward()
        # Clip gradient norm
        if self.max_grad_norm is not None:
            th.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.policy.optimizer.step()
        detached = current_quantiles.detach()
        step = CriticStep(
            replay_data,
            (detached.mean(dim=1, keepdim=True),),
            target_quantiles.mean(dim=1, keepdim=True),
            quantiles=(detached.unsqueeze(1), target_quantiles.unsqueeze(1)),
        )
        return loss, step

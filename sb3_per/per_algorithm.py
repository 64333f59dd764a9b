"""What every PER-aware algorithm shares: the IS-weighted losses, the TD errors that become priorities,
the priority write-back, the PER logger keys, and the ``train`` that keeps SB3's own for uniform replay."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch as th
from torch.nn import functional as F

from sb3_per.buffers import PrioritizedReplayBuffer

TD_ERROR_REDUCTIONS = ("mean", "max")
# What `PrioritizedReplayMixin._record_per_stats` logs through the model's logger each training call.
PER_LOGGER_KEYS = ("train/per_beta", "train/per_weight_mean", "train/per_priority_mean", "train/per_priority_max")


def check_td_error_reduction(td_error_reduction: str) -> str:
    """
    :param td_error_reduction: how several critics' TD errors are combined: one of ``TD_ERROR_REDUCTIONS``
    :return: ``td_error_reduction``, if valid
    :raises ValueError: naming the parameter, for any other value
    """
    if td_error_reduction not in TD_ERROR_REDUCTIONS:
        raise ValueError(f"td_error_reduction must be one of {TD_ERROR_REDUCTIONS}, got {td_error_reduction!r}")
    return td_error_reduction


def weighted_critic_loss(
    current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor, scale: float = 0.5
) -> th.Tensor:
    """
    Importance-sampling weighted critic loss: ``scale * sum_i mean(w * (Q_i - y) ** 2)`` over the critics.

    With all weights equal to one this is ``scale * sum_i F.mse_loss(Q_i, y)``: SB3's SAC loss for
    ``scale=0.5`` (the default), SB3's TD3 / DDPG loss for ``scale=1.0``.

    :param current_q_values: each critic's Q-values for the sampled (observation, action) pairs,
        tensors of shape (batch_size, 1)
    :param target_q_values: the TD targets ``y``, shape (batch_size, 1), without gradient
    :param weights: importance-sampling weights, one per sample (shape (batch_size, 1) or (batch_size,))
    :param scale: the factor in front of the sum over critics
    :return: the scalar loss
    """
    errors = th.cat(tuple(current_q_values), dim=1) - target_q_values  # (batch_size, n_critics)
    # scale * the sum over critics of a mean over the batch = scale * n_critics * one mean over both
    # (one fused expression: half the autograd nodes of a per-critic loop)
    return (scale * errors.shape[1]) * (weights.view_as(target_q_values) * errors.square()).mean()


def weighted_huber_loss(current_q_values: th.Tensor, target_q_values: th.Tensor, weights: th.Tensor) -> th.Tensor:
    """
    Importance-sampling weighted Huber loss: ``mean(w * smooth_l1(Q, y))``; with all weights equal to one
    this is SB3's DQN loss ``F.smooth_l1_loss(Q, y)``.

    :param current_q_values: Q-values of the sampled (observation, action) pairs, shape (batch_size, 1)
    :param target_q_values: the TD targets ``y``, shape (batch_size, 1), without gradient
    :param weights: importance-sampling weights, one per sample (shape (batch_size, 1) or (batch_size,))
    :return: the scalar loss
    """
    per_sample = F.smooth_l1_loss(current_q_values, target_q_values, reduction="none")
    return (weights.view_as(per_sample) * per_sample).mean()


def td_errors_for_priorities(
    current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, reduction: str = "mean"
) -> th.Tensor:
    """
    One absolute TD error per sample, to set the replay priorities from (detached from the graph).

    :param current_q_values: each critic's Q-values, tensors of shape (batch_size, 1)
    :param target_q_values: the TD targets, shape (batch_size, 1)
    :param reduction: how the critics' errors are combined: ``"mean"`` of ``|Q_i - y|`` (absolute values
        are taken first, so errors of opposite sign do not cancel) or ``"max"`` of ``|Q_i - y|`` (as LAP does)
    :return: tensor of shape (batch_size,), on the critics' device
    """
    check_td_error_reduction(reduction)
    with th.no_grad():
        abs_errors = (th.cat(tuple(current_q_values), dim=1) - target_q_values).abs_()  # (batch_size, n_critics)
        return abs_errors.mean(dim=1) if reduction == "mean" else abs_errors.amax(dim=1)


class PrioritizedReplayMixin:
    """
    Mixin for an SB3 off-policy algorithm (put it first among the bases: ``class TD3(PrioritizedReplayMixin,
    stable_baselines3.TD3)``) that makes use of a ``PrioritizedReplayBuffer``.

    Its ``train`` is the SB3 algorithm's own ``train`` unless the replay buffer is a ``PrioritizedReplayBuffer``;
    then it calls ``self._train_prioritized(buffer, gradient_steps, batch_size)``, which each algorithm writes
    as a copy of its SB3 ``train`` that weights the loss by the IS weights (``weighted_critic_loss``,
    ``weighted_huber_loss``), calls ``_write_back_priorities`` after the critic's optimizer step, and
    ``_record_per_stats`` at the end.
    """

    # How several critics' TD errors are combined; an instance attribute where the constructor takes it.
    td_error_reduction: str = "mean"

    def train(self, gradient_steps: int, batch_size: int | None = None) -> None:
        """
        :param gradient_steps: number of gradient steps
        :param batch_size: minibatch size; ``None`` means the SB3 algorithm's default (uniform replay)
            or ``self.batch_size`` (prioritized replay)
        """
        buffer = self.replay_buffer  # type: ignore[attr-defined]
        if isinstance(buffer, PrioritizedReplayBuffer):
            batch_size = self.batch_size if batch_size is None else batch_size  # type: ignore[attr-defined]
            self._train_prioritized(buffer, gradient_steps, batch_size)
        else:
            # Uniform replay: SB3's own `train`, so results are bit-identical and PER costs nothing.
            kwargs = {} if batch_size is None else {"batch_size": batch_size}
            super().train(gradient_steps, **kwargs)  # type: ignore[misc]

    def _train_prioritized(self, buffer: PrioritizedReplayBuffer, gradient_steps: int, batch_size: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement training from a prioritized buffer")

    def _write_back_priorities(
        self,
        buffer: PrioritizedReplayBuffer,
        indices: np.ndarray,
        current_q_values: Sequence[th.Tensor],
        target_q_values: th.Tensor,
    ) -> None:
        """
        Set the priorities of the sampled transitions from their TD errors (combined over the critics
        as ``td_error_reduction`` says), computed from the Q-values of the forward pass that gave the loss.

        :param buffer: the prioritized buffer the batch came from
        :param indices: the batch's flat indices in the buffer
        :param current_q_values: each critic's Q-values for the batch, tensors of shape (batch_size, 1)
        :param target_q_values: the batch's TD targets
        """
        td_errors = td_errors_for_priorities(current_q_values, target_q_values, self.td_error_reduction)
        buffer.update_priorities(indices, td_errors)

    def _record_per_stats(
        self, buffer: PrioritizedReplayBuffer, first_beta: float, sampled_weights: list[th.Tensor]
    ) -> None:
        """
        Log the prioritized-replay statistics of one training call (one device sync for all of them).

        :param buffer: the prioritized buffer
        :param first_beta: the IS exponent of the call's first batch
        :param sampled_weights: the IS weights of each batch of the call
        """
        logger = self.logger  # type: ignore[attr-defined]
        logger.record("train/per_beta", first_beta)
        if sampled_weights:
            logger.record("train/per_weight_mean", th.cat(sampled_weights).mean().item())
        logger.record("train/per_priority_mean", buffer.mean_priority)
        logger.record("train/per_priority_max", buffer.max_priority)

"""What every PER-aware algorithm shares: the IS-weighted losses, LAP and PAL (Fujimoto et al. 2020), the TD
errors that become priorities, the priority write-back, the PER logger keys, and the ``train`` that keeps SB3's
own for uniform replay."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from torch.nn import functional as F

from sb3_per.buffers import PrioritizedBufferMixin

TD_ERROR_REDUCTIONS = ("mean", "max")
# What the critic loss and the priorities are (see `PrioritizedReplayMixin`).
PER_MODES = ("per", "lap", "pal")
# What `PrioritizedReplayMixin._record_per_stats` logs through the model's logger each training call
# (with per_mode="lap", only the two priority keys).
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


def check_per_mode(per_mode: str, pal_alpha: float) -> str:
    """
    :param per_mode: one of ``PER_MODES``
    :param pal_alpha: PAL's exponent, a finite number >= 0
    :return: ``per_mode``, if valid
    :raises ValueError: naming the parameter, for any other value
    """
    if per_mode not in PER_MODES:
        raise ValueError(f"per_mode must be one of {PER_MODES}, got {per_mode!r}")
    if not (np.isfinite(pal_alpha) and pal_alpha >= 0):
        raise ValueError(f"pal_alpha must be a finite number >= 0, got {pal_alpha!r}")
    return per_mode


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


def lap_loss(current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor) -> th.Tensor:
    """
    LAP's critic loss (loss-adjusted prioritized replay, Fujimoto, Meger & Precup 2020): the Huber loss
    with threshold 1, unweighted, summed over the critics:
    ``sum_i mean(huber(Q_i - y))``, ``huber(d) = 0.5 * d ** 2`` if ``|d| < 1`` else ``|d| - 0.5``.

    Used with priorities ``max(|d|, 1) ** alpha``, this has in expectation the gradient of the mean squared
    error under uniform sampling. (The paper's code uses ``|d|`` above the threshold: the same gradient.)
    For one critic it is SB3's DQN loss ``F.smooth_l1_loss(Q, y)``.

    :param current_q_values: each critic's Q-values, tensors of shape (batch_size, 1)
    :param target_q_values: the TD targets ``y``, shape (batch_size, 1), without gradient
    :return: the scalar loss
    """
    errors = th.cat(tuple(current_q_values), dim=1) - target_q_values  # (batch_size, n_critics)
    return F.smooth_l1_loss(errors, th.zeros_like(errors), reduction="none").mean(dim=0).sum()


def pal_loss(
    current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, alpha: float = 0.4, reduction: str = "max"
) -> th.Tensor:
    """
    PAL's critic loss (prioritized approximation loss, Fujimoto, Meger & Precup 2020), used with uniform
    sampling: in expectation it has the gradient that LAP's prioritized sampling gives, without a priority
    structure.

    ``sum_i mean(pal(Q_i - y)) / lambda``, with ``pal(d) = 0.5 * d ** 2`` if ``|d| < 1`` else
    ``|d| ** (1 + alpha) / (1 + alpha)``, and ``lambda = mean(max(|d|, 1) ** alpha)`` over the batch
    (detached; ``|d|`` combined over the critics as ``reduction`` says, the paper takes the max).

    :param current_q_values: each critic's Q-values, tensors of shape (batch_size, 1)
    :param target_q_values: the TD targets ``y``, shape (batch_size, 1), without gradient
    :param alpha: the exponent (the paper uses 0.4, LAP's priority exponent)
    :param reduction: ``"max"`` or ``"mean"`` of ``|Q_i - y|`` over the critics, for ``lambda``
    :return: the scalar loss
    """
    check_td_error_reduction(reduction)
    errors = th.cat(tuple(current_q_values), dim=1) - target_q_values  # (batch_size, n_critics)
    abs_errors = errors.abs()
    per_sample = th.where(abs_errors < 1.0, 0.5 * errors.square(), abs_errors.pow(1.0 + alpha) / (1.0 + alpha))
    with th.no_grad():
        combined = abs_errors.mean(dim=1) if reduction == "mean" else abs_errors.amax(dim=1)
        normalizer = combined.clamp(min=1.0).pow(alpha).mean()
    return per_sample.mean(dim=0).sum() / normalizer


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
    stable_baselines3.TD3)``) that makes use of a prioritized buffer (``PrioritizedReplayBuffer`` or
    ``PrioritizedDictReplayBuffer``), in one of three ways set by ``per_mode``:

    - ``"per"`` (default; Schaul et al. 2016): the algorithm's own critic loss, each sample weighted by its
      importance-sampling weight; priorities ``(|d| + epsilon) ** alpha`` from the TD errors ``d``.
    - ``"lap"`` (loss-adjusted prioritization, Fujimoto et al. 2020): priorities ``max(|d|, 1) ** alpha``
      (written as ``(max(|d|, 1) + epsilon) ** alpha``, so never below 1), the unweighted Huber loss of
      ``lap_loss``; the IS weights are not used. Needs a proportional prioritized buffer.
    - ``"pal"`` (prioritized approximation loss, same paper): uniform sampling (a plain SB3 buffer) with
      ``pal_loss``, whose expected gradient is LAP's. Needs a buffer that is not prioritized.

    Its ``train`` is the SB3 algorithm's own ``train`` for ``per_mode="per"`` with a buffer that is not
    prioritized (so results are SB3's, bit for bit); otherwise it calls
    ``self._train_per(buffer, gradient_steps, batch_size)``, which each algorithm writes as a copy of its SB3
    ``train`` whose critic loss is ``_replay_loss``, that calls ``_after_critic_step`` after the critic's
    optimizer step, and ``_record_per_stats`` at the end. What is specific to an algorithm is its loss
    under ``per_mode="per"``: ``_is_weighted_loss``.
    """

    # How several critics' TD errors are combined; an instance attribute where the constructor takes it.
    td_error_reduction: str = "mean"
    per_mode: str = "per"
    pal_alpha: float = 0.4
    # The factor in front of the sum over critics of the MSE in the SB3 algorithm's critic loss (SAC: 0.5).
    critic_loss_scale: float = 0.5

    def _setup_model(self) -> None:
        super()._setup_model()  # type: ignore[misc]
        self._check_replay_buffer_for_per_mode()

    def load_replay_buffer(self, path: Any, truncate_last_traj: bool = True) -> None:
        """
        Load a replay buffer from a pickle file (SB3's ``load_replay_buffer``), checking that it suits ``per_mode``;
        one that does not raises ``ValueError`` and the model keeps its buffer.

        :param path: Path to the pickled replay buffer.
        :param truncate_last_traj: When using ``HerReplayBuffer`` (SB3's parameter)
        """
        previous = self.replay_buffer  # type: ignore[attr-defined]
        super().load_replay_buffer(path, truncate_last_traj)  # type: ignore[misc]
        try:
            self._check_replay_buffer_for_per_mode()
        except ValueError:
            self.replay_buffer = previous  # a refused buffer leaves the model as it was
            raise

    def _check_replay_buffer_for_per_mode(self) -> None:
        """Raise ``ValueError`` if the replay buffer is not the kind ``per_mode`` samples from."""
        buffer = self.replay_buffer  # type: ignore[attr-defined]
        prioritized = isinstance(buffer, PrioritizedBufferMixin)
        if self.per_mode == "lap" and not (prioritized and buffer.prioritization == "proportional"):
            raise ValueError(
                f"per_mode='lap' samples in proportion to its priorities, but the replay buffer is a "
                f"{type(buffer).__name__}{' with rank-based prioritization' if prioritized else ''}: use "
                "PrioritizedReplayBuffer (PrioritizedDictReplayBuffer for Dict observations) with "
                "prioritization='proportional'"
            )
        if self.per_mode == "pal" and prioritized:
            raise ValueError(
                "per_mode='pal' replaces prioritized sampling by its loss and samples uniformly, but the replay "
                f"buffer is a {type(buffer).__name__}: use one that is not prioritized (replay_buffer_class=None)"
            )

    def _excluded_save_params(self) -> list[str]:
        # The statistics of the current training call are not part of the model.
        return [*super()._excluded_save_params(), "_per_first_beta", "_per_sampled_weights"]  # type: ignore[misc]

    def train(self, gradient_steps: int, batch_size: int | None = None) -> None:
        """
        :param gradient_steps: number of gradient steps
        :param batch_size: minibatch size; ``None`` means the SB3 algorithm's default (uniform replay)
            or ``self.batch_size`` (prioritized replay, LAP, PAL)
        """
        buffer = self.replay_buffer  # type: ignore[attr-defined]
        if isinstance(buffer, PrioritizedBufferMixin) or self.per_mode != "per":
            batch_size = self.batch_size if batch_size is None else batch_size  # type: ignore[attr-defined]
            self._per_first_beta = buffer.beta if isinstance(buffer, PrioritizedBufferMixin) else None
            self._per_sampled_weights: list[th.Tensor] = []
            self._train_per(buffer, gradient_steps, batch_size)
        else:
            # Uniform replay: SB3's own `train`, so results are bit-identical and PER costs nothing.
            kwargs = {} if batch_size is None else {"batch_size": batch_size}
            super().train(gradient_steps, **kwargs)  # type: ignore[misc]

    def _train_per(self, buffer: ReplayBuffer, gradient_steps: int, batch_size: int) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement training with per_mode={self.per_mode!r}")

    def _is_weighted_loss(
        self, current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor
    ) -> th.Tensor:
        """The algorithm's critic loss with each sample weighted (``per_mode="per"``); DQN's is the Huber loss."""
        return weighted_critic_loss(current_q_values, target_q_values, weights, self.critic_loss_scale)

    def _replay_loss(
        self, replay_data: NamedTuple, current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor
    ) -> th.Tensor:
        """
        The critic loss of one batch, as ``per_mode`` says.

        :param replay_data: the batch, as the replay buffer's ``sample`` returned it
        :param current_q_values: each critic's Q-values for the batch, tensors of shape (batch_size, 1)
        :param target_q_values: the batch's TD targets
        """
        if self.per_mode == "lap":
            return lap_loss(current_q_values, target_q_values)
        if self.per_mode == "pal":
            return pal_loss(current_q_values, target_q_values, self.pal_alpha, self.td_error_reduction)
        return self._is_weighted_loss(current_q_values, target_q_values, replay_data.weights)  # type: ignore[attr-defined]

    def _after_critic_step(
        self, replay_data: NamedTuple, current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor
    ) -> None:
        """
        With a prioritized buffer, set the priorities of the sampled transitions from their TD errors (combined
        over the critics as ``td_error_reduction`` says, floored at 1 for LAP), computed from the Q-values of
        the forward pass that gave the loss, and keep the batch's IS weights for the logger.

        :param replay_data: the batch, as the replay buffer's ``sample`` returned it
        :param current_q_values: each critic's Q-values for the batch, tensors of shape (batch_size, 1)
        :param target_q_values: the batch's TD targets
        """
        buffer = self.replay_buffer  # type: ignore[attr-defined]
        if not isinstance(buffer, PrioritizedBufferMixin):
            return
        td_errors = td_errors_for_priorities(current_q_values, target_q_values, self.td_error_reduction)
        if self.per_mode == "lap":
            td_errors = td_errors.clamp_(min=1.0)
        buffer.update_priorities(replay_data.indices, td_errors)  # type: ignore[attr-defined]
        self._per_sampled_weights.append(replay_data.weights)  # type: ignore[attr-defined]

    def _record_per_stats(self) -> None:
        """Log the prioritized-replay statistics of one training call (one device sync for all of them)."""
        buffer = self.replay_buffer  # type: ignore[attr-defined]
        if not isinstance(buffer, PrioritizedBufferMixin):
            return  # PAL: nothing prioritized to report
        logger = self.logger  # type: ignore[attr-defined]
        if self.per_mode == "per":  # LAP does not use the IS weights
            logger.record("train/per_beta", self._per_first_beta)
            if self._per_sampled_weights:
                logger.record("train/per_weight_mean", th.cat(self._per_sampled_weights).mean().item())
        logger.record("train/per_priority_mean", buffer.mean_priority)
        logger.record("train/per_priority_max", buffer.max_priority)

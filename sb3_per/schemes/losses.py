"""The critic losses of the replay schemes (SB3's own, importance-weighted, sb3-contrib's quantile Huber loss among
them; LAP's; PAL's) and the absolute TD errors that priorities come from: pure functions of Q-values (or quantiles)
and targets, shared by every algorithm."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import torch as th
from sb3_contrib.common.utils import quantile_huber_loss
from torch.nn import functional as F

from sb3_per.checks import checked_choice

#: How several critics' absolute TD errors are combined into one per transition
TD_ERROR_REDUCTIONS = ("mean", "max")


def weighted_mean(per_sample: th.Tensor, weights: th.Tensor | None) -> th.Tensor:
    """``mean(w * x)``; with ``weights=None``, ``x.mean()`` itself (so SB3's arithmetic, bit for bit)."""
    # Multiplying by weights of one is exact, forward and backward: unit weights give the unweighted mean's bits.
    return (per_sample if weights is None else weights.view_as(per_sample) * per_sample).mean()


def weighted_mse_loss(
    current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor | None, scale: float = 0.5
) -> th.Tensor:
    """
    Importance-sampling weighted critic loss: ``scale * sum_i mean(w * (Q_i - y) ** 2)`` over the critics.

    Computed as SB3 computes ``scale * sum_i F.mse_loss(Q_i, y)`` (SB3's SAC loss for ``scale=0.5``, its TD3 /
    DDPG loss for ``scale=1.0``), the squared errors multiplied by ``w`` before the mean: with no weights, or
    weights of one, the loss and its gradient are SB3's, bit for bit.

    :param current_q_values: each critic's Q-values for the sampled (observation, action) pairs,
        tensors of shape (batch_size, 1)
    :param target_q_values: the TD targets ``y``, shape (batch_size, 1), without gradient
    :param weights: importance-sampling weights, one per sample (shape (batch_size, 1) or (batch_size,));
        ``None`` for an unweighted batch
    :param scale: the factor in front of the sum over critics
    :return: the scalar loss
    """
    # Python's sum, as SB3's loss: over tensors (there is always a critic) it is a tensor, not its start value 0.
    total = sum(
        weighted_mean(F.mse_loss(current_q, target_q_values, reduction="none"), weights)
        for current_q in current_q_values
    )
    return scale * cast(th.Tensor, total)


def weighted_huber_loss(
    current_q_values: th.Tensor, target_q_values: th.Tensor, weights: th.Tensor | None
) -> th.Tensor:
    """
    Importance-sampling weighted Huber loss: ``mean(w * smooth_l1(Q, y))``; with no weights, or weights of one,
    this is SB3's DQN loss ``F.smooth_l1_loss(Q, y)``, bit for bit.

    :param current_q_values: Q-values of the sampled (observation, action) pairs, shape (batch_size, 1)
    :param target_q_values: the TD targets ``y``, shape (batch_size, 1), without gradient
    :param weights: importance-sampling weights, one per sample (shape (batch_size, 1) or (batch_size,));
        ``None`` for an unweighted batch
    :return: the scalar loss
    """
    return weighted_mean(F.smooth_l1_loss(current_q_values, target_q_values, reduction="none"), weights)


def quantile_huber_terms(current_quantiles: th.Tensor, target_quantiles: th.Tensor) -> th.Tensor:
    """
    The terms of sb3-contrib's ``quantile_huber_loss`` before it reduces them, in its arithmetic:
    ``rho_tau(d) = |tau - 1{d < 0}| * huber(d)`` for each current quantile (``tau`` its midpoint ``(i + 0.5) / n``)
    and each target quantile, ``d = target - current``.

    :param current_quantiles: (batch_size, n_quantiles) (QR-DQN) or (batch_size, n_critics, n_quantiles) (TQC)
    :param target_quantiles: (batch_size, n_target_quantiles) or (batch_size, 1, n_target_quantiles), no gradient
    :return: the terms, shape (batch_size, [n_critics,] n_quantiles, n_target_quantiles)
    """
    n_quantiles = current_quantiles.shape[-1]
    cum_prob = (th.arange(n_quantiles, device=current_quantiles.device, dtype=th.float) + 0.5) / n_quantiles
    pairwise_delta = target_quantiles.unsqueeze(-2) - current_quantiles.unsqueeze(-1)
    abs_pairwise_delta = th.abs(pairwise_delta)
    huber_loss = th.where(abs_pairwise_delta > 1, abs_pairwise_delta - 0.5, pairwise_delta**2 * 0.5)
    return th.abs(cum_prob.view(-1, 1) - (pairwise_delta.detach() < 0).float()) * huber_loss


def per_sample_quantile_huber_loss(
    current_quantiles: th.Tensor, target_quantiles: th.Tensor, sum_over_quantiles: bool = False
) -> th.Tensor:
    """
    Each sample's quantile Huber loss, whose mean over the batch is sb3-contrib's ``quantile_huber_loss`` (up to
    rounding): the mean of the sample's terms (``quantile_huber_terms``), or, with ``sum_over_quantiles``, their sum
    over the current quantiles averaged over the rest (QR-DQN's loss, as in its paper).

    :param current_quantiles: as ``quantile_huber_terms``
    :param target_quantiles: as ``quantile_huber_terms``
    :param sum_over_quantiles: sb3-contrib's parameter: ``False`` for TQC, ``True`` for QR-DQN
    :return: shape (batch_size,)
    """
    terms = quantile_huber_terms(current_quantiles, target_quantiles)
    if sum_over_quantiles:
        terms = terms.sum(dim=-2)
    return terms.mean(dim=tuple(range(1, terms.ndim)))


def weighted_quantile_huber_loss(
    current_quantiles: th.Tensor,
    target_quantiles: th.Tensor,
    weights: th.Tensor | None,
    sum_over_quantiles: bool = False,
) -> th.Tensor:
    """
    sb3-contrib's ``quantile_huber_loss(..., sum_over_quantiles)`` with each sample's loss weighted by its
    importance-sampling weight: ``mean_i(w_i * l_i)``, ``l_i`` the sample's ``per_sample_quantile_huber_loss``
    (TQC's critic loss by default; QR-DQN's with ``sum_over_quantiles=True``). Each sample's terms are reduced
    before its weight is applied, so that the backward pass never spreads a weight over every term (on TQC's 2 x 25
    quantiles and 46 target quantiles that cost PER-TQC about 6% of a gradient step); in floating point this rounds
    differently from weighting each term (by about 1e-8 of the loss). With ``weights=None`` or all weights one it is
    sb3-contrib's function itself: the same value and gradient bit for bit. Checking for unit weights reads them on
    the CPU, one wait for the device a step, as the priority write-back does anyway.

    :param current_quantiles: as ``quantile_huber_terms``, with gradient
    :param target_quantiles: as ``quantile_huber_terms``
    :param weights: one weight per sample, shape (batch_size, 1) or (batch_size,); ``None``: unweighted
    :param sum_over_quantiles: sb3-contrib's parameter: ``False`` (default) for TQC, ``True`` for QR-DQN
    :return: the scalar loss
    """
    if weights is None or bool((weights == 1).all()):
        return quantile_huber_loss(current_quantiles, target_quantiles, sum_over_quantiles=sum_over_quantiles)
    per_sample = per_sample_quantile_huber_loss(current_quantiles, target_quantiles, sum_over_quantiles)
    return weighted_mean(per_sample, weights)


def lap_loss(current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, min_priority: float = 1.0) -> th.Tensor:
    """
    LAP's critic loss (loss-adjusted prioritized replay, Fujimoto, Meger & Precup 2020): the Huber loss with
    threshold ``kappa = min_priority``, unweighted, summed over the critics:
    ``sum_i mean(huber(Q_i - y))``, ``huber(d) = 0.5 * d ** 2`` if ``|d| < kappa`` else
    ``kappa * (|d| - kappa / 2)``.

    Used with priorities ``max(|d|, kappa) ** alpha``, this has in expectation the gradient of the mean squared
    error under uniform sampling. (The authors' code uses ``kappa * |d|`` above the threshold: the same
    gradient.) For one critic and ``kappa = 1`` it is SB3's DQN loss ``F.smooth_l1_loss(Q, y)``.

    :param current_q_values: each critic's Q-values, tensors of shape (batch_size, 1)
    :param target_q_values: the TD targets ``y``, shape (batch_size, 1), without gradient
    :param min_priority: the threshold ``kappa`` (the paper's 1 for continuous control, 0.01 for Atari)
    :return: the scalar loss
    """
    errors = th.cat(tuple(current_q_values), dim=1) - target_q_values  # (batch_size, n_critics)
    per_sample = F.huber_loss(errors, th.zeros_like(errors), reduction="none", delta=min_priority)
    return per_sample.mean(dim=0).sum()


def pal_loss(
    current_q_values: Sequence[th.Tensor],
    target_q_values: th.Tensor,
    alpha: float = 0.4,
    reduction: str = "max",
    min_priority: float = 1.0,
) -> th.Tensor:
    """
    PAL's critic loss (prioritized approximation loss, Fujimoto, Meger & Precup 2020), used with uniform
    sampling: in expectation it has the gradient that LAP's prioritized sampling gives, without a priority
    structure.

    ``sum_i mean(pal(Q_i - y)) / lambda``, with ``pal(d) = kappa ** alpha * 0.5 * d ** 2`` if ``|d| < kappa``
    else ``kappa * |d| ** (1 + alpha) / (1 + alpha)``, and ``lambda = mean(max(|d|, kappa) ** alpha)`` over the
    batch (detached; ``|d|`` combined over the critics as ``reduction`` says, the paper takes the max), with
    ``kappa = min_priority`` (1 in the paper).

    :param current_q_values: each critic's Q-values, tensors of shape (batch_size, 1)
    :param target_q_values: the TD targets ``y``, shape (batch_size, 1), without gradient
    :param alpha: the exponent (the paper uses 0.4, LAP's priority exponent)
    :param reduction: ``"max"`` or ``"mean"`` of ``|Q_i - y|`` over the critics, for ``lambda``
    :param min_priority: the threshold ``kappa``
    :return: the scalar loss
    """
    checked_choice("reduction", reduction, TD_ERROR_REDUCTIONS)
    errors = th.cat(tuple(current_q_values), dim=1) - target_q_values  # (batch_size, n_critics)
    abs_errors = errors.abs()
    per_sample = th.where(
        abs_errors < min_priority,
        (min_priority**alpha * 0.5) * errors.square(),
        (min_priority / (1.0 + alpha)) * abs_errors.pow(1.0 + alpha),
    )
    with th.no_grad():
        combined = abs_errors.mean(dim=1) if reduction == "mean" else abs_errors.amax(dim=1)
        normalizer = combined.clamp(min=min_priority).pow(alpha).mean()
    return per_sample.mean(dim=0).sum() / normalizer


def absolute_td_errors(
    current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, reduction: str = "mean"
) -> th.Tensor:
    """
    One absolute TD error per sample, combined over the critics, to set the replay priorities from (detached).

    :param current_q_values: each critic's Q-values, tensors of shape (batch_size, 1)
    :param target_q_values: the TD targets, shape (batch_size, 1)
    :param reduction: how the critics' errors are combined: ``"mean"`` of ``|Q_i - y|`` (absolute values
        are taken first, so errors of opposite sign do not cancel) or ``"max"`` of ``|Q_i - y|`` (as LAP does)
    :return: tensor of shape (batch_size,), on the critics' device
    """
    checked_choice("reduction", reduction, TD_ERROR_REDUCTIONS)
    with th.no_grad():
        abs_errors = (th.cat(tuple(current_q_values), dim=1) - target_q_values).abs_()  # (batch_size, n_critics)
        return abs_errors.mean(dim=1) if reduction == "mean" else abs_errors.amax(dim=1)

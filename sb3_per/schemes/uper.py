"""UPER: prioritize by the information gain of a distributional ensemble, not by noise (Carrasco-Davis et al. 2025)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.logger import Logger

from sb3_per.checks import checked_number
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
)
from sb3_per.schemes.per import PER


def population_variance(values: th.Tensor, dim: int) -> th.Tensor:
    """
    The population variance, ``values.var(dim, unbiased=False)`` up to rounding: written out because ``Tensor.var``
    over a short dimension (TQC's 2 critics) costs over ten times as much on a CPU.

    :param values: any tensor
    :param dim: the dimension to take the variance over
    :return: the mean squared deviation from the mean along ``dim``, with ``dim`` removed
    """
    return (values - values.mean(dim=dim, keepdim=True)).square().mean(dim=dim)


def information_gain(current_quantiles: th.Tensor, target_quantiles: th.Tensor, min_aleatoric: float) -> th.Tensor:
    """
    UPER's priority from an ensemble of quantile critics.

    :param current_quantiles: the critics' quantiles at the transitions' (s, a), (batch_size, n_critics, n_quantiles)
    :param target_quantiles: the target quantiles, (batch_size, 1, n_target_quantiles)
    :param min_aleatoric: the smallest aleatoric variance divided by (a floor against division by zero)
    :return: ``0.5 * log(1 + (epistemic + target_error) / aleatoric)`` per transition, shape (batch_size,): aleatoric
        the variance over the quantiles of the ensemble-mean distribution, epistemic the mean over the quantiles of
        the variance across the critics, target_error the squared difference of the targets' mean and the ensemble's
        mean (population variances, as ``jnp.var``)
    """
    with th.no_grad():
        ensemble_mean = current_quantiles.mean(dim=1)  # (batch, quantiles)
        aleatoric = population_variance(ensemble_mean, dim=1)
        epistemic = population_variance(current_quantiles, dim=1).mean(dim=1)
        target_error = (target_quantiles.mean(dim=(1, 2)) - ensemble_mean.mean(dim=1)).square()
        return 0.5 * th.log1p((epistemic + target_error) / aleatoric.clamp(min=min_aleatoric))


@dataclass(frozen=True)
class UPER(ReplayScheme):
    """
    Uncertainty prioritized experience replay (Carrasco-Davis, Lee, Clopath & Dabney, RLC 2025,
    https://arxiv.org/abs/2506.09270), for ``sb3_per.TQC``: this library's adaptation to an actor-critic, whose
    ensemble is TQC's critics (the paper has no actor-critic result). PER's sampling and importance-weighted critic
    loss; after each critic step, a sampled transition's priority becomes ``information_gain``, ``0.5 * log(1 +
    (epistemic + target_error) / aleatoric)`` from that step's quantiles, so that error the return distribution
    already spreads (aleatoric noise) gets little priority. It changes no buffer setting. Logs ``PER``'s keys.

    Deviations from the co-author's development code (github.com/seblee97/dqn_zoo, not confirmed as the paper's
    release): TQC's critics as the ensemble, at the transition's own action; TQC's truncated target, with the discount
    and the episode's end, in the target error; ``aleatoric`` floored at ``min_aleatoric``; ``aleatoric`` the variance
    over the quantiles (their QR ensemble's, not their C51 ensemble's).

    The full description, the settings and the deviations: ``docs/methods/uper.md``.

    :param min_aleatoric: the floor of the aleatoric variance in the ratio, > 0 (default 1e-12, far below the
        variances of returns on any task this library knows)
    :param td_error_reduction: how the twin critics' absolute TD errors become one per transition for the telemetry
        (``"mean"``, default, or ``"max"``); never the priority
    """

    min_aleatoric: float = 1e-12

    needs_quantile_critics: ClassVar[bool] = True
    uses_importance_weights: ClassVar[bool] = True
    logger_keys: ClassVar[tuple[str, ...]] = PER.logger_keys

    def __post_init__(self) -> None:
        super().__post_init__()
        checked_number("min_aleatoric", self.min_aleatoric, low=0.0, low_open=True)

    def check_algorithm(self, algorithm: Any) -> None:
        super().check_algorithm(algorithm)
        if not algorithm.quantile_ensemble:
            raise ValueError(
                f"{self!r} measures the disagreement of an ensemble of quantile critics (sb3_per.TQC's), but "
                f"{algorithm.__name__} has one quantile network, on which its epistemic term is always 0: use PER() "
                "or ReLo()"
            )

    def check_buffer(self, buffer: ReplayBuffer | None) -> None:
        check_prioritized_buffer(self, buffer)

    def updates(
        self, batches: BatchSource, batch_size: int, train_actor: bool, weighted_critic_loss: WeightedCriticLoss
    ) -> Iterator[ReplayUpdate]:
        batch = batches.sample(batch_size)
        yield ReplayUpdate(batch, partial(weighted_critic_loss, weights=batch.weights), batch if train_actor else None)

    def priorities(self, step: CriticStep, td_errors: th.Tensor, critics: Critics) -> th.Tensor:
        assert step.quantiles is not None, "UPER trains quantile critics only (check_algorithm)"
        return information_gain(*step.quantiles, self.min_aleatoric)

    def log_statistics(self, logger: Logger, buffer: ReplayBuffer, record: TrainingCallRecord) -> None:
        log_importance_sampling_statistics(logger, buffer, record)

"""ExpectedReLo: ReLo's reducible loss with the sample's own reward noise averaged out (this library's scheme)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch as th

from sb3_per.checks import checked_choice
from sb3_per.schemes.base import Critics, CriticStep, online_critic_loss
from sb3_per.schemes.expected_td import ExpectedTD, TDErrorRegressor, signed_td_errors
from sb3_per.schemes.relo import ReLo, reducible_loss, relo_buffer_settings

#: How ExpectedReLo makes its priority of the reducible loss and the expected TD error (see ``ExpectedReLo``)
EXPECTED_RELO_SIGNALS = ("expected", "expected_root", "gated", "signal_share")


def expected_reducible_loss(step: CriticStep, critics: Critics, expected_td_errors: th.Tensor) -> th.Tensor:
    """
    ReLo's reducible loss with the sampled TD target replaced by its expectation given ``(s, a)``.

    ``L_on - L_tgt = (Q_on - Q_tgt)(Q_on + Q_tgt - 2y)`` is linear in the target ``y``, so its mean over the noise
    of the sample's reward is the same expression at ``E[y | s, a]``, estimated as ``mean_k Q_k(s, a) + h(s, a)``,
    ``h`` the expected TD error.

    :param step: a critic step (the online critics' Q-values from before its optimizer step)
    :param critics: the algorithm's critics (its target critics and its per-sample loss)
    :param expected_td_errors: ``h(s, a)``, shape (batch_size, 1)
    :return: ``relu(mean_k L(Q_k, y_hat) - mean_k L(Q'_k, y_hat))``, ``y_hat = mean_k Q_k + h``, shape (batch_size,)
    """
    with th.no_grad():
        expected_targets = th.cat(tuple(q.detach() for q in step.q_values), dim=1).mean(dim=1, keepdim=True)
        expected_targets = expected_targets + expected_td_errors
        online = online_critic_loss(step._replace(targets=expected_targets), critics)
        target_q_values = critics.target_q_values(step.batch)
        target = critics.elementwise_critic_loss(target_q_values, expected_targets).mean(dim=1)
        return th.relu(online - target)


def signal_share(moments: th.Tensor) -> th.Tensor:
    """
    The share of a transition's TD-error second moment that its mean explains: ``h ** 2 / E[delta ** 2 | s, a]``,
    clipped to [0, 1] (1 where both are 0), from a regressor's estimates of the first two moments.

    :param moments: ``(h, E[delta ** 2 | s, a])`` per transition, shape (batch_size, 2)
    :return: shape (batch_size,)
    """
    squared_mean = moments[:, 0].square()
    second_moment = th.maximum(moments[:, 1], squared_mean)  # an estimate below h ** 2 is a regression error
    share = squared_mean / th.where(second_moment > 0, second_moment, th.ones_like(second_moment))
    return th.where(second_moment > 0, share, th.ones_like(share))


def learnable_share(td_errors: th.Tensor, expected_td_errors: th.Tensor) -> th.Tensor:
    """
    How much of each sampled TD error its expectation explains: ``min(1, |h| / |delta|)`` (1 where ``delta`` is 0).

    :param td_errors: the signed TD errors ``delta``, shape (batch_size, 1)
    :param expected_td_errors: ``h(s, a)``, shape (batch_size, 1)
    :return: shape (batch_size,)
    """
    size = td_errors.abs().flatten()
    share = expected_td_errors.abs().flatten() / th.where(size > 0, size, th.ones_like(size))
    return th.where(size > 0, share.clamp(max=1.0), th.ones_like(share))


@dataclass(frozen=True)
class ExpectedReLo(ExpectedTD):
    """
    ReLo's priority with the sample's own reward noise taken out: this library's scheme (no paper), made from the
    measurements of ``ReLo`` and ``ExpectedTD``. PER's sampling and importance-weighted critic and actor losses, as
    ``ReLo``'s; after each critic step, ExpectedTD's regressor ``h(s, a)`` (kept on the model as
    ``replay_scheme_state``) takes one Adam step on the critic's batch, and each sampled transition's priority becomes
    ReLo's ``relu(L_on - L_tgt)`` at the expected target ``mean_k Q_k(s, a) + h(s, a)`` instead of the sampled one, or
    a variant of it (``signal``), so that a transition whose error is noise alone scores about 0. Logs ``PER``'s keys.

    Buffer settings: ReLo's (``relo_buffer_settings``, under the user's ``replay_buffer_kwargs``).

    Deviations: no paper or authors' code; from ``ReLo``, the priority at the expected target (or scaled by a share
    of signal); from ``ExpectedTD``, the regressor's estimate entering ReLo's priority rather than being it. ReLo's
    and ExpectedTD's own deviations carry over.

    The full description, the settings and the deviations: ``docs/methods/expected_relo.md``.

    :param signal: ``"expected"`` (default): ``expected_reducible_loss``, ReLo's difference at the expected target;
        ``"expected_root"``: its square root, on a TD error's scale rather than a squared one's; ``"signal_share"``:
        ReLo's own ``relu(L_on - L_tgt)`` times ``signal_share``, ``h ** 2 / E[delta ** 2 | s, a]`` (the regressor
        then has a second output); ``"gated"``: ReLo's own times ``learnable_share``, ``min(1, |h| / |delta|)``
    :param hidden_sizes: the regressor's hidden layers (default (64, 64))
    :param learning_rate: its Adam learning rate (default 1e-3)
    :param weight_decay: its Adam L2 penalty (default 0: none)
    :param td_error_reduction: how the twin critics' absolute TD errors become one per transition for the telemetry
        (``"mean"``, default, or ``"max"``)
    """

    signal: str = "expected"

    uses_importance_weights: ClassVar[bool] = True
    # ReLo's batches: one for the critic and the actor, the actor's loss IS-weighted too
    updates = ReLo.updates

    def __post_init__(self) -> None:
        super().__post_init__()
        checked_choice("signal", self.signal, EXPECTED_RELO_SIGNALS)

    def buffer_settings(self, algorithm: Any) -> dict[str, Any]:
        return relo_buffer_settings(algorithm)

    def make_state(self, algorithm: Any) -> TDErrorRegressor:
        return TDErrorRegressor(
            algorithm.observation_space,
            algorithm.action_space,
            self.hidden_sizes,
            self.learning_rate,
            self.weight_decay,
            algorithm.device,
            moments=2 if self.signal == "signal_share" else 1,
        )

    def priorities(self, step: CriticStep, td_errors: th.Tensor, critics: Critics) -> th.Tensor:
        regressor: TDErrorRegressor = critics.replay_scheme_state
        batch = step.batch
        sampled = signed_td_errors(step)
        regressor.fit_step(batch.observations, batch.actions, sampled)
        with th.no_grad():
            estimates = regressor(batch.observations, batch.actions)
        if self.signal == "signal_share":
            return reducible_loss(step, critics) * signal_share(estimates)
        expected = estimates[:, :1]
        if self.signal == "expected":
            return expected_reducible_loss(step, critics, expected)
        if self.signal == "expected_root":
            return expected_reducible_loss(step, critics, expected).sqrt()
        return reducible_loss(step, critics) * learnable_share(sampled, expected)

"""What every PER-aware algorithm shares: the IS-weighted losses, LAP and PAL (Fujimoto et al. 2020), the TD
errors that become priorities, the batches each gradient step trains on, the priority write-back, the PER logger
keys, and the ``train`` that keeps SB3's own for uniform replay."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NamedTuple, cast

import numpy as np
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecNormalize
from torch.nn import functional as F

from sb3_per.buffers import PrioritizedBufferMixin
from sb3_per.replay_tags import ReplayTagsMixin
from sb3_per.telemetry import record_replay_telemetry

TD_ERROR_REDUCTIONS = ("mean", "max")
# What the critic loss and the priorities are (see `PrioritizedReplayMixin`).
PER_MODES = ("per", "lap", "pal", "la3p")
# The modes whose priorities are LAP's, floored at `lap_min_priority`
LAP_PRIORITY_MODES = ("lap", "la3p")
# LA3P's schedules (see `PrioritizedReplayMixin`)
LA3P_BUDGETS = ("matched", "paper")
# The modes whose actor trains on the critic's prioritized batch, which `uniform_actor_batch` replaces
UNIFORM_ACTOR_MODES = ("per", "lap")
# What `PrioritizedReplayMixin._record_per_stats` logs through the model's logger each training call
# (with per_mode="lap", only the two priority keys).
PER_LOGGER_KEYS = ("train/per_beta", "train/per_weight_mean", "train/per_priority_mean", "train/per_priority_max")

# A critic loss: (each critic's Q-values, the TD targets) -> scalar loss
CriticLoss = Callable[[Sequence[th.Tensor], th.Tensor], th.Tensor]


def check_td_error_reduction(td_error_reduction: str) -> str:
    """
    :param td_error_reduction: how several critics' TD errors are combined: one of ``TD_ERROR_REDUCTIONS``
    :return: ``td_error_reduction``, if valid
    :raises ValueError: naming the parameter, for any other value
    """
    if td_error_reduction not in TD_ERROR_REDUCTIONS:
        raise ValueError(f"td_error_reduction must be one of {TD_ERROR_REDUCTIONS}, got {td_error_reduction!r}")
    return td_error_reduction


def default_td_error_reduction(per_mode: str) -> str:
    """
    :param per_mode: one of ``PER_MODES``
    :return: how the critics' TD errors are combined when the user does not say: the max for LAP and PAL (as
        their authors' code does), the mean for IS-weighted PER
    """
    return "mean" if per_mode == "per" else "max"


def check_per_mode(
    per_mode: str,
    pal_alpha: float,
    lap_min_priority: float = 1.0,
    la3p_fraction: float = 0.5,
    la3p_budget: str = "matched",
    per_modes: Sequence[str] = PER_MODES,
) -> str:
    """
    :param per_mode: one of ``per_modes``
    :param pal_alpha: PAL's exponent, a finite number >= 0
    :param lap_min_priority: LAP's and PAL's threshold, a finite number > 0
    :param la3p_fraction: LA3P's prioritized share of each batch, in (0, 1]
    :param la3p_budget: one of ``LA3P_BUDGETS``
    :param per_modes: the modes the algorithm supports
    :return: ``per_mode``, if valid
    :raises ValueError: naming the parameter, for any other value
    """
    if per_mode not in per_modes:
        raise ValueError(f"per_mode must be one of {tuple(per_modes)}, got {per_mode!r}")
    if not (np.isfinite(la3p_fraction) and 0.0 < la3p_fraction <= 1.0):
        raise ValueError(f"la3p_fraction must be in (0, 1], got {la3p_fraction!r}")
    if la3p_budget not in LA3P_BUDGETS:
        raise ValueError(f"la3p_budget must be one of {LA3P_BUDGETS}, got {la3p_budget!r}")
    if not (np.isfinite(pal_alpha) and pal_alpha >= 0):
        raise ValueError(f"pal_alpha must be a finite number >= 0, got {pal_alpha!r}")
    if not (np.isfinite(lap_min_priority) and lap_min_priority > 0):
        raise ValueError(f"lap_min_priority must be a finite number > 0, got {lap_min_priority!r}")
    return per_mode


def check_uniform_actor_batch(uniform_actor_batch: bool, per_mode: str) -> bool:
    """
    :param uniform_actor_batch: whether the actor trains on a uniform batch of its own
    :param per_mode: one of ``PER_MODES``
    :return: ``uniform_actor_batch``, if a bool that ``per_mode`` allows (True only with ``UNIFORM_ACTOR_MODES``)
    :raises ValueError: naming the parameter, for any other value
    """
    if not isinstance(uniform_actor_batch, (bool, np.bool_)):
        raise ValueError(f"uniform_actor_batch must be a bool, got {uniform_actor_batch!r}")
    if uniform_actor_batch and per_mode not in UNIFORM_ACTOR_MODES:
        raise ValueError(
            f"uniform_actor_batch=True replaces the actor's prioritized batch, which only per_mode in "
            f"{UNIFORM_ACTOR_MODES} has, got per_mode={per_mode!r}"
        )
    return bool(uniform_actor_batch)


def _weighted_mean(per_sample: th.Tensor, weights: th.Tensor | None) -> th.Tensor:
    # Multiplying by weights of one is exact, forward and backward: unit weights give the unweighted mean's bits.
    return (per_sample if weights is None else weights.view_as(per_sample) * per_sample).mean()


def weighted_critic_loss(
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
        _weighted_mean(F.mse_loss(current_q, target_q_values, reduction="none"), weights)
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
    return _weighted_mean(F.smooth_l1_loss(current_q_values, target_q_values, reduction="none"), weights)


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
    check_td_error_reduction(reduction)
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


def concatenate_samples(first: Any, second: Any) -> Any:
    """
    One batch made of two of the same kind (``PrioritizedReplayBufferSamples`` or its Dict counterpart), in order.

    :param first: a batch
    :param second: another batch of the same type
    :return: the batch of ``len(first) + len(second)`` transitions, of the same type
    """

    def joined(a: Any, b: Any) -> Any:
        if a is None:
            return None
        if isinstance(a, dict):
            return {key: th.cat((a[key], b[key])) for key in a}
        if isinstance(a, np.ndarray):
            return np.concatenate((a, b))
        return th.cat((a, b))

    return type(first)(*(joined(a, b) for a, b in zip(first, second, strict=True)))


def la3p_matched_loss(
    current_q_values: Sequence[th.Tensor],
    target_q_values: th.Tensor,
    n_uniform: int,
    pal: CriticLoss,
    lap: CriticLoss,
) -> th.Tensor:
    """
    LA3P's critic loss on a batch whose first ``n_uniform`` transitions were sampled uniformly (PAL's loss) and
    the others by priority (LAP's): the mean over the batch, ``(n_u * PAL + n_p * LAP) / (n_u + n_p)``.
    """
    n_total = target_q_values.shape[0]
    uniform = pal([q[:n_uniform] for q in current_q_values], target_q_values[:n_uniform])
    prioritized = lap([q[n_uniform:] for q in current_q_values], target_q_values[n_uniform:])
    return (n_uniform * uniform + (n_total - n_uniform) * prioritized) / n_total


class ReplayUpdate(NamedTuple):
    """
    One critic step and the actor step that follows it: what they train on.

    :param critic_batch: the critic's batch, as the replay buffer's ``sample`` returned it
    :param critic_loss: the critic's loss for that batch
    :param actor_batch: the actor's batch (LA3P: ``None`` where no actor step follows; otherwise the critic's
        batch there)
    """

    critic_batch: Any
    critic_loss: CriticLoss
    actor_batch: Any


@dataclass
class TrainingCallRecord:
    """
    What one training call sampled, for its logger statistics: made by ``train``, filled by the steps, read by
    ``_record_per_stats``; never kept on the model.

    :param first_beta: the IS exponent of the call's first batch (``None`` without a prioritized buffer)
    :param tagged: whether the buffer is tagged, so that the telemetry's samples are kept
    :param weights: the IS weights of the call's critic batches (``per_mode="per"`` with a prioritized buffer)
    :param sampled_indices: (tagged) the flat indices of each batch sampled, each batch once
    :param critic_indices: (tagged) the flat indices of each critic batch, aligned with ``td_errors``
    :param td_errors: (tagged) each critic batch's absolute TD errors
    :param actor_indices: (tagged, LA3P or ``uniform_actor_batch``) the flat indices of each actor batch
    """

    first_beta: float | None = None
    tagged: bool = False
    weights: list[th.Tensor] = field(default_factory=list)
    sampled_indices: list[np.ndarray] = field(default_factory=list)
    critic_indices: list[np.ndarray] = field(default_factory=list)
    td_errors: list[th.Tensor] = field(default_factory=list)
    actor_indices: list[np.ndarray] = field(default_factory=list)


class PrioritizedReplayMixin:
    """
    Mixin for an SB3 off-policy algorithm (put it first among the bases: ``class TD3(PrioritizedReplayMixin,
    stable_baselines3.TD3)``) that makes use of a prioritized buffer (``PrioritizedReplayBuffer`` or
    ``PrioritizedDictReplayBuffer``), in one of the ways ``per_mode`` sets:

    - ``"per"`` (default; Schaul et al. 2016): the algorithm's own critic loss, each sample weighted by its
      importance-sampling weight; priorities ``(|d| + epsilon) ** alpha`` from the TD errors ``d``.
    - ``"lap"`` (loss-adjusted prioritization, Fujimoto et al. 2020): priorities ``max(|d|, kappa) ** alpha``
      (written as ``(max(|d|, kappa) + epsilon) ** alpha``), ``kappa = lap_min_priority``, and the unweighted
      Huber loss of ``lap_loss``; the IS weights are not used. Needs a proportional prioritized buffer.
    - ``"pal"`` (prioritized approximation loss, same paper): uniform sampling (a plain SB3 buffer) with
      ``pal_loss``, whose expected gradient is LAP's. Needs a buffer that is not prioritized.
    - ``"la3p"`` (actor prioritized replay, Saglam, Mutlu, Cicek & Kozat 2023; SAC, TD3, DDPG): with batch size
      ``N`` and ``lambda = la3p_fraction``, each gradient step takes a uniform batch of ``N - int(lambda N)``
      (critic with PAL's loss, and actor), a critic batch of ``int(lambda N)`` sampled by LAP's priorities (LAP's
      loss) and an actor batch of ``int(lambda N)`` sampled in proportion to ``1 / priority``; priorities are
      written back from both critic batches. ``la3p_budget="matched"`` (default) makes one critic step on the
      uniform + prioritized parts (each with its loss, averaged over the ``N`` transitions) and one actor step on
      the uniform + inverse parts: the optimizer steps of uniform SAC/TD3, on batches of ``N``.
      ``"paper"`` is the authors' schedule: critic and actor steps on the uniform part, then a critic step on
      the prioritized and an actor step on the inverse part, the target networks updated after each pair.
      Needs a proportional prioritized buffer with ``inverse_sampling=True``. Deviations from the authors' code
      (github.com/baturaysaglam/LA3P): the uniform batch's priorities are written back as the others (as
      theirs); SAC's entropy-coefficient step runs before the critic step on the actor's batch (SB3's order;
      theirs follows the actor step), so the actor batch is sampled before that step's priority write-back, and
      TD3/DDPG sample it there too, before the critic step (theirs after the prioritized part's write-back); the
      prioritized part has ``max(1, int(lambda N))`` transitions and the uniform part the rest (theirs
      ``int((1 - lambda) N)``); the inverse priorities are kept in a sum tree in step with the priorities
      (theirs rebuilt over the filled prefix each step, stale once the ring wraps); TD3's delayed actor steps
      sample no inverse batch, as theirs.

    With ``uniform_actor_batch=True`` (``"per"`` or ``"lap"``, a prioritized buffer) the actor step, and SAC's
    entropy step, train on a batch of their own, sampled uniformly (``sample_uniform``) after the critic's
    prioritized batch; the critic's sampling, loss and priority write-back are those above. An ablation:
    prioritized replay for the critic only, uniform for the actor (LA3P's argument, without its inverse sampling
    and PAL loss). TD3's and DDPG's steps without an actor update sample no actor batch.

    The twin critics' TD errors are combined as ``td_error_reduction`` says: by default the max for LAP and PAL
    (their authors' choice), the mean for ``"per"``.

    Its ``train`` is the SB3 algorithm's own ``train`` for ``per_mode="per"`` with a buffer that is not
    prioritized (so results are SB3's, bit for bit); otherwise it calls
    ``self._train_per(buffer, gradient_steps, batch_size, record)``: each algorithm writes it as its SB3
    ``train``, one copy of SB3's arithmetic split into steps that take their batch as an argument (a critic step
    that returns the batch's absolute TD errors; an actor step), which it runs on each ``ReplayUpdate`` of
    ``_replay_updates`` and follows each critic step with ``_after_critic_step``. What is specific to an
    algorithm under ``per_mode="per"`` is its weighted loss: ``_is_weighted_loss``.
    """

    # How several critics' TD errors are combined; an instance attribute where the constructor takes it.
    td_error_reduction: str = "mean"
    per_mode: str = "per"
    pal_alpha: float = 0.4
    lap_min_priority: float = 1.0
    la3p_fraction: float = 0.5
    la3p_budget: str = "matched"
    uniform_actor_batch: bool = False
    # The per_mode values the algorithm supports (DQN has no actor for LA3P)
    supported_per_modes: tuple[str, ...] = PER_MODES
    # The factor in front of the sum over critics of the MSE in the SB3 algorithm's critic loss (SAC: 0.5).
    critic_loss_scale: float = 0.5

    # Set by the SB3 algorithm this is mixed into
    replay_buffer: ReplayBuffer | None
    replay_buffer_class: type[ReplayBuffer] | None
    replay_buffer_kwargs: dict[str, Any]
    batch_size: int
    gamma: float
    logger: Logger
    _vec_normalize_env: VecNormalize | None
    _current_progress_remaining: float

    def _init_replay_options(
        self,
        per_mode: str,
        td_error_reduction: str | None,
        pal_alpha: float,
        lap_min_priority: float,
        la3p_fraction: float = 0.5,
        la3p_budget: str = "matched",
        uniform_actor_batch: bool = False,
    ) -> None:
        """Check and keep the constructor's replay options (see the algorithms' docstrings)."""
        check_per_mode(per_mode, pal_alpha, lap_min_priority, la3p_fraction, la3p_budget, self.supported_per_modes)
        self.uniform_actor_batch = check_uniform_actor_batch(uniform_actor_batch, per_mode)
        self.per_mode = per_mode
        self.la3p_fraction = float(la3p_fraction)
        self.la3p_budget = la3p_budget
        if td_error_reduction is None:
            td_error_reduction = default_td_error_reduction(per_mode)
        self.td_error_reduction = check_td_error_reduction(td_error_reduction)
        self.pal_alpha = float(pal_alpha)
        self.lap_min_priority = float(lap_min_priority)

    def _setup_model(self) -> None:
        self._give_gamma_to_the_replay_buffer()
        super()._setup_model()  # type: ignore[misc]
        self._check_replay_buffer_for_per_mode(self.replay_buffer)

    def _give_gamma_to_the_replay_buffer(self) -> None:
        """
        A prioritized buffer discounts its n-step returns with the algorithm's ``gamma`` unless
        ``replay_buffer_kwargs`` name another one, which raises ``ValueError``.
        """
        buffer_class = self.replay_buffer_class
        if buffer_class is None or not issubclass(buffer_class, PrioritizedBufferMixin):
            return
        buffer_gamma = self.replay_buffer_kwargs.get("gamma", self.gamma)
        if buffer_gamma != self.gamma:
            raise ValueError(
                f"replay_buffer_kwargs gamma={buffer_gamma!r} (the n-step returns' discount) disagrees with the "
                f"algorithm's gamma={self.gamma!r}: leave it out of replay_buffer_kwargs or make them equal"
            )
        # A new dict: SB3 keeps the one the user passed, which is theirs.
        self.replay_buffer_kwargs = {**self.replay_buffer_kwargs, "gamma": self.gamma}

    def load_replay_buffer(self, path: Any, truncate_last_traj: bool = True) -> None:
        """
        Load a replay buffer from a pickle file (SB3's ``load_replay_buffer``), checking that it suits ``per_mode``;
        one that does not raises ``ValueError`` and the model keeps its buffer. A buffer that turns prioritized
        replay on or off (a uniform one into a model that had a prioritized one, or the reverse) loads with a
        ``UserWarning`` naming both classes.

        :param path: Path to the pickled replay buffer.
        :param truncate_last_traj: When using ``HerReplayBuffer`` (SB3's parameter)
        """
        previous = self.replay_buffer
        super().load_replay_buffer(path, truncate_last_traj)  # type: ignore[misc]
        loaded = self.replay_buffer
        try:
            self._check_replay_buffer_for_per_mode(loaded)
        except ValueError:
            self.replay_buffer = previous  # a refused buffer leaves the model as it was
            raise
        if isinstance(previous, PrioritizedBufferMixin) != isinstance(loaded, PrioritizedBufferMixin):
            warnings.warn(
                f"the loaded {type(loaded).__name__} replaces the model's {type(previous).__name__}: training now "
                f"samples {'in proportion to priority' if isinstance(loaded, PrioritizedBufferMixin) else 'uniformly'}",
                UserWarning,
                stacklevel=2,
            )

    def _check_replay_buffer_for_per_mode(self, buffer: ReplayBuffer | None) -> None:
        """Raise ``ValueError`` if ``buffer`` is not the kind ``per_mode`` samples from."""
        prioritized = isinstance(buffer, PrioritizedBufferMixin)
        if self.per_mode in LAP_PRIORITY_MODES and not (
            isinstance(buffer, PrioritizedBufferMixin) and buffer.prioritization == "proportional"
        ):
            raise ValueError(
                f"per_mode={self.per_mode!r} samples in proportion to its priorities, but the replay buffer is a "
                f"{type(buffer).__name__}{' with rank-based prioritization' if prioritized else ''}: use "
                "PrioritizedReplayBuffer (PrioritizedDictReplayBuffer for Dict observations) with "
                "prioritization='proportional'"
            )
        if (
            self.per_mode in LAP_PRIORITY_MODES
            and isinstance(buffer, PrioritizedBufferMixin)
            and not buffer.priorities_follow_td_errors
        ):
            raise ValueError(
                f"per_mode={self.per_mode!r} sets LAP's priorities from the TD errors, but the replay buffer is a "
                f"{type(buffer).__name__}, whose priorities never follow them: use PrioritizedReplayBuffer "
                "(PrioritizedDictReplayBuffer for Dict observations)"
            )
        if self.per_mode == "la3p" and not getattr(buffer, "inverse_sampling", False):
            raise ValueError(
                "per_mode='la3p' samples its actor batches in proportion to 1 / priority: make the "
                f"{type(buffer).__name__} with inverse_sampling=True in replay_buffer_kwargs"
            )
        if self.uniform_actor_batch and not prioritized:
            raise ValueError(
                "uniform_actor_batch=True samples the actor's batch uniformly beside the critic's prioritized one, "
                f"but the replay buffer is a {type(buffer).__name__}: use PrioritizedReplayBuffer "
                "(PrioritizedDictReplayBuffer for Dict observations)"
            )
        if self.per_mode == "pal" and prioritized:
            raise ValueError(
                "per_mode='pal' replaces prioritized sampling by its loss and samples uniformly, but the replay "
                f"buffer is a {type(buffer).__name__}: use one that is not prioritized (replay_buffer_class=None)"
            )

    def train(self, gradient_steps: int, batch_size: int | None = None) -> None:
        """
        :param gradient_steps: number of gradient steps
        :param batch_size: minibatch size; ``None`` means the SB3 algorithm's default (uniform replay)
            or ``self.batch_size`` (prioritized replay, LAP, PAL, a tagged buffer)
        """
        buffer = self.replay_buffer
        assert buffer is not None
        prioritized = isinstance(buffer, PrioritizedBufferMixin)
        tagged_buffer = buffer if isinstance(buffer, ReplayTagsMixin) and buffer.tagged else None
        tagged = tagged_buffer is not None
        if prioritized or tagged or self.per_mode != "per":
            first_beta = None
            if isinstance(buffer, PrioritizedBufferMixin):
                if buffer.beta_anneal_steps == "auto":
                    # beta follows the run: beta_end once learn(total_timesteps) has collected them all
                    buffer.set_beta_progress(min(1.0, max(0.0, 1.0 - self._current_progress_remaining)))
                first_beta = buffer.beta
            record = TrainingCallRecord(first_beta=first_beta, tagged=tagged)
            self._train_per(buffer, gradient_steps, self.batch_size if batch_size is None else batch_size, record)
            self._record_per_stats(buffer, record)
            if tagged_buffer is not None:
                record_replay_telemetry(
                    self.logger,
                    tagged_buffer,
                    record.sampled_indices,
                    record.critic_indices,
                    record.td_errors,
                    actor_indices=record.actor_indices if self._separate_actor_batches else None,
                    weights=record.weights,
                )
        else:
            # Uniform replay: SB3's own `train`, so results are bit-identical and PER costs nothing.
            kwargs = {} if batch_size is None else {"batch_size": batch_size}
            super().train(gradient_steps, **kwargs)  # type: ignore[misc]

    @property
    def _separate_actor_batches(self) -> bool:
        """Whether the actor trains on batches other than the critic's."""
        return self.per_mode == "la3p" or self.uniform_actor_batch

    def _train_per(
        self, buffer: ReplayBuffer, gradient_steps: int, batch_size: int, record: TrainingCallRecord
    ) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement training with per_mode={self.per_mode!r}")

    def _replay_updates(
        self, buffer: ReplayBuffer, batch_size: int, record: TrainingCallRecord, train_actor: bool = True
    ) -> Iterator[ReplayUpdate]:
        """
        The critic and actor steps of one gradient step, as ``per_mode`` says: one batch of ``batch_size`` for
        both (with ``uniform_actor_batch``, a second, uniform one for the actor), or LA3P's batches. Batches are
        sampled as the steps ask for them, after the previous step's priority write-back.

        :param buffer: the replay buffer
        :param batch_size: the gradient step's number of transitions
        :param record: the training call's record
        :param train_actor: whether an actor step follows (TD3's delayed policy updates)
        """
        if self.per_mode == "la3p":
            yield from self._la3p_updates(buffer, batch_size, record, train_actor)
            return
        batch = self._sample(buffer, batch_size, record)
        actor_batch = batch
        if self.uniform_actor_batch and train_actor:
            actor_batch = self._sample_uniform(buffer, batch_size, record)
            self._record_actor_batch(actor_batch, record)
        yield ReplayUpdate(batch, self._critic_loss_of(batch), actor_batch)

    def _la3p_updates(
        self, buffer: ReplayBuffer, batch_size: int, record: TrainingCallRecord, train_actor: bool
    ) -> Iterator[ReplayUpdate]:
        """LA3P's updates of one gradient step (see the class docstring), as ``la3p_budget`` says."""
        n_prioritized = max(1, int(batch_size * self.la3p_fraction))
        n_uniform = batch_size - n_prioritized
        pal = partial(
            pal_loss, alpha=self.pal_alpha, reduction=self.td_error_reduction, min_priority=self.lap_min_priority
        )
        lap = partial(lap_loss, min_priority=self.lap_min_priority)
        uniform = None
        if n_uniform:
            uniform = self._sample_uniform(buffer, n_uniform, record)
        if self.la3p_budget == "paper" and uniform is not None:
            self._record_actor_batch(uniform if train_actor else None, record)
            yield ReplayUpdate(uniform, pal, uniform if train_actor else None)
        prioritized = self._sample(buffer, n_prioritized, record)
        inverse = self._sample(buffer, n_prioritized, record, inverse=True) if train_actor else None
        if self.la3p_budget == "paper" or uniform is None:
            self._record_actor_batch(inverse, record)
            yield ReplayUpdate(prioritized, lap, inverse)
            return
        critic_batch = concatenate_samples(uniform, prioritized)
        actor_batch = concatenate_samples(uniform, inverse) if inverse is not None else None
        self._record_actor_batch(actor_batch, record)
        yield ReplayUpdate(critic_batch, partial(la3p_matched_loss, n_uniform=n_uniform, pal=pal, lap=lap), actor_batch)

    @staticmethod
    def _record_actor_batch(batch: Any, record: TrainingCallRecord) -> None:
        if batch is not None and record.tagged:
            record.actor_indices.append(batch.indices)

    def _sample(self, buffer: ReplayBuffer, batch_size: int, record: TrainingCallRecord, **kwargs: Any) -> Any:
        """One batch of ``buffer`` (``kwargs``: the buffer's sampling options), its indices kept for telemetry."""
        # The buffer's own samples: with ``indices`` where it is tagged (or prioritized)
        batch: Any = buffer.sample(batch_size, env=self._vec_normalize_env, **kwargs)
        if record.tagged:
            record.sampled_indices.append(batch.indices)
        return batch

    def _sample_uniform(self, buffer: ReplayBuffer, batch_size: int, record: TrainingCallRecord) -> Any:
        """One uniform batch of a prioritized ``buffer``, whatever its priorities, its indices kept for telemetry."""
        assert isinstance(buffer, PrioritizedBufferMixin)
        batch = buffer.sample_uniform(batch_size, self._vec_normalize_env)
        if record.tagged:
            record.sampled_indices.append(batch.indices)
        return batch

    def _critic_loss_of(self, batch: NamedTuple) -> CriticLoss:
        """The critic loss ``per_mode`` gives ``batch``."""
        if self.per_mode == "lap":
            return partial(lap_loss, min_priority=self.lap_min_priority)
        if self.per_mode == "pal":
            return partial(
                pal_loss, alpha=self.pal_alpha, reduction=self.td_error_reduction, min_priority=self.lap_min_priority
            )
        # Batches of a uniform buffer carry no weights: SB3's own loss.
        return partial(self._is_weighted_loss, weights=getattr(batch, "weights", None))

    def _is_weighted_loss(
        self, current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor | None
    ) -> th.Tensor:
        """The algorithm's critic loss with each sample weighted (``per_mode="per"``); DQN's is the Huber loss."""
        return weighted_critic_loss(current_q_values, target_q_values, weights, self.critic_loss_scale)

    def _after_critic_step(
        self, buffer: ReplayBuffer, batch: Any, td_errors: th.Tensor, record: TrainingCallRecord
    ) -> None:
        """
        With a prioritized buffer, set the priorities of a critic batch's transitions from the absolute TD errors
        that the critic step computed from the forward pass that gave the loss (floored at ``lap_min_priority``
        for LAP; skipped where the transition was overwritten since it was sampled, by its write stamp), and keep
        the batch's IS weights in ``record``; with a tagged buffer, keep its indices and TD errors there too.

        :param buffer: the replay buffer the batch came from
        :param batch: the critic's batch, as the replay buffer's ``sample`` returned it
        :param td_errors: the batch's absolute TD errors, shape (batch_size,)
        :param record: the training call's record
        """
        if record.tagged:
            record.critic_indices.append(batch.indices)
            record.td_errors.append(td_errors)
        if not isinstance(buffer, PrioritizedBufferMixin):
            return
        priorities_from = (
            td_errors.clamp(min=self.lap_min_priority) if self.per_mode in LAP_PRIORITY_MODES else td_errors
        )
        buffer.update_priorities(batch.indices, priorities_from, batch.stamps)
        if self.per_mode == "per":
            record.weights.append(batch.weights)

    def _record_per_stats(self, buffer: ReplayBuffer, record: TrainingCallRecord) -> None:
        """Log the prioritized-replay statistics of one training call (one device sync for all of them)."""
        if not isinstance(buffer, PrioritizedBufferMixin):
            return  # PAL: nothing prioritized to report
        if self.per_mode == "per":  # LAP does not use the IS weights
            self.logger.record("train/per_beta", record.first_beta)
            if record.weights:
                self.logger.record("train/per_weight_mean", th.cat(record.weights).mean().item())
        self.logger.record("train/per_priority_mean", buffer.mean_priority)
        self.logger.record("train/per_priority_max", buffer.max_priority)

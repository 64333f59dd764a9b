"""
What every replay scheme is: the interface an algorithm's training step calls, and the state of one training call
that the scheme and the algorithm pass between them (never kept on the model).

One gradient step of an algorithm with a scheme::

    for update in scheme.updates(batches, batch_size, train_actor, weighted_critic_loss):
        loss, step = algorithm.critic_step(update.critic_batch, update.critic_loss)   # -> CriticStep
        td_errors = scheme.td_errors(step)                                             # telemetry, priorities
        buffer.update_priorities(step.batch.indices, scheme.priorities(step, td_errors, algorithm), ...)
        algorithm.actor_step(update.actor_batch, update.actor_weights)                 # if not None
"""

from __future__ import annotations

import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple, Protocol

import numpy as np
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.vec_env import VecNormalize
from stable_baselines3.her.her_replay_buffer import HerReplayBuffer

from sb3_per.buffers import PrioritizedBufferMixin
from sb3_per.checks import checked_choice
from sb3_per.schemes.losses import TD_ERROR_REDUCTIONS, absolute_td_errors

# A critic loss: (each critic's Q-values, the TD targets) -> scalar loss
CriticLoss = Callable[[Sequence[th.Tensor], th.Tensor], th.Tensor]


class WeightedCriticLoss(Protocol):
    """The algorithm's own (SB3's) critic loss with each sample weighted (``weights=None``: SB3's loss itself)."""

    def __call__(
        self, current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor | None
    ) -> th.Tensor: ...


# What a scheme that prioritizes logs through the model's logger after each training call
PRIORITY_LOGGER_KEYS = ("train/per_priority_mean", "train/per_priority_max")


class ReplayUpdate(NamedTuple):
    """
    One critic step and the actor step that follows it: what they train on.

    :param critic_batch: the critic's batch, as the replay buffer's ``sample`` returned it
    :param critic_loss: the critic's loss for that batch
    :param actor_batch: the actor's batch; ``None`` where no actor step follows (DQN, TD3's steps between its
        delayed policy updates)
    :param actor_weights: a weight per transition of the actor's batch for the actor's loss (``None``: SB3's
        unweighted mean)
    """

    critic_batch: Any
    critic_loss: CriticLoss
    actor_batch: Any
    actor_weights: th.Tensor | None = None


class CriticStep(NamedTuple):
    """
    What one critic step computed, for the priorities written back after it.

    :param batch: the critic's batch
    :param q_values: each critic's Q-values for the batch's (observation, action) pairs, from the forward pass that
        gave the loss (before the optimizer step), shape (batch_size, 1) each (quantile critics: their means)
    :param targets: the TD targets ``y``, shape (batch_size, 1), without gradient (quantile critics: their mean)
    :param quantiles: quantile critics only: the critics' quantiles of that forward pass, (batch_size, n_critics,
        n_quantiles), and the target quantiles, (batch_size, 1, n_target_quantiles), without gradient
    """

    batch: Any
    q_values: Sequence[th.Tensor]
    targets: th.Tensor
    quantiles: tuple[th.Tensor, th.Tensor] | None = None


class SchemeState(th.nn.Module, ABC):
    """
    What a scheme learns of its own (ExpectedTD's regressor), kept on the model as ``replay_scheme_state``. A saved
    model holds its ``checkpoint`` among the model's data, as CPU tensors, so that stock SB3 loads the zip too.
    """

    @abstractmethod
    def checkpoint(self) -> dict[str, Any]:
        """Its settings (``"settings"``) and everything it has learned, as plain values and CPU tensors."""

    @abstractmethod
    def restore(self, checkpoint: dict[str, Any]) -> bool:
        """Continue from ``checkpoint`` if one made with the same settings wrote it; whether it did."""


def restored_scheme_state(
    state: SchemeState | None, checkpoint: dict[str, Any] | None, scheme: ReplayScheme | None
) -> SchemeState | None:
    """
    A loaded model's scheme state: ``state`` (made anew by ``scheme``) continued from the saved ``checkpoint``; a
    checkpoint that ``state`` cannot continue (another scheme, other settings) is dropped with a ``UserWarning``.
    """
    if checkpoint is not None and (state is None or not state.restore(checkpoint)):
        warnings.warn(
            f"the saved model's {checkpoint.get('kind', 'scheme state')} (settings {checkpoint.get('settings')!r}) "
            f"cannot be continued by replay_scheme={scheme!r}: it is dropped"
            + ("" if state is None else f", and the scheme's {type(state).__name__} starts anew"),
            UserWarning,
            stacklevel=3,
        )
    return state


class Critics(Protocol):
    """What a scheme may ask of the algorithm's critics about a critic step's batch, beyond the step itself."""

    def target_q_values(self, batch: Any) -> Sequence[th.Tensor]:
        """Each target critic's Q-values for the batch's (observation, action) pairs, without gradient."""
        ...

    def elementwise_critic_loss(self, q_values: Sequence[th.Tensor], targets: th.Tensor) -> th.Tensor:
        """The algorithm's per-sample critic loss of each critic (squared error, or DQN's Huber), (batch, n_critics)."""
        ...

    @property
    def replay_scheme_state(self) -> Any:
        """What the scheme's ``make_state`` made for this model (``None`` if nothing)."""
        ...


def online_critic_loss(step: CriticStep, critics: Critics) -> th.Tensor:
    """
    The online critics' per-sample loss in a critic step, averaged over the critics, without gradient.

    :param step: a critic step (the online critics' Q-values from before its optimizer step, and its targets)
    :param critics: the algorithm's critics (their per-sample loss: the squared error, or DQN's Huber loss)
    :return: ``mean_k L(Q_k(s, a), y)`` per transition, shape (batch_size,)
    """
    with th.no_grad():
        return critics.elementwise_critic_loss([q.detach() for q in step.q_values], step.targets).mean(dim=1)


@dataclass
class TrainingCallRecord:
    """
    What one training call sampled, for its logger statistics and telemetry: made by ``train``, filled by the steps;
    never kept on the model.

    :param first_beta: the IS exponent of the call's first batch (``None`` without a prioritized buffer)
    :param tagged: whether the buffer is tagged, so that the telemetry's samples are kept
    :param weights: the IS weights of the call's critic batches (a scheme that uses them, a prioritized buffer)
    :param sampled_indices: (tagged) the flat indices of each batch sampled, each batch once
    :param critic_indices: (tagged) the flat indices of each critic batch, aligned with ``td_errors``
    :param td_errors: (tagged) each critic batch's absolute TD errors
    :param actor_indices: (tagged, a scheme whose actor trains on batches of its own) each actor batch's indices
    """

    first_beta: float | None = None
    tagged: bool = False
    weights: list[th.Tensor] = field(default_factory=list)
    sampled_indices: list[np.ndarray] = field(default_factory=list)
    critic_indices: list[np.ndarray] = field(default_factory=list)
    td_errors: list[th.Tensor] = field(default_factory=list)
    actor_indices: list[np.ndarray] = field(default_factory=list)


def batch_tensors(batch: Any) -> dict[str, th.Tensor]:
    """A batch's rewards, observations and next observations (each key of Dict observations apart), by name."""
    tensors = {"reward": batch.rewards}
    for name, value in (("observation", batch.observations), ("next observation", batch.next_observations)):
        if isinstance(value, dict):
            tensors.update({f"{name} {key!r}": item for key, item in value.items()})
        else:
            tensors[name] = value
    return {name: tensor for name, tensor in tensors.items() if tensor.is_floating_point()}


def check_finite_batch(batch: Any) -> None:
    """
    Raise ``ValueError`` naming what is not finite in a sampled batch (a reward, an observation, a next observation)
    and the buffer index that holds it, before any network sees it: one check of the whole batch, then a search.
    """
    tensors = batch_tensors(batch)
    if bool(th.stack([th.isfinite(tensor).all() for tensor in tensors.values()]).all()):
        return
    for name, tensor in tensors.items():
        bad_rows = (~th.isfinite(tensor)).reshape(len(tensor), -1).any(dim=1)
        if bad_rows.any():
            row = int(bad_rows.nonzero()[0, 0])
            values = tensor.reshape(len(tensor), -1)[row]
            value = values[~th.isfinite(values)][0].item()
            index = int(batch.indices[row]) if hasattr(batch, "indices") else row
            raise ValueError(
                f"the replay buffer holds a {name} that is not finite ({value}, at index {index}): no network was "
                "updated with it. The env returned it, and the buffer keeps it, so later samples would meet it "
                "again: check the env (SB3's VecCheckNan finds the step that returns it)"
            )


def check_finite_critic_loss(loss: th.Tensor, q_values: Sequence[th.Tensor], targets: th.Tensor) -> None:
    """
    Raise ``ValueError`` saying what overflowed, before the optimizer step, when a critic loss is not finite: the TD
    targets, the critics' Q-values (or quantiles), or the loss itself (finite values whose squares overflow).
    """
    if bool(th.isfinite(loss)):
        return
    estimates = [q_values] if isinstance(q_values, th.Tensor) else list(q_values)
    if not bool(th.isfinite(targets).all()):
        what = "the TD targets are not finite (the target critics' values or the rewards overflowed)"
    elif not all(bool(th.isfinite(q).all()) for q in estimates):
        what = "the critics' estimates are not finite (the critics diverged)"
    else:
        largest = max([float(targets.abs().max())] + [float(q.detach().abs().max()) for q in estimates])
        what = (
            f"the targets and the critics' estimates are finite (up to {largest:.3g} in size) but the loss "
            f"overflowed {loss.dtype}: rewards of this size need scaling (e.g. VecNormalize(norm_reward=True))"
        )
    raise ValueError(f"the critic loss is {loss.item()}: {what}; the networks were not updated with it")


class BatchSource:
    """
    Where a scheme draws the batches of one training call: the replay buffer, the VecNormalize env that normalises
    what it returns, and the call's record, which keeps the indices of what was drawn where the buffer is tagged.

    :param buffer: the model's replay buffer
    :param env: the model's VecNormalize env, if any
    :param record: the training call's record
    """

    def __init__(self, buffer: ReplayBuffer, env: VecNormalize | None, record: TrainingCallRecord) -> None:
        self.buffer = buffer
        self.env = env
        self.record = record

    def sample(self, batch_size: int) -> Any:
        """A batch by the buffer's own rule: by priority for a prioritized buffer, uniform for SB3's."""
        return self._kept(self.buffer.sample(batch_size, env=self.env))

    def sample_uniform(self, batch_size: int) -> Any:
        """A uniform batch of a prioritized buffer, whatever its priorities."""
        buffer = self.buffer
        assert isinstance(buffer, PrioritizedBufferMixin), "schemes check their buffer first"
        return self._kept(buffer.sample_uniform(batch_size, self.env))

    def sample_inverse(self, batch_size: int) -> Any:
        """A batch of a prioritized buffer with ``inverse_sampling``, in proportion to ``1 / priority``."""
        buffer = self.buffer
        assert isinstance(buffer, PrioritizedBufferMixin), "schemes check their buffer first"
        return self._kept(buffer.sample(batch_size, env=self.env, inverse=True))

    def _kept(self, batch: Any) -> Any:
        check_finite_batch(batch)
        if self.record.tagged:
            self.record.sampled_indices.append(batch.indices)
        return batch


@dataclass(frozen=True)
class ReplayScheme(ABC):
    """
    What one gradient step trains on (the critic's and the actor's batches), its critic loss, and the priorities
    written back from its TD errors: one subclass per method (``PER``, ``ReLo``, ``LAP``, ``UPER``, ...), frozen and
    checked when made (a bad parameter raises ``ValueError`` naming it). A method's class docstring is short: what it
    does, the buffer settings it gives, its deviations from the paper or the authors' code named, and a link to its
    page, ``docs/methods/<name>.md``, the one home of its description and deviations.

    Pass an instance to a sb3_per algorithm: ``SAC(..., replay_buffer_class=PrioritizedReplayBuffer,
    replay_scheme=LAP(min_priority=0.01))``.

    :param td_error_reduction: how several critics' absolute TD errors become one per transition: ``"mean"`` or
        ``"max"`` of ``|Q_i - y|`` over the critics
    """

    td_error_reduction: str = "mean"

    #: Whether the scheme trains an actor on batches it chooses (an algorithm without one refuses it)
    needs_actor: ClassVar[bool] = False
    #: Whether the scheme's critic loss replaces the algorithm's (on Q-values: not for quantile critics)
    replaces_critic_loss: ClassVar[bool] = False
    #: Whether the scheme needs quantile critics (TQC)
    needs_quantile_critics: ClassVar[bool] = False
    #: Whether the scheme's critic loss uses the batches' importance-sampling weights
    uses_importance_weights: ClassVar[bool] = False
    #: What the scheme logs through the model's logger after each training call (with a prioritized buffer)
    logger_keys: ClassVar[tuple[str, ...]] = PRIORITY_LOGGER_KEYS

    def __post_init__(self) -> None:
        checked_choice("td_error_reduction", self.td_error_reduction, TD_ERROR_REDUCTIONS)

    @property
    def separate_actor_batches(self) -> bool:
        """Whether the actor trains on batches other than the critic's."""
        return False

    def check_algorithm(self, algorithm: Any) -> None:
        """
        Raise ``ValueError`` if the scheme cannot train ``algorithm``.

        :param algorithm: the algorithm's class (its ``has_actor``, ``quantile_critics`` and ``quantile_ensemble`` say
            what it is)
        """
        name = algorithm.__name__
        if self.needs_actor and not algorithm.has_actor:
            raise ValueError(f"{self!r} prioritizes an actor's batches, but {name} has no actor")
        if self.separate_actor_batches and not algorithm.has_actor:
            raise ValueError(
                f"{self!r} samples a batch of its own for the actor, but {name} has no actor: leave "
                "uniform_actor_batch out"
            )
        if self.replaces_critic_loss and algorithm.quantile_critics:
            schemes = "PER(), ReLo() or UPER()" if algorithm.quantile_ensemble else "PER() or ReLo()"
            raise ValueError(
                f"{self!r} replaces the critic loss by one on Q-values, but {name}'s critics are quantile "
                f"distributions: use {schemes}"
            )
        if self.needs_quantile_critics and not algorithm.quantile_critics:
            raise ValueError(f"{self!r} needs quantile critics (sb3_per.TQC), but {name}'s are not")

    def buffer_settings(self, algorithm: Any) -> dict[str, Any]:
        """
        The prioritized buffer's settings of the scheme's paper for ``algorithm``, which an ``sb3_per`` algorithm puts
        under the user's ``replay_buffer_kwargs`` (the user's values win): none, unless the scheme says otherwise.

        :param algorithm: the algorithm's class (its ``has_actor`` says whether it is an actor-critic)
        """
        return {}

    @abstractmethod
    def check_buffer(self, buffer: ReplayBuffer | None) -> None:
        """Raise ``ValueError`` if ``buffer`` is not a kind the scheme samples from (the message says which is)."""

    @abstractmethod
    def updates(
        self, batches: BatchSource, batch_size: int, train_actor: bool, weighted_critic_loss: WeightedCriticLoss
    ) -> Iterator[ReplayUpdate]:
        """
        The critic and actor steps of one gradient step. Batches are drawn as the steps ask for them, so each is
        drawn after the previous step's priority write-back.

        :param batches: where to draw the batches
        :param batch_size: the gradient step's number of transitions
        :param train_actor: whether an actor step follows (TD3's delayed policy updates; False for DQN)
        :param weighted_critic_loss: the algorithm's own critic loss, each sample weighted
        """

    def make_state(self, algorithm: Any) -> SchemeState | None:
        """
        The learned state the scheme keeps on the model (``model.replay_scheme_state``, saved and loaded with it), made
        when the model is set up; ``None`` (default) for a scheme that learns nothing of its own.

        :param algorithm: the model (its spaces and device)
        """
        return None

    def td_errors(self, step: CriticStep) -> th.Tensor:
        """One absolute TD error per transition of the step's batch (detached), combined over the critics."""
        return absolute_td_errors(step.q_values, step.targets, self.td_error_reduction)

    def priorities(self, step: CriticStep, td_errors: th.Tensor, critics: Critics) -> th.Tensor:
        """
        What ``update_priorities`` is given for the step's batch (the buffer makes ``(x + epsilon) ** alpha`` of it).

        :param step: the critic step
        :param td_errors: its ``td_errors``
        :param critics: the algorithm's critics, for a scheme that needs more than the step
        """
        return td_errors

    def log_statistics(self, logger: Logger, buffer: ReplayBuffer, record: TrainingCallRecord) -> None:
        """Log ``logger_keys`` for one training call (with a prioritized buffer; one device sync for all)."""
        log_priority_statistics(logger, buffer)


def log_priority_statistics(logger: Logger, buffer: ReplayBuffer) -> None:
    """Log ``PRIORITY_LOGGER_KEYS``: a prioritized buffer's mean and largest priority (raised to alpha)."""
    if isinstance(buffer, PrioritizedBufferMixin):
        logger.record("train/per_priority_mean", buffer.mean_priority)
        logger.record("train/per_priority_max", buffer.max_priority)


def log_importance_sampling_statistics(logger: Logger, buffer: ReplayBuffer, record: TrainingCallRecord) -> None:
    """
    Log what an importance-weighted scheme logs (``PER.logger_keys``): with a prioritized buffer, the IS exponent of
    the call's first batch, the mean IS weight of its critic batches, and ``log_priority_statistics``.
    """
    if not isinstance(buffer, PrioritizedBufferMixin):
        return
    logger.record("train/per_beta", record.first_beta)
    if record.weights:
        logger.record("train/per_weight_mean", th.cat(record.weights).mean().item())
    log_priority_statistics(logger, buffer)


def prioritized_buffer_for(buffer: ReplayBuffer | None) -> str:
    """The name of sb3_per's prioritized buffer that takes the place of ``buffer``, for an error message."""
    if isinstance(buffer, HerReplayBuffer):
        return "PrioritizedHerReplayBuffer"
    return "PrioritizedReplayBuffer (PrioritizedDictReplayBuffer for Dict observations)"


def check_prioritized_buffer(scheme: ReplayScheme, buffer: ReplayBuffer | None, inverse: bool = False) -> None:
    """
    Raise ``ValueError`` unless ``buffer`` is a proportional prioritized buffer whose priorities follow the TD errors
    (and, with ``inverse``, has ``inverse_sampling=True``): what LAP and LA3P sample from.
    """
    prioritized = isinstance(buffer, PrioritizedBufferMixin)
    if not (isinstance(buffer, PrioritizedBufferMixin) and buffer.prioritization == "proportional"):
        raise ValueError(
            f"{scheme!r} samples in proportion to its priorities, but the replay buffer is a "
            f"{type(buffer).__name__}{' with rank-based prioritization' if prioritized else ''}: use "
            f"{prioritized_buffer_for(buffer)} with prioritization='proportional'"
        )
    if not buffer.priorities_follow_updates:
        raise ValueError(
            f"{scheme!r} sets its priorities from the TD errors, but the replay buffer is a "
            f"{type(buffer).__name__}, whose priorities never follow them: use PrioritizedReplayBuffer "
            "(PrioritizedDictReplayBuffer for Dict observations)"
        )
    if inverse and not buffer.inverse_sampling:
        raise ValueError(
            f"{scheme!r} samples its actor batches in proportion to 1 / priority: make the "
            f"{type(buffer).__name__} with inverse_sampling=True in replay_buffer_kwargs"
        )

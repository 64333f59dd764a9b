"""What every PER-aware algorithm shares: the replay scheme it trains with, the priority write-back after each critic
step, the logger statistics and telemetry of a training call, and the ``train`` that keeps SB3's own for uniform
replay."""

from __future__ import annotations

import inspect
import io
import pathlib
import warnings
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, ClassVar, TypeVar

import torch as th
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.type_aliases import GymEnv
from stable_baselines3.common.vec_env import VecNormalize
from torch.nn import functional as F

from sb3_per.buffers import PrioritizedBufferMixin
from sb3_per.replay_tags import ReplayTagsMixin
from sb3_per.schemes import PER, BatchSource, CriticStep, ReplayScheme, ReplayUpdate, TrainingCallRecord
from sb3_per.schemes.base import CriticLoss, SchemeState, check_finite_critic_loss, restored_scheme_state
from sb3_per.schemes.losses import weighted_mse_loss
from sb3_per.telemetry import ReplayTelemetry, call_telemetry, log_call_telemetry

# The prioritized buffer's settings that change what training does without making it wrong: a loaded buffer that
# changes one of them is taken with a warning naming the old and new values.
_BUFFER_SETTINGS = (
    "prioritization",
    "alpha",
    "epsilon",
    "beta_start",
    "beta_end",
    "beta_anneal_steps",
    "weight_normalization",
    "priority_half_life",
    "inverse_sampling",
    "tag_key",
)


SelfAlgorithm = TypeVar("SelfAlgorithm", bound="PrioritizedReplayMixin")

# The model data's key of a saved scheme state's checkpoint (``SchemeState.checkpoint``)
SCHEME_CHECKPOINT = "replay_scheme_checkpoint"


def check_replay_buffer_arguments(replay_buffer_class: Any, replay_buffer_kwargs: Any) -> None:
    """
    Raise ``ValueError``, naming the parameter and its value, unless ``replay_buffer_class`` is ``None`` or a class
    of replay buffer (not its name, not an instance) and ``replay_buffer_kwargs`` a dict of keyword arguments.
    """
    if replay_buffer_class is not None and not (
        isinstance(replay_buffer_class, type) and issubclass(replay_buffer_class, ReplayBuffer)
    ):
        raise ValueError(
            "replay_buffer_class must be a class of replay buffer, e.g. sb3_per.PrioritizedReplayBuffer (the class, "
            f"not its name or an instance), or None, got {replay_buffer_class!r}"
        )
    if not isinstance(replay_buffer_kwargs, dict) or not all(isinstance(key, str) for key in replay_buffer_kwargs):
        raise ValueError(
            "replay_buffer_kwargs must be a dict of the buffer's keyword arguments, e.g. dict(alpha=0.6), or None, "
            f"got {replay_buffer_kwargs!r}"
        )


def check_replay_scheme(replay_scheme: ReplayScheme | None, algorithm: Any) -> ReplayScheme | None:
    """
    :param replay_scheme: what the user gave as ``replay_scheme``
    :param algorithm: the algorithm's class
    :return: ``replay_scheme``, if it is ``None`` or a scheme the algorithm can train with
    :raises ValueError: naming the parameter and its value, for anything else
    """
    if replay_scheme is None:
        return None
    if not isinstance(replay_scheme, ReplayScheme):
        raise ValueError(
            f"replay_scheme must be a replay scheme (sb3_per.PER(), LAP(), PAL(), LA3P(), ...) or None, got "
            f"{replay_scheme!r}"
        )
    replay_scheme.check_algorithm(algorithm)
    return replay_scheme


def scheme_buffer_settings(
    replay_scheme: ReplayScheme | None, algorithm: Any, replay_buffer_class: type[ReplayBuffer] | None
) -> dict[str, Any]:
    """
    The scheme's paper settings of a prioritized buffer (``ReplayScheme.buffer_settings``), which the user's
    ``replay_buffer_kwargs`` override; none where there is no scheme or the buffer is not prioritized.

    :param replay_scheme: the model's scheme
    :param algorithm: the algorithm's class
    :param replay_buffer_class: the model's buffer class
    """
    if (
        replay_scheme is None
        or replay_buffer_class is None
        or not issubclass(replay_buffer_class, PrioritizedBufferMixin)
    ):
        return {}
    return replay_scheme.buffer_settings(algorithm)


def constructor_with_replay_scheme(algorithm_class: type) -> Callable[..., None]:
    """
    The constructor of ``sb3_per``'s subclass of ``algorithm_class`` (an SB3 or sb3-contrib algorithm): it checks and
    keeps the keyword-only ``replay_scheme`` and passes every other argument on, as given, to the next class in the
    method resolution order after ``PrioritizedReplayMixin`` (``algorithm_class`` itself, or a class that a user's
    subclass puts between them), so that a new SB3 version's parameters reach SB3 with no change here.
    ``inspect.signature``, ``help`` and the docs show ``algorithm_class``'s signature with ``replay_scheme`` added
    (before its ``**kwargs``, if it has them); type checkers read the same from ``sb3_per/__init__.pyi``
    (``tests/sb3_per/test_constructors.py`` checks that the two agree with the installed SB3).

    :param algorithm_class: the SB3 algorithm that the class subclasses (``stable_baselines3.SAC``, ...)
    """

    def __init__(
        self: PrioritizedReplayMixin, *args: Any, replay_scheme: ReplayScheme | None = None, **kwargs: Any
    ) -> None:
        self._init_replay_scheme(replay_scheme)
        self._constructing = True  # what replay_buffer_kwargs hold is the user's, not a saved model's
        try:
            super(PrioritizedReplayMixin, self).__init__(*args, **kwargs)
        finally:
            del self._constructing

    __init__.__signature__ = signature_with_replay_scheme(algorithm_class)  # type: ignore[attr-defined]
    return __init__


def signature_with_replay_scheme(algorithm_class: type) -> inspect.Signature:
    """``algorithm_class``'s constructor signature with the keyword-only ``replay_scheme`` added after its other
    parameters (and before its ``**kwargs``, if it has them)."""
    sb3_signature = inspect.signature(algorithm_class.__init__)  # type: ignore[misc]
    parameters = list(sb3_signature.parameters.values())
    keywords = [p for p in parameters if p.kind is inspect.Parameter.VAR_KEYWORD]
    scheme_parameter = inspect.Parameter(
        "replay_scheme", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=ReplayScheme | None
    )
    named = [p for p in parameters if p.kind is not inspect.Parameter.VAR_KEYWORD]
    return sb3_signature.replace(parameters=[*named, scheme_parameter, *keywords])


class PrioritizedReplayMixin:
    """
    Mixin for an SB3 off-policy algorithm that trains with a replay scheme (``sb3_per.schemes``): the scheme draws
    the batches of each gradient step, gives the critic its loss, and turns the step's TD errors into the priorities
    written back. Put it (or an algorithm's training steps, e.g. ``TD3TrainingSteps``) first among the bases, and take
    ``replay_scheme`` with the constructor made for the SB3 class: ``class TD3(TD3TrainingSteps,
    stable_baselines3.TD3): __init__ = constructor_with_replay_scheme(stable_baselines3.TD3)``.

    ``replay_scheme=None`` (default) means ``PER()`` with a prioritized buffer (or a tagged one, for its telemetry)
    and, with any other buffer, the SB3 algorithm's own ``train``, so results are SB3's, bit for bit.

    Its ``train`` calls ``self._train_with_scheme(scheme, batches, gradient_steps, batch_size, record)``: each
    algorithm writes it as its SB3 ``train``, one copy of SB3's arithmetic split into steps that take their batch
    as an argument (a critic step that returns a ``CriticStep``; an actor step), which it runs on each
    ``ReplayUpdate`` of ``_updates`` and follows each critic step with ``_write_back``. What is specific to an
    algorithm is SB3's critic loss with a weight per sample: ``weighted_critic_loss``.

    With ``beta_anneal_steps="auto"``, beta follows the run's progress, ``1 - _current_progress_remaining``, and
    never goes back down: a ``learn(..., reset_num_timesteps=False)`` that continues a run, or a model given a
    loaded buffer, continues from the buffer's beta.

    Each training call with a tagged buffer also logs the replay telemetry (``sb3_per.telemetry``) and adds it to
    ``replay_telemetry``.
    """

    #: Whether the algorithm has an actor (a scheme that prioritizes an actor's batches needs one)
    has_actor: ClassVar[bool] = True
    #: Whether the algorithm's critics are quantile distributions (TQC, QR-DQN), whose loss a scheme cannot replace
    quantile_critics: ClassVar[bool] = False
    #: Whether they are an ensemble of quantile critics (TQC's ``n_critics``), whose disagreement UPER measures
    quantile_ensemble: ClassVar[bool] = False
    #: The factor in front of the sum over critics of the MSE in the SB3 algorithm's critic loss (SAC: 0.5)
    critic_loss_scale: ClassVar[float] = 0.5

    replay_scheme: ReplayScheme | None
    replay_scheme_state: SchemeState | None
    replay_telemetry: ReplayTelemetry
    #: Set only while the constructor runs: replay_buffer_kwargs are then the user's, not a loaded model's
    _constructing: bool

    # Set by the SB3 algorithm this is mixed into
    replay_buffer: ReplayBuffer | None
    replay_buffer_class: type[ReplayBuffer] | None
    replay_buffer_kwargs: dict[str, Any]
    batch_size: int
    gamma: float
    logger: Logger
    _vec_normalize_env: VecNormalize | None
    _current_progress_remaining: float
    critic_target: Any  # SAC's and TD3's target critics (DQN overrides target_q_values)

    def _init_replay_scheme(self, replay_scheme: ReplayScheme | None) -> None:
        """Check and keep the constructor's ``replay_scheme`` (before SB3's constructor, which may set up the model)."""
        self.replay_scheme = check_replay_scheme(replay_scheme, type(self))
        self.replay_scheme_state = None
        self.replay_telemetry = ReplayTelemetry()

    def _setup_model(self) -> None:
        # Every way a scheme arrives (the constructor, load's keyword or custom_objects) is checked here
        check_replay_scheme(self.replay_scheme, type(self))
        check_replay_buffer_arguments(self.replay_buffer_class, self.replay_buffer_kwargs)
        # The buffer is made with the scheme's settings under the user's values, and the model's gamma. What save
        # keeps is the user's values, what SB3 adds while it sets up (its n-step buffer's), and the buffer's gamma
        # (stock SB3 loads the zip with it): never a scheme setting, so that a model loaded with another scheme gets
        # that one's.
        users = self.replay_buffer_kwargs
        settings = scheme_buffer_settings(self.replay_scheme, type(self), self.replay_buffer_class)
        self.replay_buffer_kwargs = {**settings, **users, **self._buffer_gamma(users)}
        try:
            super()._setup_model()  # type: ignore[misc]
        finally:
            kept = self.replay_buffer_kwargs.items()
            self.replay_buffer_kwargs = {key: value for key, value in kept if key in users or key not in settings}
        self._check_replay_buffer(self.replay_buffer)
        # What the scheme learns of its own (ExpectedTD's regressor); a loaded model continues its saved checkpoint
        checkpoint = self.__dict__.pop(SCHEME_CHECKPOINT, None)
        state = None if self.replay_scheme is None else self.replay_scheme.make_state(self)
        self.replay_scheme_state = restored_scheme_state(state, checkpoint, self.replay_scheme)

    @classmethod
    def load(
        cls: type[SelfAlgorithm],
        path: str | pathlib.Path | io.BufferedIOBase,
        env: GymEnv | None = None,
        device: th.device | str = "auto",
        custom_objects: dict[str, Any] | None = None,
        print_system_info: bool = False,
        force_reset: bool = True,
        **kwargs: Any,
    ) -> SelfAlgorithm:
        """
        SB3's ``load``. A ``replay_scheme`` given here gets the constructor's checks and messages (``ValueError``
        for a scheme the algorithm cannot train with, or that cannot sample the saved buffer class); a scheme state
        saved with the model (ExpectedTD's regressor) is continued where the scheme is the same, else dropped with a
        ``UserWarning``.
        """
        if "replay_scheme" in kwargs:
            check_replay_scheme(kwargs["replay_scheme"], cls)
        return super().load(  # type: ignore[misc]
            path, env, device, custom_objects, print_system_info, force_reset, **kwargs
        )

    def save(self, path: Any, exclude: Any = None, include: Any = None) -> None:
        """
        SB3's ``save``; what the scheme learned of its own (``replay_scheme_state``) goes with the model's data as a
        checkpoint of CPU tensors, so that stock SB3 (``stable_baselines3.SAC.load``) loads the zip too.
        """
        if self.replay_scheme_state is None:
            super().save(path, exclude=exclude, include=include)  # type: ignore[misc]
            return
        self.__dict__[SCHEME_CHECKPOINT] = self.replay_scheme_state.checkpoint()
        try:
            super().save(path, exclude=exclude, include=include)  # type: ignore[misc]
        finally:
            del self.__dict__[SCHEME_CHECKPOINT]

    def _excluded_save_params(self) -> list[str]:
        return [*super()._excluded_save_params(), "replay_scheme_state"]  # type: ignore[misc]

    def _buffer_gamma(self, replay_buffer_kwargs: dict[str, Any]) -> dict[str, float]:
        """
        The ``gamma`` a prioritized buffer discounts its n-step returns with: the algorithm's (none for another
        buffer). One in the user's ``replay_buffer_kwargs`` that differs raises ``ValueError``; one saved with a
        model that is loaded with another ``gamma`` gives way to it.
        """
        buffer_class = self.replay_buffer_class
        if buffer_class is None or not issubclass(buffer_class, PrioritizedBufferMixin):
            return {}
        buffer_gamma = replay_buffer_kwargs.get("gamma", self.gamma)
        if buffer_gamma != self.gamma and getattr(self, "_constructing", False):
            raise ValueError(
                f"replay_buffer_kwargs gamma={buffer_gamma!r} (the n-step returns' discount) disagrees with the "
                f"algorithm's gamma={self.gamma!r}: leave it out of replay_buffer_kwargs or make them equal"
            )
        return {"gamma": self.gamma}

    def load_replay_buffer(self, path: Any, truncate_last_traj: bool = True) -> None:
        """
        Load a replay buffer from a pickle file (SB3's ``load_replay_buffer``), checking that the replay scheme can
        sample from it and that its n-step returns are discounted with the model's ``gamma``; one that fails raises
        ``ValueError`` and the model keeps its buffer. A buffer that turns prioritized replay on or off, or changes a
        prioritized buffer's settings (alpha, epsilon, beta, prioritization, fading, tags, ...), loads with a
        ``UserWarning`` naming the old and new values.

        :param path: Path to the pickled replay buffer.
        :param truncate_last_traj: When using ``HerReplayBuffer`` (SB3's parameter)
        """
        previous = getattr(self, "replay_buffer", None)  # SB3's HER tests delete the buffer before loading one
        super().load_replay_buffer(path, truncate_last_traj)  # type: ignore[misc]
        loaded = self.replay_buffer
        try:
            self._check_replay_buffer(loaded)
            self._check_n_step_discount(loaded)
        except ValueError:
            self.replay_buffer = previous  # a refused buffer leaves the model as it was
            raise
        changes = "" if previous is None else _changed_replay(previous, loaded)  # none replaced: nothing changed
        if changes:
            warnings.warn(
                f"the loaded {type(loaded).__name__} replaces the model's {type(previous).__name__}: {changes}",
                UserWarning,
                stacklevel=2,
            )

    def _check_n_step_discount(self, buffer: ReplayBuffer | None) -> None:
        """Raise ``ValueError`` if ``buffer`` discounts n-step returns with a gamma other than the model's."""
        if isinstance(buffer, PrioritizedBufferMixin) and buffer.n_steps > 1 and buffer.gamma != self.gamma:
            raise ValueError(
                f"the loaded buffer discounts its {buffer.n_steps}-step returns with gamma={buffer.gamma!r}, but the "
                f"model's gamma is {self.gamma!r}: its targets would be discounted wrongly"
            )

    def _check_replay_buffer(self, buffer: ReplayBuffer | None) -> None:
        """Raise ``ValueError`` if ``buffer`` is not a kind the replay scheme samples from."""
        if self.replay_scheme is not None:
            self.replay_scheme.check_buffer(buffer)

    @property
    def training_scheme(self) -> ReplayScheme | None:
        """
        The scheme the next training call runs: ``replay_scheme``, or, where that is ``None`` (the default), ``PER()``
        with a prioritized or tagged buffer; ``None`` means SB3's own ``train`` (uniform replay).
        """
        return None if self.replay_buffer is None else self._active_scheme(self.replay_buffer)

    def _active_scheme(self, buffer: ReplayBuffer) -> ReplayScheme | None:
        """The scheme a training call runs: the model's; ``PER()`` for a prioritized or tagged buffer; else none."""
        if self.replay_scheme is not None:
            return self.replay_scheme
        if isinstance(buffer, PrioritizedBufferMixin) or (isinstance(buffer, ReplayTagsMixin) and buffer.tagged):
            return PER()
        return None

    def dump_logs(self, *args: Any, **kwargs: Any) -> None:
        """SB3's ``dump_logs``; the replay telemetry, which shows what the logger shows, is cleared with it."""
        super().dump_logs(*args, **kwargs)  # type: ignore[misc]
        self.replay_telemetry.clear()

    def train(self, gradient_steps: int, batch_size: int | None = None) -> None:
        """
        :param gradient_steps: number of gradient steps
        :param batch_size: minibatch size; ``None`` means the SB3 algorithm's default (uniform replay)
            or ``self.batch_size`` (with a replay scheme)
        """
        buffer = self.replay_buffer
        assert buffer is not None
        scheme = self._active_scheme(buffer)
        if scheme is None:
            # Uniform replay: SB3's own `train`, so results are bit-identical and PER costs nothing.
            kwargs = {} if batch_size is None else {"batch_size": batch_size}
            super().train(gradient_steps, **kwargs)  # type: ignore[misc]
            return
        first_beta = None
        if isinstance(buffer, PrioritizedBufferMixin):
            if buffer.beta_anneal_steps == "auto":
                # beta follows the run (beta_end once learn(total_timesteps) has collected them all), never down
                progress = min(1.0, max(0.0, 1.0 - self._current_progress_remaining))
                buffer.set_beta_progress(max(progress, buffer.beta_progress or 0.0))
            first_beta = buffer.beta
        tagged_buffer = buffer if isinstance(buffer, ReplayTagsMixin) and buffer.tagged else None
        record = TrainingCallRecord(first_beta=first_beta, tagged=tagged_buffer is not None)
        batches = BatchSource(buffer, self._vec_normalize_env, record)
        self._train_with_scheme(scheme, batches, gradient_steps, self.batch_size if batch_size is None else batch_size)
        scheme.log_statistics(self.logger, buffer, record)
        if tagged_buffer is not None:
            figures = call_telemetry(
                tagged_buffer,
                record.sampled_indices,
                record.critic_indices,
                record.td_errors,
                actor_indices=record.actor_indices if scheme.separate_actor_batches else None,
                weights=record.weights,
            )
            log_call_telemetry(self.logger, figures)
            self.replay_telemetry.add(figures)

    def _train_with_scheme(
        self, scheme: ReplayScheme, batches: BatchSource, gradient_steps: int, batch_size: int
    ) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement training with a replay scheme")

    @staticmethod
    def _updates(
        scheme: ReplayScheme, batches: BatchSource, batch_size: int, train_actor: bool, weighted_critic_loss: Any
    ) -> Iterator[ReplayUpdate]:
        """The scheme's updates of one gradient step, the indices of separate actor batches kept for telemetry."""
        record = batches.record
        for update in scheme.updates(batches, batch_size, train_actor, weighted_critic_loss):
            if record.tagged and scheme.separate_actor_batches and update.actor_batch is not None:
                record.actor_indices.append(update.actor_batch.indices)
            yield update._replace(critic_loss=partial(_checked_critic_loss, update.critic_loss))

    def _write_back(self, scheme: ReplayScheme, batches: BatchSource, step: CriticStep) -> th.Tensor:
        """
        After a critic step: with a prioritized buffer, set the priorities of the critic batch's transitions from
        what the scheme makes of the step (skipped where a transition was overwritten since it was sampled, by its
        write stamp), and keep the batch's IS weights where the scheme uses them; with a tagged buffer, keep its
        indices and TD errors for the telemetry.

        :return: the batch's absolute TD errors, combined over the critics
        """
        td_errors = scheme.td_errors(step)
        record, buffer, batch = batches.record, batches.buffer, step.batch
        if record.tagged:
            record.critic_indices.append(batch.indices)
            record.td_errors.append(td_errors)
        if isinstance(buffer, PrioritizedBufferMixin):
            priorities = scheme.priorities(step, td_errors, self)
            try:
                buffer.update_priorities(batch.indices, priorities, batch.stamps)
            except ValueError as error:
                if bool(th.isfinite(priorities).all()):
                    raise
                raise ValueError(
                    f"{type(scheme).__name__}'s priorities overflowed ({priorities[~th.isfinite(priorities)][0]}) "
                    f"though the TD errors are finite (up to {float(td_errors.max()):.3g}): rewards of this size "
                    "need scaling (e.g. VecNormalize(norm_reward=True)); the priorities were not written"
                ) from error
            if scheme.uses_importance_weights:
                record.weights.append(batch.weights)
        return td_errors

    def weighted_critic_loss(
        self, current_q_values: Sequence[th.Tensor], target_q_values: th.Tensor, weights: th.Tensor | None
    ) -> th.Tensor:
        """The SB3 algorithm's critic loss with each sample weighted (``None``: SB3's own); DQN's is the Huber loss."""
        return weighted_mse_loss(current_q_values, target_q_values, weights, self.critic_loss_scale)

    def elementwise_critic_loss(self, q_values: Sequence[th.Tensor], targets: th.Tensor) -> th.Tensor:
        """Each critic's squared error per sample, shape (batch_size, n_critics) (DQN: its Huber loss)."""
        return th.cat([F.mse_loss(q, targets, reduction="none") for q in q_values], dim=1)

    def target_q_values(self, batch: Any) -> Sequence[th.Tensor]:
        """Each target critic's Q-values for the batch's (observation, action) pairs, without gradient."""
        with th.no_grad():
            return self.critic_target(batch.observations, batch.actions)


def _checked_critic_loss(critic_loss: CriticLoss, q_values: Sequence[th.Tensor], targets: th.Tensor) -> th.Tensor:
    """``critic_loss(q_values, targets)``, if it is finite; else ``ValueError`` saying what overflowed."""
    loss = critic_loss(q_values, targets)
    check_finite_critic_loss(loss, q_values, targets)
    return loss


def _changed_replay(previous: ReplayBuffer | None, loaded: ReplayBuffer | None) -> str:
    """What a loaded buffer changes in how the model replays, in words (empty: nothing)."""
    was, now = isinstance(previous, PrioritizedBufferMixin), isinstance(loaded, PrioritizedBufferMixin)
    if was != now:
        return f"training now samples {'in proportion to priority' if now else 'uniformly'}"
    if not (isinstance(previous, PrioritizedBufferMixin) and isinstance(loaded, PrioritizedBufferMixin)):
        return ""
    changed = [
        f"{name} {getattr(previous, name)!r} -> {getattr(loaded, name)!r}"
        for name in _BUFFER_SETTINGS
        if getattr(previous, name) != getattr(loaded, name)
    ]
    return ", ".join(changed)

"""ExpectedTD: prioritize by a learned estimate of the expected TD error, not the last sampled one (Panahi et al.)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, cast

import torch as th
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.logger import Logger
from stable_baselines3.common.preprocessing import get_flattened_obs_dim, preprocess_obs
from torch import nn
from torch.nn import functional as F

from sb3_per.checks import checked_number, checked_positive_integer
from sb3_per.schemes.base import (
    BatchSource,
    Critics,
    CriticStep,
    ReplayScheme,
    ReplayUpdate,
    SchemeState,
    TrainingCallRecord,
    WeightedCriticLoss,
    check_prioritized_buffer,
    log_importance_sampling_statistics,
)
from sb3_per.schemes.per import PER


def tensors_on_cpu(value: Any) -> Any:
    """``value`` (nested dicts and lists, as an optimizer's ``state_dict``) with each tensor copied to the CPU."""
    if isinstance(value, th.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {key: tensors_on_cpu(item) for key, item in value.items()}
    if isinstance(value, list):
        return [tensors_on_cpu(item) for item in value]
    return value


def signed_td_errors(step: CriticStep) -> th.Tensor:
    """``y - mean_k Q_k(s, a)`` per transition of a critic step, shape (batch_size, 1), without gradient."""
    with th.no_grad():
        return step.targets - th.cat(tuple(step.q_values), dim=1).mean(dim=1, keepdim=True)


class TDErrorRegressor(SchemeState):
    """
    ``h(s, a)``, an estimate of ``E[TD error | s, a]``: an MLP (ReLU) on the flattened, preprocessed observation and
    the action (one-hot for a discrete one), trained by Adam on the squared error to the signed TD errors it is given.

    :param observation_space: the model's observation space (not a Dict)
    :param action_space: the model's action space (Box or Discrete)
    :param hidden_sizes: the hidden layers' sizes
    :param learning_rate: Adam's learning rate
    :param weight_decay: Adam's L2 penalty
    :param device: where it lives (the model's device)
    :param moments: how many moments of the TD error it estimates (default 1: ``h`` alone; 2: also
        ``E[delta ** 2 | s, a]``, from which the TD error's variance)
    """

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Space,
        hidden_sizes: Sequence[int],
        learning_rate: float,
        weight_decay: float,
        device: th.device,
        moments: int = 1,
    ) -> None:
        super().__init__()
        if isinstance(observation_space, spaces.Dict):
            raise ValueError("ExpectedTD's regressor takes a flat observation, but the observation space is a Dict")
        if not isinstance(action_space, (spaces.Box, spaces.Discrete)):
            raise ValueError(f"ExpectedTD's regressor takes a Box or Discrete action, got {action_space}")
        self.observation_space = observation_space
        self.action_space = action_space
        self.moments = checked_positive_integer("moments", moments)
        self.settings = (tuple(hidden_sizes), float(learning_rate), float(weight_decay), self.moments)
        action_size = (
            int(action_space.n) if isinstance(action_space, spaces.Discrete) else get_flattened_obs_dim(action_space)
        )
        sizes = [get_flattened_obs_dim(observation_space) + action_size, *hidden_sizes]
        layers: list[nn.Module] = []
        for size_in, size_out in itertools.pairwise(sizes):
            layers += [nn.Linear(size_in, size_out), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Linear(sizes[-1], self.moments)).to(device)
        self.optimizer = th.optim.Adam(self.parameters(), lr=learning_rate, weight_decay=weight_decay)

    def checkpoint(self) -> dict[str, Any]:
        return {
            "kind": type(self).__name__,
            "settings": self.settings,
            "parameters": {name: value.detach().cpu() for name, value in self.state_dict().items()},
            "optimizer": tensors_on_cpu(self.optimizer.state_dict()),
        }

    def restore(self, checkpoint: dict[str, Any]) -> bool:
        if checkpoint.get("kind") != type(self).__name__ or tuple(checkpoint.get("settings", ())) != self.settings:
            return False
        self.load_state_dict(checkpoint["parameters"])
        self.optimizer.load_state_dict(checkpoint["optimizer"])  # Adam moves its moments to the parameters' device
        return True

    def forward(self, observations: th.Tensor, actions: th.Tensor) -> th.Tensor:
        """``h(s, a)``, shape (batch_size, 1); with ``moments=m``, the estimates of ``E[delta ** k | s, a]``, k = 1..m,
        shape (batch_size, m)."""
        features = cast(th.Tensor, preprocess_obs(observations, self.observation_space)).flatten(start_dim=1)
        if isinstance(self.action_space, spaces.Discrete):
            actions = F.one_hot(actions.long().flatten(), int(self.action_space.n)).float()
        return self.net(th.cat([features, actions.flatten(start_dim=1).float()], dim=1))

    def fit_step(self, observations: th.Tensor, actions: th.Tensor, td_errors: th.Tensor) -> float:
        """One Adam step on ``mean((h(s, a) - td_error) ** 2)`` over the batch (with ``moments=m``, the mean over the
        m columns of their squared errors to ``td_error ** k``); returns that loss."""
        targets = td_errors
        if self.moments > 1:
            targets = th.cat([td_errors**power for power in range(1, self.moments + 1)], dim=1)
        loss = F.mse_loss(self(observations, actions), targets)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return float(loss.item())


@dataclass(frozen=True)
class ExpectedTD(ReplayScheme):
    """
    Expected-TD-error prioritization (Panahi, Patterson, White & White, RLJ 2024, https://arxiv.org/abs/2407.09702):
    PER chases the noise in each stored transition's own TD error; an estimate of ``E[delta | s, a]``, learned across
    transitions, leaves it out. PER's sampling and importance-weighted critic loss; after each critic step, ``h``
    (``TDErrorRegressor``, kept on the model as ``replay_scheme_state`` and saved with it) takes one Adam step on its
    squared error to the signed TD errors of the critic's batch (``signed_td_errors``), and each sampled transition's
    priority becomes ``|h(s, a)|``. It changes no buffer setting. Logs ``PER``'s keys.

    Deviations from the paper (its code is not public, so the estimator is this library's): a separate network, not a
    head on the critic's features; Adam; SB3's actor-critics and DQN rather than the paper's DQN.

    The full description, the settings and the deviations: ``docs/methods/expected_td.md``.

    :param hidden_sizes: the regressor's hidden layers (default (64, 64))
    :param learning_rate: its Adam learning rate (default 1e-3)
    :param weight_decay: its Adam L2 penalty (default 0: none)
    :param td_error_reduction: how the twin critics' absolute TD errors become one per transition for the telemetry
        (``"mean"``, default, or ``"max"``)
    """

    hidden_sizes: tuple[int, ...] = (64, 64)
    learning_rate: float = 1e-3
    weight_decay: float = 0.0

    uses_importance_weights: ClassVar[bool] = True
    logger_keys: ClassVar[tuple[str, ...]] = PER.logger_keys

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.hidden_sizes, tuple) or not self.hidden_sizes:
            raise ValueError(f"hidden_sizes must be a non-empty tuple of layer sizes, got {self.hidden_sizes!r}")
        for size in self.hidden_sizes:
            checked_positive_integer("hidden_sizes", size)
        checked_number("learning_rate", self.learning_rate, low=0.0, low_open=True)
        checked_number("weight_decay", self.weight_decay, low=0.0)

    def check_buffer(self, buffer: ReplayBuffer | None) -> None:
        check_prioritized_buffer(self, buffer)

    def make_state(self, algorithm: Any) -> TDErrorRegressor:
        return TDErrorRegressor(
            algorithm.observation_space,
            algorithm.action_space,
            self.hidden_sizes,
            self.learning_rate,
            self.weight_decay,
            algorithm.device,
        )

    def updates(
        self, batches: BatchSource, batch_size: int, train_actor: bool, weighted_critic_loss: WeightedCriticLoss
    ) -> Iterator[ReplayUpdate]:
        batch = batches.sample(batch_size)
        yield ReplayUpdate(batch, partial(weighted_critic_loss, weights=batch.weights), batch if train_actor else None)

    def priorities(self, step: CriticStep, td_errors: th.Tensor, critics: Critics) -> th.Tensor:
        regressor: TDErrorRegressor = critics.replay_scheme_state
        batch = step.batch
        regressor.fit_step(batch.observations, batch.actions, signed_td_errors(step))
        with th.no_grad():
            return regressor(batch.observations, batch.actions).abs().flatten()

    def log_statistics(self, logger: Logger, buffer: ReplayBuffer, record: TrainingCallRecord) -> None:
        log_importance_sampling_statistics(logger, buffer, record)

"""Fixtures of the library's tests: call recorders, batch spies, one replayed actor-critic step, priority readers,
parameter comparisons and small envs with tags or Dict observations."""

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch as th
from gymnasium import spaces

from sb3_per import PrioritizedReplayBuffer

#: ``record_calls(obj, name)``: the calls of ``obj.name`` from then on, each as its ``(args, kwargs)``.
CallRecorder = Callable[[object, str], list[tuple[tuple, dict]]]


def stored_priorities(buffer: PrioritizedReplayBuffer) -> np.ndarray:
    """Copy of the priorities of the stored transitions."""
    return buffer.tree[np.arange(buffer.n_transitions)].copy()


@pytest.fixture
def record_calls(monkeypatch: pytest.MonkeyPatch) -> CallRecorder:
    """A recorder of a method's calls; the method still runs, and the spy is removed after the test."""

    def record(obj: object, name: str) -> list[tuple[tuple, dict]]:
        calls: list[tuple[tuple, dict]] = []
        real = getattr(obj, name)

        def spy(*args, **kwargs):
            calls.append((args, kwargs))
            return real(*args, **kwargs)

        monkeypatch.setattr(obj, name, spy)
        return calls

    return record


@pytest.fixture
def sampled_batches(monkeypatch: pytest.MonkeyPatch) -> Callable[..., list]:
    """
    ``sampled_batches(buffer, discount=None)``: the list that each batch ``buffer.sample`` returns from then on is
    appended to; with ``discount``, each batch is given n-step-like discounts of that value before it is returned.
    """

    def spy_on(buffer: Any, discount: float | None = None) -> list:
        batches: list = []
        sample = buffer.sample

        def spy(*args, **kwargs):
            batch = sample(*args, **kwargs)
            if discount is not None:
                batch = batch._replace(discounts=th.full_like(batch.rewards, discount))
            batches.append(batch)
            return batch

        monkeypatch.setattr(buffer, "sample", spy)
        return batches

    return spy_on


@dataclass
class ActorCriticStep:
    """What one gradient step of SAC or TQC computed its targets from, recovered after the step."""

    #: the step's one batch
    batch: Any
    #: a copy of the policy's networks (actor, critics, target critics) before the step
    networks: Any
    #: the entropy coefficient before the step
    ent_coef: th.Tensor
    #: the next actions the step drew for ``batch.next_observations`` (its random draws replayed)
    next_actions: th.Tensor
    #: their log-probabilities under the actor before the step
    next_log_prob: th.Tensor


@pytest.fixture
def one_actor_critic_step(sampled_batches: Callable[..., list]) -> Callable[..., ActorCriticStep]:
    """
    ``one_actor_critic_step(model, batch_size, discount=None)``: train a SAC or TQC ``model`` one gradient step on
    one batch and return an ``ActorCriticStep``: the networks before the step, and the step's next actions drawn
    again from them with the torch random state the step started from (the actor's actions for its loss first, as
    the step draws them). ``discount`` as ``sampled_batches``.
    """

    def step(model: Any, batch_size: int, discount: float | None = None) -> ActorCriticStep:
        batches = sampled_batches(model.replay_buffer, discount)
        networks = copy.deepcopy(model.policy)
        ent_coef = th.exp(model.log_ent_coef.detach().clone())
        rng_state = th.get_rng_state()
        model.train(gradient_steps=1, batch_size=batch_size)
        (batch,) = batches
        th.set_rng_state(rng_state)
        with th.no_grad():
            networks.actor.action_log_prob(batch.observations)  # the noise of the actor-loss actions
            next_actions, next_log_prob = networks.actor.action_log_prob(batch.next_observations)
        return ActorCriticStep(batch, networks, ent_coef, next_actions, next_log_prob)

    return step


@pytest.fixture
def truncated_target_quantiles() -> Callable[[Any, ActorCriticStep, int], th.Tensor]:
    """
    ``targets(model, step, kept)``: TQC's target quantiles of an ``ActorCriticStep``, by hand: the target critics'
    quantiles at the next state pooled and sorted, the lowest ``kept`` of them, minus the entropy term, discounted
    (by the batch's own discounts where it has them, n-step batches, else by the model's gamma) behind the reward;
    shape (batch_size, kept).
    """

    def targets(model: Any, step: ActorCriticStep, kept: int) -> th.Tensor:
        batch = step.batch
        with th.no_grad():
            pooled = step.networks.critic_target(batch.next_observations, step.next_actions).flatten(start_dim=1)
            lowest = pooled.sort(dim=1).values[:, :kept]
            next_values = lowest - step.ent_coef * step.next_log_prob.reshape(-1, 1)
            discounts = batch.discounts if batch.discounts is not None else model.gamma
            return batch.rewards + (1 - batch.dones) * discounts * next_values

    return targets


@pytest.fixture
def assert_same_parameters() -> Callable[[Any, Any], None]:
    """``check(model, reference)``: assert that the two models' policies (and entropy coefficients) are equal, bit
    for bit."""

    def check(model: Any, reference: Any) -> None:
        reference_parameters = reference.policy.state_dict()
        for name, parameter in model.policy.state_dict().items():
            assert th.equal(parameter, reference_parameters[name]), name
        if hasattr(reference, "log_ent_coef"):
            assert th.equal(model.log_ent_coef, reference.log_ent_coef)

    return check


@pytest.fixture
def priorities() -> Callable[[PrioritizedReplayBuffer], np.ndarray]:
    """``priorities(buffer)``: a copy of the priorities of the stored transitions."""
    return stored_priorities


@pytest.fixture
def assert_only_sampled_priorities_follow() -> Callable[..., np.ndarray]:
    """
    ``check(buffer, before, indices, td_errors)``: assert that after one write-back the sampled transitions hold
    ``(|td| + epsilon) ** alpha`` (a transition sampled twice takes its last error, as ``SumTree.update``
    documents) and that no other priority changed; return the sampled indices, sorted and unique.
    """

    def check(
        buffer: PrioritizedReplayBuffer, before: np.ndarray, indices: np.ndarray, td_errors: np.ndarray
    ) -> np.ndarray:
        expected = dict(zip(indices.tolist(), (np.abs(td_errors) + buffer.epsilon) ** buffer.alpha, strict=True))
        sampled = np.array(sorted(expected))
        after = stored_priorities(buffer)
        np.testing.assert_allclose(after[sampled], [expected[i] for i in sampled], rtol=1e-5)
        assert not np.isclose(after[sampled], before[sampled]).any()
        unsampled = np.setdiff1d(np.arange(buffer.n_transitions), sampled)
        np.testing.assert_array_equal(after[unsampled], before[unsampled])
        return sampled

    return check


class RegimeTaggedPendulum(gym.Wrapper):
    """Pendulum whose every step's ``info["regime"]`` is the step count modulo ``n_tags``."""

    def __init__(self, n_tags: int) -> None:
        super().__init__(gym.make("Pendulum-v1"))
        self.n_tags = n_tags
        self.steps = 0

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        return observation, reward, terminated, truncated, {**info, "regime": self.steps % self.n_tags}


class DictObservation(gym.ObservationWrapper):
    """Pendulum with its observation inside a Dict."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = spaces.Dict({"state": env.observation_space})

    def observation(self, observation: np.ndarray) -> dict[str, np.ndarray]:
        return {"state": observation}


@pytest.fixture
def regime_tagged_pendulum() -> Callable[[int], gym.Env]:
    """``make(n_tags)``: Pendulum whose every step's ``info["regime"]`` is the step count modulo ``n_tags``."""
    return RegimeTaggedPendulum


@pytest.fixture
def dict_pendulum() -> gym.Env:
    """Pendulum with its observation inside a Dict (key ``"state"``)."""
    return DictObservation(gym.make("Pendulum-v1"))

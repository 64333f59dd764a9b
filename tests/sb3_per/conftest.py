"""Fixtures of the library's tests: call recorders, priority readers and small envs with tags or Dict observations."""

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest
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

"""SB3's usage with ``PrioritizedReplayBuffer`` substituted, on buffers smaller than the batch (SB3's own tests train
SAC and TD3 on Pendulum with ``buffer_size=250`` below the default ``batch_size=256``): sb3_per's SAC, TD3 and DQN
train on them, every gradient step sampling a full batch (with replacement) and writing its priorities back."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch as th

from sb3_per import DQN, SAC, TD3, PrioritizedReplayBuffer

WriteBack = tuple[np.ndarray, np.ndarray, np.ndarray]  # indices, TD errors, the priorities before
Priorities = Callable[[PrioritizedReplayBuffer], np.ndarray]  # the conftest's ``priorities`` fixture


def record_write_backs(buffer: PrioritizedReplayBuffer, priorities: Priorities) -> list[WriteBack]:
    """The list to which each later ``buffer.update_priorities`` call adds what it was given and what it found."""
    write_backs: list[WriteBack] = []
    update_priorities = buffer.update_priorities

    def recorded(indices: Any, td_errors: Any, stamps: Any = None) -> None:
        errors = th.as_tensor(td_errors).detach().cpu().numpy().reshape(-1).copy()
        write_backs.append((np.asarray(indices).copy(), errors, priorities(buffer)))
        update_priorities(indices, td_errors, stamps)

    buffer.update_priorities = recorded
    return write_backs


def assert_a_write_back_set_the_priorities_of_its_batch(
    priorities: Priorities,
    buffer: PrioritizedReplayBuffer,
    indices: np.ndarray,
    td_errors: np.ndarray,
    before: np.ndarray,
) -> None:
    """
    After the write-back of ``indices`` (with repeats: a leaf takes its last error), the sampled transitions hold
    ``(|td| + epsilon) ** alpha`` and the others what they held before.
    """
    expected = dict(zip(indices.tolist(), (np.abs(td_errors) + buffer.epsilon) ** buffer.alpha, strict=True))
    sampled = np.array(sorted(expected))
    after = priorities(buffer)
    np.testing.assert_allclose(after[sampled], [expected[i] for i in sampled], rtol=1e-5)
    unsampled = np.setdiff1d(np.arange(buffer.n_transitions), sampled)
    np.testing.assert_array_equal(after[unsampled], before[unsampled])


def assert_every_gradient_step_wrote_back_a_full_batch(
    model: Any, write_backs: list[WriteBack], batch_size: int, priorities: Priorities
) -> None:
    """
    One write-back per gradient step, each of ``batch_size`` finite TD errors for stored transitions, more than
    the buffer holds (so they repeat); the last one (learn ends with a training call) set the priorities of its
    batch; every stored priority is finite and positive.
    """
    buffer = model.replay_buffer
    assert buffer.full  # the ring wrapped: learning overwrote transitions between write-backs
    assert model._n_updates > 0
    assert len(write_backs) == model._n_updates == buffer.n_priority_updates
    for indices, td_errors, _ in write_backs:
        assert indices.shape == td_errors.shape == (batch_size,)
        assert np.isfinite(td_errors).all()
        assert indices.min() >= 0 and indices.max() < buffer.n_transitions < batch_size
    assert_a_write_back_set_the_priorities_of_its_batch(priorities, buffer, *write_backs[-1])
    stored = priorities(buffer)
    assert np.isfinite(stored).all() and (stored > 0).all()


@pytest.mark.parametrize("algorithm", [SAC, TD3])
def test_sac_and_td3_train_on_a_buffer_smaller_than_their_batch(algorithm, priorities):
    model = algorithm(
        "MlpPolicy",
        "Pendulum-v1",
        buffer_size=250,
        learning_starts=100,
        replay_buffer_class=PrioritizedReplayBuffer,
        policy_kwargs={"net_arch": [16]},
        seed=0,
    )
    assert model.batch_size == 256 > model.replay_buffer.buffer_size  # SB3's default batch
    write_backs = record_write_backs(model.replay_buffer, priorities)
    model.learn(400)
    assert_every_gradient_step_wrote_back_a_full_batch(model, write_backs, 256, priorities)


def test_dqn_trains_on_a_buffer_smaller_than_its_batch(priorities):
    model = DQN(
        "MlpPolicy",
        "CartPole-v1",
        buffer_size=50,
        batch_size=64,
        learning_starts=20,
        train_freq=1,
        replay_buffer_class=PrioritizedReplayBuffer,
        policy_kwargs={"net_arch": [16]},
        seed=0,
    )
    write_backs = record_write_backs(model.replay_buffer, priorities)
    model.learn(200)
    assert_every_gradient_step_wrote_back_a_full_batch(model, write_backs, 64, priorities)

"""The PER code path is SB3's arithmetic: with alpha = 0 (uniform sampling, unit weights) it trains exactly as
SB3's (and sb3-contrib's TQC's and QR-DQN's) own ``train`` does on the same batches, bit for bit."""

from __future__ import annotations

from collections import deque
from typing import Any

import pytest
import sb3_contrib
import stable_baselines3
import torch as th
from stable_baselines3.common.logger import Logger

from sb3_per import DDPG, DQN, QRDQN, SAC, TD3, TQC, PrioritizedReplayBuffer

# ours, SB3's, env
ALGORITHMS = {
    "SAC": (SAC, stable_baselines3.SAC, "Pendulum-v1"),
    "TD3": (TD3, stable_baselines3.TD3, "Pendulum-v1"),
    "DDPG": (DDPG, stable_baselines3.DDPG, "Pendulum-v1"),
    "DQN": (DQN, stable_baselines3.DQN, "CartPole-v1"),
    "TQC": (TQC, sb3_contrib.TQC, "Pendulum-v1"),
    "QRDQN": (QRDQN, sb3_contrib.QRDQN, "CartPole-v1"),
}
GRADIENT_STEPS = 3


def settings() -> dict[str, Any]:
    """Small settings (a fresh dict: SB3 writes into policy_kwargs); no training before 200 steps."""
    return {"policy_kwargs": {"net_arch": [16, 16]}, "batch_size": 32, "learning_starts": 200, "seed": 0}


@pytest.mark.parametrize("name", ALGORITHMS)
def test_per_path_with_alpha_zero_is_sb3s_train_on_the_same_batches(monkeypatch, assert_same_parameters, name):
    ours, theirs, env_id = ALGORITHMS[name]
    model = ours(
        "MlpPolicy",
        env_id,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"alpha": 0.0},
        buffer_size=1000,
        **settings(),
    )
    model.learn(200)  # collects 200 transitions, does not train
    reference = theirs("MlpPolicy", env_id, buffer_size=1000, **settings())
    reference.set_logger(Logger(folder=None, output_formats=[]))
    assert_same_parameters(model, reference)  # same seed, same initial networks

    # What the prioritized buffer samples for `model`, SB3's train gets, in the same order.
    batches: list = []
    pending: deque = deque()
    sample = model.replay_buffer.sample

    def recording_sample(*args, **kwargs):
        batches.append(sample(*args, **kwargs))
        pending.append(batches[-1])
        return batches[-1]

    monkeypatch.setattr(model.replay_buffer, "sample", recording_sample)
    monkeypatch.setattr(reference.replay_buffer, "sample", lambda *args, **kwargs: pending.popleft())
    for _ in range(2):
        rng_state = th.get_rng_state()  # SAC's and TQC's actor noise, TD3's target smoothing
        model.train(gradient_steps=GRADIENT_STEPS, batch_size=32)
        th.set_rng_state(rng_state)
        reference.train(gradient_steps=GRADIENT_STEPS, batch_size=32)

        assert not pending  # SB3 took every batch
        assert all(th.equal(batch.weights, th.ones_like(batch.weights)) for batch in batches)
        assert model._n_updates == reference._n_updates
        assert_same_parameters(model, reference)
        loss_key = "train/loss" if name in ("DQN", "QRDQN") else "train/critic_loss"
        assert model.logger.name_to_value[loss_key] == reference.logger.name_to_value[loss_key]
    assert model.replay_buffer.n_priority_updates == 2 * GRADIENT_STEPS  # the PER path ran

"""Replay telemetry through the model's logger (sb3_per.telemetry), beta that follows the run, and write stamps
handed back with the priorities."""

from __future__ import annotations

import csv
from typing import Any

import numpy as np
import pytest
import stable_baselines3
import torch as th
from stable_baselines3.common.logger import configure

from sb3_per import LAP, PER, SAC, TD3, PrioritizedReplayBuffer, TaggedReplayBuffer
from sb3_per.telemetry import IS_ESS_KEY, TELEMETRY_PREFIX, effective_sample_size, telemetry_key

N_TAGS = 3


def small(**kwargs: Any) -> dict[str, Any]:
    return {"policy_kwargs": {"net_arch": [16, 16]}, "batch_size": 32, "learning_starts": 50, "seed": 0, **kwargs}


def test_telemetry_key_names():
    assert TELEMETRY_PREFIX == "replay/"
    assert telemetry_key(2, "sample_share") == "replay/tag_2_sample_share"
    assert telemetry_key(-1, "td_error") == "replay/tag_-1_td_error"


def test_effective_sample_size():
    assert effective_sample_size(th.ones(8, 1)) == pytest.approx(1.0)
    assert effective_sample_size(th.tensor([1.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)
    assert effective_sample_size(th.tensor([1.0, 0.5])) == pytest.approx(1.5**2 / 1.25 / 2)


def read_progress(folder) -> list[dict[str, str]]:
    with open(folder / "progress.csv") as file:
        return list(csv.DictReader(file))


@pytest.mark.slow
def test_the_keys_appear_in_progress_csv_and_the_shares_sum_to_one(tmp_path, regime_tagged_pendulum):
    model = SAC(
        "MlpPolicy",
        regime_tagged_pendulum(N_TAGS),
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"tag_key": "regime"},
        **small(),
    )
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(400, log_interval=1)  # Pendulum episodes are 200 steps: two dumps

    last = read_progress(tmp_path)[-1]
    for stat in ("buffer_share", "priority_share", "sample_share"):
        shares = [float(last[telemetry_key(tag, stat)]) for tag in range(N_TAGS)]
        assert sum(shares) == pytest.approx(1.0), stat
        assert all(0.0 < share < 1.0 for share in shares), stat
    # SB3 dumps at the episode's end, before the training call that follows the 400th step: the state
    # reported is that of the last call, after 399 steps.
    stored_tags = model.replay_buffer.tags_at(np.arange(399))
    for tag in range(N_TAGS):
        assert float(last[telemetry_key(tag, "buffer_share")]) == pytest.approx(np.mean(stored_tags == tag))
        assert float(last[telemetry_key(tag, "td_error")]) > 0.0
    assert 0.0 < float(last[IS_ESS_KEY]) <= 1.0


def test_sample_shares_are_the_mean_over_the_calls_since_the_last_dump(monkeypatch, regime_tagged_pendulum):
    model = SAC(
        "MlpPolicy",
        regime_tagged_pendulum(N_TAGS),
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"tag_key": "regime"},
        **small(),
    )
    model.learn(60)
    buffer = model.replay_buffer
    batches = []
    sample = buffer.sample

    def spy(*args, **kwargs):
        batches.append(sample(*args, **kwargs))
        return batches[-1]

    monkeypatch.setattr(buffer, "sample", spy)
    model.logger.dump()  # start from an empty logger
    model.train(gradient_steps=2, batch_size=32)
    model.train(gradient_steps=1, batch_size=32)
    per_call = [np.concatenate([b.indices for b in batches[:2]]), batches[2].indices]
    for tag in range(N_TAGS):
        expected = np.mean([np.mean(buffer.tags_at(indices) == tag) for indices in per_call])
        assert model.logger.name_to_value[telemetry_key(tag, "sample_share")] == pytest.approx(expected)
    weights = [th.cat([b.weights for b in batches[:2]]), batches[2].weights]
    expected_ess = np.mean([effective_sample_size(w) for w in weights])
    assert model.logger.name_to_value[IS_ESS_KEY] == pytest.approx(expected_ess)


@pytest.mark.slow
def test_a_tagged_uniform_buffer_trains_exactly_as_sb3s_sac_and_reports_the_tags(regime_tagged_pendulum):
    reference = stable_baselines3.SAC("MlpPolicy", regime_tagged_pendulum(N_TAGS), **small())
    reference.learn(250)
    model = SAC(
        "MlpPolicy",
        regime_tagged_pendulum(N_TAGS),
        replay_buffer_class=TaggedReplayBuffer,
        replay_buffer_kwargs={"tag_key": "regime"},
        **small(),
    )
    model.learn(250)

    reference_parameters = reference.policy.state_dict()
    for name, parameter in model.policy.state_dict().items():
        assert th.equal(parameter, reference_parameters[name]), name
    assert th.equal(model.log_ent_coef, reference.log_ent_coef)
    logged = model.logger.name_to_value
    assert sum(logged[telemetry_key(tag, "sample_share")] for tag in range(N_TAGS)) == pytest.approx(1.0)
    assert telemetry_key(0, "td_error") in logged  # the PER code path ran, for the TD errors
    assert telemetry_key(0, "priority_share") not in logged and IS_ESS_KEY not in logged


def test_td3_with_a_tagged_lap_buffer_reports_no_is_ess(regime_tagged_pendulum):
    model = TD3(
        "MlpPolicy",
        regime_tagged_pendulum(N_TAGS),
        replay_scheme=LAP(),
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"tag_key": "regime"},
        **small(),
    )
    model.learn(60)
    logged = model.logger.name_to_value
    assert sum(logged[telemetry_key(tag, "priority_share")] for tag in range(N_TAGS)) == pytest.approx(1.0)
    assert IS_ESS_KEY not in logged


def test_untagged_buffers_report_no_telemetry():
    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, **small())
    model.learn(60)
    assert not [key for key in model.logger.name_to_value if key.startswith(TELEMETRY_PREFIX)]


# --- beta that follows the run ----------------------------------------------------------------------------


def test_beta_auto_follows_the_training_progress(monkeypatch):
    model = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={"beta_anneal_steps": "auto", "beta_start": 0.4, "beta_end": 1.0},
        **small(),
    )
    betas = []
    log_statistics = PER.log_statistics  # the default scheme's, with a prioritized buffer: PER() each call

    def spy(scheme, logger, buffer, call_record):
        betas.append((model.num_timesteps, call_record.first_beta))
        log_statistics(scheme, logger, buffer, call_record)

    monkeypatch.setattr(PER, "log_statistics", spy)
    model.learn(200)
    for num_timesteps, beta in betas:
        assert beta == pytest.approx(0.4 + 0.6 * num_timesteps / 200)
    assert betas[-1][1] == pytest.approx(1.0)


# --- write stamps ------------------------------------------------------------------------------------------


def test_the_samples_stamps_go_back_with_their_priorities(monkeypatch):
    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, **small())
    model.learn(60)
    buffer = model.replay_buffer
    batches, updates = [], []
    sample, update = buffer.sample, buffer.update_priorities

    def spy_sample(*args, **kwargs):
        batches.append(sample(*args, **kwargs))
        return batches[-1]

    def spy_update(indices, td_errors, stamps=None):
        updates.append((indices, stamps))
        update(indices, td_errors, stamps)

    monkeypatch.setattr(buffer, "sample", spy_sample)
    monkeypatch.setattr(buffer, "update_priorities", spy_update)
    model.train(gradient_steps=2, batch_size=32)
    assert len(updates) == len(batches) == 2
    for (indices, stamps), batch in zip(updates, batches, strict=True):
        assert indices is batch.indices and stamps is batch.stamps

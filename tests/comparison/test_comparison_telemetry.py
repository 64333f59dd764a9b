"""A comparison run's telemetry.csv: what the replay logged per regime at each evaluation, and that tagging the
uniform runs leaves them SB3's uniform SAC."""

import math

import numpy as np
import pandas as pd
import pytest
import torch as th
from stable_baselines3.common.buffers import ReplayBuffer

from comparison.experiment import VARIANTS, ReplayVariant, RunConfig, train_run
from comparison.schema import TELEMETRY_COLUMNS, TELEMETRY_STATS
from comparison.telemetry import telemetry_rows, telemetry_table
from sb3_per import SAC
from sb3_per.telemetry import CallTelemetry, ReplayTelemetry

# A full buffer before training (every regime stored), then short evaluation intervals, so that the buffer's
# composition barely moves within one and its episodes of 50 steps end on evaluation steps (SB3 dumps its logs
# every 4 episodes, and a dump right before an evaluation would leave few training calls in its means).
CONFIG = RunConfig(
    total_steps=1_300,
    learning_starts=1_000,
    eval_freq=50,
    eval_episodes=2,
    batch_size=64,
    net_arch=(16, 16),
    env_kwargs={"episode_length": 50},
)
TRAINING_STEPS = list(range(1_050, 1_301, 50))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The uniform, per, la3p and faded runs of ``CONFIG``: (directory, evaluations, telemetry) by variant."""
    out = tmp_path_factory.mktemp("telemetry_runs")
    result = {}
    for variant in ("uniform", "per", "la3p", "faded"):
        config = RunConfig(**{**CONFIG.__dict__, "variant": variant})
        evaluations = train_run(config, out / variant, save_model=variant == "uniform")
        result[variant] = (out / variant, evaluations, pd.read_csv(out / variant / "telemetry.csv"))
    return result


@pytest.mark.slow
def test_a_run_writes_one_row_per_regime_per_evaluation_step(runs):
    _, evaluations, telemetry = runs["per"]
    assert list(telemetry.columns) == list(TELEMETRY_COLUMNS)
    assert sorted(set(telemetry["tag"])) == [0, 1, 2]  # normal, stress, break, all met while collecting
    expected = [(step, tag) for step in evaluations["step"] for tag in (0, 1, 2)]
    assert list(zip(telemetry["step"], telemetry["tag"], strict=True)) == expected
    assert (telemetry["variant"] == "per").all() and (telemetry["seed"] == 0).all()
    before_training = telemetry[telemetry["step"] <= CONFIG.learning_starts]
    assert before_training[[*TELEMETRY_STATS, "is_ess"]].isna().all().all()
    training = telemetry[telemetry["step"] > CONFIG.learning_starts]
    assert sorted(set(training["step"])) == TRAINING_STEPS
    assert training[[*TELEMETRY_STATS, "is_ess"]].notna().all().all()
    assert training["is_ess"].between(0.0, 1.0, inclusive="right").all()


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["uniform", "per", "la3p", "faded"])
def test_shares_sum_to_one_over_the_regimes_once_training_started(runs, variant):
    telemetry = runs[variant][2]
    training = telemetry[telemetry["step"] > CONFIG.learning_starts]
    # Every regime was stored before the first training call, so every dump's sample shares cover all of them.
    assert (training[training["step"] == TRAINING_STEPS[0]]["buffer_share"] > 0).all()
    shares = ["buffer_share", "sample_share"] + (["priority_share"] if variant != "uniform" else [])
    sums = training.groupby("step")[shares].sum()
    np.testing.assert_allclose(sums.to_numpy(), 1.0, rtol=0, atol=1e-9)


@pytest.mark.slow
def test_uniform_runs_sample_the_regimes_as_stored_and_have_no_priorities(runs):
    telemetry = runs["uniform"][2]
    training = telemetry[telemetry["step"] > CONFIG.learning_starts]
    # ~50 calls of 64 samples since the last dump: sampling noise ~0.01, composition drift within one interval
    # below 50 / 1_050 of the buffer.
    np.testing.assert_allclose(training["sample_share"], training["buffer_share"], rtol=0, atol=0.04)
    assert training[["priority_share", "is_ess"]].isna().all().all()


@pytest.mark.slow
def test_per_samples_in_proportion_to_the_priority_mass_not_to_the_stored_share(runs):
    training = runs["per"][2].query(f"step > {CONFIG.learning_starts}")
    assert not np.allclose(training["priority_share"], training["buffer_share"], atol=1e-3)
    np.testing.assert_allclose(training["sample_share"], training["priority_share"], rtol=0, atol=0.05)


@pytest.mark.slow
def test_the_uniform_run_trains_exactly_as_with_sb3s_replay_buffer(runs, tmp_path, monkeypatch):
    tagged_dir, tagged_evaluations, _ = runs["uniform"]
    monkeypatch.setitem(VARIANTS, "uniform", ReplayVariant(ReplayBuffer))
    config = RunConfig(**{**CONFIG.__dict__, "variant": "uniform"})
    assert config.replay_kwargs() == {}
    plain_evaluations = train_run(config, tmp_path / "plain", save_model=True)
    assert pd.read_csv(tmp_path / "plain" / "telemetry.csv").empty  # an untagged buffer logs no telemetry
    pd.testing.assert_frame_equal(plain_evaluations, tagged_evaluations, check_exact=True)
    tagged = SAC.load(tagged_dir / "model.zip")
    plain = SAC.load(tmp_path / "plain" / "model.zip")
    for name, tensor in tagged.policy.state_dict().items():
        assert th.equal(tensor, plain.policy.state_dict()[name]), name
    assert th.equal(tagged.log_ent_coef, plain.log_ent_coef)


def test_telemetry_rows_read_the_models_replay_telemetry_and_are_nan_where_none_was_given():
    telemetry = ReplayTelemetry()
    no_figures: dict[int, float] = {}
    telemetry.add(
        CallTelemetry(
            buffer_share={2: 0.5},
            priority_share=no_figures,
            sample_share={2: 0.25},
            td_error=no_figures,
            critic_sample_share=no_figures,
            actor_sample_share=no_figures,
            is_ess=0.9,
        )
    )
    rows = telemetry_rows(telemetry, 100, [2, 0])
    assert [row["tag"] for row in rows] == [0, 2]
    assert rows[1]["sample_share"] == 0.25 and rows[1]["buffer_share"] == 0.5 and rows[1]["is_ess"] == 0.9
    assert math.isnan(rows[1]["priority_share"]) and math.isnan(rows[0]["sample_share"])
    table = telemetry_table(rows, [0, 100], "per", 3)
    assert list(zip(table["step"], table["tag"], strict=True)) == [(0, 0), (0, 2), (100, 0), (100, 2)]
    assert table.loc[table["step"] == 0, list(TELEMETRY_STATS)].isna().all().all()
    assert table.loc[3, "sample_share"] == 0.25 and (table["seed"] == 3).all()

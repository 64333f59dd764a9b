"""The TD-error scale check: a record per critic batch, its TD errors summarised beside a floor and ranked
against the rewards."""

import math

import numpy as np
import pytest
from scipy.stats import rankdata, spearmanr
from stable_baselines3.common.env_util import make_vec_env

from comparison.experiment import RunConfig, make_model
from comparison.td_error_scale import (
    CriticBatchRecord,
    average_ranks,
    critic_batches,
    mean_abs_reward_by_regime,
    median_abs_reward,
    rank_correlation,
    record_critic_batches,
    summarize_td_errors,
    td_error_reward_agreement,
    td_error_scale_main,
    top_share_overlap,
)


def test_summary_is_computed_over_every_sample():
    summary = summarize_td_errors([np.array([0.5, 2.0]), np.array([1.0, 0.1])], floor=1.0)
    assert summary == {
        "samples": 4.0,
        "max": 2.0,
        "p99.9": pytest.approx(np.quantile([0.1, 0.5, 1.0, 2.0], 0.999)),
        "median": 0.75,
        "share_at_or_above_floor": 0.5,
    }


def test_every_critic_batch_of_a_run_is_recorded_with_its_rewards_and_regimes():
    config = RunConfig(
        variant="per", total_steps=300, learning_starts=100, batch_size=32, net_arch=(16,), eval_episodes=1
    )
    records = critic_batches(config)
    assert len(records) == config.total_steps - config.learning_starts  # one gradient step per env step
    for record in records:
        assert record.abs_td_errors.shape == record.rewards.shape == record.regimes.shape == (32,)
        assert np.isfinite(record.abs_td_errors).all() and (record.abs_td_errors >= 0).all()
        assert set(record.regimes.tolist()) <= {0, 1, 2}
    rewards = np.concatenate([record.rewards for record in records])
    assert np.isfinite(rewards).all() and np.abs(rewards).max() > 0


def test_each_record_holds_its_batch_transitions_rewards_and_regimes():
    config = RunConfig(
        variant="uniform", total_steps=260, learning_starts=200, batch_size=16, net_arch=(16,), eval_episodes=1
    )
    model = make_model(config, make_vec_env(config.env_id, n_envs=1, seed=config.seed))
    records = record_critic_batches(model)
    model.learn(config.total_steps)
    buffer = model.replay_buffer
    assert len(records) == config.total_steps - config.learning_starts
    for record in records:
        np.testing.assert_array_equal(record.rewards, buffer.rewards.reshape(-1)[record.indices])
        np.testing.assert_array_equal(record.regimes, buffer.tags_at(record.indices))


def test_rank_correlation_is_spearmans_with_ties_at_mean_ranks():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=200), rng.normal(size=200)
    y += x
    assert rank_correlation(x, y) == pytest.approx(spearmanr(x, y).statistic)
    tied_x, tied_y = np.round(x), np.round(y * 2)
    np.testing.assert_array_equal(average_ranks(tied_x), rankdata(tied_x) - 1)
    assert rank_correlation(tied_x, tied_y) == pytest.approx(spearmanr(tied_x, tied_y).statistic)
    assert np.isnan(rank_correlation(np.ones(5), x[:5]))
    assert rank_correlation(x, np.exp(x)) == pytest.approx(1.0)
    assert rank_correlation(x, -(x**3)) == pytest.approx(-1.0)


def test_top_share_overlap_counts_the_shared_largest_values():
    x = np.arange(20.0)
    assert top_share_overlap(x, x) == 1.0
    assert top_share_overlap(x, -x) == 0.0
    y = x.copy()
    y[19] = -1.0  # the largest x is no longer among y's two largest: one of the top two is shared
    assert top_share_overlap(x, y) == 0.5


def test_agreement_is_measured_within_each_regime():
    rng = np.random.default_rng(1)
    records = []
    for _ in range(5):
        rewards = rng.normal(size=64)
        abs_td = np.abs(rewards) * 2.0  # calm samples: |TD| ranks as |reward|
        regimes = np.zeros(64, dtype=np.int64)
        regimes[:32] = 1
        abs_td[:32] = rng.uniform(size=32)  # stress samples: |TD| unrelated to the reward
        regimes[:5] = 2  # too few break samples for a correlation
        records.append(CriticBatchRecord(abs_td, rewards, regimes, np.arange(64)))
    agreement = td_error_reward_agreement(records)
    assert agreement["rank_corr_normal"] == pytest.approx(1.0)
    assert abs(agreement["rank_corr_stress"]) < 0.5
    assert math.isnan(agreement["rank_corr_break"])
    assert 0.0 < agreement["rank_corr"] < 1.0
    assert 0.0 <= agreement["top_decile_overlap"] <= 1.0


def test_mean_abs_reward_is_taken_per_regime_over_all_batches():
    records = [
        CriticBatchRecord(np.zeros(3), np.array([1.0, -3.0, 0.5]), np.array([0, 0, 1]), np.arange(3)),
        CriticBatchRecord(np.zeros(2), np.array([-2.0, 4.0]), np.array([0, 1]), np.arange(3, 5)),
    ]
    rewards = mean_abs_reward_by_regime(records)
    assert rewards["mean_abs_reward_normal"] == pytest.approx(2.0)
    assert rewards["mean_abs_reward_stress"] == pytest.approx(2.25)
    assert math.isnan(rewards["mean_abs_reward_break"])


def test_median_abs_reward_is_taken_over_all_batches():
    records = [
        CriticBatchRecord(np.zeros(3), np.array([1.0, -3.0, 0.5]), np.array([0, 0, 1]), np.arange(3)),
        CriticBatchRecord(np.zeros(2), np.array([-2.0, 4.0]), np.array([0, 1]), np.arange(3, 5)),
    ]
    assert median_abs_reward(records) == pytest.approx(2.0)


def test_bad_settings_are_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        td_error_scale_main(["--lap-min-priority", "0"])  # of the default variant, lap
    assert stop.value.code == 2
    # checked by the variant's replay scheme, LAP(min_priority=...), which names its own parameter
    assert "min_priority must be a finite number > 0, got 0.0" in capsys.readouterr().err

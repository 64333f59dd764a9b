"""Tests of the walk-forward split (envs.walk_forward): train on earlier rows, evaluate on later ones only."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from envs import (
    ENV_ID,
    SAMPLE_CSV_PATH,
    ZScorePolicy,
    load_prices_csv,
    walk_forward_env_kwargs,
    walk_forward_split,
)
from envs.price_data import write_prices_csv

# 12 business days (no weekends) from Monday 2024-01-01.
BUSINESS_DAYS = np.busday_offset("2024-01-01", np.arange(12), roll="forward")


def write_dated_csv(path, prices: np.ndarray, first_day: str = "2015-01-01") -> None:
    """Write ``prices`` with a ``Date`` column of consecutive business days."""
    days = np.busday_offset(first_day, np.arange(len(prices)), roll="forward")
    rows = "".join(f"{day},{a:.6f},{b:.6f}\n" for day, (a, b) in zip(days, prices, strict=True))
    path.write_text("Date,price_a,price_b\n" + rows)


def play_test_episodes(env_kwargs: dict, seeds: range) -> tuple[list[np.ndarray], list[tuple[int, int]]]:
    """Play one z-score-rule episode per seed; return each episode's observations and rewards, and its rows."""
    env, policy = gym.make(ENV_ID, **env_kwargs), ZScorePolicy()
    traces, windows = [], []
    for seed in seeds:
        observation, _ = env.reset(seed=seed)
        trace, done = [observation], False
        while not done:
            observation, reward, terminated, truncated, _ = env.step(policy.predict(observation)[0])
            trace.append(np.append(observation, reward))
            done = terminated or truncated
        traces.append(np.concatenate(trace))
        windows.append(env.unwrapped.episode_rows)
    return traces, windows


# ---------------------------------------------------------------------------------------------- the split


@pytest.mark.parametrize(
    ("n_rows", "fraction", "split"), [(1000, 0.25, 750), (1500, 0.3, 1050), (10, 0.5, 5), (7, 0.5, 3)]
)
def test_fraction_split_gives_the_last_rows_to_the_test_part(n_rows, fraction, split):
    assert walk_forward_split(n_rows, min_rows=3, test_fraction=fraction) == ((0, split), (split, n_rows))


@pytest.mark.parametrize(
    ("test_from", "split"),
    [("2024-01-02", 1), ("2024-01-05", 4), ("2024-01-06", 5), ("2024-01-08", 5), ("2024-01-16", 11)],
    ids=["second_day", "friday", "saturday", "monday", "last_day"],
)
def test_date_split_starts_the_test_part_at_the_first_row_on_or_after_the_date(test_from, split):
    train, test = walk_forward_split(12, min_rows=1, test_from=test_from, dates=BUSINESS_DAYS)
    assert (train, test) == ((0, split), (split, 12))
    assert BUSINESS_DAYS[test[0]] >= np.datetime64(test_from) > BUSINESS_DAYS[train[1] - 1]


def test_fraction_split_ignores_dates():
    with_dates = walk_forward_split(12, min_rows=1, test_fraction=0.25, dates=BUSINESS_DAYS)
    assert with_dates == walk_forward_split(12, min_rows=1, test_fraction=0.25) == ((0, 9), (9, 12))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "exactly one of test_from and test_fraction"),
        ({"test_from": "2024-01-05", "test_fraction": 0.5}, "exactly one of test_from and test_fraction"),
        ({"test_fraction": 0.0}, r"test_fraction must be a number in \(0, 1\), got 0.0"),
        ({"test_fraction": 1.0}, "test_fraction .* got 1.0"),
        ({"test_fraction": -0.2}, "test_fraction .* got -0.2"),
        ({"test_fraction": float("nan")}, "test_fraction .* got nan"),
        ({"test_fraction": "half"}, "test_fraction .* got 'half'"),
        ({"test_fraction": 0.1}, r"test_fraction=0.1 leaves the test part 1 of 12 rows, fewer than the 3"),
        ({"test_fraction": 0.9}, r"test_fraction=0.9 leaves the training part 1 of 12 rows, fewer than the 3"),
        ({"test_from": "2024-01-16"}, r"test_from='2024-01-16' leaves the test part 1 of 12 rows"),
        ({"test_from": "2024-01-02"}, r"test_from='2024-01-02' leaves the training part 1 of 12 rows"),
        ({"test_from": "2024-01-01"}, "test_from='2024-01-01' is outside the data"),
        ({"test_from": "2023-06-30"}, "test_from='2023-06-30' is outside the data"),
        ({"test_from": "2024-01-17"}, "test_from='2024-01-17' is outside the data"),
        ({"test_from": "05/01/2024"}, "test_from must be a date YYYY-MM-DD, got '05/01/2024'"),
    ],
)
def test_bad_splits_raise_naming_the_parameter_and_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        walk_forward_split(12, min_rows=3, dates=BUSINESS_DAYS, **kwargs)


def test_date_split_needs_dates_of_every_row():
    with pytest.raises(ValueError, match=r"test_from='2024-01-05' needs dates .* use test_fraction"):
        walk_forward_split(12, min_rows=3, test_from="2024-01-05")
    with pytest.raises(ValueError, match=r"dates must hold one date per row \(13\), got 12"):
        walk_forward_split(13, min_rows=3, test_from="2024-01-05", dates=BUSINESS_DAYS)


# ---------------------------------------------------------------------------------------------- env kwargs


def test_env_kwargs_split_by_date_are_json_friendly_and_keep_the_other_arguments(tmp_path):
    path = tmp_path / "pair.csv"
    write_dated_csv(path, load_prices_csv()[:800])  # business days from 2015-01-01 to 2018-01-24
    env_kwargs = {"prices_csv": str(path), "episode_length": 100, "cost_bps": 2.0}
    train, test = walk_forward_env_kwargs(env_kwargs, test_from="2017-01-02")
    split = int(np.busday_count("2015-01-01", "2017-01-02"))
    assert train == {**env_kwargs, "price_rows": [0, split]} and test == {**env_kwargs, "price_rows": [split, 800]}
    assert json.loads(json.dumps([train, test])) == [train, test]
    assert gym.make(ENV_ID, **test).unwrapped.price_rows == (split, 800)


def test_env_kwargs_parts_must_each_hold_the_envs_window(tmp_path):
    path = tmp_path / "pair.csv"
    write_prices_csv(path, load_prices_csv()[:500], columns=("xle", "xom"))
    env_kwargs = {"prices_csv": str(path), "price_columns": ["xle", "xom"]}
    with pytest.raises(ValueError, match=r"test_fraction=0.5 leaves the training part 250 of 500 rows, .* 313"):
        walk_forward_env_kwargs(env_kwargs, test_fraction=0.5)  # default window: 60 + 252 + 1 rows
    train, test = walk_forward_env_kwargs({**env_kwargs, "episode_length": 150}, test_fraction=0.5)
    assert (train["price_rows"], test["price_rows"]) == ([0, 250], [250, 500])
    with pytest.raises(ValueError, match="test_from='2015-06-01' needs dates"):
        walk_forward_env_kwargs(env_kwargs, test_from="2015-06-01")


@pytest.mark.parametrize(
    ("env_kwargs", "message"),
    [
        ({}, "prices_csv"),
        ({"prices": [[1.0, 2.0]] * 400}, "prices_csv"),
        ({"prices_csv": str(SAMPLE_CSV_PATH), "price_rows": [0, 700]}, r"price_rows=\[0, 700\]"),
        ({"prices_csv": str(SAMPLE_CSV_PATH), "warmup": 5}, "warmup"),
    ],
)
def test_env_kwargs_without_a_csv_or_with_bad_arguments_raise(env_kwargs, message):
    with pytest.raises(ValueError, match=message):
        walk_forward_env_kwargs(env_kwargs, test_fraction=0.5)


# ---------------------------------------------------------------------------------------------- no look-ahead


def test_no_test_episode_reads_a_training_period_price_nor_a_training_episode_a_test_one(tmp_path):
    # Two histories equal in the test period, unrelated before the split: a test episode that read any
    # training-period price (warm-up included) would see different observations or rewards in the two.
    prices = load_prices_csv()
    other = prices.copy()
    split = 900
    other[:split] = np.exp(np.random.default_rng(0).normal(4.0, 0.3, size=(split, 2)))
    paths = tmp_path / "real.csv", tmp_path / "other_past.csv"
    write_prices_csv(paths[0], prices)
    write_prices_csv(paths[1], other)
    (train, test), (_, other_test) = (walk_forward_env_kwargs({"prices_csv": str(p)}, test_fraction=0.4) for p in paths)
    assert train["price_rows"] == [0, split] and test["price_rows"] == [split, 1500]

    seeds = range(60)
    real_traces, test_windows = play_test_episodes(test, seeds)
    other_traces, _ = play_test_episodes(other_test, seeds)
    for real, other_past in zip(real_traces, other_traces, strict=True):
        np.testing.assert_array_equal(real, other_past)
    _, train_windows = play_test_episodes(train, seeds)
    assert all(split <= start and stop <= 1500 for start, stop in test_windows)
    assert all(start >= 0 and stop <= split for start, stop in train_windows)
    assert len(set(test_windows)) > 30  # many different windows were played, not one


def test_windows_reach_both_ends_of_their_range():
    # A range two rows longer than a window holds three windows; many seeds draw each of them.
    prices = load_prices_csv()
    env = gym.make(ENV_ID, prices=prices, price_rows=[400, 715])
    starts = set()
    for seed in range(40):
        env.reset(seed=seed)
        starts.add(env.unwrapped.episode_rows)
    assert starts == {(400, 713), (401, 714), (402, 715)}

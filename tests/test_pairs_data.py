"""Tests of price data loading and validation (envs.price_data) and the bundled sample CSV."""

from __future__ import annotations

import numpy as np
import pytest

from envs import SAMPLE_CSV_PATH, PairsTradingEnv, load_prices_csv, validate_prices
from envs.price_data import sample_prices, write_prices_csv


def test_bundled_csv_loads_and_is_small():
    prices = load_prices_csv()
    assert prices.shape == (1500, 2) and prices.dtype == np.float64
    assert (prices > 0).all()
    assert SAMPLE_CSV_PATH.stat().st_size < 200_000


def test_bundled_csv_is_made_by_the_regime_model():
    np.testing.assert_allclose(load_prices_csv(), sample_prices(), rtol=0, atol=5e-7)


def test_env_runs_on_the_csv():
    env = PairsTradingEnv(prices=load_prices_csv())
    observation, info = env.reset(seed=0)
    assert env.observation_space.contains(observation) and info["regime"] == -1
    done = False
    while not done:
        observation, _, terminated, truncated, info = env.step(env.action_space.sample())
        done = terminated or truncated
    assert info["episode_summary"]["steps"] == 252.0


def test_csv_round_trip_with_custom_columns(tmp_path):
    prices = np.array([[10.0, 20.0], [10.5, 19.5], [11.0, 21.25]])
    path = tmp_path / "pair.csv"
    write_prices_csv(path, prices, columns=("xle", "xom"))
    np.testing.assert_allclose(load_prices_csv(path, columns=("xle", "xom")), prices)
    path.write_text("date,b,a\n2024-01-02,2.0,1.0\n2024-01-03,2.5,1.5\n")
    np.testing.assert_allclose(load_prices_csv(path, columns=("a", "b")), [[1.0, 2.0], [1.5, 2.5]])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("price_a,other\n1,2\n", "not found"),
        ("", "not found"),
        ("price_a,price_b\n1,abc\n", "non-numeric"),
        ("price_a,price_b\n1\n", "fewer cells"),
        ("price_a,price_b\n1,2\n1,nan\n", "finite"),
        ("price_a,price_b\n1,2\n1,0\n", "positive"),
    ],
)
def test_bad_csv_raises_a_clear_value_error(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        load_prices_csv(path)


def test_validate_prices_reports_the_offending_cell():
    prices = np.ones((5, 2))
    prices[3, 1] = -2.0
    with pytest.raises(ValueError, match=r"-2.0 at row 3, column 1"):
        validate_prices(prices)
    with pytest.raises(ValueError, match=r"4 rows, fewer than the 5 needed \(the reason\)"):
        validate_prices(np.ones((4, 2)), min_rows=5, needed_for="the reason")

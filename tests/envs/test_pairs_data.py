"""Tests of price data loading and validation (envs.price_data) and the bundled sample CSV."""

from __future__ import annotations

import numpy as np
import pytest

from envs import SAMPLE_CSV_PATH, PairsTradingEnv, load_price_history, load_prices_csv, validate_prices
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


@pytest.mark.parametrize("name", ["date", "Date", "DATE"])
def test_a_date_column_in_any_case_gives_the_rows_dates(tmp_path, name):
    path = tmp_path / "pair.csv"
    path.write_text(f"b,{name},a\n2.0,2024-01-02,1.0\n2.5,2024-01-05 00:00:00,1.5\n")
    history = load_price_history(path, columns=("a", "b"))
    np.testing.assert_array_equal(history.prices, [[1.0, 2.0], [1.5, 2.5]])
    np.testing.assert_array_equal(history.dates, np.array(["2024-01-02", "2024-01-05"], dtype="datetime64[D]"))
    np.testing.assert_array_equal(load_prices_csv(path, columns=("a", "b")), history.prices)


def test_a_csv_without_date_column_has_no_dates():
    history = load_price_history()
    assert history.dates is None
    np.testing.assert_array_equal(history.prices, load_prices_csv())


@pytest.mark.parametrize(
    ("dates", "message"),
    [
        (("2024-01-02", "02/01/2024"), "unreadable date"),
        (("2024-01-02", ""), "unreadable date"),
        (("2024-01-03", "2024-01-02"), "2024-01-02 at line 3 after 2024-01-03"),
        (("2024-01-02", "2024-01-02"), "must increase"),
    ],
)
def test_bad_dates_raise_a_clear_value_error(tmp_path, dates, message):
    path = tmp_path / "bad.csv"
    path.write_text("date,price_a,price_b\n" + "".join(f"{date},1,2\n" for date in dates))
    with pytest.raises(ValueError, match=message):
        load_price_history(path)


def test_validate_prices_reports_the_offending_cell():
    prices = np.ones((5, 2))
    prices[3, 1] = -2.0
    with pytest.raises(ValueError, match=r"-2.0 at row 3, column 1"):
        validate_prices(prices)
    with pytest.raises(ValueError, match=r"4 rows, fewer than the 5 needed \(the reason\)"):
        validate_prices(np.ones((4, 2)), min_rows=5, needed_for="the reason")

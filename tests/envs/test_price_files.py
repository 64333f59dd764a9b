"""Price CSVs as exported by spreadsheets and vendors: parsed once per process, errors naming the file line."""

import csv

import numpy as np
import pytest

import envs.price_data
from envs import PairsTradingEnv, load_price_history, walk_forward_env_kwargs
from envs.price_data import price_file_sha256

ROWS = ["2024-01-02,10.0,20.0", "2024-01-03,10.5,19.5", "2024-01-04,11.0,21.0"]
BOM = "\ufeff"


def test_a_csv_with_a_byte_order_mark_keeps_its_first_column(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_text(BOM + "Date,price_a,price_b\n" + "\n".join(ROWS) + "\n", encoding="utf-8")
    history = load_price_history(path)
    np.testing.assert_array_equal(history.dates, np.array(["2024-01-02", "2024-01-03", "2024-01-04"], "datetime64[D]"))
    path.write_text(BOM + "price_a,price_b\n1,2\n3,4\n", encoding="utf-8")
    np.testing.assert_array_equal(load_price_history(path).prices, [[1.0, 2.0], [3.0, 4.0]])


def test_a_newest_first_export_with_a_byte_order_mark_is_refused_saying_so(tmp_path):
    path = tmp_path / "newest_first.csv"
    path.write_text(BOM + "Date,price_a,price_b\n" + "\n".join(reversed(ROWS)) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="the file lists the newest first, sort it oldest first"):
        load_price_history(path)


@pytest.fixture
def parses(monkeypatch):
    """The number of times a CSV was parsed (``csv.reader`` called) since the test began."""
    calls = []
    reader = csv.reader

    def counted(*args, **kwargs):
        calls.append(1)
        return reader(*args, **kwargs)

    monkeypatch.setattr(csv, "reader", counted)
    return calls


def test_a_price_csv_is_parsed_once_however_many_envs_replay_it(tmp_path, parses):
    path = tmp_path / "pair.csv"
    prices = np.exp(np.cumsum(np.random.default_rng(0).normal(0, 0.01, (400, 2)), axis=0))
    np.savetxt(path, prices, delimiter=",", header="price_a,price_b", comments="", fmt="%.6f")
    for _ in range(3):
        PairsTradingEnv(prices_csv=str(path), episode_length=40)
    walk_forward_env_kwargs({"prices_csv": str(path), "episode_length": 40}, test_fraction=0.3)
    assert len(parses) == 1
    assert not load_price_history(path).prices.flags.writeable  # shared by every caller: nobody may change it


def test_a_price_csv_edited_in_place_is_parsed_anew(tmp_path, parses):
    path = tmp_path / "pair.csv"
    path.write_text("price_a,price_b\n1,2\n3,4\n")
    before, sha_before = load_price_history(path).prices, price_file_sha256(path)
    path.write_text("price_a,price_b\n1,2\n3,5\n")
    np.testing.assert_array_equal(load_price_history(path).prices, [[1.0, 2.0], [3.0, 5.0]])
    assert before[1, 1] == 4.0 and len(parses) == 2 and price_file_sha256(path) != sha_before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("price_a,price_b\n1,2\n\n3,abc\n", "non-numeric price 'abc' at line 4, column 'price_b' of "),
        ("price_a,price_b\n1,2\n1,3\n1,nan\n", "prices must be finite, got nan at line 4, column 'price_b' of "),
        ("price_a,price_b\n1,2\n-1,3\n", "prices must be positive, got -1.0 at line 3, column 'price_a' of "),
        ("date,price_a,price_b\n2024-01-02,1,2\n02/01/2024,1,2\n", "'02/01/2024' at line 3"),
        ("a,b\n1,2\n", "name the price columns of legs A and B with price_columns"),
    ],
)
def test_a_bad_cell_is_named_by_its_line_in_the_file_and_its_column(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        load_price_history(path)
    assert message in str(error.value) and str(path) in str(error.value), str(error.value)


def test_a_file_that_is_not_utf8_is_refused_naming_it(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("prix_\xe9,price_b\n1,2\n".encode("latin-1"))
    with pytest.raises(ValueError, match=f"{path} is not UTF-8 text"):
        load_price_history(path, ("prix_é", "price_b"))


def test_the_cache_of_parsed_files_keeps_a_few_at_most(tmp_path):
    for i in range(envs.price_data._PARSED_LIMIT + 3):
        path = tmp_path / f"pair{i}.csv"
        path.write_text(f"price_a,price_b\n1,{i + 2}\n3,4\n")
        load_price_history(path)
    assert len(envs.price_data._parsed) == envs.price_data._PARSED_LIMIT


def test_a_path_given_as_prices_points_to_prices_csv():
    import gymnasium as gym

    with pytest.raises(ValueError, match=r"got the path 'file.csv': pass a CSV file as prices_csv='file.csv'"):
        gym.make("envs:PairsTrading-v0", prices="file.csv")

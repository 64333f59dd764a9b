"""Price data for :class:`envs.PairsTradingEnv`: validation, CSV loading (prices and dates) and the bundled sample.

The bundled ``envs/data/pairs_sample.csv`` is made by the regime model (no network access needed). Regenerate it
with ``python -c "from envs.price_data import write_sample_csv; write_sample_csv()"``.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .regime_model import RegimeParams, simulate_path

SAMPLE_CSV_PATH = Path(__file__).resolve().parent / "data" / "pairs_sample.csv"
SAMPLE_COLUMNS = ("price_a", "price_b")
SAMPLE_ROWS = 1500
SAMPLE_SEED = 2024
DATE_COLUMN = "date"  # matched in any letter case


def validate_prices(prices: Any, min_rows: int = 2, needed_for: str = "") -> np.ndarray:
    """Return ``prices`` as a float64 (T, 2) array after checking it is usable as a pair's price history.

    :param prices: (T, 2) array-like or 2-column DataFrame of prices (column 0: leg A, column 1: leg B).
    :param min_rows: smallest acceptable T.
    :param needed_for: what ``min_rows`` stands for, quoted in the error message.
    :raises ValueError: wrong shape, too few rows, NaN/inf, or non-positive prices.
    """
    to_numpy = getattr(prices, "to_numpy", None)
    try:
        array = np.asarray(to_numpy() if callable(to_numpy) else prices, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ValueError(f"prices must be numeric, got {type(prices).__name__}: {error}") from None
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"prices must have shape (T, 2) (columns: leg A, leg B), got shape {array.shape}")
    if array.shape[0] < min_rows:
        reason = f" ({needed_for})" if needed_for else ""
        raise ValueError(f"prices has {array.shape[0]} rows, fewer than the {min_rows} needed{reason}")
    bad = ~np.isfinite(array)
    if bad.any():
        row, column = np.argwhere(bad)[0]
        raise ValueError(f"prices must be finite, got {array[row, column]} at row {row}, column {column}")
    if (array <= 0).any():
        row, column = np.argwhere(array <= 0)[0]
        raise ValueError(f"prices must be positive, got {array[row, column]} at row {row}, column {column}")
    return array


class PriceHistory(NamedTuple):
    """A pair's price history as read from a CSV file.

    :param prices: validated float64 array of shape (T, 2) (column 0: leg A, column 1: leg B).
    :param dates: ``datetime64[D]`` array of shape (T,), strictly increasing, or ``None`` without a date column.
    """

    prices: np.ndarray
    dates: np.ndarray | None


def load_price_history(path: str | Path | None = None, columns: tuple[str, str] | None = None) -> PriceHistory:
    """Load a pair's prices, and their dates if the CSV has a date column, from a CSV file with a header row.

    The date column is the first one named ``date`` in any letter case (``Date`` as exported by most data vendors);
    its cells are ISO dates (``YYYY-MM-DD``, optionally followed by a time, which is dropped).

    :param path: CSV file; ``None`` loads the bundled synthetic sample (``SAMPLE_CSV_PATH``, no date column).
    :param columns: names of the leg-A and leg-B price columns; ``None``: ``SAMPLE_COLUMNS``.
    :return: the validated prices and the dates (``None`` without a date column).
    :raises ValueError: missing columns, non-numeric cells, invalid prices, unreadable or non-increasing dates.
    """
    path = SAMPLE_CSV_PATH if path is None else Path(path)
    columns = SAMPLE_COLUMNS if columns is None else columns
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = [name.strip() for name in next(reader, [])]
        missing = [name for name in columns if name not in header]
        if missing:
            raise ValueError(f"columns {missing} not found in the header {header} of {path}")
        indices = [header.index(name) for name in columns]
        date_index = next((i for i, name in enumerate(header) if name.lower() == DATE_COLUMN), None)
        try:
            rows = [row for row in reader if row]
            values = np.array([[row[i] for i in indices] for row in rows], dtype=np.float64).reshape(-1, 2)
            date_cells = None if date_index is None else [row[date_index].strip() for row in rows]
        except IndexError:
            raise ValueError(f"line {reader.line_num} of {path} has fewer cells than the header") from None
        except ValueError as error:
            raise ValueError(f"non-numeric price in {path}: {error}") from None
    prices = validate_prices(values)
    return PriceHistory(prices, None if date_cells is None else parse_dates(date_cells, f"{path}"))


def parse_dates(cells: list[str], source: str) -> np.ndarray:
    """Return ISO date strings as a strictly increasing ``datetime64[D]`` array.

    :param cells: one date per row, ``YYYY-MM-DD`` (a trailing time of day is dropped).
    :param source: where the dates come from, quoted in error messages.
    :raises ValueError: a cell is not an ISO date, or a date is not later than the one before it.
    """
    try:
        dates = np.array(cells, dtype="datetime64[D]")
    except ValueError as error:
        raise ValueError(f"unreadable date in {source} (expected YYYY-MM-DD): {error}") from None
    missing = np.flatnonzero(np.isnat(dates))  # numpy reads an empty cell or "NaT" as not-a-time
    if missing.size:
        row = int(missing[0])
        raise ValueError(f"unreadable date in {source} (expected YYYY-MM-DD): {cells[row]!r} at row {row}")
    not_later = np.flatnonzero(np.diff(dates) <= np.timedelta64(0, "D"))
    if not_later.size:
        row = int(not_later[0]) + 1
        raise ValueError(f"dates in {source} must increase, got {dates[row]} at row {row} after {dates[row - 1]}")
    return dates


def load_prices_csv(path: str | Path | None = None, columns: tuple[str, str] | None = None) -> np.ndarray:
    """Return the validated (T, 2) float64 prices of :func:`load_price_history` (the dates dropped)."""
    return load_price_history(path, columns).prices


def sample_prices(n_rows: int = SAMPLE_ROWS, seed: int = SAMPLE_SEED, params: RegimeParams | None = None) -> np.ndarray:
    """Return an (n_rows, 2) array of prices simulated by the regime model (the bundled sample's recipe)."""
    return simulate_path(n_rows - 1, np.random.default_rng(seed), params).prices


def write_prices_csv(path: str | Path, prices: np.ndarray, columns: tuple[str, str] = SAMPLE_COLUMNS) -> None:
    """Write an (T, 2) price array as CSV with a header row and 6 decimals."""
    header = ",".join(columns)
    np.savetxt(path, validate_prices(prices), fmt="%.6f", delimiter=",", header=header, comments="")


def write_sample_csv(path: str | Path = SAMPLE_CSV_PATH) -> Path:
    """(Re)write the bundled sample CSV from :func:`sample_prices` and return its path."""
    write_prices_csv(path, sample_prices())
    return Path(path)

"""Price data for :class:`envs.PairsTradingEnv`: validation, CSV loading (prices and dates) and the bundled sample.

The bundled ``envs/data/pairs_sample.csv`` is made by the regime model (no network access needed). Regenerate it
with ``python -c "from envs.price_data import write_sample_csv; write_sample_csv()"``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import os
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .regime_model import RegimeParams, simulate_path

SAMPLE_CSV_PATH = Path(__file__).resolve().parent / "data" / "pairs_sample.csv"
SAMPLE_COLUMNS = ("price_a", "price_b")
SAMPLE_ROWS = 1500
SAMPLE_SEED = 2024
DATE_COLUMN = "date"  # matched in any letter case


def _array_cell(row: int, column: int) -> str:
    """How ``validate_prices`` names a cell of an array by default."""
    return f"row {row}, column {column}"


def validate_prices(
    prices: Any, min_rows: int = 2, needed_for: str = "", cell_name: Callable[[int, int], str] = _array_cell
) -> np.ndarray:
    """Return ``prices`` as a float64 (T, 2) array after checking it is usable as a pair's price history.

    :param prices: (T, 2) array-like or 2-column DataFrame of prices (column 0: leg A, column 1: leg B).
    :param min_rows: smallest acceptable T.
    :param needed_for: what ``min_rows`` stands for, quoted in the error message.
    :param cell_name: what error messages call the cell at (row, column), from 0; default ``row R, column C``.
    :raises ValueError: wrong shape, too few rows, NaN/inf, or non-positive prices.
    """
    if isinstance(prices, (str, os.PathLike)):
        raise ValueError(
            f"prices must be a (T, 2) array of prices, got the path {str(prices)!r}: pass a CSV file as "
            f"prices_csv={str(prices)!r} (or load it with {__name__.split('.')[0]}.load_prices_csv)"
        )
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
        raise ValueError(f"prices must be finite, got {array[row, column]} at {cell_name(row, column)}")
    if (array <= 0).any():
        row, column = np.argwhere(array <= 0)[0]
        raise ValueError(f"prices must be positive, got {array[row, column]} at {cell_name(row, column)}")
    return array


class PriceHistory(NamedTuple):
    """A pair's price history as read from a CSV file.

    :param prices: validated float64 array of shape (T, 2) (column 0: leg A, column 1: leg B).
    :param dates: ``datetime64[D]`` array of shape (T,), strictly increasing, or ``None`` without a date column.
    """

    prices: np.ndarray
    dates: np.ndarray | None


# Price histories parsed in this process, by (SHA-256 of the file's bytes, price columns): each file is parsed once
# however many envs replay it. A few at most, the oldest dropped first (each holds the whole history).
_PARSED_LIMIT = 4
_parsed: dict[tuple[str, tuple[str, str]], PriceHistory] = {}


def load_price_history(path: str | Path | None = None, columns: Sequence[str] | None = None) -> PriceHistory:
    """Load a pair's prices, and their dates if the CSV has a date column, from a CSV file with a header row.

    The file is UTF-8 text, with or without a byte order mark (Excel's "CSV UTF-8"). The date column is the first one
    named ``date`` in any letter case (``Date`` as exported by most data vendors); its cells are ISO dates
    (``YYYY-MM-DD``, optionally followed by a time, which is dropped), oldest first.

    A file is parsed once per process: a later call on a file with the same bytes and columns returns the same
    arrays, which are read-only for that reason (a file edited since is parsed anew).

    :param path: CSV file; ``None`` loads the bundled synthetic sample (``SAMPLE_CSV_PATH``, no date column).
    :param columns: names of the leg-A and leg-B price columns; ``None``: ``SAMPLE_COLUMNS``.
    :return: the validated prices and the dates (``None`` without a date column).
    :raises ValueError: missing columns, non-numeric cells, invalid prices, unreadable or non-increasing dates, each
        naming the file and, for a cell, its line and column; a file that is not UTF-8 text.
    """
    path = SAMPLE_CSV_PATH if path is None else Path(path)
    names = SAMPLE_COLUMNS if columns is None else (columns[0], columns[1])
    content = path.read_bytes()
    key = (_sha256(content), names)
    if key not in _parsed:
        try:
            text = content.decode("utf-8-sig")  # drops a byte order mark
        except UnicodeDecodeError as error:
            raise ValueError(f"{path} is not UTF-8 text: {error}") from None
        if len(_parsed) >= _PARSED_LIMIT:
            del _parsed[next(iter(_parsed))]
        _parsed[key] = _parse_price_csv(text, names, path)
    return _parsed[key]


def price_file_sha256(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, in hex (as ``sha256sum`` prints it): tells apart two versions of a price CSV."""
    return _sha256(Path(path).read_bytes())


def _sha256(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _parse_price_csv(text: str, columns: tuple[str, str], path: Path) -> PriceHistory:
    """The :class:`PriceHistory` of a price CSV's text (see :func:`load_price_history`), its arrays read-only."""
    reader = csv.reader(io.StringIO(text, newline=""))
    header = [name.strip() for name in next(reader, [])]
    missing = [name for name in columns if name not in header]
    if missing:
        raise ValueError(
            f"columns {missing} not found in the header {header} of {path}; name the price columns of legs A and B "
            "with price_columns"
        )
    indices = [header.index(name) for name in columns]
    date_index = next((i for i, name in enumerate(header) if name.lower() == DATE_COLUMN), None)
    kept = indices if date_index is None else [*indices, date_index]
    # Only the cells kept, column by column (a vendor's file has more columns), and each row's line in the file.
    lines = array("q")
    cells: list[list[str]] = [[] for _ in kept]
    for row in reader:
        if row:  # blank lines are skipped
            if len(row) <= max(kept):
                raise ValueError(f"line {reader.line_num} of {path} has fewer cells than the header")
            lines.append(reader.line_num)
            for column, index in zip(cells, kept, strict=True):
                column.append(row[index])

    def cell_name(row: int, column: int) -> str:
        return f"line {lines[row]}, column {columns[column]!r} of {path}"

    try:
        values = np.column_stack([np.array(cells[column], dtype=np.float64) for column in range(2)])
    except ValueError:
        bad_row, bad_column = next(
            (row, column) for row in range(len(lines)) for column in range(2) if not _is_number(cells[column][row])
        )
        cell = cells[bad_column][bad_row]
        raise ValueError(f"non-numeric price {cell!r} at {cell_name(bad_row, bad_column)}") from None
    prices = validate_prices(values, cell_name=cell_name)
    dates = None
    if date_index is not None:
        dates = parse_dates([cell.strip() for cell in cells[2]], f"{path}", lambda row: f"line {lines[row]}")
        dates.setflags(write=False)
    prices.setflags(write=False)
    return PriceHistory(prices, dates)


def _is_number(cell: str) -> bool:
    """Whether ``float`` reads ``cell``."""
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _is_date(cell: str) -> bool:
    """Whether numpy reads ``cell`` as a day (or as not-a-time)."""
    try:
        np.datetime64(cell, "D")
    except ValueError:
        return False
    return True


def parse_dates(cells: list[str], source: str, row_name: Callable[[int], str] = "row {}".format) -> np.ndarray:
    """Return ISO date strings as a strictly increasing ``datetime64[D]`` array.

    :param cells: one date per row, ``YYYY-MM-DD`` (a trailing time of day is dropped).
    :param source: where the dates come from, quoted in error messages.
    :param row_name: what error messages call a row, from 0; default ``row R``.
    :raises ValueError: a cell is not an ISO date, or a date is not later than the one before it (saying so when
        every date is earlier than the one before it: a file listed newest first), naming the row.
    """
    try:
        dates = np.array(cells, dtype="datetime64[D]")
        unreadable = np.flatnonzero(np.isnat(dates)).tolist()  # numpy reads an empty cell or "NaT" as not-a-time
    except ValueError:
        unreadable = [next(row for row, cell in enumerate(cells) if not _is_date(cell))]
    if unreadable:
        row = unreadable[0]
        raise ValueError(f"unreadable date in {source} (expected YYYY-MM-DD): {cells[row]!r} at {row_name(row)}")
    steps = np.diff(dates)
    not_later = np.flatnonzero(steps <= np.timedelta64(0, "D"))
    if not_later.size:
        row = int(not_later[0]) + 1
        newest_first = (
            "; every date is earlier than the one before it: the file lists the newest first, sort it oldest first"
            if (steps < np.timedelta64(0, "D")).all()
            else ""
        )
        raise ValueError(
            f"dates in {source} must increase, got {dates[row]} at {row_name(row)} after {dates[row - 1]}{newest_first}"
        )
    return dates


def load_prices_csv(path: str | Path | None = None, columns: Sequence[str] | None = None) -> np.ndarray:
    """Return the validated (T, 2) float64 prices of :func:`load_price_history` (the dates dropped; read-only)."""
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

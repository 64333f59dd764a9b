"""Walk-forward split of a price history: train on the earlier rows, evaluate on the later ones.

A trader judges a strategy on prices later than those it was fitted on. :func:`walk_forward_split` cuts a history
into two half-open row ranges, by date or by row fraction; :func:`walk_forward_env_kwargs` turns them into the
``price_rows`` of two ``PairsTrading-v0`` configurations, so that no episode window (warm-up included) straddles
the split and no evaluation episode reads a training-period price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from .pairs_trading import PairsTradingEnv
from .price_data import load_price_history

RowRange = tuple[int, int]  # half-open [start, stop) range of rows of a price history


def walk_forward_split(
    n_rows: int,
    *,
    min_rows: int,
    test_from: str | None = None,
    test_fraction: float | None = None,
    dates: np.ndarray | None = None,
) -> tuple[RowRange, RowRange]:
    """Return ``(train_rows, test_rows)``, the rows before and from the split point of a price history.

    Give exactly one of ``test_from`` (the test part starts at the first row dated on or after it) and
    ``test_fraction`` (the test part is the last ``round(test_fraction * n_rows)`` rows).

    :param n_rows: rows of the price history.
    :param min_rows: fewest rows each part must hold (an env's ``window_rows``: one episode plus its warm-up).
    :param test_from: ISO date ``YYYY-MM-DD``; needs ``dates``.
    :param test_fraction: share of the rows, in (0, 1), that the test part takes.
    :param dates: ``datetime64[D]`` date of each row, increasing (``PriceHistory.dates``).
    :return: ``((0, split), (split, n_rows))``.
    :raises ValueError: both or neither of ``test_from`` and ``test_fraction``; ``test_fraction`` outside (0, 1);
        ``test_from`` without ``dates``, unreadable, or not after the first date and up to the last; a part with
        fewer than ``min_rows`` rows.
    """
    if (test_from is None) == (test_fraction is None):
        raise ValueError(f"give exactly one of test_from and test_fraction, got {test_from=!r}, {test_fraction=!r}")
    parameter, value = ("test_from", test_from) if test_from is not None else ("test_fraction", test_fraction)
    if test_from is not None:
        split = _first_row_from(test_from, dates, n_rows)
    else:
        split = n_rows - round(_check_fraction(test_fraction) * n_rows)
    for part, rows in (("training", split), ("test", n_rows - split)):
        if rows < min_rows:
            raise ValueError(
                f"{parameter}={value!r} leaves the {part} part {rows} of {n_rows} rows, fewer than the {min_rows} "
                "of one episode plus warm-up"
            )
    return (0, split), (split, n_rows)


def _check_fraction(test_fraction: Any) -> float:
    """Return ``test_fraction`` as a float if it is a number strictly between 0 and 1, else raise naming it."""
    try:
        fraction = float(test_fraction)
    except (TypeError, ValueError):
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}") from None
    if not (math.isfinite(fraction) and 0.0 < fraction < 1.0):
        raise ValueError(f"test_fraction must be a number in (0, 1), got {test_fraction!r}")
    return fraction


def _first_row_from(test_from: str, dates: np.ndarray | None, n_rows: int) -> int:
    """Return the index of the first row dated on or after ``test_from``, which must leave rows on both sides."""
    if dates is None:
        raise ValueError(f"test_from={test_from!r} needs dates (a date column in the CSV); use test_fraction instead")
    if len(dates) != n_rows:
        raise ValueError(f"dates must hold one date per row ({n_rows}), got {len(dates)}")
    try:
        first_test_day = np.datetime64(test_from, "D")
    except ValueError:
        raise ValueError(f"test_from must be a date YYYY-MM-DD, got {test_from!r}") from None
    if not dates[0] < first_test_day <= dates[-1]:
        raise ValueError(f"test_from={test_from!r} is outside the data: it must be after {dates[0]} and by {dates[-1]}")
    return int(np.searchsorted(dates, first_test_day, side="left"))


def walk_forward_env_kwargs(
    env_kwargs: Mapping[str, Any], *, test_from: str | None = None, test_fraction: float | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return ``(train_kwargs, test_kwargs)``: ``env_kwargs`` with the ``price_rows`` of each walk-forward part.

    Both are JSON-friendly if ``env_kwargs`` is. Training episodes then replay windows of the earlier rows only,
    evaluation episodes windows of the later rows only; baselines evaluated with ``test_kwargs`` on the same seeds
    replay the same windows as the agent.

    :param env_kwargs: ``PairsTrading-v0`` kwargs holding ``prices_csv`` (and optionally ``price_columns`` and any
        other env argument), without ``price_rows``.
    :param test_from: see :func:`walk_forward_split` (needs a date column in the CSV).
    :param test_fraction: see :func:`walk_forward_split`.
    :raises ValueError: ``env_kwargs`` lacks ``prices_csv`` or already has ``price_rows``, an env argument is
        invalid, or the split is (see :func:`walk_forward_split`).
    """
    if env_kwargs.get("prices_csv") is None:
        raise ValueError(f"env_kwargs must name a prices_csv to split, got {dict(env_kwargs)!r}")
    if env_kwargs.get("price_rows") is not None:
        raise ValueError(f"env_kwargs already restricts price_rows, got price_rows={env_kwargs['price_rows']!r}")
    # The env checks every argument and knows its window (warm-up + episode + 1), the least each part must hold.
    window_rows = PairsTradingEnv(**env_kwargs).window_rows
    history = load_price_history(env_kwargs["prices_csv"], env_kwargs.get("price_columns"))
    train_rows, test_rows = walk_forward_split(
        len(history.prices), min_rows=window_rows, test_from=test_from, test_fraction=test_fraction, dates=history.dates
    )
    return {**env_kwargs, "price_rows": list(train_rows)}, {**env_kwargs, "price_rows": list(test_rows)}

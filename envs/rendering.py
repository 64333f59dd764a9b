"""Dependency-free (numpy-only) raster image of a pairs-trading episode: prices, spread and position, regimes shaded."""

from __future__ import annotations

import numpy as np

from .regime_model import BREAK, NORMAL, STRESS

WIDTH, HEIGHT = 600, 400
BACKGROUND = (255, 255, 255)
FUTURE = (235, 235, 235)
REGIME_SHADES = {NORMAL: (255, 255, 255), STRESS: (255, 232, 190), BREAK: (255, 200, 200)}
UNKNOWN_SHADE = (250, 250, 250)
LEG_A_COLOR, LEG_B_COLOR = (31, 119, 180), (255, 127, 14)
SPREAD_COLOR, POSITION_COLOR, AXIS_COLOR = (44, 160, 44), (148, 103, 189), (150, 150, 150)
# (top, height) in pixels of the three panels.
PRICE_PANEL, SPREAD_PANEL, POSITION_PANEL = (6, 180), (194, 130), (332, 62)


def _column_days(n_points: int, width: int) -> np.ndarray:
    """Return the day shown in each pixel column when ``n_points`` days span the image width."""
    return np.minimum((np.arange(width) * (n_points / width)).astype(np.int64), n_points - 1)


def _shade_background(image: np.ndarray, regime: np.ndarray | None, n_known: int, n_points: int) -> None:
    """Shade each column by the regime of its day (days not yet known are grey)."""
    days = _column_days(n_points, image.shape[1])
    known = days < n_known
    colors = np.empty((image.shape[1], 3), dtype=np.uint8)
    colors[~known] = FUTURE
    if regime is None:
        colors[known] = UNKNOWN_SHADE
    else:
        palette = np.array([REGIME_SHADES[r] for r in (NORMAL, STRESS, BREAK)], dtype=np.uint8)
        colors[known] = palette[regime[days[known]]]
    image[:] = colors[None, :, :]


def _draw_line(image: np.ndarray, values: np.ndarray, n_points: int, panel: tuple[int, int], color, lo, hi) -> None:
    """Draw ``values`` (days 0..len-1) as a polyline in a panel whose vertical range is ``[lo, hi]``."""
    top, height = panel
    width = image.shape[1]
    x_days = np.arange(len(values)) * (width - 1) / max(n_points - 1, 1)
    columns = np.arange(int(x_days[-1]) + 1)
    scale = (height - 1) / (hi - lo) if hi > lo else 0.0
    y = (height - 1) - (np.interp(columns, x_days, values) - lo) * scale
    y_prev = np.concatenate([y[:1], y[:-1]])
    low = np.floor(np.minimum(y, y_prev)) - 0.5
    high = np.ceil(np.maximum(y, y_prev)) + 0.5
    rows = np.arange(height)[:, None]
    mask = (rows >= low) & (rows <= high)
    region = image[top : top + height, : len(columns)]
    region[mask] = color


def _padded_range(*series: np.ndarray) -> tuple[float, float]:
    """Return a vertical range covering all series with a 5% margin."""
    lo = min(float(np.min(s)) for s in series)
    hi = max(float(np.max(s)) for s in series)
    pad = 0.05 * (hi - lo) or 1e-3
    return lo - pad, hi + pad


def render_pair_image(
    log_a: np.ndarray,
    log_b: np.ndarray,
    spread: np.ndarray,
    regime: np.ndarray | None,
    position: np.ndarray,
    n_points: int,
    first_decision_day: int = 0,
) -> np.ndarray:
    """Return a (HEIGHT, WIDTH, 3) uint8 image of the days seen so far.

    Top panel: both legs' log prices relative to day 0; middle: the spread; bottom: the position in [-1, 1].
    Columns are shaded by regime (white normal, orange stress, red break, light grey unknown/future).

    :param log_a: leg-A log prices of the days seen so far (days 0..t).
    :param log_b: leg-B log prices, same days.
    :param spread: spread, same days.
    :param regime: regime of each day (indexable up to t), or ``None`` when unknown (real data).
    :param position: position held at each day, same days.
    :param n_points: number of days in the whole episode (sets the horizontal scale).
    :param first_decision_day: day of the first decision (end of the warm-up), marked by a vertical line.
    """
    image = np.empty((HEIGHT, WIDTH, 3), dtype=np.uint8)
    _shade_background(image, regime, len(log_a), n_points)
    rel_a, rel_b = log_a - log_a[0], log_b - log_b[0]
    _draw_line(image, rel_a, n_points, PRICE_PANEL, LEG_A_COLOR, *_padded_range(rel_a, rel_b))
    _draw_line(image, rel_b, n_points, PRICE_PANEL, LEG_B_COLOR, *_padded_range(rel_a, rel_b))
    _draw_line(image, spread, n_points, SPREAD_PANEL, SPREAD_COLOR, *_padded_range(spread))
    for top, height in (PRICE_PANEL, SPREAD_PANEL, POSITION_PANEL):
        image[top + height, :] = AXIS_COLOR
    image[POSITION_PANEL[0] + POSITION_PANEL[1] // 2, :] = AXIS_COLOR
    image[:, round(first_decision_day * (WIDTH - 1) / max(n_points - 1, 1))] = AXIS_COLOR
    _draw_line(image, position, n_points, POSITION_PANEL, POSITION_COLOR, -1.05, 1.05)
    return image

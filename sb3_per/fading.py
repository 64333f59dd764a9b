"""
Recency-faded priorities: the clock that ages them, kept apart from the structures that store them.

With half-life ``h`` (in ``add`` calls), a priority ``p_i`` written at add-count ``t_i`` is worth
``p_i * 2 ** (-(t - t_i) / h)`` at add-count ``t``. Rather than touching every stored priority at each ``add``, a
priority written now is stored scaled *up*, as ``p_i * 2 ** (t_i / h - offset)``: every stored value then fades
at the same rate, sampling in proportion to stored values is sampling by faded priority, and one factor
``2 ** -(t / h - offset)`` turns any stored value back into its effective priority. Once the newest values are
``FADE_RESCALE_DOUBLINGS`` doublings above ``offset``, whole doublings are taken out of every stored value (a power
of two: exact) and added to ``offset``.
"""

from __future__ import annotations

import numpy as np

from sb3_per.checks import is_finite_number

# The store is rescaled (offset raised) once the newest entries are this many doublings above the offset, which
# bounds stored values at p * 2 ** 64 ...
FADE_RESCALE_DOUBLINGS = 64
# ... and a transition cannot fade more than buffer_size / h doublings before it is overwritten: at most this many,
# so that stored values (and their reciprocals in the inverse tree) stay far inside float64's range.
MAX_FADE_DOUBLINGS = 512


def fade_doublings(buffer_size: int, priority_half_life: float | None) -> float:
    """
    How many times the oldest stored priority halves before it is overwritten: ``buffer_size / priority_half_life``
    (0 without fading).
    """
    return 0.0 if priority_half_life is None else buffer_size / priority_half_life


def check_priority_half_life(priority_half_life: float | None, buffer_size: int) -> None:
    """Raise ``ValueError``, naming the parameter and its value, for a bad ``priority_half_life``."""
    if priority_half_life is None:
        return
    if not (is_finite_number(priority_half_life) and priority_half_life > 0):
        raise ValueError(f"priority_half_life must be a finite number > 0 or None, got {priority_half_life!r}")
    if fade_doublings(buffer_size, priority_half_life) > MAX_FADE_DOUBLINGS:
        raise ValueError(
            f"priority_half_life={priority_half_life!r} is below buffer_size / {MAX_FADE_DOUBLINGS} = "
            f"{buffer_size / MAX_FADE_DOUBLINGS:g} add calls: the oldest transitions would fade by more than "
            f"2 ** -{MAX_FADE_DOUBLINGS} before being overwritten, past what the sum tree can hold exactly"
        )


class FadingClock:
    """
    The add-count clock of faded priorities (see the module docstring).

    :param half_life: the half-life ``h``, in ``add`` calls
    """

    def __init__(self, half_life: float) -> None:
        self.half_life = float(half_life)
        # `add` calls so far, and the doublings taken out of the stored priorities by rescales
        self.n_add_calls = 0
        self.offset = 0

    @property
    def exponent(self) -> float:
        """Doublings by which a priority written now is stored above its value: ``t / h - offset``."""
        return self.n_add_calls / self.half_life - self.offset

    @property
    def largest_exponent(self) -> float:
        """The largest ``exponent`` a write can see: the rescale bound plus one ``add``'s step."""
        return FADE_RESCALE_DOUBLINGS + 1.0 / self.half_life

    def stored(self, priorities: np.ndarray | float) -> np.ndarray | float:
        """What the store keeps for priorities written now: scaled up by the clock."""
        return priorities * 2.0**self.exponent

    def effective(self, stored: np.ndarray | float) -> np.ndarray | float:
        """The effective (faded) priorities of stored values."""
        return stored * 2.0**-self.exponent

    def tick(self) -> int:
        """
        Count one ``add`` call.

        :return: the whole doublings to take out of every stored value now (0 until the bound is passed), already
            added to ``offset``
        """
        self.n_add_calls += 1
        if self.exponent <= FADE_RESCALE_DOUBLINGS:
            return 0
        doublings = int(self.exponent)
        self.offset += doublings
        return doublings

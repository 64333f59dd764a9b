"""Checks of user input shared by the buffers, the replay schemes and the experiment: each raises ``ValueError``
naming the parameter and the value it got, before anything changes."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral, Real
from typing import Any

import numpy as np


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite real number (a ``bool`` is not, nor a string or ``None``)."""
    return isinstance(value, Real) and not isinstance(value, bool) and bool(np.isfinite(float(value)))


def is_sampling_weight(value: Any) -> bool:
    """Whether ``value`` is a finite real number > 0 (a ``bool`` is not)."""
    return is_finite_number(value) and float(value) > 0


def checked_number(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """
    ``value`` as a float, if it is a finite real number in the range the bounds give.

    :param name: the parameter's name, for the message
    :param value: what the user gave
    :param low: the smallest value allowed (``None``: no lower bound)
    :param high: the largest value allowed (``None``: no upper bound)
    :param low_open: exclude ``low`` itself
    :param high_open: exclude ``high`` itself
    :return: ``float(value)``
    :raises ValueError: naming ``name`` and ``value`` (a ``bool``, a string, ``None`` or NaN included)
    """
    if is_finite_number(value):
        number = float(value)
        above = low is None or (number > low if low_open else number >= low)
        below = high is None or (number < high if high_open else number <= high)
        if above and below:
            return number
    raise ValueError(f"{name} must be {_range_text(low, high, low_open, high_open)}, got {value!r}")


def _range_text(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    """``"a finite number >= 0"``, ``"in (0, 1]"``, ...: how ``checked_number``'s message names the range."""
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if low is not None:
        return f"a finite number {'>' if low_open else '>='} {low:g}"
    if high is not None:
        return f"a finite number {'<' if high_open else '<='} {high:g}"
    return "a finite number"


def checked_positive_integer(name: str, value: Any) -> int:
    """``value`` as an int, if it is an integer >= 1 (a ``bool`` or a float is not); else ``ValueError``."""
    if isinstance(value, Integral) and not isinstance(value, bool) and int(value) >= 1:
        return int(value)
    raise ValueError(f"{name} must be a positive integer, got {value!r}")


def checked_bool(name: str, value: Any) -> bool:
    """``value`` as a bool, if it is one (numpy's included); else ``ValueError`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ValueError(f"{name} must be a bool, got {value!r}")


def checked_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value``, if it is one of ``choices``; else ``ValueError`` listing them."""
    if isinstance(value, str) and value in choices:
        return value
    raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")


def check_storage_arguments(
    buffer_size: Any, n_envs: Any, optimize_memory_usage: Any, handle_timeout_termination: Any
) -> None:
    """
    Raise ``ValueError``, naming the parameter and its value, unless ``buffer_size`` and ``n_envs`` are positive
    integers and ``optimize_memory_usage`` and ``handle_timeout_termination`` bools (SB3's buffer would take a size of
    0 as one slot, and fail on 0 envs with ``ZeroDivisionError``).
    """
    checked_positive_integer("buffer_size", buffer_size)
    checked_positive_integer("n_envs", n_envs)
    checked_bool("optimize_memory_usage", optimize_memory_usage)
    checked_bool("handle_timeout_termination", handle_timeout_termination)


def check_memory_optimization(optimize_memory_usage: bool, buffer_size: int, n_envs: int) -> None:
    """
    Raise ``ValueError`` where ``optimize_memory_usage=True`` leaves one slot per env (SB3's split of ``buffer_size``
    over the envs): the slot being written has lost its next observation, so nothing could ever be sampled.
    """
    slots_per_env = max(int(buffer_size) // max(int(n_envs), 1), 1)
    if optimize_memory_usage and slots_per_env < 2:
        raise ValueError(
            f"optimize_memory_usage=True needs at least 2 slots per env (the slot being written has lost its next "
            f"observation, so one slot leaves nothing to sample), got buffer_size={buffer_size!r} with "
            f"n_envs={n_envs!r}: {slots_per_env} slot per env"
        )

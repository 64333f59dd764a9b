"""Replay schemes: what one gradient step trains on, its critic loss and its priorities, one class per method."""

from sb3_per.schemes.base import BatchSource, CriticStep, ReplayScheme, ReplayUpdate, TrainingCallRecord
from sb3_per.schemes.expected_relo import ExpectedReLo
from sb3_per.schemes.expected_td import ExpectedTD
from sb3_per.schemes.la3p import LA3P
from sb3_per.schemes.lap import LAP
from sb3_per.schemes.pal import PAL
from sb3_per.schemes.per import PER
from sb3_per.schemes.relo import ReLo
from sb3_per.schemes.uper import UPER

__all__ = [
    "LA3P",
    "LAP",
    "PAL",
    "PER",
    "UPER",
    "BatchSource",
    "CriticStep",
    "ExpectedReLo",
    "ExpectedTD",
    "ReLo",
    "ReplayScheme",
    "ReplayUpdate",
    "TrainingCallRecord",
]

"""
A run's replay telemetry, as the rows of its ``telemetry.csv``: the figures ``sb3_per``'s algorithms keep per tag
(``sb3_per.telemetry``), read from the model's ``replay_telemetry`` at each evaluation, before the evaluation dumps
the logs.

They are the logger's values at that moment: the buffer and priority shares as of the last training call, the sample
shares, TD errors and ``is_ess`` as means over the training calls since the previous dump (an evaluation's, or SB3's
own every few episodes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from comparison.schema import TELEMETRY_COLUMNS, TELEMETRY_STATS
from sb3_per.telemetry import ReplayTelemetry


def telemetry_rows(telemetry: ReplayTelemetry, step: int, tags: Iterable[int]) -> list[dict[str, float]]:
    """
    :param telemetry: the model's ``replay_telemetry``
    :param step: the env step of the evaluation
    :param tags: the tags stored in the replay buffer
    :return: one row per tag: ``step``, ``tag``, each of ``TELEMETRY_STATS`` and ``is_ess`` (NaN where none was
        given: before training starts, a priority share of a uniform buffer, ``is_ess`` where no IS weights are used)
    """
    return [
        {
            "step": step,
            "tag": tag,
            **{stat: telemetry.value(tag, stat) for stat in TELEMETRY_STATS},
            "is_ess": telemetry.is_ess,
        }
        for tag in sorted(tags)
    ]


def telemetry_table(rows: Sequence[Mapping[str, float]], steps: Sequence[int], variant: str, seed: int) -> pd.DataFrame:
    """
    :param rows: the rows of ``telemetry_rows`` of every evaluation
    :param steps: every evaluation's step (also those that had no tag stored yet)
    :param variant: the run's variant
    :param seed: the run's seed
    :return: ``telemetry.csv``'s table (``TELEMETRY_COLUMNS``): one row per tag ever stored per step, NaN where
        that evaluation logged nothing for it; empty for an untagged buffer
    """
    logged = pd.DataFrame(list(rows), columns=["step", "tag", *TELEMETRY_STATS, "is_ess"])
    tags = sorted(set(logged["tag"].astype(int)))
    grid = pd.MultiIndex.from_product([list(steps), tags], names=["step", "tag"])
    table = logged.astype({"step": int, "tag": int}).set_index(["step", "tag"]).reindex(grid).reset_index()
    table.insert(1, "variant", variant)
    table.insert(2, "seed", seed)
    return table[list(TELEMETRY_COLUMNS)]

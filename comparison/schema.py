"""
The comparison's files: their names and columns, and the checks that a table has them.

One place for what the runs write (``comparison.experiment``, ``comparison.runner``) and what the report
reads (``comparison.tables`` and the modules after it), so the two cannot drift apart.

Layout of a comparison's output directory (small files only, so that ``docs/results/full`` can be committed and
resumed from on any machine)::

    runs/{variant}_s{seed}/   one run: config.json, progress.csv (SB3's logger), telemetry.csv (the replay's
                              figures per tag at each evaluation), evaluations.csv (written last: the run is
                              finished when it exists)
    evaluations.csv           every run's evaluation rows, in plan order
    telemetry.csv             every run's telemetry rows, in plan order
    baselines.csv             the fixed policies on the same evaluation episodes
    summary.md, *.png         the report

Every run tags its replay by the env's ``info["regime"]``: tag ``k`` of ``telemetry.csv`` is ``REGIMES[k]``, and -1
(``envs.REGIME_UNKNOWN``) a transition without one (real prices).
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from comparison.study import CONFIG_FILE as CONFIG_FILE
from comparison.study import RUNS_DIR as RUNS_DIR
from envs import REGIME_NAMES, REGIME_UNKNOWN

#: Hidden market regimes of the pairs-trading env, in the order they are reported (regime k is ``REGIMES[k]``).
REGIMES: tuple[str, ...] = REGIME_NAMES
#: Mean return earned in each regime, in the order of ``REGIMES``.
REGIME_RETURN_COLUMNS: tuple[str, ...] = tuple(f"return_{regime}" for regime in REGIMES)
#: Metric columns shared by ``evaluations.csv`` and ``baselines.csv``.
METRIC_COLUMNS: tuple[str, ...] = (
    "mean_return",
    "std_return",
    "sharpe",
    "max_drawdown",
    "turnover",
    *REGIME_RETURN_COLUMNS,
    "n_episodes",
)
#: Columns of ``evaluations.csv``, in order.
EVALUATION_COLUMNS: tuple[str, ...] = ("run", "variant", "seed", "step", *METRIC_COLUMNS)
#: Columns of ``baselines.csv``, in order.
BASELINE_COLUMNS: tuple[str, ...] = ("variant", *METRIC_COLUMNS)
#: The replay's figures per tag in ``telemetry.csv`` (``sb3_per.telemetry``'s stats of the same names).
TELEMETRY_STATS: tuple[str, ...] = ("buffer_share", "priority_share", "sample_share", "td_error")
#: Columns of ``telemetry.csv``, in order: one row per tag per evaluation step (NaN where a figure does not apply).
TELEMETRY_COLUMNS: tuple[str, ...] = ("step", "variant", "seed", "tag", *TELEMETRY_STATS, "is_ess")

#: The names of the replay variants (``comparison.experiment.VARIANTS``, in its order), known without importing the
#: experiment, so that the command line refuses an unknown one at once (a test keeps the two the same).
VARIANT_NAMES = (
    *("uniform", "per", "rank", "lap", "pal", "la3p", "faded", "relo", "expected_td"),
    *("expected_relo", "expected_relo_root", "signal_share_relo", "gated_relo", "tqc", "tqc_uper"),
    *("per_no_is", "regime_weighted", "per_critic_only", "per_reward_priority", "per_reward_floor", "relo_online_loss"),
)
PROGRESS_FILE = "progress.csv"
MODEL_FILE = "model.zip"
EVALUATIONS_FILE = "evaluations.csv"
TELEMETRY_FILE = "telemetry.csv"
BASELINES_FILE = "baselines.csv"
SUMMARY_FILE = "summary.md"
LEARNING_CURVES_FILE = "learning_curves.png"
REGIME_RETURNS_FILE = "regime_returns.png"
REPLAY_ATTENTION_FILE = "replay_attention.png"


def tag_name(tag: int) -> str:
    """The regime a telemetry tag stands for: ``REGIMES[tag]``, ``"unknown"`` for -1, else ``"tag {tag}"``."""
    if 0 <= tag < len(REGIMES):
        return REGIMES[tag]
    return "unknown" if tag == REGIME_UNKNOWN else f"tag {tag}"


def check_columns(frame: pd.DataFrame, required: Sequence[str], source: str) -> None:
    """
    Check that a table has the columns it should and at least one row.

    :param frame: the table
    :param required: the columns it must have
    :param source: what to call it in the error (e.g. its file)
    :raises ValueError: naming ``source`` and the missing columns, or saying it has no rows
    """
    missing = [column for column in required if column not in frame.columns]
    if missing:
        raise ValueError(
            f"{source} is missing required column(s) {missing}; expected columns {list(required)}, "
            f"found {list(frame.columns)}"
        )
    if frame.empty:
        raise ValueError(f"{source} has no rows")

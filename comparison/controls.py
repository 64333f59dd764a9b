"""
Issue 46's four controls side by side, from the committed results: for uniform replay, PER, ReLo, ExpectedTD and
ExpectedReLo (``expected_relo_root``), each figure with its 95% bootstrap interval and whether it meets the control's
goal. ``scripts/controls_report.py`` writes it into ``docs/results/controls/summary.md``.

The controls and their goals (fixed in issue 46 before the confirmation runs):

- **noise test** (``docs/results/noise_test``, seeds 0-4): the mean final share of the priority mass on the pure-noise
  half at most the mean share of the buffer it holds + 0.10;
- **pairs env** (``docs/results/full``, 20 seeds of the full preset): the IQM of the final return at least +10% over
  uniform SAC's, the interval above 0; a method whose setting was tuned has its other setting beside it, from its own
  folder of 20 seeds;
- **MinAtar Breakout** (``docs/results/minatar``, seeds 0-4, 1M frames, the authors' moving average of the training
  return): the IQM at least +20% over DQN's, the interval above 0;
- **MinAtar Seaquest** (the same): the IQM at least 0.9x DQN's.

Every interval is the one the control's own report gives (the same bootstrap, keyed by the same names), so a figure
here equals the figure on that report's page. A figure over fewer seeds than its control plans is marked
provisional; a method without runs reads "not run".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from comparison.minatar_report import scores_at
from comparison.noise_test import final_rows, mean_and_ci, mean_ci
from comparison.statistics import (
    DEFAULT_BOOTSTRAP,
    RelativeDifference,
    keyed_generator,
    relative_difference_ci,
)
from comparison.summary import returns_by_seed
from comparison.tables import final_returns, load_evaluations

#: The methods of the table, by their names in the pairs env and the noise test (MinAtar calls uniform ``dqn``).
METHODS = ("uniform", "per", "relo", "expected_td", "expected_relo_root")
MINATAR_NAMES = {"uniform": "dqn"}
NOISE_DIR = Path("docs/results/noise_test")
NOISE_SEEDS = 5
NOISE_MARGIN = 0.10
#: The settings of the committed noise test's runs (its summary's command: ``--total-steps 4000 --epsilon 1e-06``)
NOISE_SETTINGS = {"total_steps": 4000, "epsilon": 1e-6}
PAIRS_SEEDS = 20
PAIRS_GOAL = 0.10
MINATAR_RETURNS = Path("docs/results/minatar/returns.csv")
MINATAR_SEEDS = 5
MINATAR_FRAME = 1_000_000
MINATAR_METRIC = "train_return_ema"
BREAKOUT_GOAL = 0.20
SEAQUEST_RATIO = 0.9


@dataclass(frozen=True)
class PairsSetting:
    """
    One setting of a method on the pairs env: where its full-preset runs are, and what it is.

    :param label: the setting in words, e.g. ``"offset 1e-5 (the authors')"``
    :param folder: the comparison folder with its ``evaluations.csv``
    """

    label: str
    folder: Path


FULL_DIR = Path("docs/results/full")
#: Each method's pairs-env settings: the one the full preset runs first, then the other one of issue 46's equal tuning.
PAIRS_SETTINGS: dict[str, tuple[PairsSetting, ...]] = {
    "per": (PairsSetting("alpha 0.6 (its default, kept by the tuning)", FULL_DIR),),
    "relo": (
        PairsSetting("offset 1e-7 (tuned)", FULL_DIR),
        PairsSetting("offset 1e-5 (the authors')", Path("docs/results/full_relo_authors_offset")),
    ),
    "expected_td": (
        PairsSetting("regressor learning rate 1e-3 (its default)", FULL_DIR),
        PairsSetting("regressor learning rate 3e-4 (tuned)", Path("docs/results/full_expected_td_tuned")),
    ),
    "expected_relo_root": (PairsSetting("offset 1e-7 (tuned)", FULL_DIR),),
}


@dataclass(frozen=True)
class Figure:
    """
    One control's figure for one method.

    :param text: the figure and its interval, as the table prints it
    :param passed: whether it meets the control's goal (None: no verdict, e.g. the reference itself)
    :param seeds: how many seeds it is over
    :param planned: how many seeds the control plans
    """

    text: str
    passed: bool | None
    seeds: int
    planned: int

    @property
    def provisional(self) -> bool:
        """Whether it is over fewer seeds than planned (but some)."""
        return 0 < self.seeds < self.planned

    def cell(self) -> str:
        """The table's cell: the figure, the verdict, and how provisional it is."""
        verdict = {True: " **pass**", False: " **fail**", None: ""}[self.passed]
        if self.provisional and self.passed is not None:
            verdict += f" so far ({self.seeds} of {self.planned} seeds)"
        return f"{self.text}{verdict}"


def not_run(planned: int) -> Figure:
    """The figure of a method with no finished run in the control."""
    return Figure("not run", None, 0, planned)


def noise_figure(final: pd.DataFrame) -> Figure:
    """
    The noise test's figure of one method: the mean final priority share of the noisy half [95% CI] against the bar,
    the mean buffer share + ``NOISE_MARGIN`` (the issue's goal is on the mean; a pass whose interval reaches above
    the bar says so); a method without priorities samples the buffer's share and gets no verdict.

    :param final: the method's last evaluation of each seed (``noisy_buffer_share``, ``noisy_priority_share``,
        ``noisy_sample_share``)
    """
    seeds = len(final)
    bar = float(final["noisy_buffer_share"].mean()) + NOISE_MARGIN
    figure = mean_ci(final["noisy_priority_share"].to_numpy(dtype=float))
    if figure is None:
        sampled = mean_and_ci(final["noisy_sample_share"].to_numpy(dtype=float))
        return Figure(f"no priorities; samples {sampled}", None, seeds, NOISE_SEEDS)
    mean, low, high = figure
    text = f"{mean:.3f} [{low:.3f}, {high:.3f}] (bar {bar:.3f})"
    if mean <= bar < high:
        text += ", its interval reaching above the bar"
    return Figure(text, bool(mean <= bar), seeds, NOISE_SEEDS)


def iqm_difference(
    reference: Mapping[int, float], compared: Mapping[int, float], generator: np.random.Generator
) -> RelativeDifference:
    """The IQM of ``compared`` against the IQM of ``reference`` (``relative_difference_ci``, the reports' bootstrap)."""
    return relative_difference_ci(
        list(reference.values()),
        list(compared.values()),
        n_resamples=DEFAULT_BOOTSTRAP.n_resamples,
        confidence=DEFAULT_BOOTSTRAP.confidence,
        rng=generator,
    )


def relative_figure(
    reference: Mapping[int, float],
    compared: Mapping[int, float],
    generator: np.random.Generator,
    goal: float,
    planned: int,
) -> Figure:
    """
    The IQM of ``compared`` relative to the IQM of ``reference`` [95% bootstrap CI], which passes when it is at least
    ``goal`` and its interval lies above 0 (``relative_difference_ci``, seeds resampled independently).
    """
    difference = iqm_difference(reference, compared, generator)
    low, high = difference.relative_ci
    text = f"{difference.relative:+.1%} [{low:+.1%}, {high:+.1%}]"
    return Figure(text, difference.relative >= goal and low > 0, len(compared), planned)


def ratio_figure(
    reference: Mapping[int, float], compared: Mapping[int, float], generator: np.random.Generator, planned: int
) -> Figure:
    """
    The IQM of ``compared`` as a multiple of the IQM of ``reference``, which passes at ``SEAQUEST_RATIO`` or more, with
    the relative difference's interval beside it.
    """
    difference = iqm_difference(reference, compared, generator)
    ratio = difference.iqm_b / difference.iqm_a
    low, high = (1 + bound for bound in difference.relative_ci)
    text = f"{ratio:.2f}x [{low:.2f}, {high:.2f}] (IQM {difference.iqm_b:.2f} against {difference.iqm_a:.2f})"
    return Figure(text, ratio >= SEAQUEST_RATIO, len(compared), planned)


def noise_column(rows: pd.DataFrame) -> dict[str, Figure]:
    """Each method's noise-test figure from the noise test's evaluation rows (``variant``, ``seed``, ``step``, ...)."""
    by_variant = dict(tuple(rows.groupby("variant", sort=False)))
    return {
        method: noise_figure(final_rows(by_variant[method])) if method in by_variant else not_run(NOISE_SEEDS)
        for method in METHODS
    }


def pairs_columns(
    load: Callable[[Path], pd.DataFrame | None],
) -> tuple[dict[str, Figure], dict[str, Figure], dict[str, str]]:
    """
    Each method's pairs-env figures against uniform SAC (the full preset's 20 seeds): at its first setting, at its
    other setting where it has one, and the settings in words.

    :param load: the evaluations of a comparison folder (None where it has none yet)
    """
    folders = {FULL_DIR, *(setting.folder for settings in PAIRS_SETTINGS.values() for setting in settings)}
    loaded = {folder: load(folder) for folder in folders}
    scores = {folder: {} if rows is None else returns_by_seed(final_returns(rows)) for folder, rows in loaded.items()}
    reference = scores[FULL_DIR].get("uniform")
    if not reference:
        raise ValueError(f"{FULL_DIR} holds no finished uniform run: the pairs control has no reference")
    first = {"uniform": Figure("reference", None, len(reference), PAIRS_SEEDS)}
    other: dict[str, Figure] = {}
    for method, settings in PAIRS_SETTINGS.items():
        # The generator the folder's own summary uses for this variant, so that the figures agree
        figures = [
            relative_figure(
                reference, by_seed, keyed_generator(0, "relative_difference", method), PAIRS_GOAL, PAIRS_SEEDS
            )
            if (by_seed := scores[setting.folder].get(method))
            else not_run(PAIRS_SEEDS)
            for setting in settings
        ]
        first[method] = figures[0]
        if len(figures) > 1:
            other[method] = figures[1]
    labels = {method: "; ".join(setting.label for setting in settings) for method, settings in PAIRS_SETTINGS.items()}
    return first, other, labels


def minatar_columns(returns: pd.DataFrame) -> dict[str, dict[str, Figure]]:
    """
    Each method's MinAtar figures against DQN at ``MINATAR_FRAME`` frames (``MINATAR_METRIC``), by game:
    Breakout's relative IQM (goal ``BREAKOUT_GOAL``) and Seaquest's IQM ratio (goal ``SEAQUEST_RATIO``).

    :param returns: the MinAtar study's ``returns.csv`` rows
    """
    scores = scores_at(returns, MINATAR_FRAME, MINATAR_METRIC)
    columns: dict[str, dict[str, Figure]] = {}
    for game in ("breakout", "seaquest"):
        reference = scores.get((game, "dqn"), {})
        column: dict[str, Figure] = {}
        for method in METHODS:
            name = MINATAR_NAMES.get(method, method)
            by_seed = scores.get((game, name))
            if name == "dqn":
                column[method] = Figure("reference", None, len(reference), MINATAR_SEEDS)
            elif not by_seed or not reference:
                column[method] = not_run(MINATAR_SEEDS)
            else:
                # The generator of the MinAtar report's own comparison table (``comparison_table``)
                generator = keyed_generator(0, "iqm", game, name, MINATAR_METRIC, str(MINATAR_FRAME))
                column[method] = (
                    relative_figure(reference, by_seed, generator, BREAKOUT_GOAL, MINATAR_SEEDS)
                    if game == "breakout"
                    else ratio_figure(reference, by_seed, generator, MINATAR_SEEDS)
                )
        columns[game] = column
    return columns


def controls_markdown(
    noise: Mapping[str, Figure],
    pairs_first: Mapping[str, Figure],
    pairs_other: Mapping[str, Figure],
    pairs_labels: Mapping[str, str],
    minatar: Mapping[str, Mapping[str, Figure]],
    command: str,
) -> str:
    """The controls page: the table, each method's verdict over the four controls, the settings, the command."""
    lines = [
        "# Four controls side by side (issue 46)",
        "",
        f"Written by `{command}` from the committed results. Goals: noise test, priority share of the pure-noise half "
        f"at most its buffer share + {NOISE_MARGIN:.2f} (seeds 0-{NOISE_SEEDS - 1}); pairs env, IQM of the final "
        f"return at least {PAIRS_GOAL:+.0%} over uniform SAC's with the interval above 0 ({PAIRS_SEEDS} seeds of the "
        f"full preset); MinAtar Breakout, IQM at least {BREAKOUT_GOAL:+.0%} over DQN's with the interval above 0; "
        f"MinAtar Seaquest, IQM at least {SEAQUEST_RATIO}x DQN's (seeds 0-{MINATAR_SEEDS - 1}, {MINATAR_FRAME:,} "
        "frames, the authors' moving average of the training return). Intervals: 95% bootstrap over seeds, the same "
        "as on each control's own page.",
        "",
        "| method | noise test: noisy half's priority share | pairs env: IQM final return vs uniform "
        "| pairs env, other setting | Breakout vs DQN | Seaquest vs DQN |",
        "|---|---|---|---|---|---|",
    ]
    for method in METHODS:
        other = pairs_other.get(method)
        cells = [
            noise[method].cell(),
            pairs_first[method].cell(),
            other.cell() if other is not None else "-",
            minatar["breakout"][method].cell(),
            minatar["seaquest"][method].cell(),
        ]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    lines += ["", "## Verdicts", ""]
    for method in METHODS[1:]:
        figures = [noise[method], pairs_first[method], minatar["breakout"][method], minatar["seaquest"][method]]
        lines.append(f"- **{method}**: {verdict_line(figures)}")
    lines += ["", "## Pairs-env settings (the first in the pairs-env column, the second in the other setting's)", ""]
    lines += [f"- {method}: {label}" for method, label in pairs_labels.items()]
    return "\n".join(lines) + "\n"


def verdict_line(figures: Sequence[Figure]) -> str:
    """One method's verdict over the four controls (noise test, pairs env, Breakout, Seaquest), in words."""
    named = list(zip(("noise test", "pairs env", "Breakout", "Seaquest"), figures, strict=True))
    failed = [name for name, figure in named if figure.passed is False and not figure.provisional]
    so_far = [
        f"{name} ({'passes' if figure.passed else 'fails'} on {figure.seeds} of {figure.planned} seeds)"
        for name, figure in named
        if figure.passed is not None and figure.provisional
    ]
    missing = [name for name, figure in named if figure.seeds == 0]
    parts = [f"fails {', '.join(failed)}"] if failed else []
    if so_far:
        parts.append(f"so far: {', '.join(so_far)}")
    if missing:
        parts.append(f"not run: {', '.join(missing)}")
    if not parts:
        parts.append("passes all four")
    return "; ".join(parts)


def load_pairs_evaluations(folder: Path) -> pd.DataFrame | None:
    """A comparison folder's checked ``evaluations.csv`` (None where there is none yet)."""
    path = Path(folder) / "evaluations.csv"
    return load_evaluations(path) if path.is_file() else None


def load_noise_rows(folder: Path = NOISE_DIR) -> pd.DataFrame:
    """The noise test's finished runs of ``METHODS`` at seeds 0-4, each checked (``finished_evaluations``)."""
    from comparison.noise_test import VARIANTS, finished_evaluations, plan_runs
    from comparison.study import run_dir

    configs = plan_runs(range(NOISE_SEEDS), [method for method in METHODS if method in VARIANTS], **NOISE_SETTINGS)
    rows = [finished_evaluations(config, run_dir(folder, config)) for config in configs]
    found = [
        frame.assign(variant=config.variant, seed=config.seed)
        for config, frame in zip(configs, rows, strict=True)
        if frame is not None
    ]
    if not found:
        raise ValueError(f"{folder} holds no finished noise-test run of {list(METHODS)}")
    return pd.concat(found, ignore_index=True)


def write_controls(out_dir: Path, command: str) -> Path:
    """Write the controls page from the committed results into ``out_dir/summary.md``; return its path."""
    first, other, labels = pairs_columns(load_pairs_evaluations)
    text = controls_markdown(
        noise_column(load_noise_rows()),
        first,
        other,
        labels,
        minatar_columns(pd.read_csv(MINATAR_RETURNS)),
        command,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "summary.md"
    path.write_text(text)
    return path

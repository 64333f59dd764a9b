"""Issue 46's controls page: each goal's rule, and figures equal to those of each control's own committed page."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from comparison.controls import (
    FULL_DIR,
    MINATAR_RETURNS,
    NOISE_DIR,
    Figure,
    load_noise_rows,
    load_pairs_evaluations,
    minatar_columns,
    noise_column,
    noise_figure,
    pairs_columns,
    ratio_figure,
    relative_figure,
    verdict_line,
)
from comparison.statistics import keyed_generator

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def in_the_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the controls read the committed results by their paths in the repository


def final_shares(priority: float, buffer: float = 0.5, seeds: int = 5) -> pd.DataFrame:
    spread = np.linspace(-0.01, 0.01, seeds)
    return pd.DataFrame(
        {
            "noisy_buffer_share": buffer + spread,
            "noisy_priority_share": priority + spread,
            "noisy_sample_share": priority + spread,
        }
    )


def test_the_noise_goal_is_the_buffer_share_plus_a_tenth():
    assert noise_figure(final_shares(0.59)).passed is True
    assert noise_figure(final_shares(0.61)).passed is False
    assert "interval reaching above" not in noise_figure(final_shares(0.55)).text
    wide = final_shares(0.59).assign(noisy_priority_share=[0.45, 0.55, 0.59, 0.63, 0.73])
    assert noise_figure(wide).passed is True and noise_figure(wide).text.endswith("its interval reaching above the bar")
    no_priorities = final_shares(0.5).assign(noisy_priority_share=np.nan)
    assert noise_figure(no_priorities).passed is None


def test_a_relative_goal_needs_the_figure_at_the_goal_and_its_interval_above_zero():
    reference = {seed: 1.0 + 0.01 * seed for seed in range(20)}

    def figure(compared: dict[int, float]) -> Figure:
        return relative_figure(reference, compared, keyed_generator(0, "test"), goal=0.10, planned=20)

    assert figure({seed: 1.3 + 0.01 * seed for seed in range(20)}).passed is True
    assert figure({seed: 1.05 + 0.01 * seed for seed in range(20)}).passed is False  # above 0, below the goal
    wide = {seed: (1.15 + (2.0 if seed % 2 else -1.5)) for seed in range(20)}
    assert figure(wide).passed is False  # the interval reaches below 0


def test_seaquest_passes_at_nine_tenths_of_dqn():
    reference = {seed: 4.0 + 0.1 * seed for seed in range(5)}
    ratio = {seed: value * 0.95 for seed, value in reference.items()}
    low = {seed: value * 0.85 for seed, value in reference.items()}
    assert ratio_figure(reference, ratio, keyed_generator(0, "test"), planned=5).passed is True
    assert ratio_figure(reference, low, keyed_generator(0, "test"), planned=5).passed is False


def test_a_figure_on_fewer_seeds_is_so_far_and_the_verdict_says_so():
    early = Figure("+16.9%", False, 8, 20)
    assert early.cell() == "+16.9% **fail** so far (8 of 20 seeds)"
    done = [Figure("x", True, 5, 5), early, Figure("not run", None, 0, 5), Figure("y", False, 5, 5)]
    assert verdict_line(done) == "fails Seaquest; so far: pairs env (fails on 8 of 20 seeds); not run: Breakout"
    assert verdict_line([Figure("x", True, 5, 5)] * 4) == "passes all four"


def test_the_figures_are_those_of_each_controls_own_page():
    noise = noise_column(load_noise_rows())
    noise_page = (ROOT / NOISE_DIR / "summary.md").read_text()
    for method in ("per", "relo", "expected_td"):
        assert f"| {method} | 5 | 0.503 [0.498, 0.507] | {noise[method].text.split(' (bar')[0]} |" in noise_page
    first, _, _ = pairs_columns(load_pairs_evaluations)
    full_page = (ROOT / FULL_DIR / "summary.md").read_text()
    for method in ("per", "relo", "expected_td"):
        assert f"**{method} vs uniform**, IQM of final return: relative {first[method].text} (95% CI)" in full_page
    minatar = minatar_columns(pd.read_csv(ROOT / MINATAR_RETURNS))
    minatar_page = (ROOT / "docs/results/minatar/summary.md").read_text()
    at_1m = minatar_page.split("training return, EMA 0.99 (theirs) at 1,000,000 frames")[1]
    number = r"([-\d.]+) \[([-\d.]+), ([-\d.]+)\]"
    relative = re.search(rf"\| breakout \| per \| [-\d.]+ \[[-\d., ]+\] \| {number} \| \d/\d", at_1m)
    assert relative is not None
    figure = re.match(r"([-+\d.]+)% \[([-+\d.]+)%, ([-+\d.]+)%\]", minatar["breakout"]["per"].text)
    assert figure is not None
    # the page prints 2 decimals, this table 0.1%: equal within their rounding
    ours = np.array([float(value) / 100 for value in figure.groups()])
    assert np.abs(ours - np.array([float(value) for value in relative.groups()])).max() <= 0.0056

"""The comparison's plots: their legends call an interval a CI only when there are seeds enough for one."""

import numpy as np
import pandas as pd
import pytest

from comparison.plots import learning_curves_figure, regime_returns_figure
from comparison.statistics import FEW_SEEDS


def _legend_texts(figure) -> list[str]:
    return [text.get_text() for text in figure.axes[0].get_legend().get_texts()]


def _evaluations(synthetic_evaluations, n_seeds: int) -> pd.DataFrame:
    three = synthetic_evaluations(np.random.default_rng(0))  # seeds 0, 1, 2 of uniform and per
    copies = [three.assign(seed=three["seed"] + 3 * k, run=three["run"] + f"_{k}") for k in range(3)]
    evals = pd.concat(copies, ignore_index=True)
    return evals[evals["seed"] < n_seeds]


@pytest.mark.parametrize("make_figure", [learning_curves_figure, regime_returns_figure])
@pytest.mark.parametrize("n_seeds", [2, FEW_SEEDS - 1, FEW_SEEDS])
def test_legends_say_ci_only_with_enough_seeds(make_figure, n_seeds, synthetic_baselines, synthetic_evaluations):
    texts = _legend_texts(make_figure(_evaluations(synthetic_evaluations, n_seeds), synthetic_baselines(), rng=0))
    variants = [text for text in texts if text.startswith(("uniform", "per"))]
    assert len(variants) == 2 and all(f"mean of {n_seeds} seeds" in text for text in variants)
    if n_seeds < FEW_SEEDS:
        assert not any("95% CI" in text for text in variants), variants
        assert all("range" in text for text in variants)
    else:
        assert all("95% CI" in text for text in variants), variants

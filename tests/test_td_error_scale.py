"""The TD-error scale check: one array of absolute TD errors per critic batch, summarised beside a floor."""

import numpy as np
import pytest

from comparison.experiment import RunConfig
from comparison.td_error_scale import critic_td_errors, summarize_td_errors, td_error_scale_main


def test_summary_is_computed_over_every_sample():
    summary = summarize_td_errors([np.array([0.5, 2.0]), np.array([1.0, 0.1])], floor=1.0)
    assert summary == {
        "samples": 4.0,
        "max": 2.0,
        "p99.9": pytest.approx(np.quantile([0.1, 0.5, 1.0, 2.0], 0.999)),
        "median": 0.75,
        "share_at_or_above_floor": 0.5,
    }


def test_every_critic_batch_of_a_run_is_recorded():
    config = RunConfig(
        variant="lap", total_steps=300, learning_starts=100, batch_size=32, net_arch=(16,), eval_episodes=1
    )
    batches = critic_td_errors(config)
    assert len(batches) == config.total_steps - config.learning_starts  # one gradient step per env step
    assert all(batch.shape == (32,) and np.isfinite(batch).all() and (batch >= 0).all() for batch in batches)


def test_bad_settings_are_a_usage_error(capsys):
    with pytest.raises(SystemExit) as stop:
        td_error_scale_main(["--lap-min-priority", "0"])
    assert stop.value.code == 2
    assert "lap_min_priority" in capsys.readouterr().err

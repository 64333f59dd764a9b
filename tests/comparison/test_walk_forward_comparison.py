"""Walk-forward comparisons on real prices: training on the earlier rows, every evaluation on the later rows only."""

import json

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import comparison.experiment
from comparison.cli import compare_main
from comparison.experiment import RunConfig, baseline_rows, train_run
from envs import SAMPLE_CSV_PATH, walk_forward_env_kwargs

SPLIT = 1_050  # the bundled CSV's 1500 rows, the last 30% for evaluation


@pytest.fixture
def tiny(tiny_run_argv) -> list[str]:
    """One uniform run of 300 steps, evaluated at steps 0, 150 and 300 on 3 episodes of 40 steps."""
    return [
        "--quick",
        "--seeds",
        "0",
        "--variants",
        "uniform",
        *tiny_run_argv(total_steps=300, learning_starts=100, eval_freq=150, eval_episodes=3, episode_length=40),
        "--no-progress-bar",
    ]


class EpisodeRows(gym.Wrapper):
    """Keeps the ``episode_rows`` of every episode the wrapped env plays."""

    def __init__(self, env: gym.Env, seen: list[tuple[int, int]]) -> None:
        super().__init__(env)
        self.seen = seen

    def reset(self, **kwargs):
        result = self.env.reset(**kwargs)
        self.seen.append(tuple(self.env.unwrapped.episode_rows))
        return result


@pytest.mark.slow
def test_the_command_line_trains_on_the_earlier_rows_and_evaluates_on_the_later_ones(tmp_path, tiny):
    argv = [*tiny, "--out", str(tmp_path), "--prices", str(SAMPLE_CSV_PATH), "--test-fraction", "0.3"]
    assert compare_main(argv)["failures"] == {}
    config = json.loads((tmp_path / "runs" / "uniform_s0" / "config.json").read_text())
    assert config["env_kwargs"] == {"episode_length": 40, "prices_csv": str(SAMPLE_CSV_PATH), "price_rows": [0, SPLIT]}
    assert config["eval_env_kwargs"] == {**config["env_kwargs"], "price_rows": [SPLIT, 1_500]}
    evaluations = pd.read_csv(tmp_path / "evaluations.csv")
    assert list(evaluations["step"]) == [0, 150, 300] and np.isfinite(evaluations["mean_return"]).all()
    assert set(pd.read_csv(tmp_path / "telemetry.csv")["tag"]) == {-1}  # real prices have no regime
    assert "| uniform | unknown | 100.0% |" in (tmp_path / "summary.md").read_text()


def test_no_evaluation_or_baseline_episode_reads_a_training_price(tmp_path, monkeypatch):
    env_kwargs = {"prices_csv": str(SAMPLE_CSV_PATH), "episode_length": 40}
    train_kwargs, test_kwargs = walk_forward_env_kwargs(env_kwargs, test_fraction=0.3)
    config = RunConfig(
        variant="uniform",
        total_steps=200,
        learning_starts=100,
        eval_freq=100,
        eval_episodes=4,
        batch_size=32,
        net_arch=(16,),
        env_kwargs=train_kwargs,
        eval_env_kwargs=test_kwargs,
    )
    seen: list[tuple[int, int]] = []
    make_eval_envs = comparison.experiment.make_eval_envs

    def spied(env_id, kwargs, n_envs):
        return [EpisodeRows(env, seen) for env in make_eval_envs(env_id, kwargs, n_envs)]

    monkeypatch.setattr(comparison.experiment, "make_eval_envs", spied)
    train_run(config, tmp_path / "run")
    baseline_rows(config.env_id, config.evaluation_env_kwargs, config.eval_seeds)
    assert len(seen) == 3 * 4 + 2 * 4  # three evaluations of the agent, two baselines, 4 episodes each
    assert all(SPLIT <= start < stop <= 1_500 for start, stop in seen), seen
    assert len(set(seen)) > 1  # the episodes are windows drawn across the test rows, not one window


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prices", str(SAMPLE_CSV_PATH), "--test-fraction", "0.99"], "leaves the training part 15 of 1500 rows"),
        (["--prices", str(SAMPLE_CSV_PATH), "--test-from", "2020-01-02"], "needs dates"),
        (["--prices", str(SAMPLE_CSV_PATH)], "--prices needs --test-from YYYY-MM-DD or --test-fraction F"),
        (["--prices", "no_such_prices.csv", "--test-fraction", "0.3"], "no_such_prices.csv"),
        (["--test-fraction", "0.3"], "--test-fraction only applies with --prices"),
        (["--prices", str(SAMPLE_CSV_PATH), "--test-from", "2020-01-02", "--test-fraction", "0.3"], "not allowed"),
        (
            ["--prices", str(SAMPLE_CSV_PATH), "--test-fraction", "0.3", "--price-columns", "price_a", "gold"],
            "gold",
        ),
    ],
)
def test_a_split_that_cannot_be_made_is_a_usage_error(argv, message, tiny, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        compare_main([*tiny, "--out", str(tmp_path), *argv])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error
    assert not (tmp_path / "runs").exists()

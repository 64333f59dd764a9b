"""Where a prioritized DQN's replay goes on MinAtar: the tags, that tagging changes no training, and the report."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch as th
from gymnasium import spaces

from comparison.checkpoints import PROGRESS_FILE
from comparison.minatar import (
    END_EVENT,
    EVENT_KEY,
    NO_EVENT,
    RETURNS_FILE,
    REWARD_EVENT,
    EventTag,
    MinAtarConfig,
    MinAtarStudy,
    make_model,
    make_training_env,
    register_minatar,
)
from comparison.minatar_attention import (
    attention_config,
    main,
    shares_table,
    study_run_differences,
    train_attention_run,
)
from sb3_per.telemetry import telemetry_key

# The MinAtar study's tiny budget (tests/comparison/test_minatar.py), without greedy evaluations
TINY = dict(
    total_frames=400,
    log_interval=200,
    eval_episodes=0,
    learning_starts=100,
    buffer_size=1_000,
    target_update_interval=50,
)


class Scripted(gym.Env[np.ndarray, int]):
    """Steps through given (reward, terminated) pairs."""

    observation_space = spaces.Box(0.0, 1.0, (1,))
    action_space = spaces.Discrete(2)

    def __init__(self, steps: list[tuple[float, bool]]) -> None:
        self.steps = iter(steps)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward, terminated = next(self.steps)
        return np.zeros(1, dtype=np.float32), reward, terminated, False, {"kept": True}


def test_a_frame_is_tagged_reward_if_the_game_pays_else_end_if_it_terminates_else_other() -> None:
    env = EventTag(Scripted([(0.0, False), (1.0, False), (0.0, True), (-1.0, True), (2.0, False)]))
    env.reset()
    tags = [env.step(0)[4] for _ in range(5)]
    assert [info[EVENT_KEY] for info in tags] == [NO_EVENT, REWARD_EVENT, END_EVENT, REWARD_EVENT, REWARD_EVENT]
    assert all(info["kept"] for info in tags)


def test_a_tagged_noisy_game_is_tagged_by_its_own_reward_not_the_noisy_one() -> None:
    register_minatar()
    noisy = make_training_env(MinAtarConfig(game="breakout_noisy", **TINY), tag_events=True)
    clean = make_training_env(MinAtarConfig(game="breakout", **TINY))
    noisy.reset()
    clean.reset()
    actions = np.random.default_rng(0).integers(noisy.action_space.n, size=2_000)
    tags, game_rewards = [], []
    for action in actions:
        _, noisy_rewards, _, infos = noisy.step(np.array([action]))
        _, rewards, dones, _ = clean.step(np.array([action]))
        assert noisy_rewards[0] != rewards[0]  # the noise is there
        tags.append(infos[0][EVENT_KEY])
        game_rewards.append((rewards[0], dones[0]))
    expected = [REWARD_EVENT if reward != 0 else END_EVENT if done else NO_EVENT for reward, done in game_rewards]
    assert tags == expected and REWARD_EVENT in tags and END_EVENT in tags


@pytest.mark.parametrize("variant", ["per", "expected_relo_root"])
def test_tagging_changes_nothing_the_run_trains(variant: str, tmp_path: Path) -> None:
    config = MinAtarConfig(game="breakout", variant=variant, seed=3, **TINY)
    MinAtarStudy().train(config, tmp_path / "study")
    rows = train_attention_run(config, tmp_path / "tagged")
    study_rows = pd.read_csv(tmp_path / "study" / RETURNS_FILE)
    assert study_run_differences(rows, study_rows) == []
    study, tagged = (pd.read_csv(tmp_path / run / PROGRESS_FILE) for run in ("study", "tagged"))
    # the losses and priorities logged at each row are the same numbers: the same gradient steps
    trained = [column for column in study.columns if column.startswith("train/")]
    assert "train/loss" in trained
    pd.testing.assert_frame_equal(study[trained], tagged[trained])
    # and the tagged run logged every kind's figures, the stored shares summing to 1
    table = shares_table(tagged, config.logged_frames)
    last = table[table["frame"] == config.total_frames]
    assert set(last["event"]) >= {"other"} and last["buffer_share"].sum() == pytest.approx(1.0)
    assert last["priority_share"].sum() == pytest.approx(1.0)


def test_a_run_that_departs_from_the_studys_is_named_at_each_frame_it_differs() -> None:
    rows = pd.DataFrame({"frame": [0, 200, 400], "train_return_ema": [0.0, 0.5, 0.7], "train_episodes": [0, 3, 5]})
    assert study_run_differences(rows, rows.copy()) == []
    other = rows.assign(train_return_ema=[0.0, 0.5, 0.71])
    assert study_run_differences(rows, other) == ["frame 400: differs from the study's run"]
    assert study_run_differences(rows, rows.assign(train_episodes=[0, 4, 5])) == [
        "frame 200: differs from the study's run"
    ]
    assert study_run_differences(rows, None) == ["no finished study run of this config to check it against"]


def test_the_table_reads_each_kinds_figures_at_each_logged_frame() -> None:
    progress = pd.DataFrame(
        {
            telemetry_key(REWARD_EVENT, "priority_share"): [np.nan, 0.3],
            telemetry_key(REWARD_EVENT, "buffer_share"): [np.nan, 0.01],
            telemetry_key(NO_EVENT, "priority_share"): [np.nan, 0.7],
            telemetry_key(NO_EVENT, "buffer_share"): [np.nan, 0.99],
        }
    )
    table = shares_table(progress, [0, 50_000])
    assert table["frame"].tolist() == [50_000, 50_000]
    assert table.set_index("event")["priority_share"].to_dict() == {"reward": 0.3, "other": 0.7}
    assert table["sample_share"].isna().all()


def test_only_a_prioritized_variant_is_looked_at() -> None:
    with pytest.raises(ValueError, match=r"variant must be a prioritized one of .*, got 'dqn'"):
        attention_config("breakout", "dqn", 0, 300_000)
    register_minatar()
    config = MinAtarConfig(game="breakout", variant="dqn", **TINY)
    with pytest.raises(ValueError, match="tag_key is for a prioritized variant's buffer, got tag_key='replay_event'"):
        make_model(config, make_training_env(config), tag_key=EVENT_KEY)
    with pytest.raises(SystemExit):
        main(["run", "--variants", "dqn"])


def test_the_command_line_skips_a_finished_run_and_reports_it(tmp_path: Path, capsys, monkeypatch) -> None:
    config = MinAtarConfig(game="breakout", variant="per", seed=0, **TINY)
    out = tmp_path / "attention"
    train_attention_run(config, out / "runs" / config.run_name)
    monkeypatch.setattr("comparison.minatar_attention.attention_config", lambda *args: config)
    threads = th.get_num_threads()
    th.set_num_threads(2)
    try:
        assert main(["run", "--variants", "per", "--out", str(out), "--study-runs", str(tmp_path / "none")]) == 0
        # one torch thread, as the study's runs: two on a core shared with other runs made a run five times slower
        assert th.get_num_threads() == 1
    finally:
        th.set_num_threads(threads)
    assert "breakout_per_s0: finished already" in capsys.readouterr().out
    summary = (out / "summary.md").read_text()
    assert "## breakout, per, seed 0" in summary
    assert "**no**: no finished study run of this config to check it against" in summary
    assert "| 400 | other |" in summary

"""The Blind Cliffwalk positive control: the chain, its exhaustive memory, and prioritized replay's speed-up."""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np
import pandas as pd
import pytest

from comparison.blind_cliffwalk import (
    METHODS,
    SUMMARY_COLUMNS,
    UPDATES_FILE,
    BlindCliffwalk,
    BlindCliffwalkConfig,
    BlindCliffwalkStudy,
    summarize_runs,
    summary_table,
    updates_to_learn,
)
from comparison.study import run_dir, run_study, study_main

STUDY = BlindCliffwalkStudy()


def quiet(line: str) -> None:
    """``run_study``'s announcements, dropped."""


def test_exhaustive_memory_holds_each_state_action_as_often_as_a_random_policy_meets_it() -> None:
    n = 5
    chain = BlindCliffwalk(n)
    memory = chain.exhaustive_memory(np.random.default_rng(0))
    assert len(memory.states) == chain.n_transitions == 2 ** (n + 1) - 2
    # Both actions of state s are taken by the 2**(n - 1 - s) sequences that reach s.
    for state in range(n):
        for action in (0, 1):
            count = np.sum((memory.states == state) & (memory.actions == action))
            assert count == 2 ** (n - 1 - state)
    assert memory.rewards.sum() == 1.0  # exactly one transition sees the reward
    assert memory.dones.sum() == 2**n  # one termination per action sequence


def test_true_q_is_the_fixed_point_of_the_bellman_optimality_update_on_every_transition() -> None:
    chain = BlindCliffwalk(6)
    memory = chain.exhaustive_memory(np.random.default_rng(1))
    q = chain.true_q()
    targets = memory.rewards + chain.gamma * (1 - memory.dones) * q[memory.next_states].max(axis=1)
    np.testing.assert_allclose(q[memory.states, memory.actions], targets)


def test_the_right_action_alternates_between_neighbouring_states() -> None:
    chain = BlindCliffwalk(4)
    rights = [chain.right_action(state) for state in range(4)]
    assert all(a != b for a, b in pairwise(rights))


def test_prioritized_replay_needs_fewer_median_updates_than_uniform_on_a_small_chain(tmp_path) -> None:
    plan = STUDY.plan(range(5), n_states=[5], max_updates=100_000)
    run_study(STUDY, plan, tmp_path, announce=quiet)
    summary = summary_table(plan, tmp_path).set_index("method")
    assert (summary["n_learned"] == 5).all()
    assert summary.loc["proportional", "median_updates"] < summary.loc["uniform", "median_updates"]
    assert summary.loc["rank", "median_updates"] < summary.loc["uniform", "median_updates"]


@pytest.mark.parametrize("method", METHODS)
def test_a_run_is_reproducible_and_gives_up_one_update_before_it_would_have_learned(method: str) -> None:
    needed = updates_to_learn(4, method, seed=3, max_updates=100_000)
    assert needed is not None
    assert updates_to_learn(4, method, seed=3, max_updates=100_000) == needed
    assert updates_to_learn(4, method, seed=3, max_updates=needed - 1) is None


def test_summary_counts_a_run_that_did_not_learn_as_slower_than_any_that_did() -> None:
    row = summarize_runs(3, "uniform", [10, 30, None])
    assert (row["n_learned"], row["median_updates"], row["fewest_updates"]) == (2, 30.0, 10.0)
    assert math.isnan(row["most_updates"])
    mostly_censored = summarize_runs(3, "uniform", [10, None, None])
    assert math.isnan(mostly_censored["median_updates"])
    assert row["n_transitions"] == 14


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_states": [0]}, "n_states must be a positive integer"),
        ({"methods": ["greedy"]}, "method must be one of"),
        ({"seeds": []}, "seeds must not be empty"),
        ({"max_updates": 0}, "max_updates must be a positive integer"),
    ],
)
def test_the_plan_rejects_bad_arguments_naming_them(kwargs: dict, message: str) -> None:
    arguments = {"n_states": [3], "methods": ["uniform"], "seeds": [0], "max_updates": 10} | kwargs
    with pytest.raises(ValueError, match=message):
        STUDY.plan(**arguments)


def test_bad_method_is_rejected_before_a_run() -> None:
    with pytest.raises(ValueError, match="method must be one of"):
        updates_to_learn(3, "oracle", seed=0, max_updates=10)


def test_a_run_that_did_not_learn_is_finished_and_counts_as_censored(tmp_path) -> None:
    config = BlindCliffwalkConfig(6, "uniform", seed=0, max_updates=100)
    run_study(STUDY, [config], tmp_path, announce=quiet)
    assert STUDY.finished(config, run_dir(tmp_path, config))
    assert math.isnan(pd.read_csv(run_dir(tmp_path, config) / UPDATES_FILE)["updates"].item())
    row = summary_table([config], tmp_path).iloc[0]
    assert row["n_learned"] == 0 and math.isnan(row["median_updates"])
    # A run cut short (no result file) or a result file of another run is not finished.
    (run_dir(tmp_path, config) / UPDATES_FILE).write_text("n_states,method,seed,updates\n6,uniform,1,50\n")
    assert not STUDY.finished(config, run_dir(tmp_path, config))
    (run_dir(tmp_path, config) / UPDATES_FILE).unlink()
    assert not STUDY.finished(config, run_dir(tmp_path, config))
    assert run_study(STUDY, [config], tmp_path, announce=quiet).trained == [config.run_name]


def test_the_config_round_trips_through_json_and_names_its_run() -> None:
    config = BlindCliffwalkConfig(12, "rank", seed=3, max_updates=500, alpha=0.5)
    assert BlindCliffwalkConfig.from_json(config.to_json()) == config and config.run_name == "n12_rank_s3"
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
        BlindCliffwalkConfig(3, "rank", seed=-1)


def test_command_line_writes_the_summary_csv_and_its_plot(tmp_path, capsys) -> None:
    assert study_main(STUDY, ["run", "--n-states", "2", "3", "--seeds", "2", "--out", str(tmp_path)]) == 0
    written = pd.read_csv(tmp_path / "blind_cliffwalk.csv")
    assert list(written.columns) == list(SUMMARY_COLUMNS)
    assert sorted(zip(written["n_states"], written["method"], strict=True)) == sorted(
        (n, m) for n in (2, 3) for m in METHODS
    )
    assert (written["n_seeds"] == 2).all()
    pd.testing.assert_frame_equal(written, summary_table(STUDY.plan(range(2), [2, 3]), tmp_path), check_dtype=False)
    assert (tmp_path / "blind_cliffwalk.png").read_bytes().startswith(b"\x89PNG")
    assert "trained 12 run(s); 0 pending" in capsys.readouterr().out
    assert study_main(STUDY, ["pending", "--n-states", "2", "3", "4", "--seeds", "2", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "6"

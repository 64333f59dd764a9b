"""The CartPole uniform-vs-PER study: the zoo's settings, the alpha-0 control's premise, and resume on a tiny budget."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import rl_zoo3
import yaml
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.env_util import make_vec_env

from comparison.cartpole_per import (
    ENV_ID,
    EVALUATIONS_FILE,
    ZOO_HYPERPARAMETERS,
    CartPoleConfig,
    CartPolePerStudy,
    finished_evaluations,
    make_model,
)
from comparison.study import run_dir, run_study, study_main
from sb3_per import PrioritizedReplayBuffer

STUDY = CartPolePerStudy()
# Past the zoo's 1,000 random steps: two training calls of 128 gradient steps, three evaluations.
TINY = dict(total_steps=1_536, eval_freq=512, eval_episodes=2)


def test_the_settings_are_the_installed_rl_zoos_for_cartpole() -> None:
    with open(Path(rl_zoo3.__file__).parent / "hyperparams" / "dqn.yml") as file:
        zoo = yaml.safe_load(file)[ENV_ID]
    assert zoo.pop("policy") == "MlpPolicy" and zoo.pop("n_timesteps") == 5e4
    assert zoo.pop("policy_kwargs") == "dict(net_arch=[256, 256])"
    expected = {key: value for key, value in ZOO_HYPERPARAMETERS.items() if key != "policy_kwargs"}
    assert zoo == expected
    assert ZOO_HYPERPARAMETERS["policy_kwargs"] == dict(net_arch=[256, 256])


def test_the_alpha_zero_control_samples_uniformly_with_weights_of_one() -> None:
    model = make_model("per_a0", 0, make_vec_env(ENV_ID, n_envs=1, seed=0))
    buffer = model.replay_buffer
    assert isinstance(buffer, PrioritizedReplayBuffer) and buffer.alpha == 0.0
    model.learn(1_300)  # one training call: priorities written back from varied TD errors
    samples = buffer.sample(64)
    np.testing.assert_array_equal(samples.weights.numpy(), 1.0)
    # Every stored transition has the same priority, so the same probability.
    priorities = buffer.priorities_at(np.arange(buffer.n_transitions))
    np.testing.assert_array_equal(priorities, 1.0)
    assert type(make_model("uniform", 0, make_vec_env(ENV_ID, n_envs=1)).replay_buffer) is ReplayBuffer


def test_a_tiny_study_evaluates_every_run_and_resumes_only_what_is_incomplete(tmp_path: Path) -> None:
    lines: list[str] = []
    plan = STUDY.plan([0], ["uniform", "per_a0.6"], **TINY)
    progress = run_study(STUDY, plan, tmp_path, announce=lines.append)
    assert progress.trained == ["uniform_s0", "per_a0.6_s0"] and progress.pending == []
    for config in plan:
        evaluations = finished_evaluations(config, run_dir(tmp_path, config))
        assert evaluations is not None and list(evaluations["step"]) == [512, 1024, 1536]
    # An attempt cut short: the PER run lost its last evaluation; only it is trained again.
    path = run_dir(tmp_path, plan[1]) / EVALUATIONS_FILE
    stored = pd.read_csv(path)
    stored[stored["step"] != 1536].to_csv(path, index=False)
    assert not STUDY.finished(plan[1], run_dir(tmp_path, plan[1]))
    progress = run_study(STUDY, plan, tmp_path, announce=lines.append)
    assert progress.trained == ["per_a0.6_s0"] and progress.pending == []
    assert len(pd.read_csv(path)) == 3


def test_the_command_line_writes_the_summary_against_uniform(tmp_path: Path) -> None:
    argv = ["run", "--variants", "uniform", "per_a0", "--seeds", "1", "--steps", "1536", "--eval-freq", "512"]
    assert study_main(STUDY, [*argv, "--eval-episodes", "1", "--out", str(tmp_path)]) == 0
    summary = (tmp_path / "summary.md").read_text()
    assert "| uniform | 1 |" in summary and "| per_a0 | 1 |" in summary
    assert "| per_a0 | " in summary.split("variant vs uniform")[1]
    assert "`python scripts/cartpole_per_study.py run --seeds 1 " in summary
    assert len(pd.read_csv(tmp_path / EVALUATIONS_FILE)) == 6  # every finished run's rows
    assert (tmp_path / "cartpole_per.png").stat().st_size > 0


def test_the_plan_is_seed_major_with_ten_seeds_by_default() -> None:
    assert [config.run_name for config in STUDY.plan([0, 1], ["uniform", "per_a0"])] == [
        "uniform_s0",
        "per_a0_s0",
        "uniform_s1",
        "per_a0_s1",
    ]
    parser = argparse.ArgumentParser()
    STUDY.add_arguments(parser)
    assert parser.parse_args([]).seeds == 10


def test_the_config_round_trips_through_json() -> None:
    config = CartPoleConfig("per_a0.4", 3, **TINY)
    assert CartPoleConfig.from_json(config.to_json()) == config
    with pytest.raises(ValueError, match="not a CartPoleConfig"):
        CartPoleConfig.from_json('{"variant": "uniform"}')


def test_bad_study_settings_and_variants_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="eval_freq"):
        CartPoleConfig("uniform", 0, total_steps=1_000, eval_freq=300)
    with pytest.raises(ValueError, match="total_steps"):
        CartPoleConfig("uniform", 0, total_steps=0)
    with pytest.raises(ValueError, match="seed must be an integer >= 0, got -1"):
        CartPoleConfig("uniform", -1)
    with pytest.raises(ValueError, match=r"variant must be one of .* got 'per_a0\.9'"):
        CartPoleConfig("per_a0.9", 0)
    with pytest.raises(ValueError, match="variant"):
        make_model("per_a0.9", 0, make_vec_env(ENV_ID, n_envs=1))

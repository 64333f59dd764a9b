"""The CartPole uniform-vs-PER study: the zoo's settings, the alpha-0 control's premise, and resume on a tiny budget."""

from __future__ import annotations

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
    CartPoleStudy,
    cartpole_main,
    completed_runs,
    make_model,
    run_cartpole_study,
)
from sb3_per import PrioritizedReplayBuffer

# Past the zoo's 1,000 random steps: two training calls of 128 gradient steps, three evaluations.
TINY = CartPoleStudy(total_steps=1_536, eval_freq=512, eval_episodes=2)


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
    evaluations = run_cartpole_study(["uniform", "per_a0.6"], [0], TINY, tmp_path, announce=lines.append)
    assert len(lines) == 2
    assert sorted(evaluations["step"].unique()) == [512, 1024, 1536]
    assert completed_runs(pd.read_csv(tmp_path / EVALUATIONS_FILE), TINY) == {("uniform", 0), ("per_a0.6", 0)}
    # An attempt cut short: the PER run lost its last evaluation; only it is trained again.
    stored = pd.read_csv(tmp_path / EVALUATIONS_FILE)
    stored[~((stored["variant"] == "per_a0.6") & (stored["step"] == 1536))].to_csv(
        tmp_path / EVALUATIONS_FILE, index=False
    )
    lines.clear()
    evaluations = run_cartpole_study(["uniform", "per_a0.6"], [0], TINY, tmp_path, announce=lines.append)
    assert [line.split(":")[0] for line in lines] == ["per_a0.6 seed 0"]
    assert len(evaluations) == 6 and len(pd.read_csv(tmp_path / EVALUATIONS_FILE)) == 6


def test_the_command_line_writes_the_summary_against_uniform(tmp_path: Path) -> None:
    argv = ["--variants", "uniform", "per_a0", "--seeds", "1", "--steps", "1536", "--eval-freq", "512"]
    cartpole_main([*argv, "--eval-episodes", "1", "--out", str(tmp_path)])
    summary = (tmp_path / "summary.md").read_text()
    assert "| uniform | 1 |" in summary and "| per_a0 | 1 |" in summary
    assert "| per_a0 | " in summary.split("variant vs uniform")[1]
    assert (tmp_path / "cartpole_per.png").stat().st_size > 0


def test_bad_study_settings_and_variants_raise_naming_them() -> None:
    with pytest.raises(ValueError, match="eval_freq"):
        CartPoleStudy(total_steps=1_000, eval_freq=300)
    with pytest.raises(ValueError, match="total_steps"):
        CartPoleStudy(total_steps=0)
    with pytest.raises(ValueError, match="variant"):
        make_model("per_a0.9", 0, make_vec_env(ENV_ID, n_envs=1))

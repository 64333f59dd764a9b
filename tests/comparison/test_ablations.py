"""The comparison's ablations of PER: its sampling without IS weights; its regime shares without TD priorities; its
prioritized batch for the critic only; its sampling and weights with priorities from rewards. And of ReLo: its
priority without the target critics' loss."""

import dataclasses
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch as th

from comparison.ablation_buffers import RewardPrioritizedReplayBuffer, TagWeightedReplayBuffer
from comparison.ablation_schemes import OnlineLossReLo
from comparison.cli import compare_main
from comparison.experiment import RunConfig, make_model
from comparison.runner import PRESETS
from envs import BREAK, NORMAL, STRESS
from sb3_per import PER, SAC, PrioritizedReplayBuffer, ReLo
from sb3_per.schemes.base import CriticStep


@pytest.fixture
def tiny(tiny_run_argv) -> list[str]:
    """Arguments of runs of 600 steps, evaluated at steps 0, 200, 400 and 600."""
    return tiny_run_argv(total_steps=600, learning_starts=200, eval_freq=200, eval_episodes=2, episode_length=40)


def test_per_no_is_samples_as_per_with_beta_zero_throughout():
    model = make_model(
        RunConfig(variant="per_no_is", alpha=0.7, beta_start=0.4, beta_end=1.0), gym.make(RunConfig.env_id)
    )
    buffer = model.replay_buffer
    assert isinstance(buffer, PrioritizedReplayBuffer) and model.replay_scheme is None  # sb3_per's default: PER
    assert (buffer.alpha, buffer.prioritization, buffer.priority_half_life) == (0.7, "proportional", None)
    buffer.set_beta_progress(1.0)
    assert buffer.beta == 0.0


def test_regime_weighted_weighs_each_regime_as_the_config_says():
    config = RunConfig(variant="regime_weighted", regime_weights=(1.0, 3.0, 0.5))
    model = make_model(config, gym.make(config.env_id))
    assert type(model.replay_buffer) is TagWeightedReplayBuffer
    assert model.replay_buffer.tag_weights == {NORMAL: 1.0, STRESS: 3.0, BREAK: 0.5}
    # sb3_per's default, PER, with a buffer whose batches carry no weights: SB3's unweighted loss
    assert model.replay_scheme is None


def test_per_critic_only_is_per_with_a_uniform_actor_batch():
    config = RunConfig(variant="per_critic_only", alpha=0.7, beta_start=0.4)
    model, per = (
        make_model(c, gym.make(config.env_id)) for c in (config, RunConfig(variant="per", alpha=0.7, beta_start=0.4))
    )
    assert (model.replay_scheme, per.replay_scheme) == (PER(uniform_actor_batch=True), None)  # None: PER()
    assert model.replay_buffer_kwargs == per.replay_buffer_kwargs


def test_per_reward_priority_is_per_with_a_reward_prioritized_buffer():
    config = RunConfig(variant="per_reward_priority", alpha=0.7, beta_start=0.3)
    model, per = (
        make_model(c, gym.make(config.env_id)) for c in (config, RunConfig(variant="per", alpha=0.7, beta_start=0.3))
    )
    assert type(model.replay_buffer) is RewardPrioritizedReplayBuffer
    assert type(per.replay_buffer) is PrioritizedReplayBuffer
    assert model.replay_buffer_kwargs == per.replay_buffer_kwargs
    assert model.replay_scheme is per.replay_scheme is None  # sb3_per's default: PER


def test_per_reward_floor_is_per_reward_priority_with_the_configs_floor():
    config = RunConfig(variant="per_reward_floor", alpha=0.7, reward_floor=0.02)
    model, unfloored = (
        make_model(c, gym.make(config.env_id)) for c in (config, RunConfig(variant="per_reward_priority", alpha=0.7))
    )
    assert type(model.replay_buffer) is RewardPrioritizedReplayBuffer
    assert (model.replay_buffer.reward_floor, unfloored.replay_buffer.reward_floor) == (0.02, 0.0)
    assert model.replay_buffer_kwargs == {**unfloored.replay_buffer_kwargs, "reward_floor": 0.02}


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf")])
def test_a_bad_reward_floor_is_refused_only_where_it_is_used(bad):
    with pytest.raises(ValueError, match="reward_floor"):
        RunConfig(variant="per_reward_floor", reward_floor=bad)
    assert RunConfig(variant="per_reward_priority", reward_floor=bad).canonical() == RunConfig(
        variant="per_reward_priority"
    )


class FixedTargetCritics:
    """SAC's per-sample loss, and target critics whose Q-values are fixed."""

    elementwise_critic_loss = SAC.elementwise_critic_loss

    def __init__(self, target_q_values: tuple[th.Tensor, ...]) -> None:
        self.fixed = target_q_values

    def target_q_values(self, batch: object) -> tuple[th.Tensor, ...]:
        return self.fixed


def test_relo_online_loss_prioritizes_by_the_online_loss_alone_and_is_relo_in_all_else():
    targets = th.tensor([[0.0], [1.0], [2.0]])
    online = (th.tensor([[1.0], [1.0], [0.0]]), th.tensor([[0.0], [3.0], [2.0]]))
    step = CriticStep(SimpleNamespace(), online, targets)
    critics = FixedTargetCritics((th.tensor([[0.5], [1.0], [5.0]]), th.tensor([[0.0], [1.0], [4.0]])))
    # online squared errors, mean over the two critics: (1 + 0) / 2, (0 + 4) / 2, (4 + 0) / 2
    got = OnlineLossReLo().priorities(step, th.zeros(3), critics)
    assert got.tolist() == [0.5, 2.0, 2.0]
    assert ReLo().priorities(step, th.zeros(3), critics).tolist() == [0.375, 2.0, 0.0]  # minus the target's

    config = RunConfig(variant="relo_online_loss", relo_alpha=0.4, relo_epsilon=1e-6)
    relo_config = dataclasses.replace(config, variant="relo")
    model, relo_model = (make_model(c, gym.make(config.env_id)) for c in (config, relo_config))
    assert type(model.replay_scheme) is OnlineLossReLo and isinstance(model.replay_scheme, ReLo)
    assert model.replay_buffer_kwargs == relo_model.replay_buffer_kwargs
    assert (model.replay_buffer.alpha, model.replay_buffer.epsilon) == (0.4, 1e-6)


def test_the_ablations_are_in_no_preset():
    for preset in PRESETS.values():
        ablations = {
            *("per_no_is", "regime_weighted", "per_critic_only", "per_reward_priority", "per_reward_floor"),
            "relo_online_loss",
        }
        assert not ablations & set(preset.plan(None, None))


@pytest.mark.slow
def test_ablation_runs_train_with_unit_weights_and_oversample_the_weighted_regime(tmp_path, tiny):
    argv = ["--quick", "--out", str(tmp_path), "--seeds", "0", "--variants", "per_no_is", "regime_weighted"]
    result = compare_main([*argv, "--regime-weights", "1", "4", "1", "--no-progress-bar", *tiny])
    assert result["failures"] == {}
    telemetry = pd.read_csv(tmp_path / "telemetry.csv").dropna(subset=["sample_share"])
    no_is = telemetry[telemetry["variant"] == "per_no_is"]
    assert np.allclose(no_is["is_ess"].dropna(), 1.0)  # every IS weight 1
    progress = pd.read_csv(tmp_path / "runs" / "per_no_is_s0" / "progress.csv")
    assert np.allclose(progress["train/per_weight_mean"].dropna(), 1.0)
    stress = telemetry[(telemetry["variant"] == "regime_weighted") & (telemetry["tag"] == STRESS)]
    # stress days weigh 4: sampled share 4b / (1 + 3b) of a stored share b, far above b itself
    expected = 4 * stress["buffer_share"] / (1 + 3 * stress["buffer_share"])
    assert (stress["buffer_share"] > 0).all()
    assert np.allclose(stress["sample_share"], expected, atol=0.1)
    assert (stress["sample_share"] > 1.5 * stress["buffer_share"]).all()


@pytest.mark.parametrize("weights", [["1", "2"], ["1", "0", "1"], ["1", "nan", "1"]])
def test_bad_regime_weights_are_a_usage_error_naming_them(weights, tmp_path, capsys):
    with pytest.raises(SystemExit):
        compare_main(["--quick", "--out", str(tmp_path), "--variants", "regime_weighted", "--regime-weights", *weights])
    assert "regime_weights must be 3 finite weights > 0" in capsys.readouterr().err

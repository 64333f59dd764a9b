"""sb3_per.TQC: sb3-contrib's TQC bit for bit without prioritized replay, an IS-weighted quantile Huber loss, priorities
from the quantile critics' mean TD errors, and save/load with its scheme."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import sb3_contrib
import torch as th
from sb3_contrib.common.utils import quantile_huber_loss
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.env_util import make_vec_env

import sb3_per.schemes.base as scheme_base
import sb3_per.tqc as per_tqc
from sb3_per import PER, TQC, PrioritizedReplayBuffer
from sb3_per.tqc import weighted_quantile_huber_loss

ENV_ID = "Pendulum-v1"
N_QUANTILES, N_CRITICS, DROP_PER_NET = 5, 2, 2


def settings(**kwargs: Any) -> dict[str, Any]:
    """Small TQC settings (a fresh dict each time: SB3 writes into policy_kwargs)."""
    small = {
        "policy_kwargs": {"net_arch": [16, 16], "n_quantiles": N_QUANTILES, "n_critics": N_CRITICS},
        "top_quantiles_to_drop_per_net": DROP_PER_NET,
        "batch_size": 32,
        "learning_starts": 50,
        "buffer_size": 1000,
        "seed": 0,
    }
    return {**small, **kwargs}


# --- without prioritized replay: sb3-contrib's TQC --------------------------------------------------------


@pytest.mark.parametrize("n_steps", [1, 3], ids=["1-step", "3-step"])
def test_with_sb3s_replay_buffer_it_trains_as_sb3_contrib_tqc(monkeypatch, assert_same_parameters, n_steps):
    """SB3's buffer (``PER()`` with it is refused: test_refused_combinations.py): sb3-contrib's train, same bits."""
    replay_scheme = None
    reference = sb3_contrib.TQC("MlpPolicy", ENV_ID, n_steps=n_steps, **settings(learning_starts=100)).learn(200)

    losses: list = []

    def recording_loss(current_quantiles, target_quantiles, weights):
        losses.append(weights)
        return weighted_quantile_huber_loss(current_quantiles, target_quantiles, weights)

    def must_not_run(*args, **kwargs):
        raise AssertionError("PER work done without a replay scheme and with a uniform buffer")

    monkeypatch.setattr(per_tqc, "weighted_quantile_huber_loss", recording_loss)
    if replay_scheme is None:
        monkeypatch.setattr(per_tqc, "weighted_quantile_huber_loss", must_not_run)
        monkeypatch.setattr(scheme_base, "absolute_td_errors", must_not_run)
    model = TQC("MlpPolicy", ENV_ID, n_steps=n_steps, replay_scheme=replay_scheme, **settings(learning_starts=100))
    model.learn(200)

    assert type(model.replay_buffer) is type(reference.replay_buffer)
    assert not isinstance(model.replay_buffer, PrioritizedReplayBuffer)
    assert model._n_updates == reference._n_updates == 100
    # the scheme path ran on every gradient step, with no weights: sb3-contrib's loss itself
    assert losses == ([] if replay_scheme is None else [None] * 100)
    assert_same_parameters(model, reference)
    assert model.logger.name_to_value["train/critic_loss"] == reference.logger.name_to_value["train/critic_loss"]


# --- the weighted quantile Huber loss -------------------------------------------------------------------


def random_quantiles(seed: int, batch_size: int = 6) -> tuple[th.Tensor, th.Tensor]:
    """Current quantiles (batch, 2 critics, 4 quantiles), with gradient, and target quantiles (batch, 1, 5)."""
    generator = th.Generator().manual_seed(seed)
    current = (2 * th.randn(batch_size, 2, 4, generator=generator)).requires_grad_()
    target = 2 * th.randn(batch_size, 1, 5, generator=generator)
    return current, target


@pytest.mark.parametrize("weight_shape", [(6, 1), (6,)])
def test_quantile_loss_with_unit_weights_is_sb3_contribs_value_and_gradient(weight_shape):
    current, target = random_quantiles(0)
    reference = quantile_huber_loss(current, target, sum_over_quantiles=False)
    (reference_gradient,) = th.autograd.grad(reference, current)
    ours = weighted_quantile_huber_loss(current, target, th.ones(weight_shape))
    (gradient,) = th.autograd.grad(ours, current)
    assert th.equal(ours, reference)
    assert th.equal(gradient, reference_gradient)
    assert th.equal(weighted_quantile_huber_loss(current, target, None), reference)


def test_quantile_loss_matches_a_hand_computation():
    """One critic, quantile midpoints (0.25, 0.75); both branches of the Huber loss (|d| > 1 and |d| <= 1)."""
    current = th.tensor([[[0.0, 1.0]], [[1.0, 1.0]]])
    target = th.tensor([[[0.5, 3.0]], [[1.0, 0.0]]])
    # Sample 0: d = y - z for tau .25: (0.5, 3), for tau .75: (-0.5, 2). Huber 0.125, 2.5, 0.125, 1.5;
    # |tau - 1{d < 0}| = 0.25, 0.25, 0.25, 0.75 -> terms 0.03125 + 0.625 + 0.03125 + 1.125 = 1.8125.
    # Sample 1: d = (0, -1) for both taus. Huber 0, 0.5; weights .25, .75 then .75, .25 -> 0.375 + 0.125 = 0.5.
    assert quantile_huber_loss(current, target, sum_over_quantiles=False).item() == (1.8125 + 0.5) / 8
    weights = th.tensor([[2.0], [0.5]])
    assert weighted_quantile_huber_loss(current, target, weights).item() == (2.0 * 1.8125 + 0.5 * 0.5) / 8


def test_quantile_loss_is_the_weighted_mean_of_per_sample_losses():
    current, target = random_quantiles(1)
    weights = th.tensor([0.1, 0.5, 1.0, 0.25, 0.8, 0.3])
    loss = weighted_quantile_huber_loss(current, target, weights.reshape(-1, 1))
    per_sample = th.stack(
        [quantile_huber_loss(current[i : i + 1], target[i : i + 1], sum_over_quantiles=False) for i in range(6)]
    )
    th.testing.assert_close(loss, (weights * per_sample).mean())
    # each sample's gradient is sb3-contrib's, scaled by its own weight (never a weight per critic or quantile)
    (gradient,) = th.autograd.grad(loss, current)
    (unweighted,) = th.autograd.grad(quantile_huber_loss(current, target, sum_over_quantiles=False), current)
    th.testing.assert_close(gradient, weights.view(-1, 1, 1) * unweighted)


# --- one gradient step with a prioritized buffer -----------------------------------------------------------


def collected_model(**kwargs: Any) -> TQC:
    """A PER-TQC whose buffer holds 300 transitions of random play and that has not trained yet."""
    model = TQC(
        "MlpPolicy", ENV_ID, replay_buffer_class=PrioritizedReplayBuffer, **settings(learning_starts=300, **kwargs)
    )
    model.learn(300)  # trains only once num_timesteps > learning_starts
    assert model.replay_buffer.n_priority_updates == 0
    return model


def test_train_weights_the_quantile_loss_by_the_sampled_is_weights(monkeypatch, sampled_batches):
    model = collected_model()
    buffer = model.replay_buffer
    # uneven priorities, so that the IS weights are not all one
    buffer.tree.update(np.arange(buffer.n_transitions), np.linspace(0.1, 3.0, buffer.n_transitions))
    batches = sampled_batches(buffer)
    calls: list = []

    def spy_loss(current_quantiles, target_quantiles, weights):
        loss = weighted_quantile_huber_loss(current_quantiles, target_quantiles, weights)
        calls.append((current_quantiles.detach().clone(), target_quantiles.clone(), weights, loss.item()))
        return loss

    monkeypatch.setattr(per_tqc, "weighted_quantile_huber_loss", spy_loss)
    model.train(gradient_steps=1, batch_size=32)

    ((current, target, weights, loss),), (batch,) = calls, batches
    assert weights is batch.weights
    assert weights.min() < 0.99
    assert current.shape == (32, N_CRITICS, N_QUANTILES)
    assert target.shape == (32, 1, N_CRITICS * (N_QUANTILES - DROP_PER_NET))
    per_sample = th.stack(
        [quantile_huber_loss(current[i : i + 1], target[i : i + 1], sum_over_quantiles=False) for i in range(32)]
    )
    assert loss == pytest.approx((weights.reshape(-1) * per_sample).mean().item(), rel=1e-5)
    assert model.logger.name_to_value["train/critic_loss"] == pytest.approx(loss)


@pytest.mark.parametrize("reduction", ["mean", "max"])
def test_priorities_of_the_sampled_indices_follow_the_critics_mean_td_errors(
    priorities, assert_only_sampled_priorities_follow, one_actor_critic_step, truncated_target_quantiles, reduction
):
    """A quantile critic's TD error is ``mean_q Z_k(s, a) - mean_j y_j`` (truncated targets), reduced over k."""
    model = collected_model(replay_scheme=PER(td_error_reduction=reduction))
    buffer = model.replay_buffer
    before = priorities(buffer)

    step = one_actor_critic_step(model, batch_size=32)

    batch = step.batch
    targets = truncated_target_quantiles(model, step, kept=N_CRITICS * (N_QUANTILES - DROP_PER_NET))
    with th.no_grad():
        critic_means = step.networks.critic(batch.observations, batch.actions).mean(dim=2)  # (32, n_critics)
    abs_errors = (critic_means - targets.mean(dim=1, keepdim=True)).abs()
    td = (abs_errors.mean(1) if reduction == "mean" else abs_errors.amax(1)).numpy().astype(np.float64)
    sampled = assert_only_sampled_priorities_follow(buffer, before, batch.indices, td)
    assert len(sampled) > 20
    assert buffer.n_priority_updates == 1


# --- save / load / resume ---------------------------------------------------------------------------------


def test_save_load_keeps_the_scheme_and_training_continues_prioritized(tmp_path, priorities, assert_same_parameters):
    model = TQC(
        "MlpPolicy",
        ENV_ID,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_scheme=PER(td_error_reduction="max"),
        **settings(),
    )
    model.learn(150)
    model.save(tmp_path / "model.zip")
    model.save_replay_buffer(tmp_path / "buffer.pkl")

    loaded = TQC.load(tmp_path / "model.zip", env=make_vec_env(ENV_ID, n_envs=1, seed=0))
    loaded.load_replay_buffer(tmp_path / "buffer.pkl")
    buffer = loaded.replay_buffer
    assert isinstance(loaded, TQC)
    assert loaded.replay_scheme == PER(td_error_reduction="max")
    assert isinstance(buffer, PrioritizedReplayBuffer)
    assert buffer.n_priority_updates == model.replay_buffer.n_priority_updates == 100
    np.testing.assert_array_equal(priorities(buffer), priorities(model.replay_buffer))
    assert_same_parameters(loaded, model)
    loaded_priorities = priorities(buffer)

    loaded.learn(50, reset_num_timesteps=False)
    assert loaded.num_timesteps == 200
    assert loaded._n_updates == 150
    assert buffer.n_priority_updates == 150  # the prioritized path, not sb3-contrib's train
    assert not np.array_equal(priorities(buffer)[:150], loaded_priorities)
    assert not th.equal(loaded.log_ent_coef, model.log_ent_coef)


def test_sb3_replay_buffer_is_the_default():
    assert type(TQC("MlpPolicy", ENV_ID, **settings()).replay_buffer) is ReplayBuffer

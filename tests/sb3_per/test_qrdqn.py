"""sb3_per.QRDQN: sb3-contrib's QR-DQN bit for bit without prioritized replay, an IS-weighted quantile Huber loss,
priorities from the quantiles' mean TD errors (ReLo's from the online and target networks' losses), save/load with its
scheme, several envs, and the schemes it refuses."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import sb3_contrib
import torch as th
from sb3_contrib.common.utils import quantile_huber_loss
from stable_baselines3.common.env_util import make_vec_env
from torch.nn import functional as F

import sb3_per.qrdqn as per_qrdqn
import sb3_per.schemes.base as scheme_base
from sb3_per import (
    LA3P,
    LAP,
    PAL,
    PER,
    QRDQN,
    UPER,
    ExpectedReLo,
    ExpectedTD,
    PrioritizedReplayBuffer,
    ReLo,
)
from sb3_per.schemes.losses import weighted_quantile_huber_loss

ENV_ID = "CartPole-v1"
N_QUANTILES = 5


def settings(**kwargs: Any) -> dict[str, Any]:
    """Small QR-DQN settings (a fresh dict each time: SB3 writes into policy_kwargs)."""
    small = {
        "policy_kwargs": {"net_arch": [16], "n_quantiles": N_QUANTILES},
        "batch_size": 32,
        "learning_starts": 100,
        "buffer_size": 1000,
        "target_update_interval": 50,
        "seed": 0,
    }
    return {**small, **kwargs}


# --- without prioritized replay: sb3-contrib's QR-DQN -----------------------------------------------------


@pytest.mark.parametrize("n_steps", [1, 3], ids=["1-step", "3-step"])
def test_with_sb3s_replay_buffer_it_trains_as_sb3_contrib_qrdqn(monkeypatch, assert_same_parameters, n_steps):
    """SB3's buffer and no scheme: sb3-contrib's own train, the same bits (the PER path's parity with it, on the same
    batches, is test_per_path_parity.py's)."""
    reference = sb3_contrib.QRDQN("MlpPolicy", ENV_ID, n_steps=n_steps, **settings()).learn(400)

    def must_not_run(*args, **kwargs):
        raise AssertionError("PER work done without a replay scheme and with a uniform buffer")

    monkeypatch.setattr(per_qrdqn, "weighted_quantile_huber_loss", must_not_run)
    monkeypatch.setattr(scheme_base, "absolute_td_errors", must_not_run)
    model = QRDQN("MlpPolicy", ENV_ID, n_steps=n_steps, **settings()).learn(400)

    assert isinstance(model, sb3_contrib.QRDQN)
    assert type(model.replay_buffer) is type(reference.replay_buffer)
    assert model.training_scheme is None
    assert model._n_updates == reference._n_updates == 75
    assert_same_parameters(model, reference)
    assert model.exploration_rate == reference.exploration_rate


# --- the weighted quantile Huber loss, summed over the quantiles -------------------------------------------


def random_quantiles(seed: int, batch_size: int = 6) -> tuple[th.Tensor, th.Tensor]:
    """Current quantiles (batch, 4), with gradient, and target quantiles (batch, 4): QR-DQN's shapes."""
    generator = th.Generator().manual_seed(seed)
    current = (2 * th.randn(batch_size, 4, generator=generator)).requires_grad_()
    target = 2 * th.randn(batch_size, 4, generator=generator)
    return current, target


@pytest.mark.parametrize("weight_shape", [(6, 1), (6,)])
def test_qr_loss_with_unit_weights_is_sb3_contribs_value_and_gradient(weight_shape):
    current, target = random_quantiles(0)
    reference = quantile_huber_loss(current, target, sum_over_quantiles=True)
    (reference_gradient,) = th.autograd.grad(reference, current)
    ours = weighted_quantile_huber_loss(current, target, th.ones(weight_shape), sum_over_quantiles=True)
    (gradient,) = th.autograd.grad(ours, current)
    assert th.equal(ours, reference)
    assert th.equal(gradient, reference_gradient)
    assert th.equal(weighted_quantile_huber_loss(current, target, None, sum_over_quantiles=True), reference)


def test_qr_loss_matches_a_hand_computation():
    """Quantile midpoints (0.25, 0.75); both branches of the Huber loss (|d| > 1 and |d| <= 1)."""
    current = th.tensor([[0.0, 1.0], [1.0, 1.0]])
    target = th.tensor([[0.5, 3.0], [1.0, 0.0]])
    # Sample 0: d = y - z for tau .25: (0.5, 3), for tau .75: (-0.5, 2). Huber 0.125, 2.5, 0.125, 1.5;
    # |tau - 1{d < 0}| = 0.25, 0.25, 0.25, 0.75 -> summed over tau, per target quantile: 0.0625 and 1.75; mean 0.90625.
    # Sample 1: d = (0, -1) for both taus. Huber 0, 0.5 -> per target quantile: 0 and .75 * .5 + .25 * .5; mean 0.25.
    assert quantile_huber_loss(current, target, sum_over_quantiles=True).item() == (0.90625 + 0.25) / 2
    weights = th.tensor([[2.0], [0.5]])
    loss = weighted_quantile_huber_loss(current, target, weights, sum_over_quantiles=True)
    assert loss.item() == (2.0 * 0.90625 + 0.5 * 0.25) / 2


def test_qr_loss_is_the_weighted_mean_of_per_sample_losses():
    current, target = random_quantiles(1)
    weights = th.tensor([0.1, 0.5, 1.0, 0.25, 0.8, 0.3])
    loss = weighted_quantile_huber_loss(current, target, weights.reshape(-1, 1), sum_over_quantiles=True)
    per_sample = th.stack([quantile_huber_loss(current[i : i + 1], target[i : i + 1]) for i in range(6)])
    th.testing.assert_close(loss, (weights * per_sample).mean())
    # each sample's gradient is sb3-contrib's, scaled by its own weight (never a weight per quantile)
    (gradient,) = th.autograd.grad(loss, current)
    (unweighted,) = th.autograd.grad(quantile_huber_loss(current, target), current)
    th.testing.assert_close(gradient, weights.view(-1, 1) * unweighted)


# --- one gradient step with a prioritized buffer -----------------------------------------------------------


def collected_model(**kwargs: Any) -> QRDQN:
    """A PER-QRDQN whose buffer holds 300 transitions of random play, with uneven priorities, not trained yet."""
    model = QRDQN(
        "MlpPolicy", ENV_ID, replay_buffer_class=PrioritizedReplayBuffer, **settings(learning_starts=300, **kwargs)
    )
    model.learn(300)  # trains only once num_timesteps > learning_starts
    buffer = model.replay_buffer
    assert buffer.n_priority_updates == 0
    # uneven priorities, so that the IS weights are not all one
    buffer.tree.update(np.arange(buffer.n_transitions), np.linspace(0.1, 3.0, buffer.n_transitions))
    return model


def quantiles_by_hand(networks: Any, batch: Any, gamma: float) -> tuple[th.Tensor, th.Tensor]:
    """The quantiles of the batch's actions and QR-DQN's target quantiles (the target network's quantiles of the
    greedy next action, by their mean, discounted behind the reward), (batch_size, n_quantiles) each."""
    rows = th.arange(len(batch.rewards))
    with th.no_grad():
        next_quantiles = networks.quantile_net_target(batch.next_observations)  # (batch, quantiles, actions)
        greedy = next_quantiles.mean(dim=1).argmax(dim=1)
        targets = batch.rewards + (1 - batch.dones) * gamma * next_quantiles[rows, :, greedy]
        current = networks.quantile_net(batch.observations)[rows, :, batch.actions.long().flatten()]
    return current, targets


def test_a_step_weights_the_loss_by_the_is_weights_and_writes_back_the_quantiles_mean_td_errors(
    sampled_batches, priorities, assert_only_sampled_priorities_follow
):
    model = collected_model()
    buffer = model.replay_buffer
    before = priorities(buffer)
    batches = sampled_batches(buffer)
    networks = copy.deepcopy(model.policy)  # QR-DQN's targets are deterministic: recomputed by hand
    model.train(gradient_steps=1, batch_size=32)

    (batch,) = batches
    assert batch.weights.min() < 0.99
    current, targets = quantiles_by_hand(networks, batch, model.gamma)
    per_sample = th.stack([quantile_huber_loss(current[i : i + 1], targets[i : i + 1]) for i in range(32)])
    by_hand = (batch.weights.reshape(-1) * per_sample).mean().item()
    assert model.logger.name_to_value["train/loss"] == pytest.approx(by_hand, rel=1e-5)

    td_errors = (current.mean(dim=1) - targets.mean(dim=1)).numpy().astype(np.float64)
    sampled = assert_only_sampled_priorities_follow(buffer, before, batch.indices, td_errors)
    assert len(sampled) > 20
    assert buffer.n_priority_updates == 1
    for key in PER.logger_keys:
        assert np.isfinite(model.logger.name_to_value[key]), key


def test_relo_priorities_are_the_online_minus_the_target_networks_huber_loss_on_the_means(
    sampled_batches, priorities, assert_only_sampled_priorities_follow
):
    model = collected_model(replay_scheme=ReLo())
    with th.no_grad():  # a target network that differs from the online one, so that the reducible loss is not all 0
        for parameter in model.quantile_net_target.parameters():
            parameter.add_(0.3 * th.randn(parameter.shape, generator=th.Generator().manual_seed(1)))
    buffer = model.replay_buffer
    before = priorities(buffer)
    batches = sampled_batches(buffer)
    networks = copy.deepcopy(model.policy)
    model.train(gradient_steps=1, batch_size=32)

    (batch,) = batches
    current, targets = quantiles_by_hand(networks, batch, model.gamma)
    with th.no_grad():
        rows = th.arange(32)
        lagged = networks.quantile_net_target(batch.observations)[rows, :, batch.actions.long().flatten()]
    mean_target = targets.mean(dim=1)
    online_loss = F.smooth_l1_loss(current.mean(dim=1), mean_target, reduction="none")
    target_loss = F.smooth_l1_loss(lagged.mean(dim=1), mean_target, reduction="none")
    reducible = th.relu(online_loss - target_loss).numpy().astype(np.float64)
    assert (reducible > 0).sum() > 5 and (reducible == 0).sum() > 5  # both sides of the relu are exercised
    assert_only_sampled_priorities_follow(buffer, before, batch.indices, reducible)


# --- every scheme it accepts, several envs -----------------------------------------------------------------


@pytest.mark.parametrize(
    "scheme",
    [PER(priority="loss"), ReLo(), ExpectedTD(hidden_sizes=(8,)), ExpectedReLo(hidden_sizes=(8,))],
    ids=lambda scheme: type(scheme).__name__ + ("-loss" if getattr(scheme, "priority", "") == "loss" else ""),
)
def test_each_scheme_it_accepts_trains_and_writes_priorities(scheme):
    model = QRDQN("MlpPolicy", ENV_ID, replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=scheme, **settings())
    model.learn(220)
    assert model.training_scheme == scheme
    assert model.replay_buffer.n_priority_updates == model._n_updates == 30


def test_two_envs_train_and_write_the_priorities_of_both(record_calls):
    env = make_vec_env(ENV_ID, n_envs=2, seed=0)
    model = QRDQN("MlpPolicy", env, replay_buffer_class=PrioritizedReplayBuffer, **settings())
    calls = record_calls(model.replay_buffer, "update_priorities")
    model.learn(400)

    buffer = model.replay_buffer
    assert buffer.n_envs == 2
    assert buffer.n_priority_updates == len(calls) == model._n_updates > 30
    written = np.concatenate([np.asarray(args[0]) for args, _ in calls])
    assert set((written % 2).tolist()) == {0, 1}  # a leaf is slot x env: both envs' transitions got priorities


# --- save / load ---------------------------------------------------------------------------------------------


def test_save_load_keeps_the_class_the_scheme_and_the_priorities(tmp_path, priorities, assert_same_parameters):
    scheme = PER(priority="loss")
    model = QRDQN("MlpPolicy", ENV_ID, replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=scheme, **settings())
    model.learn(300)
    model.save(tmp_path / "model.zip")
    model.save_replay_buffer(tmp_path / "buffer.pkl")

    loaded = QRDQN.load(tmp_path / "model.zip", env=make_vec_env(ENV_ID, n_envs=1, seed=0))
    loaded.load_replay_buffer(tmp_path / "buffer.pkl")
    buffer = loaded.replay_buffer
    assert isinstance(loaded, QRDQN)
    assert loaded.replay_scheme == scheme
    assert isinstance(buffer, PrioritizedReplayBuffer)
    assert buffer.n_priority_updates == model.replay_buffer.n_priority_updates == 50
    np.testing.assert_array_equal(priorities(buffer), priorities(model.replay_buffer))
    assert_same_parameters(loaded, model)
    loaded_priorities = priorities(buffer)

    loaded.learn(100, reset_num_timesteps=False)
    assert loaded._n_updates == 75
    assert buffer.n_priority_updates == 75  # the prioritized path, not sb3-contrib's train
    assert not np.array_equal(priorities(buffer)[:300], loaded_priorities)
    with pytest.raises(ValueError, match=r"UPER\(.*\) measures the disagreement of an ensemble"):
        QRDQN.load(tmp_path / "model.zip", replay_scheme=UPER())


# --- what it refuses -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scheme", "message"),
    [
        (
            UPER(),
            r"UPER\(.*\) measures the disagreement of an ensemble of quantile critics \(sb3_per\.TQC's\), but QRDQN "
            r"has one quantile network, on which its epistemic term is always 0: use PER\(\) or ReLo\(\)",
        ),
        (LAP(), r"LAP\(.*\) replaces the critic loss .*, but QRDQN's critics are quantile .*: use PER\(\) or ReLo"),
        (PAL(), r"PAL\(.*\) replaces the critic loss .*, but QRDQN's critics are quantile .*: use PER\(\) or ReLo"),
        (LA3P(), r"LA3P\(.*\) prioritizes an actor's batches, but QRDQN has no actor"),
        (PER(uniform_actor_batch=True), r"samples a batch of its own for the actor, but QRDQN has no actor"),
        ("PER()", r"replay_scheme must be a replay scheme .* or None, got 'PER\(\)'"),
    ],
    ids=["UPER", "LAP", "PAL", "LA3P", "uniform-actor-batch", "a-string"],
)
def test_a_scheme_it_cannot_train_with_is_refused_naming_it(scheme, message):
    with pytest.raises(ValueError, match=message):
        QRDQN("MlpPolicy", ENV_ID, replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=scheme)


def test_per_on_sb3s_uniform_buffer_is_refused():
    with pytest.raises(ValueError, match=r"PER\(.*\) samples in proportion to its priorities, .* ReplayBuffer"):
        QRDQN("MlpPolicy", ENV_ID, replay_scheme=PER())

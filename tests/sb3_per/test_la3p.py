"""LA3P (Saglam et al. 2023): uniform, prioritized and inverse-prioritized batches, on the budget of
uniform replay ("matched") or the authors' schedule ("paper")."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import stable_baselines3
import torch as th

from sb3_per import DDPG, DQN, LA3P, SAC, TD3, PrioritizedReplayBuffer
from sb3_per.schemes.la3p import la3p_matched_loss
from sb3_per.schemes.losses import lap_loss, pal_loss
from sb3_per.telemetry import telemetry_key

BATCH = 32


def small(**kwargs: Any) -> dict[str, Any]:
    return {"policy_kwargs": {"net_arch": [16, 16]}, "batch_size": BATCH, "learning_starts": 50, "seed": 0, **kwargs}


def la3p(algorithm: type = SAC, env: Any = "Pendulum-v1", scheme: LA3P | None = None, **kwargs: Any) -> Any:
    buffer_kwargs = {"inverse_sampling": True, "alpha": 0.4, **kwargs.pop("replay_buffer_kwargs", {})}
    return algorithm(
        "MlpPolicy",
        env,
        replay_scheme=LA3P() if scheme is None else scheme,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=buffer_kwargs,
        **small(**kwargs),
    )


class StepCounter:
    """Counts an optimizer's ``step`` calls."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, optimizer: th.optim.Optimizer) -> None:
        self.calls = 0
        step = optimizer.step

        def counting_step(*args, **kwargs):
            self.calls += 1
            return step(*args, **kwargs)

        monkeypatch.setattr(optimizer, "step", counting_step)


def count_steps(monkeypatch: pytest.MonkeyPatch, model: Any) -> dict[str, StepCounter]:
    counters = {"critic": StepCounter(monkeypatch, model.critic.optimizer)}
    counters["actor"] = StepCounter(monkeypatch, model.actor.optimizer)
    if getattr(model, "ent_coef_optimizer", None) is not None:
        counters["ent_coef"] = StepCounter(monkeypatch, model.ent_coef_optimizer)
    return counters


def record_batch_sizes(monkeypatch: pytest.MonkeyPatch, model: Any) -> dict[str, list[int]]:
    """Sizes of the batches the critic and actor steps of ``model`` train on."""
    sizes: dict[str, list[int]] = {"critic": [], "actor": []}
    for step in ("critic", "actor"):
        real = getattr(model, f"_{step}_step")

        def spy(replay_data, *args, _real=real, _step=step):
            sizes[_step].append(replay_data.observations.shape[0])
            return _real(replay_data, *args)

        monkeypatch.setattr(model, f"_{step}_step", spy)
    return sizes


def test_matched_budget_makes_the_optimizer_steps_of_uniform_sac_on_batches_of_n(monkeypatch):
    uniform = stable_baselines3.SAC("MlpPolicy", "Pendulum-v1", **small())
    uniform.learn(60)
    uniform_steps = count_steps(monkeypatch, uniform)
    uniform_sizes = []
    sample = uniform.replay_buffer.sample

    def spy(batch_size, *args, **kwargs):
        uniform_sizes.append(batch_size)
        return sample(batch_size, *args, **kwargs)

    monkeypatch.setattr(uniform.replay_buffer, "sample", spy)
    uniform.train(gradient_steps=3, batch_size=BATCH)

    model = la3p()
    model.learn(60)
    steps, sizes = count_steps(monkeypatch, model), record_batch_sizes(monkeypatch, model)
    model.train(gradient_steps=3, batch_size=BATCH)

    assert (
        {name: counter.calls for name, counter in steps.items()}
        == {name: counter.calls for name, counter in uniform_steps.items()}
        == {"critic": 3, "actor": 3, "ent_coef": 3}
    )
    assert sizes == {"critic": uniform_sizes, "actor": uniform_sizes} == {"critic": [BATCH] * 3, "actor": [BATCH] * 3}


def test_paper_budget_makes_two_of_each_step_on_half_batches(monkeypatch):
    model = la3p(scheme=LA3P(budget="paper"))
    model.learn(60)
    steps, sizes = count_steps(monkeypatch, model), record_batch_sizes(monkeypatch, model)
    model.train(gradient_steps=3, batch_size=BATCH)
    assert {name: counter.calls for name, counter in steps.items()} == {"critic": 6, "actor": 6, "ent_coef": 6}
    assert sizes == {"critic": [BATCH // 2] * 6, "actor": [BATCH // 2] * 6}


@pytest.mark.parametrize("budget", ["matched", "paper"])
def test_la3p_fraction_one_draws_no_uniform_batch(monkeypatch, budget):
    model = la3p(scheme=LA3P(fraction=1.0, budget=budget))
    model.learn(60)

    def no_uniform(*args, **kwargs):
        raise AssertionError("a uniform batch was drawn")

    monkeypatch.setattr(model.replay_buffer, "sample_uniform", no_uniform)
    calls = []
    sample = model.replay_buffer.sample

    def spy(batch_size, env=None, inverse=False):
        calls.append((batch_size, inverse))
        return sample(batch_size, env, inverse)

    monkeypatch.setattr(model.replay_buffer, "sample", spy)
    sizes = record_batch_sizes(monkeypatch, model)
    model.train(gradient_steps=2, batch_size=BATCH)
    assert calls == [(BATCH, False), (BATCH, True)] * 2
    assert sizes == {"critic": [BATCH] * 2, "actor": [BATCH] * 2}


@pytest.mark.parametrize("budget", ["matched", "paper"])
def test_priorities_are_written_back_from_both_critic_batches(monkeypatch, budget):
    model = la3p(scheme=LA3P(budget=budget))
    model.learn(60)
    buffer = model.replay_buffer
    uniform_batches, prioritized_batches, updates = [], [], []
    real_uniform, real_sample, real_update = buffer.sample_uniform, buffer.sample, buffer.update_priorities

    def spy_uniform(*args):
        uniform_batches.append(real_uniform(*args))
        return uniform_batches[-1]

    def spy_sample(batch_size, env=None, inverse=False):
        batch = real_sample(batch_size, env, inverse)
        if not inverse:
            prioritized_batches.append(batch)
        return batch

    def spy_update(indices, td_errors, stamps=None):
        updates.append((np.asarray(indices).copy(), td_errors.detach().clone()))
        real_update(indices, td_errors, stamps)

    monkeypatch.setattr(buffer, "sample_uniform", spy_uniform)
    monkeypatch.setattr(buffer, "sample", spy_sample)
    monkeypatch.setattr(buffer, "update_priorities", spy_update)
    model.train(gradient_steps=1, batch_size=BATCH)

    ((uniform,), (prioritized,)) = uniform_batches, prioritized_batches
    written = np.concatenate([indices for indices, _ in updates])
    assert len(updates) == (1 if budget == "matched" else 2)
    np.testing.assert_array_equal(written, np.concatenate((uniform.indices, prioritized.indices)))
    assert min(float(td.min()) for _, td in updates) >= model.replay_scheme.min_priority  # LAP's floor, both parts


def test_matched_loss_is_pal_on_the_uniform_part_and_lap_on_the_prioritized_part():
    generator = th.Generator().manual_seed(0)
    qs = [th.randn(6, 1, generator=generator) * 2 for _ in range(2)]
    target = th.randn(6, 1, generator=generator)
    loss = la3p_matched_loss(qs, target, 2, pal_loss, lap_loss)
    pal = pal_loss([q[:2] for q in qs], target[:2])
    lap = lap_loss([q[2:] for q in qs], target[2:])
    assert loss.item() == pytest.approx((2 * pal.item() + 4 * lap.item()) / 6)


def test_td3_samples_no_inverse_batch_between_delayed_actor_steps(monkeypatch, record_calls):
    model = la3p(TD3, policy_delay=2)
    model.learn(60)
    model._n_updates = 0
    sample_calls = record_calls(model.replay_buffer, "sample")
    steps = count_steps(monkeypatch, model)
    model.train(gradient_steps=4, batch_size=BATCH)  # actor steps at _n_updates 2 and 4
    assert [kwargs.get("inverse", False) for _, kwargs in sample_calls] == [False, False, True, False, False, True]
    assert (steps["critic"].calls, steps["actor"].calls) == (4, 2)


def test_ddpg_trains_with_la3p():
    model = la3p(DDPG)
    model.learn(80)
    assert model.replay_buffer.n_priority_updates == model._n_updates == 30


def test_la3p_telemetry_counts_critic_and_actor_batches_apart(regime_tagged_pendulum):
    model = la3p(env=regime_tagged_pendulum(2), replay_buffer_kwargs={"tag_key": "regime"})
    model.learn(60)
    logged = model.logger.name_to_value
    for stat in ("sample_share", "critic_sample_share", "actor_sample_share"):
        assert sum(logged[telemetry_key(tag, stat)] for tag in (0, 1)) == pytest.approx(1.0), stat


def test_td3_la3p_telemetry_survives_training_calls_without_an_actor_step(regime_tagged_pendulum):
    model = la3p(TD3, env=regime_tagged_pendulum(2), replay_buffer_kwargs={"tag_key": "regime"}, policy_delay=2)
    model.learn(60)  # one gradient step a call: every other call has no actor step, hence no actor batch
    logged = model.logger.name_to_value
    assert sum(logged[telemetry_key(tag, "actor_sample_share")] for tag in (0, 1)) == pytest.approx(1.0)


# --- bad combinations ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("fraction", [0.0, -0.5, 1.5, float("nan")])
def test_a_la3p_fraction_outside_0_1_raises_naming_it(fraction):
    with pytest.raises(ValueError, match=rf"fraction must be in \(0, 1\], got {fraction}"):
        LA3P(fraction=fraction)


def test_a_bad_la3p_budget_raises_naming_it():
    with pytest.raises(ValueError, match=r"budget must be one of \('matched', 'paper'\), got 'double'"):
        LA3P(budget="double")


def test_la3p_with_dqn_raises():
    with pytest.raises(ValueError, match=r"LA3P\(.*\) prioritizes an actor's batches, but DQN has no actor"):
        la3p(DQN, "CartPole-v1")


@pytest.mark.parametrize(
    ("buffer_class", "buffer_kwargs", "message"),
    [
        (None, None, r"LA3P\(.*\) samples in proportion .* ReplayBuffer"),
        # LA3P sets inverse_sampling=True, which the buffer refuses with rank-based prioritization
        (
            PrioritizedReplayBuffer,
            {"prioritization": "rank"},
            r"inverse_sampling=True needs prioritization='proportional'",
        ),
        (PrioritizedReplayBuffer, {"inverse_sampling": False}, r"LA3P\(.*\) .* inverse_sampling=True"),
    ],
)
def test_la3p_refuses_a_buffer_it_cannot_sample_from(buffer_class, buffer_kwargs, message):
    with pytest.raises(ValueError, match=message):
        SAC(
            "MlpPolicy",
            "Pendulum-v1",
            replay_scheme=LA3P(),
            replay_buffer_class=buffer_class,
            replay_buffer_kwargs=buffer_kwargs,
        )

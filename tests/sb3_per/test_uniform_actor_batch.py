"""PER(uniform_actor_batch=True) (and LAP's): the critic trains on the prioritized batch (its loss and priorities as
without it), the actor (and SAC's entropy coefficient) on a uniform batch of its own."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.utils import set_random_seed

from sb3_per import DDPG, LA3P, LAP, PAL, PER, SAC, TD3, PrioritizedDictReplayBuffer, PrioritizedReplayBuffer
from sb3_per.telemetry import telemetry_key

BATCH = 32


def critic_only_per(algorithm: type = SAC, env: Any = "Pendulum-v1", **kwargs: Any) -> Any:
    kwargs.setdefault("replay_scheme", PER(uniform_actor_batch=True))
    kwargs.setdefault("learning_starts", 50)
    return algorithm(
        kwargs.pop("policy", "MlpPolicy"),
        env,
        replay_buffer_class=kwargs.pop("replay_buffer_class", PrioritizedReplayBuffer),
        replay_buffer_kwargs={"alpha": 1.0, **kwargs.pop("replay_buffer_kwargs", {})},
        policy_kwargs={"net_arch": [16, 16]},
        batch_size=BATCH,
        seed=0,
        **kwargs,
    )


def record_step_indices(monkeypatch: pytest.MonkeyPatch, model: Any, steps: tuple[str, ...]) -> dict[str, list]:
    """The flat indices of the batches each of ``model``'s ``steps`` (``"critic"``, ``"actor"``, ...) trains on."""
    seen: dict[str, list] = {step: [] for step in steps}
    for step in steps:
        real = getattr(model, f"_{step}_step")

        def spy(replay_data, *args, _real=real, _step=step):
            seen[_step].append(replay_data.indices.copy())
            return _real(replay_data, *args)

        monkeypatch.setattr(model, f"_{step}_step", spy)
    return seen


def make_one_transition_dominate(buffer: PrioritizedReplayBuffer, index: int = 7) -> None:
    """Priorities whose sampling picks ``index`` nearly always (alpha 1: a million to one against each other)."""
    n = buffer.n_transitions
    errors = np.full(n, 1e-6)
    errors[index] = 1e3
    buffer.update_priorities(np.arange(n), errors)


@pytest.mark.parametrize(
    ("algorithm", "scheme"),
    [
        (SAC, PER(uniform_actor_batch=True)),
        (SAC, LAP(uniform_actor_batch=True)),
        (TD3, PER(uniform_actor_batch=True)),
        (TD3, LAP(uniform_actor_batch=True)),
        (DDPG, PER(uniform_actor_batch=True)),
    ],
    ids=["sac_per", "sac_lap", "td3_per", "td3_lap", "ddpg_per"],
)
def test_the_critic_trains_on_the_prioritized_batch_and_the_actor_on_a_uniform_one(monkeypatch, algorithm, scheme):
    model = critic_only_per(algorithm, replay_scheme=scheme, **({"policy_delay": 1} if algorithm is TD3 else {}))
    model.learn(100)
    make_one_transition_dominate(model.replay_buffer)
    steps = ("entropy", "critic", "actor") if algorithm is SAC else ("critic", "actor")
    seen = record_step_indices(monkeypatch, model, steps)
    model.train(gradient_steps=1, batch_size=BATCH)
    critic, actor = seen["critic"][0], seen["actor"][0]
    assert (critic == 7).mean() > 0.9  # the critic's batch follows the priorities
    assert (actor == 7).mean() < 0.2 and len(np.unique(actor)) > BATCH // 2  # the actor's does not
    if algorithm is SAC:
        np.testing.assert_array_equal(seen["entropy"][0], actor)  # the entropy step samples the actor's actions


@pytest.mark.parametrize("algorithm", [SAC, TD3])
def test_the_priorities_are_written_back_from_the_critic_batch_only(monkeypatch, priorities, algorithm):
    model = critic_only_per(algorithm, **({"policy_delay": 1} if algorithm is TD3 else {}))
    model.learn(100)
    buffer = model.replay_buffer
    before = priorities(buffer)
    seen = record_step_indices(monkeypatch, model, ("critic", "actor"))
    model.train(gradient_steps=1, batch_size=BATCH)
    changed = np.flatnonzero(priorities(buffer) != before)
    assert set(changed) <= set(seen["critic"][0])
    only_actor = np.setdiff1d(seen["actor"][0], seen["critic"][0])
    assert only_actor.size > 0
    np.testing.assert_array_equal(priorities(buffer)[only_actor], before[only_actor])


def test_the_first_critic_step_is_pers_same_batch_same_update_same_priorities(monkeypatch, priorities):
    models = [
        critic_only_per(learning_starts=100, replay_scheme=PER(uniform_actor_batch=flag)) for flag in (True, False)
    ]
    critic_batches = []
    for model in models:
        model.learn(100)  # collection only: both buffers hold the same transitions
        seen = record_step_indices(monkeypatch, model, ("critic",))
        set_random_seed(5)  # NumPy's global generator (the buffer's sampling) and torch's (the policy's)
        model.train(gradient_steps=1, batch_size=BATCH)
        critic_batches.append(seen["critic"][0])
    with_uniform_actor, per = models
    np.testing.assert_array_equal(*critic_batches)
    for ours, theirs in zip(with_uniform_actor.critic.parameters(), per.critic.parameters(), strict=True):
        th.testing.assert_close(ours, theirs, rtol=0, atol=0)
    np.testing.assert_array_equal(priorities(with_uniform_actor.replay_buffer), priorities(per.replay_buffer))
    # ... while the actors trained on different batches
    actors = zip(with_uniform_actor.actor.parameters(), per.actor.parameters(), strict=True)
    assert any(not th.equal(ours, theirs) for ours, theirs in actors)


def test_td3_samples_an_actor_batch_only_for_its_delayed_actor_steps(record_calls):
    model = critic_only_per(TD3, policy_delay=2)
    model.learn(60)
    model._n_updates = 0
    uniform_calls = record_calls(model.replay_buffer, "sample_uniform")
    model.train(gradient_steps=4, batch_size=BATCH)  # actor steps at _n_updates 2 and 4
    assert [args[0] for args, _ in uniform_calls] == [BATCH, BATCH]


@pytest.mark.parametrize("algorithm", [SAC, TD3])
def test_telemetry_counts_critic_and_actor_batches_apart(regime_tagged_pendulum, algorithm):
    model = critic_only_per(algorithm, env=regime_tagged_pendulum(2), replay_buffer_kwargs={"tag_key": "regime"})
    model.learn(60)  # TD3: every other training call has no actor step
    logged = model.logger.name_to_value
    for stat in ("sample_share", "critic_sample_share", "actor_sample_share"):
        assert sum(logged[telemetry_key(tag, stat)] for tag in (0, 1)) == pytest.approx(1.0), stat
    model.logger.dump()
    make_one_transition_dominate(model.replay_buffer, index=7)
    model.train(gradient_steps=2, batch_size=BATCH)  # TD3: one actor step
    tag = model.replay_buffer.tags_at(np.array([7]))[0]
    critic_share = logged[telemetry_key(tag, "critic_sample_share")]
    actor_share = logged[telemetry_key(tag, "actor_sample_share")]
    assert critic_share > 0.9 and actor_share < 0.85  # the actor's batch, not the critic's, behind its share
    # the sampled share counts both kinds of batch
    assert logged[telemetry_key(tag, "sample_share")] < critic_share


def test_a_loaded_buffer_that_is_not_prioritized_is_refused(tmp_path):
    model = critic_only_per()
    uniform = SAC("MlpPolicy", "Pendulum-v1", policy_kwargs={"net_arch": [16, 16]}, learning_starts=50)
    uniform.learn(60)
    uniform.save_replay_buffer(tmp_path / "uniform.pkl")
    with pytest.raises(ValueError, match=r"uniform_actor_batch=True.* the replay buffer is a ReplayBuffer"):
        model.load_replay_buffer(tmp_path / "uniform.pkl")
    assert isinstance(model.replay_buffer, PrioritizedReplayBuffer)  # the refused buffer was not kept


def test_it_trains_with_prioritized_dict_replay(dict_pendulum):
    model = critic_only_per(
        env=dict_pendulum, policy="MultiInputPolicy", replay_buffer_class=PrioritizedDictReplayBuffer
    )
    model.learn(80)
    assert model.replay_buffer.n_priority_updates == model._n_updates == 30


def test_save_and_load_keep_it(tmp_path):
    model = critic_only_per()
    model.save(tmp_path / "model")
    assert SAC.load(tmp_path / "model").replay_scheme == PER(uniform_actor_batch=True)


def test_it_is_off_by_default():
    assert SAC("MlpPolicy", "Pendulum-v1").replay_scheme is None  # PER() with a prioritized buffer
    assert PER().uniform_actor_batch is False and LAP().uniform_actor_batch is False


# --- bad input -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scheme", [PER, LAP])
def test_a_value_that_is_not_a_bool_raises_naming_it(scheme):
    with pytest.raises(ValueError, match=r"uniform_actor_batch must be a bool, got 'yes'"):
        scheme(uniform_actor_batch="yes")


@pytest.mark.parametrize("scheme", [PAL, LA3P])
def test_schemes_whose_actor_has_no_prioritized_batch_have_no_such_parameter(scheme):
    # Before the refactor, per_mode='pal' or 'la3p' with uniform_actor_batch=True raised ValueError at the
    # algorithm's construction; now the schemes have no such parameter to set.
    with pytest.raises(TypeError, match="uniform_actor_batch"):
        scheme(uniform_actor_batch=True)


def test_a_buffer_that_is_not_prioritized_is_refused():
    with pytest.raises(ValueError, match=r"uniform_actor_batch=True.* the replay buffer is a ReplayBuffer"):
        SAC("MlpPolicy", "Pendulum-v1", replay_scheme=PER(uniform_actor_batch=True))

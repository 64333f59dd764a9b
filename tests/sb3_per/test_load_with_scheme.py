"""``Model.load(path, replay_scheme=X)`` checks X as the constructor does, a scheme's saved state is continued or
dropped in the open, and a model trained with ExpectedTD loads in stock SB3 for deployment."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import stable_baselines3
import torch as th

from sb3_per import DQN, LA3P, PER, SAC, UPER, ExpectedTD, PrioritizedReplayBuffer
from sb3_per.schemes.expected_td import TDErrorRegressor


def small() -> dict:
    """Small settings, a new dict each time (SB3 writes into policy_kwargs)."""
    return dict(learning_starts=50, buffer_size=500, batch_size=32, policy_kwargs=dict(net_arch=[16]), seed=0)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Paths of a PER-DQN, a PER-SAC and an ExpectedTD-SAC, each trained 100 steps and saved."""
    folder = tmp_path_factory.mktemp("models")
    models = {
        "dqn": DQN("MlpPolicy", "CartPole-v1", replay_buffer_class=PrioritizedReplayBuffer, **small()),
        "sac": SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, **small()),
        "expected_td": SAC(
            "MlpPolicy",
            "Pendulum-v1",
            replay_buffer_class=PrioritizedReplayBuffer,
            replay_scheme=ExpectedTD(hidden_sizes=(8,)),
            **small(),
        ),
    }
    paths = {}
    for name, model in models.items():
        model.learn(100)
        paths[name] = folder / f"{name}.zip"
        model.save(paths[name])
    return paths


@pytest.mark.parametrize(
    ("algorithm", "model", "scheme", "message"),
    [
        (DQN, "dqn", LA3P(), r"LA3P\(.*\) prioritizes an actor's batches, but DQN has no actor"),
        (SAC, "sac", UPER(), r"UPER\(.*\) needs quantile critics \(sb3_per.TQC\), but SAC's are not"),
        (SAC, "sac", "per", r"replay_scheme must be a replay scheme .* or None, got 'per'"),
    ],
    ids=["LA3P-on-DQN", "UPER-on-SAC", "a-string"],
)
def test_load_refuses_what_the_constructor_refuses_with_its_message(saved, algorithm, model, scheme, message):
    constructor_env = "CartPole-v1" if algorithm is DQN else "Pendulum-v1"
    with pytest.raises(ValueError, match=message):
        algorithm("MlpPolicy", constructor_env, replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=scheme)
    with pytest.raises(ValueError, match=message):
        algorithm.load(saved[model], replay_scheme=scheme)


@pytest.mark.parametrize(
    ("algorithm", "model", "scheme", "message"),
    [
        (DQN, "dqn", PER(uniform_actor_batch=True), r"samples a batch of its own for the actor, but DQN has no actor"),
        (SAC, "sac", UPER(), r"UPER\(.*\) needs quantile critics"),
        (SAC, "sac", "PER()", r"replay_scheme must be a replay scheme .* or None, got 'PER\(\)'"),
    ],
    ids=["uniform-actor-batch-on-DQN", "UPER-on-SAC", "a-string"],
)
def test_a_scheme_given_in_custom_objects_gets_the_same_checks(saved, algorithm, model, scheme, message):
    with pytest.raises(ValueError, match=message):
        algorithm.load(saved[model], custom_objects={"replay_scheme": scheme})


def test_load_refuses_a_scheme_that_cannot_sample_the_saved_buffer_class(saved):
    model = SAC("MlpPolicy", "Pendulum-v1", **small())  # SB3's uniform buffer
    model.save(saved["sac"].parent / "uniform.zip")
    with pytest.raises(ValueError, match=r"ExpectedTD\(.*\) samples in proportion to its priorities"):
        SAC.load(saved["sac"].parent / "uniform.zip", replay_scheme=ExpectedTD())


def test_an_expected_td_model_loads_in_stock_sb3_and_acts_the_same(saved):
    ours = SAC.load(saved["expected_td"])
    stock = stable_baselines3.SAC.load(saved["expected_td"])
    observations = np.random.default_rng(0).uniform(-1, 1, size=(20, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        ours.predict(observations, deterministic=True)[0], stock.predict(observations, deterministic=True)[0]
    )


def test_switching_to_expected_td_at_load_makes_its_regressor(saved):
    loaded = SAC.load(saved["sac"], env=gym.make("Pendulum-v1"), replay_scheme=ExpectedTD(hidden_sizes=(8,)))
    assert isinstance(loaded.replay_scheme_state, TDErrorRegressor)
    loaded.learn(60, reset_num_timesteps=False)
    assert loaded.replay_buffer.n_priority_updates > 0


def test_switching_away_from_expected_td_or_to_other_settings_drops_its_regressor_with_a_warning(saved):
    with pytest.warns(UserWarning, match=r"saved model's TDErrorRegressor .* cannot be continued by .*PER\(.*dropped"):
        to_per = SAC.load(saved["expected_td"], replay_scheme=PER())
    assert to_per.replay_scheme_state is None
    with pytest.warns(UserWarning, match=r"\(\(8,\), 0.001, 0.0, 1\).* starts anew"):
        resized = SAC.load(saved["expected_td"], replay_scheme=ExpectedTD(hidden_sizes=(16,)))
    assert next(p.shape[0] for p in resized.replay_scheme_state.parameters()) == 16


def test_loading_with_the_same_scheme_continues_the_regressor_silently(saved):
    original = SAC.load(saved["expected_td"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        again = SAC.load(saved["expected_td"], replay_scheme=ExpectedTD(hidden_sizes=(8,)))
    for mine, theirs in zip(
        original.replay_scheme_state.parameters(), again.replay_scheme_state.parameters(), strict=True
    ):
        assert th.equal(mine, theirs)

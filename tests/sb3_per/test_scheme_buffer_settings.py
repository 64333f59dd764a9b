"""A scheme carries its paper's buffer settings: an sb3_per algorithm puts them under the user's
``replay_buffer_kwargs``, the user's values win, and a buffer that cannot work is still refused."""

from __future__ import annotations

import pytest

from sb3_per import DQN, LA3P, LAP, PAL, PER, SAC, ExpectedReLo, ExpectedTD, PrioritizedReplayBuffer, ReLo
from sb3_per.buffers import PrioritizedBufferMixin


def buffer_of(algorithm, scheme, **replay_buffer_kwargs) -> PrioritizedBufferMixin:
    env = "CartPole-v1" if algorithm is DQN else "Pendulum-v1"
    model = algorithm(
        "MlpPolicy",
        env,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=replay_buffer_kwargs,
        replay_scheme=scheme,
        buffer_size=1_000,
    )
    return model.replay_buffer


@pytest.mark.parametrize(
    ("algorithm", "scheme", "expected"),
    [
        (SAC, ReLo(), dict(alpha=0.5, epsilon=1e-5, weight_normalization="batch")),
        (DQN, ReLo(), dict(alpha=0.6, epsilon=1e-5, weight_normalization="batch")),
        (SAC, ExpectedReLo(), dict(alpha=0.5, epsilon=1e-5, weight_normalization="batch")),
        (SAC, LAP(), dict(alpha=0.4, epsilon=1e-6, weight_normalization="buffer")),
        (SAC, LA3P(pal_alpha=0.3), dict(alpha=0.3, epsilon=1e-6, weight_normalization="buffer")),
        (SAC, PER(), dict(alpha=0.6, epsilon=1e-6, weight_normalization="buffer")),
        (SAC, ExpectedTD(), dict(alpha=0.6, epsilon=1e-6, weight_normalization="buffer")),
    ],
    ids=["ReLo-SAC", "ReLo-DQN", "ExpectedReLo-SAC", "LAP", "LA3P", "PER", "ExpectedTD"],
)
def test_the_buffer_gets_the_schemes_paper_settings(algorithm, scheme, expected):
    buffer = buffer_of(algorithm, scheme)
    assert {name: getattr(buffer, name) for name in expected} == expected


def test_la3p_turns_the_inverse_tree_on():
    assert buffer_of(SAC, LA3P()).sampler.inverse_index is not None
    assert buffer_of(SAC, LAP()).sampler.inverse_index is None


def test_the_users_values_win_and_their_dict_is_left_as_it_was():
    kwargs = dict(alpha=0.7, epsilon=1e-7)
    model = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=kwargs,
        replay_scheme=ReLo(),
    )
    buffer = model.replay_buffer
    assert (buffer.alpha, buffer.epsilon, buffer.weight_normalization) == (0.7, 1e-7, "batch")
    assert kwargs == dict(alpha=0.7, epsilon=1e-7)


def test_a_user_setting_the_scheme_cannot_work_with_is_still_refused():
    with pytest.raises(ValueError, match=r"LA3P\(.*inverse_sampling=True"):
        buffer_of(SAC, LA3P(), inverse_sampling=False)


def test_a_scheme_on_sb3s_uniform_buffer_sets_nothing():
    model = SAC("MlpPolicy", "Pendulum-v1", replay_scheme=PAL())
    assert model.replay_buffer_kwargs == {}


def test_a_loaded_model_rebuilds_its_buffer_with_the_same_settings(tmp_path):
    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=ReLo())
    model.save(tmp_path / "model.zip")
    loaded = SAC.load(tmp_path / "model.zip")
    buffer = loaded.replay_buffer
    assert (buffer.alpha, buffer.epsilon, buffer.weight_normalization) == (0.5, 1e-5, "batch")


def test_the_models_replay_buffer_kwargs_stay_the_users_own():
    kwargs = dict(beta_start=0.5)
    model = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=kwargs,
        replay_scheme=LAP(),
    )
    assert model.replay_buffer.alpha == 0.4 and model.replay_buffer.gamma == model.gamma
    # What save keeps: no scheme setting, and the buffer's gamma (with which stock SB3 loads the zip)
    assert model.replay_buffer_kwargs == dict(beta_start=0.5, gamma=model.gamma) and kwargs == dict(beta_start=0.5)


# SB3 warns when it loads its own n-step model (the saved NStepReplayBuffer class is "custom" then): its quirk, not ours
@pytest.mark.filterwarnings("ignore:`n_steps=5` is ignored because a custom `replay_buffer_class`")
def test_stock_sb3_loads_the_zip_with_the_buffers_gamma_and_sb3s_n_step_settings_survive(tmp_path):
    import stable_baselines3

    model = SAC(
        "MlpPolicy",
        "Pendulum-v1",
        gamma=0.9,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=dict(n_steps=3),
        replay_scheme=ReLo(),
    )
    model.save(tmp_path / "prioritized.zip")
    stock = stable_baselines3.SAC.load(tmp_path / "prioritized.zip").replay_buffer
    assert (stock.gamma, stock.n_steps, stock.alpha) == (0.9, 3, 0.6)  # stock SB3 knows no scheme: the default alpha
    uniform = SAC("MlpPolicy", "Pendulum-v1", gamma=0.9, n_steps=5)  # SB3's own NStepReplayBuffer
    uniform.save(tmp_path / "n_step.zip")
    loaded = SAC.load(tmp_path / "n_step.zip").replay_buffer
    assert (type(loaded).__name__, loaded.n_steps, loaded.gamma) == ("NStepReplayBuffer", 5, 0.9)


def test_a_model_loaded_with_another_scheme_gets_that_schemes_settings(tmp_path):
    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=LAP())
    model.save(tmp_path / "model.zip")
    buffer = SAC.load(tmp_path / "model.zip", replay_scheme=ReLo()).replay_buffer
    assert (buffer.alpha, buffer.epsilon, buffer.weight_normalization) == (0.5, 1e-5, "batch")
    # SB3's uniform buffer takes none of a prioritized buffer's arguments (the saved gamma among them), as in SB3
    loaded = SAC.load(tmp_path / "model.zip", replay_scheme=PAL(), replay_buffer_class=None, replay_buffer_kwargs={})
    assert type(loaded.replay_buffer).__name__ == "ReplayBuffer"


def test_a_model_loaded_with_another_gamma_discounts_its_buffer_with_it(tmp_path):
    model = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer)
    model.save(tmp_path / "model.zip")
    loaded = SAC.load(tmp_path / "model.zip", gamma=0.95)
    assert loaded.gamma == loaded.replay_buffer.gamma == 0.95

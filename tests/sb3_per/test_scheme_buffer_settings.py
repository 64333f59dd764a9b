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

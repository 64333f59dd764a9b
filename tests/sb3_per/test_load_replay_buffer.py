"""load_replay_buffer: a buffer whose n-step returns the model would discount wrongly is refused, the model keeping its
own; one that changes how a prioritized buffer samples is taken, with a warning naming the old and new values."""

import re
import warnings

import pytest

from sb3_per import SAC, PrioritizedReplayBuffer


def sac(gamma: float = 0.99, **buffer_kwargs) -> SAC:
    """A small SAC with a prioritized buffer of 100 transitions (nothing trained: loading needs none)."""
    return SAC(
        "MlpPolicy",
        "Pendulum-v1",
        gamma=gamma,
        buffer_size=100,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs=buffer_kwargs,
        policy_kwargs=dict(net_arch=[8]),
        seed=0,
    )


def test_an_n_step_buffer_discounted_with_another_gamma_is_refused_and_the_model_keeps_its_buffer(tmp_path):
    sac(gamma=0.9, n_steps=3).save_replay_buffer(tmp_path / "gamma_0.9.pkl")
    model = sac(gamma=0.99, n_steps=3)
    own = model.replay_buffer
    with pytest.raises(ValueError, match=r"3-step returns with gamma=0.9, but the model's gamma is 0.99"):
        model.load_replay_buffer(tmp_path / "gamma_0.9.pkl")
    assert model.replay_buffer is own
    # the model's own gamma loads without a word
    same = sac(gamma=0.9, n_steps=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same.load_replay_buffer(tmp_path / "gamma_0.9.pkl")
    assert same.replay_buffer.gamma == 0.9 and same.replay_buffer.n_steps == 3


def test_a_one_step_buffer_loads_whatever_its_gamma_as_it_discounts_nothing(tmp_path):
    sac(gamma=0.9).save_replay_buffer(tmp_path / "one_step.pkl")
    model = sac(gamma=0.99)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.load_replay_buffer(tmp_path / "one_step.pkl")
    assert model.replay_buffer.gamma == 0.9


@pytest.mark.parametrize(
    ("name", "default", "changed"),
    [
        ("alpha", 0.6, 0.7),
        ("priority_half_life", None, 50.0),
        ("tag_key", None, "regime"),
        ("prioritization", "proportional", "rank"),
    ],
)
def test_a_buffer_that_changes_a_prioritized_setting_loads_with_a_warning_naming_old_and_new(
    tmp_path, name, default, changed
):
    sac(**{name: changed}).save_replay_buffer(tmp_path / "changed.pkl")
    sac().save_replay_buffer(tmp_path / "default.pkl")
    model = sac()
    assert getattr(model.replay_buffer, name) == default
    with pytest.warns(
        UserWarning, match=re.escape(f"replaces the model's PrioritizedReplayBuffer: {name} {default!r} -> {changed!r}")
    ) as record:
        model.load_replay_buffer(tmp_path / "changed.pkl")
    assert len(record) == 1
    assert getattr(model.replay_buffer, name) == changed  # taken, not refused
    # and the same change the other way round
    with pytest.warns(UserWarning, match=re.escape(f"{name} {changed!r} -> {default!r}")):
        model.load_replay_buffer(tmp_path / "default.pkl")
    assert getattr(model.replay_buffer, name) == default


def test_a_buffer_with_the_same_settings_loads_without_a_word(tmp_path):
    sac(alpha=0.7, tag_key="regime").save_replay_buffer(tmp_path / "same.pkl")
    model = sac(alpha=0.7, tag_key="regime")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.load_replay_buffer(tmp_path / "same.pkl")

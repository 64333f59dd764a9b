"""Options that cannot apply are refused when the model is made, with a message naming them, as the other impossible
combinations are: nothing trains silently as something else."""

from __future__ import annotations

import pytest
from stable_baselines3.common.buffers import ReplayBuffer

from sb3_per import DQN, PER, SAC, TQC, PrioritizedReplayBuffer, TaggedReplayBuffer


@pytest.mark.parametrize("scheme", [PER(), PER(priority="loss"), PER(uniform_actor_batch=True)], ids=repr)
@pytest.mark.parametrize("algorithm", [SAC, TQC], ids=["SAC", "TQC"])
def test_per_on_a_uniform_buffer_is_refused(algorithm, scheme):
    with pytest.raises(
        ValueError,
        match=r"PER\(.*\) samples in proportion to its priorities, but the replay buffer is a "
        r"ReplayBuffer, which samples uniformly: .* leave replay_scheme out",
    ):
        algorithm("MlpPolicy", "Pendulum-v1", replay_scheme=scheme, replay_buffer_class=ReplayBuffer)


def test_per_on_a_tagged_uniform_buffer_is_refused_and_the_default_still_gives_its_telemetry():
    tagged = dict(replay_buffer_class=TaggedReplayBuffer, replay_buffer_kwargs={"tag_key": "regime"})
    with pytest.raises(ValueError, match=r"but the replay buffer is a TaggedReplayBuffer, which samples uniformly"):
        SAC("MlpPolicy", "Pendulum-v1", replay_scheme=PER(), **tagged)
    assert SAC("MlpPolicy", "Pendulum-v1", **tagged).replay_scheme is None


def test_a_uniform_actor_batch_without_an_actor_is_refused():
    with pytest.raises(ValueError, match=r"samples a batch of its own for the actor, but DQN has no actor"):
        DQN(
            "MlpPolicy",
            "CartPole-v1",
            replay_buffer_class=PrioritizedReplayBuffer,
            replay_scheme=PER(uniform_actor_batch=True),
        )
    model = DQN("MlpPolicy", "CartPole-v1", replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=PER())
    assert model.replay_scheme == PER()  # PER itself trains DQN


def test_the_training_scheme_shows_what_trains_when_replay_scheme_is_left_out():
    prioritized = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer)
    assert prioritized.replay_scheme is None and prioritized.training_scheme == PER()
    assert SAC("MlpPolicy", "Pendulum-v1").training_scheme is None  # SB3's own train
    given = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=PER("max"))
    assert given.training_scheme == PER("max")


def test_an_sb3_contrib_algorithm_that_never_writes_priorities_is_named_in_a_short_run():
    """A 600-step try of QRDQN with the prioritized buffer warns at its second training call, not after 100."""
    from sb3_contrib import QRDQN

    model = QRDQN(
        "MlpPolicy",
        "CartPole-v1",
        replay_buffer_class=PrioritizedReplayBuffer,
        learning_starts=500,
        train_freq=4,
        policy_kwargs={"net_arch": [8]},
        seed=0,
    )
    with pytest.warns(UserWarning, match=r"never updated, .* QRDQN and CrossQ among them, never do"):
        model.learn(600)
    assert model.replay_buffer.n_priority_updates == 0

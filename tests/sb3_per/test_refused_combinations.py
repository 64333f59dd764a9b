"""Options that cannot apply are refused when the model is made, with a message naming them, as the other impossible
combinations are: nothing trains silently as something else."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces
from stable_baselines3.common.buffers import ReplayBuffer

from sb3_per import DQN, LAP, PER, SAC, TQC, PrioritizedReplayBuffer, TaggedReplayBuffer


@pytest.mark.parametrize("scheme", [PER(), PER(priority="loss"), PER(uniform_actor_batch=True)], ids=repr)
@pytest.mark.parametrize("algorithm", [SAC, TQC], ids=["SAC", "TQC"])
def test_per_on_a_uniform_buffer_is_refused(algorithm, scheme):
    with pytest.raises(
        ValueError,
        match=r"PER\(.*\) samples in proportion to its priorities, but the replay buffer is a "
        r"ReplayBuffer, which samples uniformly: .* leave replay_scheme out",
    ):
        algorithm("MlpPolicy", "Pendulum-v1", replay_scheme=scheme, replay_buffer_class=ReplayBuffer)


@pytest.mark.parametrize("scheme", [PER(), LAP()], ids=repr)
def test_a_scheme_on_sb3s_her_buffer_names_the_prioritized_her_buffer(scheme):
    from stable_baselines3 import HerReplayBuffer
    from stable_baselines3.common.envs import BitFlippingEnv

    with pytest.raises(ValueError, match=r"replay buffer is a HerReplayBuffer.*: use PrioritizedHerReplayBuffer"):
        DQN("MultiInputPolicy", BitFlippingEnv(n_bits=3), replay_scheme=scheme, replay_buffer_class=HerReplayBuffer)


def test_per_on_a_tagged_uniform_buffer_is_refused_and_the_default_still_gives_its_telemetry():
    tagged = dict(replay_buffer_class=TaggedReplayBuffer, replay_buffer_kwargs={"tag_key": "regime"})
    with pytest.raises(ValueError, match=r"but the replay buffer is a TaggedReplayBuffer, which samples uniformly"):
        SAC("MlpPolicy", "Pendulum-v1", replay_scheme=PER(), **tagged)
    assert SAC("MlpPolicy", "Pendulum-v1", **tagged).replay_scheme is None


@pytest.mark.parametrize("scheme", [PER(uniform_actor_batch=True), LAP(uniform_actor_batch=True)], ids=repr)
def test_a_uniform_actor_batch_without_an_actor_is_refused(scheme):
    with pytest.raises(ValueError, match=r"samples a batch of its own for the actor, but DQN has no actor"):
        DQN("MlpPolicy", "CartPole-v1", replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=scheme)
    model = DQN("MlpPolicy", "CartPole-v1", replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=PER())
    assert model.replay_scheme == PER()  # PER itself trains DQN


def test_the_training_scheme_shows_what_trains_when_replay_scheme_is_left_out():
    prioritized = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer)
    assert prioritized.replay_scheme is None and prioritized.training_scheme == PER()
    assert SAC("MlpPolicy", "Pendulum-v1").training_scheme is None  # SB3's own train
    given = SAC("MlpPolicy", "Pendulum-v1", replay_buffer_class=PrioritizedReplayBuffer, replay_scheme=PER("max"))
    assert given.training_scheme == PER("max")


def test_an_sb3_contrib_algorithm_that_never_writes_priorities_is_named_in_a_short_run():
    """A 600-step try of sb3-contrib's QRDQN with the prioritized buffer warns at its second training call, not after
    100, and points to sb3_per.QRDQN."""
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
    with pytest.warns(UserWarning, match=r"never updated, .* `sb3_per\.QRDQN` .* sb3-contrib's QRDQN and CrossQ among"):
        model.learn(600)
    assert model.replay_buffer.n_priority_updates == 0


@pytest.mark.parametrize(("buffer_size", "n_envs"), [(1, 1), (3, 2)], ids=["1-slot", "3-slots-2-envs"])
def test_optimize_memory_usage_with_one_slot_per_env_is_refused_naming_the_slots(buffer_size, n_envs):
    box = spaces.Box(-1, 1, (3,))
    memory_saving = {"optimize_memory_usage": True, "handle_timeout_termination": False}
    with pytest.raises(ValueError, match=rf"got buffer_size={buffer_size} with n_envs={n_envs}: 1 slot per env"):
        PrioritizedReplayBuffer(buffer_size, box, box, n_envs=n_envs, **memory_saving)
    with pytest.raises(ValueError, match=rf"got buffer_size={buffer_size} with n_envs={n_envs}: 1 slot per env"):
        TaggedReplayBuffer(buffer_size, box, box, n_envs=n_envs, tag_key="t", **memory_saving)
    buffer = PrioritizedReplayBuffer(2 * n_envs, box, box, n_envs=n_envs, **memory_saving)
    observation = np.zeros((n_envs, 3), dtype=np.float32)
    for _ in range(3):  # full, and the slot being written has no next observation: the other one is sampled
        buffer.add(observation, observation, np.zeros((n_envs, 3)), np.zeros(n_envs), np.zeros(n_envs), [{}] * n_envs)
    assert buffer.full and buffer.sample(4).weights.shape == (4, 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"replay_buffer_class": "PrioritizedReplayBuffer"}, r"replay_buffer_class must be a class .* got 'Priorit"),
        (
            {
                "replay_buffer_class": lambda: PrioritizedReplayBuffer(
                    10, spaces.Box(-1, 1, (3,)), spaces.Box(-1, 1, (1,))
                )
            },
            r"replay_buffer_class must be a class .* got <sb3_per.buffers.PrioritizedReplayBuffer object",
        ),
        ({"replay_buffer_class": int}, r"replay_buffer_class must be a class of replay buffer.* got <class 'int'>"),
        (
            {"replay_buffer_kwargs": [("alpha", 0.5)]},
            r"replay_buffer_kwargs must be a dict .* got \[\('alpha', 0.5\)\]",
        ),
    ],
    ids=["a-name", "an-instance", "another-class", "a-list"],
)
def test_replay_buffer_arguments_of_the_wrong_type_are_named(kwargs, message):
    kwargs = {
        key: value() if callable(value) and value.__name__ == "<lambda>" else value for key, value in kwargs.items()
    }
    kwargs.setdefault("replay_buffer_class", PrioritizedReplayBuffer)
    with pytest.raises(ValueError, match=message):
        SAC("MlpPolicy", "Pendulum-v1", **kwargs)

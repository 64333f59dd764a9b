"""PrioritizedDictReplayBuffer: the same sampling and priority code as PrioritizedReplayBuffer, dict storage."""

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3.common.envs import SimpleMultiObsEnv
from stable_baselines3.common.type_aliases import DictReplayBufferSamples
from stable_baselines3.common.utils import set_random_seed

from sb3_per import DQN, SAC, PrioritizedDictReplayBuffer, PrioritizedDictReplayBufferSamples, PrioritizedReplayBuffer

BOX = spaces.Box(-np.inf, np.inf, (3,), np.float32)
DICT = spaces.Dict({"state": BOX, "flag": spaces.Box(0.0, 1.0, (1,), np.float32)})
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


def as_dict(obs: np.ndarray) -> dict[str, np.ndarray]:
    """The Dict observation that carries the same data as the Box observation ``obs`` (n_envs, 3)."""
    return {"state": obs, "flag": (obs[:, :1] > 0).astype(np.float32)}


def twin_buffers(n_envs: int, **kwargs) -> tuple[PrioritizedReplayBuffer, PrioritizedDictReplayBuffer]:
    """A Box buffer and a Dict buffer with the same random episodes added to both."""
    box = PrioritizedReplayBuffer(30 * n_envs, BOX, ACTION_SPACE, device="cpu", n_envs=n_envs, **kwargs)
    dct = PrioritizedDictReplayBuffer(30 * n_envs, DICT, ACTION_SPACE, device="cpu", n_envs=n_envs, **kwargs)
    rng = np.random.default_rng(0)
    for _ in range(45):  # wraps around the 30 slots
        obs, next_obs = rng.standard_normal((2, n_envs, 3)).astype(np.float32)
        action = rng.uniform(-1, 1, (n_envs, 1)).astype(np.float32)
        reward = rng.standard_normal(n_envs).astype(np.float32)
        done = rng.random(n_envs) < 0.2
        infos = [{"TimeLimit.truncated": bool(d and rng.random() < 0.4)} for d in done]
        box.add(obs, next_obs, action, reward, done, infos)
        dct.add(as_dict(obs), as_dict(next_obs), action, reward, done, infos)
    return box, dct


def test_samples_extend_sb3_dict_samples_field_for_field():
    n = len(DictReplayBufferSamples._fields)
    assert PrioritizedDictReplayBufferSamples._fields[:n] == DictReplayBufferSamples._fields
    assert PrioritizedDictReplayBufferSamples._fields[n:] == ("weights", "indices", "stamps")


@pytest.mark.parametrize("n_envs", [1, 3])
@pytest.mark.parametrize("kwargs", [{}, {"n_steps": 3, "gamma": 0.9}, {"prioritization": "rank"}])
def test_dict_buffer_samples_exactly_what_the_box_buffer_samples_on_the_same_data(n_envs, kwargs):
    box, dct = twin_buffers(n_envs, **kwargs)
    rng = np.random.default_rng(1)
    for _ in range(5):  # sample, then feed back the same TD errors to both
        set_random_seed(7)
        expected = box.sample(16)
        set_random_seed(7)
        got = dct.sample(16)
        assert isinstance(got, PrioritizedDictReplayBufferSamples)
        np.testing.assert_array_equal(got.indices, expected.indices)
        np.testing.assert_array_equal(got.stamps, expected.stamps)
        for field in ("actions", "dones", "rewards", "discounts", "weights"):
            a, b = getattr(got, field), getattr(expected, field)
            assert (a is None and b is None) or th.equal(a, b), field
        for field in ("observations", "next_observations"):
            assert th.equal(getattr(got, field)["state"], getattr(expected, field)), field
            assert th.equal(getattr(got, field)["flag"], (getattr(expected, field)[:, :1] > 0).float()), field
        td_errors = rng.exponential(size=16)
        box.update_priorities(expected.indices, td_errors)
        dct.update_priorities(got.indices, td_errors)
    np.testing.assert_array_equal(dct.tree[np.arange(dct.n_transitions)], box.tree[np.arange(box.n_transitions)])
    assert got.weights.min() < 1.0  # the priorities differed, so the comparison covered real weights


def test_dict_buffer_refuses_what_it_cannot_store():
    with pytest.raises(ValueError, match="needs a Dict observation space"):
        PrioritizedDictReplayBuffer(10, BOX, ACTION_SPACE)
    with pytest.raises(ValueError, match="optimize_memory_usage"):
        PrioritizedDictReplayBuffer(10, DICT, ACTION_SPACE, optimize_memory_usage=True)
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedDictReplayBuffer(10, DICT, ACTION_SPACE, alpha=-1.0)
    with pytest.raises(ValueError, match="n_steps"):
        PrioritizedDictReplayBuffer(10, DICT, ACTION_SPACE, n_steps=0)


def test_sac_trains_with_prioritized_dict_replay_and_updates_its_priorities(dict_pendulum):
    model = SAC(
        "MultiInputPolicy",
        dict_pendulum,
        replay_buffer_class=PrioritizedDictReplayBuffer,
        learning_starts=50,
        batch_size=32,
        policy_kwargs=dict(net_arch=[16, 16]),
        seed=0,
    ).learn(150)
    buffer = model.replay_buffer
    assert isinstance(buffer, PrioritizedDictReplayBuffer)
    assert buffer.n_priority_updates == 100
    priorities = buffer.tree[np.arange(buffer.n_transitions)]
    assert len(np.unique(priorities)) > 50  # written back from TD errors, not left at the entry priority
    assert "train/per_weight_mean" in model.logger.name_to_value


def test_dqn_trains_with_prioritized_dict_replay_on_sb3s_multi_observation_env():
    model = DQN(
        "MultiInputPolicy",
        SimpleMultiObsEnv(random_start=False),
        replay_buffer_class=PrioritizedDictReplayBuffer,
        learning_starts=50,
        batch_size=16,
        train_freq=1,
        policy_kwargs=dict(net_arch=[16]),
        seed=0,
    ).learn(120)
    assert model.replay_buffer.n_priority_updates == 70
    assert len(np.unique(model.replay_buffer.tree[np.arange(120)])) > 20

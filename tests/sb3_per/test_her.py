"""PrioritizedHerReplayBuffer: SB3's HerReplayBuffer batches, drawn by priority, with the prioritized buffers' weights
and write-back (SB3's own HER tests run against it in test_sb3_her.py)."""

from __future__ import annotations

import copy
import pickle
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from stable_baselines3 import HerReplayBuffer
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import BitFlippingEnv
from stable_baselines3.common.type_aliases import DictReplayBufferSamples
from stable_baselines3.common.vec_env import VecEnv

from sb3_per import (
    DQN,
    LA3P,
    LAP,
    PER,
    QRDQN,
    SAC,
    TD3,
    TQC,
    UPER,
    PrioritizedDictReplayBufferSamples,
    PrioritizedHerReplayBuffer,
    ReLo,
)

N_BITS = 6  # BitFlippingEnv episodes last at most N_BITS steps
SLOTS = 30  # per env: the random steps below wrap it


def bit_flipping(n_envs: int, continuous: bool = False) -> VecEnv:
    """``n_envs`` BitFlippingEnv of ``N_BITS`` bits."""
    return make_vec_env(lambda: BitFlippingEnv(n_bits=N_BITS, continuous=continuous), n_envs)


def her_buffer(venv: VecEnv, buffer_class: type = PrioritizedHerReplayBuffer, **kwargs: Any) -> Any:
    """A HER buffer of ``SLOTS`` slots per env for ``venv``."""
    return buffer_class(
        SLOTS * venv.num_envs, venv.observation_space, venv.action_space, env=venv, n_envs=venv.num_envs, **kwargs
    )


def add_random_steps(
    buffers: list, venv: VecEnv, n_steps: int, seed: int, each_step: Callable[[], Any] = lambda: None
) -> None:
    """
    Step ``venv`` (reset first) with random actions, adding every step to each buffer as SB3's algorithms store it
    (the terminal observation as the next observation of a finished episode). ``each_step`` is called after each step;
    the steps stop early when it returns True.
    """
    venv.seed(seed)
    rng = np.random.default_rng(seed)
    obs = venv.reset()
    for _ in range(n_steps):
        actions = rng.integers(0, N_BITS, venv.num_envs)
        new_obs, rewards, dones, infos = venv.step(actions)
        next_obs = copy.deepcopy(new_obs)
        for env_index in np.flatnonzero(dones):
            for key, value in infos[env_index]["terminal_observation"].items():
                next_obs[key][env_index] = value
        for buffer in buffers:
            buffer.add(obs, next_obs, actions.reshape(-1, 1), rewards, dones, infos)
        obs = new_obs
        if each_step():
            return


def give_random_priorities(buffer: PrioritizedHerReplayBuffer, seed: int, rounds: int = 5) -> None:
    """Sample and write back random TD errors, so that the priorities differ."""
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        batch = buffer.sample(32)
        buffer.update_priorities(batch.indices, rng.exponential(size=32), batch.stamps)


def assert_samplable_exactly_where_sb3_samples(buffer: PrioritizedHerReplayBuffer) -> None:
    """A transition has a priority above 0 exactly where SB3's HerReplayBuffer samples it (a finished episode's)."""
    leaves = np.arange(buffer.buffer_size * buffer.n_envs)
    np.testing.assert_array_equal(buffer.tree[leaves] > 0, buffer.ep_length.reshape(-1) > 0)


# --- sampling: SB3's batch, by priority ----------------------------------------------------------------------------


@pytest.mark.parametrize("n_envs", [1, 2])
@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_a_batch_is_sb3s_batch_of_the_same_draws_and_goals(monkeypatch, n_envs, strategy):
    venv = bit_flipping(n_envs)
    kwargs = {"goal_selection_strategy": strategy, "n_sampled_goal": 3, "copy_info_dict": True}
    ours, sb3 = her_buffer(venv, **kwargs), her_buffer(venv, HerReplayBuffer, **kwargs)
    add_random_steps([ours, sb3], venv, 3 * SLOTS, seed=n_envs)
    give_random_priorities(ours, seed=0)
    np.testing.assert_array_equal(ours.ep_length, sb3.ep_length)
    # The random state where ours picks the relabelled goals, to replay SB3's picks from it
    goal_states = []
    pick_goals = ours._sample_goals

    def recorded_pick(*args):
        goal_states.append(np.random.get_state())  # noqa: NPY002 (SB3's generator)
        return pick_goals(*args)

    monkeypatch.setattr(ours, "_sample_goals", recorded_pick)
    batch = ours.sample(64)

    # SB3 relabels its first int(her_ratio * 64) draws and puts the real ones first: give it ours in that order.
    n_real = 64 - int(ours.her_ratio * 64)
    draws = np.concatenate((batch.indices[n_real:], batch.indices[:n_real]))
    monkeypatch.setattr(np.random, "choice", lambda *args, **kwargs: draws)
    np.random.set_state(goal_states[0])  # noqa: NPY002
    expected = sb3.sample(64)
    for field in ("observations", "next_observations"):
        for key, value in getattr(expected, field).items():
            assert th.equal(getattr(batch, field)[key], value), (field, key)
    for field in ("actions", "dones", "rewards"):
        assert th.equal(getattr(batch, field), getattr(expected, field)), field
    # The comparison saw relabelled goals other than the transitions' own
    slots, envs = np.divmod(batch.indices[n_real:], n_envs)
    assert (batch.observations["desired_goal"][n_real:].numpy() != ours.observations["desired_goal"][slots, envs]).any()


def test_a_batch_is_sb3s_sample_type_with_weights_indices_and_stamps():
    venv = bit_flipping(2)
    buffer = her_buffer(venv)
    add_random_steps([buffer], venv, 40, seed=0)
    batch = buffer.sample(50)
    assert isinstance(batch, PrioritizedDictReplayBufferSamples)
    assert batch._fields[: len(DictReplayBufferSamples._fields)] == DictReplayBufferSamples._fields
    assert batch.discounts is None
    assert batch.weights.shape == batch.rewards.shape == batch.dones.shape == (50, 1)
    assert batch.weights.dtype == th.float32
    assert batch.indices.shape == batch.stamps.shape == (50,)
    # Row i is the stored transition at indices[i]: its action, and (real rows, the first ones) its own goal
    slots, envs = np.divmod(batch.indices, 2)
    np.testing.assert_array_equal(batch.actions.numpy(), buffer.actions[slots, envs])
    n_real = 50 - int(buffer.her_ratio * 50)
    np.testing.assert_array_equal(
        batch.observations["desired_goal"][:n_real].numpy(), buffer.observations["desired_goal"][slots, envs][:n_real]
    )
    np.testing.assert_array_equal(batch.stamps, buffer._write_count[batch.indices])


@pytest.mark.filterwarnings("ignore:PrioritizedHerReplayBuffer has been sampled")  # no write-back here, on purpose
def test_which_transitions_are_relabelled_does_not_depend_on_where_they_are_stored():
    # Stratified sampling draws in storage order; the batch is shuffled before SB3's split into real and relabelled.
    venv = bit_flipping(1)
    buffer = her_buffer(venv, n_sampled_goal=1)
    add_random_steps([buffer], venv, SLOTS, seed=0)
    real_positions = []
    for _ in range(200):
        batch = buffer.sample(16)
        real_positions.append(np.mean(batch.indices[:8]) - np.mean(batch.indices[8:]))
    # Under the split of the sorted draws, the real half would always hold the later slots (a gap of about SLOTS / 2).
    assert abs(np.mean(real_positions)) < 1.5


@pytest.mark.filterwarnings("ignore:PrioritizedHerReplayBuffer has been sampled")
@pytest.mark.parametrize(("n_sampled_goal", "batch_size"), [(0, 8), (4, 1)])
def test_a_batch_with_nothing_to_relabel_holds_only_real_transitions(n_sampled_goal, batch_size):
    # BitFlippingEnv's compute_reward cannot take an empty batch, which SB3's HerReplayBuffer hands it here
    venv = bit_flipping(1)
    buffer = her_buffer(venv, n_sampled_goal=n_sampled_goal)
    add_random_steps([buffer], venv, SLOTS, seed=2)
    batch = buffer.sample(batch_size)
    assert batch.rewards.shape == (batch_size, 1) and len(batch.indices) == batch_size
    own_goals = buffer.next_observations["desired_goal"][batch.indices, 0]  # one env: a leaf is its slot
    assert np.array_equal(batch.next_observations["desired_goal"].numpy(), own_goals)  # no goal relabelled


@pytest.mark.parametrize("weight_normalization", ["buffer", "batch"])
def test_importance_weights_are_the_mixins_over_the_samplable_transitions(weight_normalization):
    venv = bit_flipping(2)
    buffer = her_buffer(venv, weight_normalization=weight_normalization, beta_start=0.7)
    add_random_steps([buffer], venv, 3 * SLOTS, seed=3)
    give_random_priorities(buffer, seed=1)
    beta = buffer.beta
    batch = buffer.sample(64)
    probabilities = buffer.tree[batch.indices]
    samplable = buffer.tree[np.flatnonzero(buffer.ep_length.reshape(-1) > 0)]
    smallest = samplable.min() if weight_normalization == "buffer" else probabilities.min()
    assert buffer.tree.min == samplable.min()  # the transitions at priority 0 are not counted
    np.testing.assert_allclose(batch.weights.numpy().reshape(-1), (probabilities / smallest) ** -beta, rtol=1e-6)
    assert batch.weights.min() < 1.0


@pytest.mark.parametrize("n_envs", [1, 2])
def test_only_the_transitions_sb3_samples_can_be_drawn(n_envs):
    venv = bit_flipping(n_envs)
    buffer = her_buffer(venv)
    rng = np.random.default_rng(0)

    def check_then_train():
        assert_samplable_exactly_where_sb3_samples(buffer)
        if buffer.tree.total > 0:
            batch = buffer.sample(16)
            assert (buffer.ep_length.reshape(-1)[batch.indices] > 0).all()
            buffer.update_priorities(batch.indices, rng.exponential(size=16), batch.stamps)

    add_random_steps([buffer], venv, 5 * SLOTS, seed=n_envs, each_step=check_then_train)
    assert buffer.full and buffer.n_priority_updates > 100


def test_an_episode_enters_at_the_largest_priority_when_it_ends():
    venv = bit_flipping(1)
    buffer = her_buffer(venv)
    rng = np.random.default_rng(0)
    ended = []

    def check_then_train():
        if buffer._current_ep_start[0] != buffer.pos:
            return  # mid-episode
        last = (buffer.pos - 1) % SLOTS
        start = buffer.ep_start[last, 0]
        episode = np.arange(start, start + buffer.ep_length[last, 0]) % SLOTS
        np.testing.assert_array_equal(buffer.tree[episode], buffer.max_priority)
        ended.append(len(episode))
        batch = buffer.sample(8)
        buffer.update_priorities(batch.indices, rng.exponential(2.0, size=8), batch.stamps)

    add_random_steps([buffer], venv, 3 * SLOTS, seed=0, each_step=check_then_train)
    assert len(ended) > 10 and max(ended) > 1 and buffer.max_priority > 1.0


def test_before_an_episode_ends_sampling_raises_sb3s_error_and_an_empty_buffer_a_value_error():
    venv = bit_flipping(1)
    buffer = her_buffer(venv)
    with pytest.raises(ValueError, match="empty"):
        buffer.sample(8)
    obs = venv.reset()
    buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    with pytest.raises(RuntimeError, match="before the end of the first episode"):
        buffer.sample(8)


# --- priority write-back -------------------------------------------------------------------------------------------


def test_an_update_for_a_transition_whose_episode_is_overwritten_is_skipped():
    venv = bit_flipping(1)
    buffer = her_buffer(venv)
    # until the next add overwrites the first slot of an episode of 2 steps or more
    add_random_steps(
        [buffer], venv, 10 * SLOTS, seed=0, each_step=lambda: buffer.full and buffer.ep_length[buffer.pos, 0] > 1
    )
    batch = buffer.sample(256)
    rest_of_episode = buffer._overwritten_episode_leaves()[1:]
    add_random_steps([buffer], venv, 1, seed=99)
    np.testing.assert_array_equal(buffer.tree[rest_of_episode], 0.0)
    buffer.update_priorities(batch.indices, np.full(256, 3.0), batch.stamps)
    buffer.update_priorities(rest_of_episode, np.full(len(rest_of_episode), 3.0))  # without stamps too
    np.testing.assert_array_equal(buffer.tree[rest_of_episode], 0.0)
    assert_samplable_exactly_where_sb3_samples(buffer)


def test_dqn_writes_back_the_td_errors_of_the_batch_rows(sampled_batches, record_calls, priorities):
    model = DQN(
        "MultiInputPolicy",
        bit_flipping(2),
        replay_buffer_class=PrioritizedHerReplayBuffer,
        learning_starts=40,
        buffer_size=400,
        policy_kwargs={"net_arch": [32]},
        seed=0,
    )
    model.learn(200)
    buffer = model.replay_buffer
    batches, write_backs = sampled_batches(buffer), record_calls(buffer, "update_priorities")
    q_net, q_net_target = copy.deepcopy(model.q_net), copy.deepcopy(model.q_net_target)
    before = priorities(buffer)
    model.train(gradient_steps=1, batch_size=64)
    (batch,), (((indices, td_errors, _), _),) = batches, write_backs
    with th.no_grad():
        next_q = q_net_target(batch.next_observations).amax(dim=1, keepdim=True)
        targets = batch.rewards + (1 - batch.dones) * model.gamma * next_q
        expected = (targets - q_net(batch.observations).gather(1, batch.actions.long())).abs()
    np.testing.assert_allclose(td_errors.numpy().reshape(-1), expected.numpy().reshape(-1), rtol=1e-5, atol=1e-6)
    assert_written_back(buffer, before, indices, td_errors.numpy().reshape(-1), priorities(buffer))


def test_sac_writes_back_the_td_errors_of_the_batch_rows(one_actor_critic_step, record_calls, priorities):
    model = SAC(
        "MultiInputPolicy",
        bit_flipping(2, continuous=True),
        replay_buffer_class=PrioritizedHerReplayBuffer,
        learning_starts=40,
        buffer_size=400,
        policy_kwargs={"net_arch": [32]},
        seed=0,
    )
    model.learn(120)
    buffer = model.replay_buffer
    write_backs = record_calls(buffer, "update_priorities")
    before = priorities(buffer)
    step = one_actor_critic_step(model, batch_size=64)
    ((indices, td_errors, _), _) = write_backs[0]
    batch, networks = step.batch, step.networks
    with th.no_grad():
        next_q = th.cat(networks.critic_target(batch.next_observations, step.next_actions), dim=1).amin(1, True)
        next_q = next_q - step.ent_coef * step.next_log_prob.reshape(-1, 1)
        targets = batch.rewards + (1 - batch.dones) * model.gamma * next_q
        expected = (th.cat(networks.critic(batch.observations, batch.actions), dim=1) - targets).abs().mean(1)
    np.testing.assert_allclose(td_errors.numpy().reshape(-1), expected.numpy(), rtol=1e-5, atol=1e-6)
    assert_written_back(buffer, before, indices, td_errors.numpy().reshape(-1), priorities(buffer))


def assert_written_back(
    buffer: PrioritizedHerReplayBuffer,
    before: np.ndarray,
    indices: np.ndarray,
    td_errors: np.ndarray,
    after: np.ndarray,
) -> None:
    """The sampled transitions hold ``(|td| + epsilon) ** alpha`` (a repeated one its last), the others what they held
    before."""
    expected = dict(zip(indices.tolist(), (np.abs(td_errors) + buffer.epsilon) ** buffer.alpha, strict=True))
    sampled = np.array(sorted(expected))
    np.testing.assert_allclose(after[sampled], [expected[i] for i in sampled], rtol=1e-5)
    unsampled = np.setdiff1d(np.arange(len(after)), sampled)
    np.testing.assert_array_equal(after[unsampled], before[unsampled])


@pytest.mark.parametrize(
    ("algorithm", "scheme", "buffer_kwargs"),
    [
        (TQC, PER(), {}),
        (TQC, UPER(), {}),
        (SAC, LAP(), {}),
        (SAC, LA3P(), {"inverse_sampling": True}),
        (TD3, LA3P(), {"inverse_sampling": True}),
        (DQN, ReLo(), {}),
        (QRDQN, PER(), {}),
    ],
    ids=["TQC-PER", "TQC-UPER", "SAC-LAP", "SAC-LA3P", "TD3-LA3P", "DQN-ReLo", "QRDQN-PER"],
)
def test_the_algorithms_and_schemes_that_apply_train_and_write_priorities_back(
    algorithm, scheme, buffer_kwargs, record_calls
):
    model = algorithm(
        "MultiInputPolicy",
        bit_flipping(2, continuous=algorithm not in (DQN, QRDQN)),
        replay_buffer_class=PrioritizedHerReplayBuffer,
        replay_buffer_kwargs=buffer_kwargs,
        replay_scheme=scheme,
        learning_starts=40,
        buffer_size=400,
        batch_size=32,
        policy_kwargs={"net_arch": [16]},
        seed=0,
    )
    write_backs = record_calls(model.replay_buffer, "update_priorities")
    model.learn(120)  # ends with a training call: nothing is added after its last write-back
    buffer = model.replay_buffer
    assert len(write_backs) == buffer.n_priority_updates >= model._n_updates > 0
    indices, written = write_backs[-1][0][:2]
    last = dict(
        zip(indices.tolist(), (np.abs(written.numpy().reshape(-1)) + buffer.epsilon) ** buffer.alpha, strict=True)
    )
    np.testing.assert_allclose(buffer.tree[np.array(list(last))], list(last.values()), rtol=1e-5)
    assert_samplable_exactly_where_sb3_samples(buffer)


# --- save and load -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("truncate_last_traj", [False, True])
def test_save_and_load_keep_the_priorities_and_the_env_comes_back_as_in_sb3(tmp_path, priorities, truncate_last_traj):
    env = bit_flipping(2, continuous=True)
    settings = {"replay_buffer_class": PrioritizedHerReplayBuffer, "learning_starts": 40, "buffer_size": 400, "seed": 0}
    model = SAC("MultiInputPolicy", env, policy_kwargs={"net_arch": [16]}, **settings)
    model.learn(123)  # stops mid-episode
    buffer = model.replay_buffer
    unfinished = buffer._current_ep_start != buffer.pos
    assert unfinished.any()
    model.save_replay_buffer(tmp_path / "buffer.pkl")

    loaded_model = SAC("MultiInputPolicy", env, policy_kwargs={"net_arch": [16]}, **settings)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded_model.load_replay_buffer(tmp_path / "buffer.pkl", truncate_last_traj=truncate_last_traj)
    assert [str(w.message).startswith("The last trajectory") for w in caught] == [True] * truncate_last_traj
    loaded = loaded_model.replay_buffer
    assert loaded.env is loaded_model.env
    assert loaded.max_priority == buffer.max_priority and loaded.n_priority_updates == buffer.n_priority_updates
    kept, now = priorities(buffer), priorities(loaded)
    if truncate_last_traj:  # the unfinished episodes are cut, and enter sampling at the largest priority
        cut = np.flatnonzero(now != kept)
        assert set(cut % 2) == set(np.flatnonzero(unfinished)) and (kept[cut] == 0).all()
        np.testing.assert_array_equal(now[cut], buffer.max_priority)
    else:
        np.testing.assert_array_equal(now, kept)
    assert_samplable_exactly_where_sb3_samples(loaded)
    loaded_model.learn(60, reset_num_timesteps=False)
    assert loaded.n_priority_updates > buffer.n_priority_updates


def test_a_pickled_buffer_drops_the_env_until_set_env_as_sb3s():
    venv = bit_flipping(1)
    buffer = her_buffer(venv, tag_key="is_success")
    add_random_steps([buffer], venv, 40, seed=0)
    give_random_priorities(buffer, seed=0)
    copied = pickle.loads(pickle.dumps(buffer))
    assert copied.env is None
    np.testing.assert_array_equal(copied.tree[np.arange(SLOTS)], buffer.tree[np.arange(SLOTS)])
    assert copied.tag_priority_shares() == buffer.tag_priority_shares()
    copied.set_env(venv)
    assert copied.sample(8).weights.shape == (8, 1)
    with pytest.raises(ValueError, match="already initialized"):
        copied.set_env(venv)


# --- refused input -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_sampled_goal": -1}, "n_sampled_goal"),
        ({"n_sampled_goal": 1.5}, "n_sampled_goal"),
        ({"n_sampled_goal": True}, "n_sampled_goal"),
        ({"goal_selection_strategy": "best"}, "goal_selection_strategy"),
        ({"goal_selection_strategy": ["future"]}, "goal_selection_strategy"),
        ({"copy_info_dict": "yes"}, "copy_info_dict"),
        ({"env": "BitFlipping"}, "env must be a VecEnv"),
        ({"optimize_memory_usage": True}, "optimize_memory_usage"),
        ({"n_steps": 3}, "n_steps=3"),
        ({"prioritization": "rank"}, "prioritization='proportional'"),
        ({"alpha": -1.0}, "alpha"),
        ({"observation_space": spaces.Box(0.0, 1.0, (4,))}, "Dict space"),
        ({"observation_space": spaces.Dict({"observation": spaces.Box(0.0, 1.0, (4,))})}, "Dict space"),
    ],
)
def test_bad_parameters_are_refused_naming_them(kwargs, match):
    venv = bit_flipping(1)
    arguments = {"observation_space": venv.observation_space, "env": venv, **kwargs}
    with pytest.raises(ValueError, match=match):
        PrioritizedHerReplayBuffer(100, action_space=venv.action_space, **arguments)


def test_a_bad_add_changes_nothing():
    venv = bit_flipping(2)
    buffer = her_buffer(venv)
    add_random_steps([buffer], venv, SLOTS + 3, seed=0)
    state = (buffer.pos, buffer.ep_length.copy(), buffer.tree[np.arange(2 * SLOTS)].copy())
    obs = venv.reset()
    with pytest.raises(ValueError, match="one info dict per env"):
        buffer.add(obs, obs, np.zeros((2, 1)), np.zeros(2), np.ones(2), [{}])
    assert buffer.pos == state[0]
    np.testing.assert_array_equal(buffer.ep_length, state[1])
    np.testing.assert_array_equal(buffer.tree[np.arange(2 * SLOTS)], state[2])

"""
Hindsight experience replay (Andrychowicz et al. 2017) with prioritized sampling: SB3's ``HerReplayBuffer`` (its
episode bookkeeping, goal relabelling and rewards recomputed by the env) behind ``PrioritizedBufferMixin`` (sampling
by priority, importance-sampling weights, priority write-back).
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np
import torch as th
from gymnasium import spaces
from stable_baselines3.common.type_aliases import DictReplayBufferSamples
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
from stable_baselines3.her.goal_selection_strategy import KEY_TO_GOAL_STRATEGY, GoalSelectionStrategy
from stable_baselines3.her.her_replay_buffer import HerReplayBuffer

from sb3_per.buffers import PrioritizedBufferMixin
from sb3_per.checks import check_storage_arguments, checked_bool
from sb3_per.priority_sampler import DEFAULT_WEIGHT_NORMALIZATION, buffer_state_with_sampler
from sb3_per.samples import PrioritizedDictReplayBufferSamples

# SB3's HerReplayBuffer raises this, word for word, when no episode has ended yet
NO_FINISHED_EPISODE = (
    "Unable to sample before the end of the first episode. We recommend choosing a value "
    "for learning_starts that is greater than the maximum number of timesteps in the environment."
)
# The observation keys that goal relabelling reads and writes
GOAL_KEYS = ("achieved_goal", "desired_goal")


class PrioritizedHerReplayBuffer(PrioritizedBufferMixin, HerReplayBuffer):
    """
    SB3's ``HerReplayBuffer`` whose transitions are drawn in proportion to their priority, with importance-sampling
    weights, as ``PrioritizedReplayBuffer`` draws them (Schaul et al. 2016). SB3's episode bookkeeping, goal
    selection strategies (``"future"``, ``"final"``, ``"episode"``), ``n_sampled_goal``, rewards recomputed with the
    env's ``compute_reward``, ``copy_info_dict``, ``n_envs > 1``, timeouts, ``truncate_last_trajectory`` and the env
    dropped on pickling (``set_env``) are SB3's own code; samples are ``PrioritizedDictReplayBufferSamples``, SB3's
    ``DictReplayBufferSamples`` fields plus ``weights``, ``indices`` and ``stamps``.

    What a priority belongs to: the stored transition, whatever goal it is replayed with. A sampled transition is
    replayed with its own goal or a relabelled one as SB3 decides (``1 / (n_sampled_goal + 1)`` of the batch with
    their own, the rest with goals the strategy picks), and its priority is written back from the TD error of the goal
    it was replayed with: a one-goal estimate of its TD error over the goals HER replays it with. Why:

    - sampling by priority changes which transitions are replayed, never the goals they are replayed with, so the
      importance weights correct exactly what prioritization changed, and the mix of real and relabelled goals is the
      one ``n_sampled_goal`` asks for;
    - one priority per stored transition keeps the prioritized buffers' machinery (write stamps, tags, fading, inverse
      sampling) as it is; cpprb's prioritized HER instead stores each relabelled copy apart, with its own priority, at
      ``n_sampled_goal + 1`` times the memory and with goals fixed when the episode ends, and Zhao and Tresp's
      prioritizations (trajectory energy, 2018; achieved-goal density, 2019) score whole episodes, not goals;
    - measured on SB3's BitFlippingEnv with DQN (``scripts/her_priorities.py``), the kind of goal (own or relabelled)
      accounts for about 2.5% of the variance of ``|TD error|`` over transitions and goals, the transition for about
      89%. A priority per transition and kind of goal learned as well or better there, but 10 seeds do not separate
      the two choices (``docs/guide/her.md``).

    Where it differs from SB3's ``HerReplayBuffer``:

    - A transition is drawn by priority, not uniformly, among those SB3 samples (of finished episodes: the unfinished
      ones, and the rest of an episode that ``add`` has started to overwrite, have priority 0). Its episode's
      transitions enter at the largest priority seen so far when the episode ends (or is cut by
      ``truncate_last_trajectory``), as the other prioritized buffers' transitions do when added.
    - The drawn transitions are put in random order (NumPy's global generator) before SB3's split into real and
      relabelled ones, as stratified sampling draws them in storage order; the batch is then SB3's: the real
      transitions first, the relabelled ones after, with ``indices``, ``weights`` and ``stamps`` in the same order.
    - Bad parameters raise ``ValueError`` naming them (SB3: ``AssertionError`` or ``KeyError``, or nothing);
      ``optimize_memory_usage=True`` (nor does SB3 support it), ``n_steps > 1`` (a relabelled goal changes every reward
      of the return) and ``prioritization="rank"`` (the rank heap would draw the transitions at priority 0) are refused.
    - Sampling an empty buffer raises ``ValueError`` as the other prioritized buffers do; a buffer with no finished
      episode raises SB3's ``RuntimeError``.
    - ``mean_priority`` counts the transitions at priority 0 (unfinished or overwritten episodes) among those stored.

    :param buffer_size: Max number of elements in the buffer
    :param observation_space: Observation space: a ``spaces.Dict`` with ``"achieved_goal"`` and ``"desired_goal"``
    :param action_space: Action space
    :param env: The training environment (a VecEnv, whose first env's ``compute_reward`` gives the relabelled
        transitions' rewards); ``None`` until ``set_env``
    :param device: PyTorch device
    :param n_envs: Number of parallel environments
    :param optimize_memory_usage: Must be False (as in SB3)
    :param handle_timeout_termination: Handle timeout termination (due to timelimit)
        separately and treat the task as infinite horizon task (SB3 issue #284)
    :param n_sampled_goal: Number of virtual transitions to create per real transition, by sampling new goals
        (an integer >= 0; 0 replays every transition with its own goal)
    :param goal_selection_strategy: Strategy for sampling goals for replay: ``"future"``, ``"final"`` or
        ``"episode"`` (any case), or a ``GoalSelectionStrategy``
    :param copy_info_dict: Whether to copy the info dictionary and pass it to ``compute_reward()``
    :param alpha: see ``PrioritizedReplayBuffer``, as are ``beta_start``, ``beta_end``, ``beta_anneal_steps``,
        ``epsilon``, ``weight_normalization``, ``gamma``, ``tag_key``, ``inverse_sampling`` and ``priority_half_life``
    :param n_steps: Must be 1
    :param prioritization: Must be ``"proportional"``
    """

    samples_class = PrioritizedDictReplayBufferSamples

    def __init__(
        self,
        buffer_size: int,
        observation_space: spaces.Dict,
        action_space: spaces.Space,
        env: VecEnv | None,
        device: th.device | str = "auto",
        n_envs: int = 1,
        optimize_memory_usage: bool = False,
        handle_timeout_termination: bool = True,
        n_sampled_goal: int = 4,
        goal_selection_strategy: GoalSelectionStrategy | str = "future",
        copy_info_dict: bool = False,
        alpha: float = 0.6,
        beta_start: float = 0.4,
        beta_end: float = 1.0,
        beta_anneal_steps: int | str = 200_000,
        epsilon: float = 1e-6,
        weight_normalization: str = DEFAULT_WEIGHT_NORMALIZATION,
        n_steps: int = 1,
        gamma: float = 0.99,
        prioritization: str = "proportional",
        tag_key: str | None = None,
        inverse_sampling: bool = False,
        priority_half_life: float | None = None,
    ):
        check_storage_arguments(buffer_size, n_envs, optimize_memory_usage, handle_timeout_termination)
        check_her_parameters(
            observation_space, env, optimize_memory_usage, n_sampled_goal, goal_selection_strategy, copy_info_dict
        )
        if n_steps != 1:
            raise ValueError(
                f"PrioritizedHerReplayBuffer needs n_steps=1, got n_steps={n_steps!r}: a relabelled goal changes the "
                "reward of every step of an n-step return"
            )
        if prioritization != "proportional":
            raise ValueError(
                f"PrioritizedHerReplayBuffer needs prioritization='proportional', got {prioritization!r}: the "
                "transitions of unfinished episodes are kept at priority 0, which the rank heap would still draw"
            )
        super().__init__(
            buffer_size,
            observation_space,
            action_space,
            env,  # type: ignore[arg-type]  # SB3 types it VecEnv, and sets None itself when unpickled
            device=device,
            n_envs=n_envs,
            handle_timeout_termination=handle_timeout_termination,
            n_sampled_goal=n_sampled_goal,
            goal_selection_strategy=goal_selection_strategy,
            copy_info_dict=copy_info_dict,
        )
        self._init_prioritization(
            alpha,
            beta_start,
            beta_end,
            beta_anneal_steps,
            epsilon,
            weight_normalization,
            n_steps,
            gamma,
            prioritization,
            tag_key,
            inverse_sampling,
            priority_half_life,
        )

    def __setstate__(self, state: dict[str, Any]) -> None:
        """SB3's (without the env, which ``set_env`` gives back), then the prioritized buffer's (per-tag sums)."""
        state = buffer_state_with_sampler(state)  # first, so that no field of an older layout is set
        HerReplayBuffer.__setstate__(self, state)
        PrioritizedBufferMixin.__setstate__(self, state)

    def add(  # type: ignore[override]
        self,
        obs: dict[str, np.ndarray],
        next_obs: dict[str, np.ndarray],
        action: np.ndarray,
        reward: np.ndarray,
        done: np.ndarray,
        infos: list[dict[str, Any]],
    ) -> None:
        """
        SB3's ``add``; the new transitions enter at priority 0, and those of an episode that ends here get the largest
        priority seen so far. What is left of the episodes ``add`` starts to overwrite (which SB3 stops sampling)
        goes to priority 0.
        """
        overwritten = self._overwritten_episode_leaves()
        super().add(obs, next_obs, action, reward, done, infos)
        dropped = overwritten[self.ep_length.reshape(-1)[overwritten] == 0]
        self._set_priorities(dropped, np.zeros(len(dropped)))
        for env_index in np.flatnonzero(done):
            self._admit_last_episode(int(env_index))

    def _entry_priorities(self, reward: np.ndarray) -> np.ndarray:
        """Zero: a transition can be sampled once its episode has ended (``_admit_last_episode``)."""
        return np.zeros(self.n_envs)

    def truncate_last_trajectory(self) -> None:
        """SB3's: the unfinished episodes are ended at the last step stored, and enter sampling as ended ones do."""
        unfinished = np.flatnonzero(self._current_ep_start != self.pos)
        super().truncate_last_trajectory()
        for env_index in unfinished:
            self._admit_last_episode(int(env_index))

    def _env_leaves(self, env_index: int, first: int, end: int) -> np.ndarray:
        """The leaves of env ``env_index``'s slots ``first``, ..., ``end - 1`` (modulo ``buffer_size``)."""
        return (np.arange(first, end) % self.buffer_size) * self.n_envs + env_index

    def _overwritten_episode_leaves(self) -> np.ndarray:
        """The leaves of the stored episodes that the next ``add`` overwrites the slot ``pos`` of, from ``pos`` to
        each one's end: SB3's ``add`` stops sampling them."""
        pos = self.pos
        ends = self.ep_start[pos] + self.ep_length[pos]
        episodes = [
            self._env_leaves(int(env_index), pos, ends[env_index]) for env_index in np.flatnonzero(self.ep_length[pos])
        ]
        return np.concatenate(episodes) if episodes else np.empty(0, dtype=np.int64)

    def _admit_last_episode(self, env_index: int) -> None:
        """Give the episode that ends at the last slot written, in env ``env_index``, the largest priority seen."""
        last = (self.pos - 1) % self.buffer_size
        start = self.ep_start[last, env_index]
        leaves = self._env_leaves(env_index, start, start + self.ep_length[last, env_index])
        self._set_priorities(leaves, self.sampler.stored(np.full(len(leaves), self.max_priority)))

    def _uniform_leaves(self, batch_size: int) -> np.ndarray:
        """SB3's draw: ``batch_size`` of the transitions of finished episodes, uniformly, with replacement."""
        return np.random.choice(np.flatnonzero(self.ep_length > 0), size=batch_size, replace=True)  # noqa: NPY002

    def _check_batch_size(self, batch_size: int) -> None:
        """The mixin's checks (a positive integer, a buffer not empty), then SB3's: an episode has ended."""
        super()._check_batch_size(batch_size)
        if self.tree.total == 0.0:
            raise RuntimeError(NO_FINISHED_EPISODE)

    def _get_prioritized_samples(
        self, leaves: np.ndarray, weights: np.ndarray, stamps: np.ndarray, env: VecNormalize | None
    ) -> PrioritizedDictReplayBufferSamples:
        """
        SB3's batch of the drawn transitions, in random order: the first ``int(her_ratio * batch_size)`` of them
        relabelled (``_get_virtual_samples``), the others with their own goal (``_get_real_samples``); the real ones
        come first in the batch, as in SB3.
        """
        order = np.random.permutation(len(leaves))  # noqa: NPY002 (the global generator, as SB3's buffers)
        n_virtual = int(self.her_ratio * len(leaves))
        virtual, real = order[:n_virtual], order[n_virtual:]
        parts = [
            gather(*np.divmod(leaves[part], self.n_envs), env)
            for gather, part in ((self._get_real_samples, real), (self._get_virtual_samples, virtual))
            if len(part)  # an env's compute_reward may not take an empty batch (n_sampled_goal=0, a batch of 1)
        ]
        batch_order = np.concatenate((real, virtual))
        return self.samples_class(
            **(parts[0] if len(parts) == 1 else concatenated_samples(*parts))._asdict(),
            weights=self._to_torch(weights[batch_order].astype(np.float32).reshape(-1, 1)),
            indices=leaves[batch_order],
            stamps=stamps[batch_order],
        )

    def _checked_priority_updates(
        self, indices: np.ndarray | th.Tensor, td_errors: np.ndarray | th.Tensor, stamps: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The mixin's checks, and the updates of transitions that SB3 no longer samples (their episode is being
        overwritten) skipped: they stay at priority 0."""
        checked = super()._checked_priority_updates(indices, td_errors, stamps)
        if checked is None:
            return None
        leaves, priorities = checked
        sampled = self.ep_length.reshape(-1)[leaves] > 0
        return (leaves, priorities) if sampled.all() else (leaves[sampled], priorities[sampled])


def concatenated_samples(first: DictReplayBufferSamples, second: DictReplayBufferSamples) -> DictReplayBufferSamples:
    """One batch of two (Dict observations, no n-step discounts): ``first``'s transitions, then ``second``'s."""
    return DictReplayBufferSamples(
        observations={key: th.cat((value, second.observations[key])) for key, value in first.observations.items()},
        actions=th.cat((first.actions, second.actions)),
        next_observations={
            key: th.cat((value, second.next_observations[key])) for key, value in first.next_observations.items()
        },
        dones=th.cat((first.dones, second.dones)),
        rewards=th.cat((first.rewards, second.rewards)),
    )


def check_her_parameters(
    observation_space: Any,
    env: Any,
    optimize_memory_usage: Any,
    n_sampled_goal: Any,
    goal_selection_strategy: Any,
    copy_info_dict: Any,
) -> None:
    """Raise ``ValueError``, naming the parameter and its value, if a parameter of SB3's ``HerReplayBuffer`` is one
    it cannot work with (see ``PrioritizedHerReplayBuffer``)."""
    if not (isinstance(observation_space, spaces.Dict) and all(key in observation_space.spaces for key in GOAL_KEYS)):
        raise ValueError(
            f"observation_space must be a Dict space with keys {GOAL_KEYS} (a goal-conditioned env's), got "
            f"{observation_space!r}"
        )
    if env is not None and not isinstance(env, VecEnv):
        raise ValueError(f"env must be a VecEnv (whose compute_reward relabels the rewards) or None, got {env!r}")
    if checked_bool("optimize_memory_usage", optimize_memory_usage):
        raise ValueError("optimize_memory_usage=True is not supported with Dict observations (nor by SB3)")
    if isinstance(n_sampled_goal, bool) or not isinstance(n_sampled_goal, Integral) or n_sampled_goal < 0:
        raise ValueError(f"n_sampled_goal must be an integer >= 0, got {n_sampled_goal!r}")
    strategy = goal_selection_strategy.lower() if isinstance(goal_selection_strategy, str) else goal_selection_strategy
    if not (
        isinstance(strategy, GoalSelectionStrategy) or (isinstance(strategy, str) and strategy in KEY_TO_GOAL_STRATEGY)
    ):
        raise ValueError(
            f"goal_selection_strategy must be one of {tuple(KEY_TO_GOAL_STRATEGY)} or a GoalSelectionStrategy, got "
            f"{goal_selection_strategy!r}"
        )
    checked_bool("copy_info_dict", copy_info_dict)

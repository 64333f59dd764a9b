"""
What a priority belongs to in prioritized HER (docs/guide/her.md): the stored transition
(``PrioritizedHerReplayBuffer``), or the stored transition and the kind of goal it is replayed with (a measurement
subject here, ``KindPrioritizedHer``).

1. Learning: SB3's ``test_performance_her`` (DQN, BitFlippingEnv with 10 bits, 2 envs, 1500 steps, ``n_sampled_goal=5``,
   "future" goals) with SB3's uniform ``HerReplayBuffer`` and the prioritized variants, over seeds: the success rate of
   the last 50 episodes (SB3's test asks > 0.9) and over the whole run.
2. TD errors of one trained model (``PrioritizedHerReplayBuffer``, seed 0): for stored transitions, ``|TD error|`` with
   the transition's own goal and with ``--goals`` relabelled ("future") goals each; the share of their variance that
   lies between transitions, and how well a priority from one goal ranks the transitions by their mean over goals.

    python scripts/her_priorities.py                # 10 seeds, about 10 minutes on one core
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
import torch as th
from stable_baselines3 import HerReplayBuffer
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.envs import BitFlippingEnv
from stable_baselines3.common.vec_env import VecNormalize

from sb3_per import DQN, PrioritizedHerReplayBuffer
from sb3_per.priority_index import ProportionalIndex

N_BITS = 10
N_ENVS = 2


class KindPrioritizedHer(PrioritizedHerReplayBuffer):
    """
    A priority per stored transition and kind of goal (its own, or relabelled): two sum trees over the same leaves. A
    batch draws its real part (``1 / (n_sampled_goal + 1)`` of it, as SB3) from the first tree and its relabelled part
    from the second, each with the IS weights of its own tree; the write-back goes to the tree of the kind replayed. A
    relabelled transition's index comes back offset by the number of leaves. Measurement subject only: no fading, no
    tags, no stamps for the relabelled kind.
    """

    def _init_bookkeeping(self) -> None:
        super()._init_bookkeeping()
        # made anew with the sampler's indices (at construction and reset); the relabelled kind is written in step
        self.relabelled_store = ProportionalIndex(self.buffer_size * self.n_envs)

    def _set_priorities(self, leaves: np.ndarray, stored: np.ndarray) -> None:
        self.relabelled_store.write(leaves, stored)
        super()._set_priorities(leaves, stored)

    def sample(self, batch_size: int, env: VecNormalize | None = None, inverse: bool = False) -> Any:
        self._check_batch_size(batch_size)
        beta = self.beta
        n_virtual = int(self.her_ratio * batch_size)
        real, real_weights = self._drawn(self.sampler.store, batch_size - n_virtual, beta)
        virtual, virtual_weights = self._drawn(self.relabelled_store, n_virtual, beta)
        if self.weight_normalization == "batch":  # by the batch's largest weight, over both kinds
            largest = max(real_weights.max(initial=0.0), virtual_weights.max(initial=0.0))
            real_weights, virtual_weights = real_weights / largest, virtual_weights / largest
        self.sampler.beta_schedule.n_calls += 1
        real_batch = self._get_prioritized_samples(real, real_weights, self._write_count[real], env)
        virtual_data = self._get_virtual_samples(*np.divmod(virtual, self.n_envs), env)
        return real_batch._replace(
            observations={k: th.cat((v, virtual_data.observations[k])) for k, v in real_batch.observations.items()},
            actions=th.cat((real_batch.actions, virtual_data.actions)),
            next_observations={
                k: th.cat((v, virtual_data.next_observations[k])) for k, v in real_batch.next_observations.items()
            },
            dones=th.cat((real_batch.dones, virtual_data.dones)),
            rewards=th.cat((real_batch.rewards, virtual_data.rewards)),
            weights=th.cat((real_batch.weights, th.as_tensor(virtual_weights, dtype=th.float32).reshape(-1, 1))),
            indices=np.concatenate((real_batch.indices, virtual + self.buffer_size * self.n_envs)),
            stamps=np.concatenate((real_batch.stamps, self._write_count[virtual])),
        )

    @staticmethod
    def _drawn(index: ProportionalIndex, n: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
        """``n`` leaves drawn from ``index`` (stratified) and their IS weights, normalized by the largest weight a
        transition of that kind could get."""
        if n == 0:
            return np.empty(0, dtype=np.int64), np.empty(0)
        leaves, probabilities, smallest = index.sample(np.random.random_sample(n))  # noqa: NPY002
        return leaves, (probabilities / smallest) ** -beta

    def _get_prioritized_samples(self, leaves: Any, weights: Any, stamps: Any, env: Any) -> Any:
        """The drawn transitions with their own goals (the relabelled ones are drawn apart)."""
        real_data = self._get_real_samples(*np.divmod(leaves, self.n_envs), env)
        return self.samples_class(
            **real_data._asdict(),
            weights=self._to_torch(weights.astype(np.float32).reshape(-1, 1)),
            indices=leaves,
            stamps=stamps,
        )

    def update_priorities(self, indices: Any, priorities: Any, stamps: Any = None) -> None:
        """Each kind's TD errors into its own tree (no stamps: nothing is added between a draw and its update)."""
        n_leaves = self.buffer_size * self.n_envs
        indices = np.asarray(indices)
        errors = th.as_tensor(priorities).detach().cpu().numpy().reshape(-1)
        sampler = self.sampler
        for store, kind in ((sampler.store, indices < n_leaves), (self.relabelled_store, indices >= n_leaves)):
            leaves, kind_errors = indices[kind] % n_leaves, errors[kind]
            sampled = self.ep_length.reshape(-1)[leaves] > 0
            if sampled.any():
                raised = sampler.priorities_of(kind_errors[sampled], "priorities")
                store.write(leaves[sampled], raised)
                sampler.max_priority = max(sampler.max_priority, float(raised.max()))
        sampler.n_priority_updates += 1


VARIANTS: dict[str, tuple[type, dict[str, Any]]] = {
    "uniform (SB3)": (HerReplayBuffer, {}),
    "per transition": (PrioritizedHerReplayBuffer, {}),
    "per transition, batch-normalized weights": (PrioritizedHerReplayBuffer, {"weight_normalization": "batch"}),
    "per transition and kind of goal": (KindPrioritizedHer, {}),
    "per transition and kind, batch-normalized": (KindPrioritizedHer, {"weight_normalization": "batch"}),
}


def trained(buffer_class: type, buffer_kwargs: dict[str, Any], seed: int) -> tuple[DQN, list[float]]:
    """SB3's test_performance_her, with ``buffer_class``: the model, and every finished episode's success."""
    env = make_vec_env(lambda: BitFlippingEnv(n_bits=N_BITS, continuous=False), N_ENVS)
    model = DQN(
        "MultiInputPolicy",
        env,
        replay_buffer_class=buffer_class,
        replay_buffer_kwargs=dict(n_sampled_goal=5, goal_selection_strategy="future", **buffer_kwargs),
        learning_rate=2e-3,
        train_freq=1,
        gradient_steps=N_ENVS,
        learning_starts=20,
        exploration_final_eps=0.02,
        target_update_interval=100,
        seed=seed,
        batch_size=32,
        buffer_size=int(1e5),
        stats_window_size=50,
    )
    successes: list[float] = []
    model.learn(total_timesteps=1500, callback=_SuccessLog(successes))
    return model, successes


class _SuccessLog:
    """A callback (SB3 accepts callables of locals and globals) that keeps every finished episode's success."""

    def __init__(self, successes: list[float]) -> None:
        self.successes = successes

    def __call__(self, local_vars: dict[str, Any], _globals: dict[str, Any]) -> bool:
        for done, info in zip(local_vars["dones"], local_vars["infos"], strict=True):
            if done:
                self.successes.append(float(info["is_success"]))
        return True


def absolute_td_errors(model: DQN, batch: Any) -> np.ndarray:
    """DQN's ``|y - Q(s, a)|`` for a batch, as its training step computes them."""
    with th.no_grad():
        next_q = model.q_net_target(batch.next_observations).max(dim=1).values.reshape(-1, 1)
        targets = batch.rewards + (1 - batch.dones) * model.gamma * next_q
        q = th.gather(model.q_net(batch.observations), dim=1, index=batch.actions.long())
    return (targets - q).abs().numpy().reshape(-1)


def td_error_spread(model: DQN, n_transitions: int, n_goals: int) -> dict[str, float]:
    """For ``n_transitions`` stored transitions: |TD| with their own goal and with ``n_goals`` relabelled goals each."""
    buffer = model.replay_buffer
    leaves = buffer._uniform_leaves(n_transitions)
    slots, envs = np.divmod(leaves, buffer.n_envs)
    own = absolute_td_errors(model, buffer._get_real_samples(slots, envs))
    relabelled = absolute_td_errors(
        model, buffer._get_virtual_samples(np.repeat(slots, n_goals), np.repeat(envs, n_goals))
    ).reshape(n_transitions, n_goals)
    # HER's mix of goals: its own goal with probability 1 / (n_sampled_goal + 1), else a relabelled one
    p_own = 1.0 - buffer.her_ratio
    mean = p_own * own + (1 - p_own) * relabelled.mean(axis=1)
    second_moment = p_own * own**2 + (1 - p_own) * (relabelled**2).mean(axis=1)
    within = float((second_moment - mean**2).mean())
    between = float(mean.var())
    # the part of the within-transition variance that a priority per kind of goal could follow: own vs relabelled
    between_kinds = float((p_own * (1 - p_own) * (own - relabelled.mean(axis=1)) ** 2).mean())
    one_goal = relabelled[:, 0]
    return {
        "mean |TD| own goal": float(own.mean()),
        "mean |TD| relabelled goal": float(relabelled.mean()),
        "share of variance between transitions": between / (between + within),
        "share of variance between the kinds of goal, within transitions": between_kinds / (between + within),
        "rank correlation, one relabelled goal vs mean over goals": spearman(one_goal, mean),
        "rank correlation, own goal vs mean over goals": spearman(own, mean),
    }


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (ties broken by order: the errors are continuous)."""
    return float(np.corrcoef(a.argsort().argsort(), b.argsort().argsort())[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(10)))
    parser.add_argument("--transitions", type=int, default=512)
    parser.add_argument("--goals", type=int, default=32)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    th.set_num_threads(1)
    print(f"DQN + HER on BitFlippingEnv({N_BITS} bits), {N_ENVS} envs, 1500 steps; seeds {args.seeds}")
    spread: dict[str, float] = {}
    for name in args.variants:
        buffer_class, kwargs = VARIANTS[name]
        start = time.time()
        last, whole = [], []
        for seed in args.seeds:
            model, successes = trained(buffer_class, kwargs, seed)
            last.append(float(np.mean(model.ep_success_buffer)))
            whole.append(float(np.mean(successes)))
            if name == "per transition" and seed == args.seeds[0]:
                spread = td_error_spread(model, args.transitions, args.goals)
        print(
            f"{name:42s} last 50 episodes {np.mean(last):.2f} {np.round(last, 2).tolist()}  "
            f"whole run {np.mean(whole):.2f} {np.round(whole, 2).tolist()}  ({time.time() - start:.0f} s)"
        )
    if spread:
        print(
            f"TD errors of the per-transition model, seed {args.seeds[0]}: {args.transitions} transitions, "
            f"{args.goals} goals each"
        )
    for key, value in spread.items():
        print(f"  {key}: {value:.3f}")


if __name__ == "__main__":
    main()

"""
Makes the saved-buffer fixtures of ``test_saved_buffers.py``: a ``PrioritizedReplayBuffer`` and a
``PrioritizedDictReplayBuffer`` pickled with SB3's ``save_to_pkl``, and what they gave next (``expected.npz``).

Run once, with the buffers of commit 1250200 (before the priority sampler was taken out of the buffer, issue 45), so
that the test checks that buffers saved by that version still load and go on as they would have:
``PYTHONPATH=. python tests/sb3_per/data/make_saved_buffers.py``. Running it again with later code overwrites the
fixtures with that code's, which the test could no longer tell from the old ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from gymnasium import spaces
from stable_baselines3.common.save_util import load_from_pkl, save_to_pkl
from stable_baselines3.common.utils import set_random_seed

from sb3_per import PrioritizedDictReplayBuffer, PrioritizedReplayBuffer

DATA = Path(__file__).parent
BATCH_SIZE = 8
SEED = 3


def filled(buffer, observation, rng: np.random.Generator, n_adds: int, tagged: bool) -> None:
    """Add ``n_adds`` steps of every env, sample and write priorities back between them."""
    n_envs = buffer.n_envs
    for step in range(n_adds):
        infos = [{"regime": (step // 7 + env) % 3} if tagged else {} for env in range(n_envs)]
        buffer.add(
            observation(),
            observation(),
            rng.uniform(-1, 1, (n_envs, 1)).astype(np.float32),
            rng.normal(size=n_envs).astype(np.float32),
            (rng.random(n_envs) < 0.1).astype(np.float32),
            infos,
        )
        if step >= 5 and step % 3 == 0:
            batch = buffer.sample(4)
            buffer.update_priorities(batch.indices, rng.exponential(size=4) * 2.0, batch.stamps)


def what_it_gives(buffer, prefix: str) -> dict[str, np.ndarray]:
    """A seeded sample, a write-back and an add, then the priorities: what the loaded buffer must reproduce."""
    leaves = np.arange(buffer.n_transitions)
    out = {
        f"{prefix}priorities": buffer.priorities_at(leaves),
        f"{prefix}beta": np.array(buffer.beta),
        f"{prefix}max_priority": np.array(buffer.max_priority),
    }
    set_random_seed(SEED)
    batch = buffer.sample(BATCH_SIZE)
    observations = batch.observations
    if isinstance(observations, dict):
        observations = observations["position"]
    out |= {
        f"{prefix}indices": batch.indices,
        f"{prefix}weights": batch.weights.numpy(),
        f"{prefix}stamps": batch.stamps,
        f"{prefix}observations": observations.numpy(),
    }
    buffer.update_priorities(batch.indices, np.linspace(0.0, 5.0, BATCH_SIZE), batch.stamps)
    return out


def main() -> None:
    rng = np.random.default_rng(0)
    expected: dict[str, np.ndarray] = {}

    box = spaces.Box(-1, 1, (3,), np.float32)
    action_space = spaces.Box(-1, 1, (1,), np.float32)
    flat = PrioritizedReplayBuffer(
        40, box, action_space, device="cpu", n_envs=2, alpha=0.7, beta_anneal_steps="auto", epsilon=1e-3,
        tag_key="regime", inverse_sampling=True, priority_half_life=5.0,
    )  # fmt: skip
    set_random_seed(1)
    flat.set_beta_progress(0.1)
    filled(flat, lambda: rng.uniform(-1, 1, (2, 3)).astype(np.float32), rng, 55, tagged=True)
    flat.set_beta_progress(0.3)
    save_to_pkl(DATA / "prioritized_replay_buffer.pkl", flat)
    expected |= what_it_gives(load_from_pkl(DATA / "prioritized_replay_buffer.pkl"), "flat_")

    dict_space = spaces.Dict(
        {"position": spaces.Box(-1, 1, (2,), np.float32), "goal": spaces.Box(-1, 1, (2,), np.float32)}
    )
    keyed = PrioritizedDictReplayBuffer(
        30, dict_space, action_space, device="cpu", alpha=0.5, beta_start=0.5, beta_anneal_steps=50,
        prioritization="rank", weight_normalization="batch",
    )  # fmt: skip
    set_random_seed(2)
    filled(keyed, lambda: {key: rng.uniform(-1, 1, (1, 2)).astype(np.float32) for key in dict_space}, rng, 24, False)
    save_to_pkl(DATA / "prioritized_dict_replay_buffer.pkl", keyed)
    expected |= what_it_gives(load_from_pkl(DATA / "prioritized_dict_replay_buffer.pkl"), "dict_")

    # The tagged buffer's per-tag shares, then a write and an add after the loaded sample, and their priorities again
    loaded = load_from_pkl(DATA / "prioritized_replay_buffer.pkl")
    expected["flat_tag_shares"] = np.array(sorted(loaded.tag_priority_shares().items()))
    set_random_seed(SEED)
    batch = loaded.sample(BATCH_SIZE)
    loaded.update_priorities(batch.indices, np.linspace(0.0, 5.0, BATCH_SIZE), batch.stamps)
    obs = np.zeros((2, 3), np.float32)
    loaded.add(obs, obs, np.zeros((2, 1), np.float32), np.zeros(2), np.zeros(2), [{"regime": 1}, {}])
    expected["flat_priorities_after_add"] = loaded.priorities_at(np.arange(loaded.n_transitions))
    np.savez(DATA / "expected.npz", **expected)


if __name__ == "__main__":
    main()

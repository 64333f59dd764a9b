from collections.abc import Callable

import numpy as np
import pytest
import torch as th


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tests train tiny networks, which run faster on one thread, and the machine's cores are shared."""
    n_threads = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(n_threads)


def _add_tagged_steps(buffers: list, n_envs: int, n_steps: int, seed: int, key: str = "regime") -> list[np.ndarray]:
    """Add the same random transitions to every buffer, each env's info tagged with a random regime in {-1..3}."""
    rng = np.random.default_rng(seed)
    tags = []
    for _ in range(n_steps):
        obs, next_obs = rng.standard_normal((2, n_envs, 3)).astype(np.float32)
        action = rng.uniform(-1, 1, (n_envs, 1)).astype(np.float32)
        reward = rng.standard_normal(n_envs).astype(np.float32)
        done = rng.random(n_envs) < 0.1
        step_tags = rng.integers(-1, 4, n_envs)
        infos = [
            {key: int(t), "TimeLimit.truncated": bool(d and rng.random() < 0.5)}
            for t, d in zip(step_tags, done, strict=True)
        ]
        for buffer in buffers:
            buffer.add(obs, next_obs, action, reward, done, infos)
        tags.append(step_tags)
    return tags


def _stored_tags(buffer, tags: list[np.ndarray]) -> np.ndarray:
    """The tag of each stored leaf, from what was added (the newest write of each slot wins)."""
    leaf_tags = np.full((buffer.buffer_size, buffer.n_envs), -99)
    for step, step_tags in enumerate(tags):
        leaf_tags[step % buffer.buffer_size] = step_tags
    return leaf_tags.reshape(-1)[: buffer.size() * buffer.n_envs]


@pytest.fixture
def add_tagged_steps() -> Callable[..., list[np.ndarray]]:
    """``add_tagged_steps(buffers, n_envs, n_steps, seed, key="regime")``: random regime-tagged steps added alike."""
    return _add_tagged_steps


@pytest.fixture
def stored_tags() -> Callable[..., np.ndarray]:
    """``stored_tags(buffer, tags)``: the tag of each stored leaf, from the tags ``add_tagged_steps`` returned."""
    return _stored_tags

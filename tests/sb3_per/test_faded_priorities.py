"""priority_half_life: priorities that fade with age, p_i * 2 ** (-(t - t_i) / h), kept exact through rescales."""

import pickle

import numpy as np
import pytest
import torch as th
from gymnasium import spaces
from scipy import stats
from stable_baselines3.common.utils import set_random_seed

import sb3_per
from sb3_per import PrioritizedDictReplayBuffer, PrioritizedReplayBuffer, SumTree
from sb3_per import priority_sampler as sampler_module
from sb3_per.fading import FADE_RESCALE_DOUBLINGS
from sb3_per.priority_sampler import SMALLEST_FADED_WEIGHT_FACTOR

OBS_SPACE = spaces.Box(-np.inf, np.inf, (3,), np.float32)
ACTION_SPACE = spaces.Box(-1.0, 1.0, (1,), np.float32)


class FadingReference:
    """The formula, kept by hand: what each leaf was written with, and when (in add calls)."""

    def __init__(self, n_leaves: int, n_envs: int, half_life: float, alpha: float, epsilon: float) -> None:
        self.written = np.zeros(n_leaves)
        self.written_at = np.zeros(n_leaves)
        self.n_envs, self.half_life, self.alpha, self.epsilon = n_envs, half_life, alpha, epsilon
        self.now, self.pos, self.max_priority = 0, 0, 1.0
        self.n_slots = n_leaves // n_envs

    def add(self) -> None:
        self.now += 1
        leaves = self.pos * self.n_envs + np.arange(self.n_envs)
        self.written[leaves], self.written_at[leaves] = self.max_priority, self.now
        self.pos = (self.pos + 1) % self.n_slots

    def update(self, leaves: np.ndarray, td_errors: np.ndarray) -> None:
        priorities = (np.abs(td_errors) + self.epsilon) ** self.alpha
        self.written[leaves], self.written_at[leaves] = priorities, self.now
        self.max_priority = max(self.max_priority, priorities.max())

    def effective(self, n_stored: int) -> np.ndarray:
        return self.written[:n_stored] * 2.0 ** (-(self.now - self.written_at[:n_stored]) / self.half_life)


def faded_pair(buffer_size: int, n_envs: int, half_life: float, **kwargs):
    buffer = PrioritizedReplayBuffer(
        buffer_size, OBS_SPACE, ACTION_SPACE, device="cpu", n_envs=n_envs, priority_half_life=half_life, **kwargs
    )
    reference = FadingReference(buffer_size, n_envs, half_life, buffer.alpha, buffer.epsilon)
    return buffer, reference


def add(buffer, reference, n_steps: int, tags=None) -> None:
    n_envs = buffer.n_envs
    for step in range(n_steps):
        obs = np.full((n_envs, 3), step, dtype=np.float32)
        infos = [
            {"regime": int(tags[(reference.now + env) % len(tags)])} if tags is not None else {}
            for env in range(n_envs)
        ]
        buffer.add(obs, obs, np.zeros((n_envs, 1)), np.zeros(n_envs), np.zeros(n_envs), infos)
        reference.add()


def train(buffer, reference, rng, n_rounds: int, tags=None) -> None:
    """Rounds of adds and prioritized updates, as training interleaves them."""
    for _ in range(n_rounds):
        add(buffer, reference, int(rng.integers(1, 8)), tags)
        samples = buffer.sample(16)
        td_errors = rng.exponential(1.0, 16) * 10 ** rng.uniform(-1, 1, 16)
        buffer.update_priorities(samples.indices, td_errors, samples.stamps)
        # duplicates: the last error given for a leaf is the one kept, as in the buffer
        reference.update(samples.indices, td_errors)


def sample_counts(buffer, n_leaves: int, batch: int = 32, n_batches: int = 2000) -> np.ndarray:
    return np.bincount(np.concatenate([buffer.sample(batch).indices for _ in range(n_batches)]), minlength=n_leaves)


def pooled_chisquare_p_value(counts: np.ndarray, expected: np.ndarray) -> float:
    """Chi-square p-value, with the cells expecting fewer than 5 counts pooled into one (as the test needs)."""
    rare = expected < 5
    if rare.any():
        counts = np.append(counts[~rare], counts[rare].sum())
        expected = np.append(expected[~rare], expected[rare].sum())
    return stats.chisquare(counts, expected)[1]


@pytest.mark.filterwarnings("ignore:PrioritizedReplayBuffer has been sampled")
def test_faded_sampling_matches_the_formula_before_and_after_a_rescale():
    buffer, reference = faded_pair(3 * 13, n_envs=3, half_life=4.0, alpha=0.7)
    rng = np.random.default_rng(0)
    train(buffer, reference, rng, 10)
    assert buffer.sampler.fading.offset == 0 and buffer.full
    for rescaled in (False, True):
        if rescaled:  # past 64 half-lives of adds, the tree has been rescaled (several times)
            train(buffer, reference, rng, int(FADE_RESCALE_DOUBLINGS * 4 / 2))
            assert buffer.sampler.fading.offset > FADE_RESCALE_DOUBLINGS
        effective = reference.effective(39)
        np.testing.assert_allclose(buffer.priorities_at(np.arange(39)), effective, rtol=1e-12)
        assert buffer.mean_priority == pytest.approx(effective.mean(), rel=1e-12)
        set_random_seed(int(rescaled))
        counts = sample_counts(buffer, 39)
        expected = effective / effective.sum() * counts.sum()
        assert pooled_chisquare_p_value(counts, expected) > 0.01
        # fading is visible: an undecayed law is clearly rejected
        undecayed = reference.written[:39] / reference.written[:39].sum() * counts.sum()
        assert stats.chisquare(counts, undecayed)[1] < 1e-6


@pytest.mark.parametrize("normalization", ["buffer", "batch"])
def test_faded_importance_weights_equal_a_hand_computation(normalization):
    buffer, reference = faded_pair(20, n_envs=1, half_life=3.0, beta_start=0.5, weight_normalization=normalization)
    rng = np.random.default_rng(1)
    train(buffer, reference, rng, 60)  # rescaled on the way
    assert buffer.sampler.fading.offset > 0
    beta = buffer.beta
    samples = buffer.sample(8)
    probabilities = reference.effective(20) / reference.effective(20).sum()
    raw = (20 * probabilities) ** -beta
    largest = raw.max() if normalization == "buffer" else raw[samples.indices].max()
    np.testing.assert_allclose(samples.weights.numpy().ravel(), raw[samples.indices] / largest, rtol=1e-5)


def test_a_new_transition_enters_at_the_largest_priority_undecayed():
    buffer, reference = faded_pair(20, n_envs=2, half_life=5.0)
    rng = np.random.default_rng(2)
    train(buffer, reference, rng, 30)
    add(buffer, reference, 1)
    newest = (buffer.pos - 1) % buffer.buffer_size * 2 + np.arange(2)
    np.testing.assert_allclose(buffer.priorities_at(newest), buffer.max_priority, rtol=1e-12)
    assert buffer.max_priority == reference.max_priority


def test_tag_shares_and_the_inverse_tree_follow_the_faded_priorities_through_rescales():
    buffer, reference = faded_pair(2 * 25, n_envs=2, half_life=2.0, tag_key="regime", inverse_sampling=True)
    tags = np.random.default_rng(3).integers(0, 3, 97)
    rng = np.random.default_rng(4)
    train(buffer, reference, rng, 80, tags)
    assert buffer.sampler.fading.offset > 0
    effective = buffer.priorities_at(np.arange(50))
    stored_tags = buffer.tags_at(np.arange(50))
    shares = buffer.tag_priority_shares()
    for tag in np.unique(stored_tags):
        assert shares[tag] == pytest.approx(effective[stored_tags == tag].sum() / effective.sum(), rel=1e-9)
    rebuilt = SumTree(50)
    rebuilt.update(np.arange(50), 1.0 / buffer.tree[np.arange(50)])
    np.testing.assert_allclose(buffer.sampler.inverse_index.tree[np.arange(50)], rebuilt[np.arange(50)], rtol=1e-15)
    assert buffer.sampler.inverse_index.tree.total == pytest.approx(rebuilt.total, rel=1e-12)


def test_pickling_keeps_the_fading_clock():
    buffer, reference = faded_pair(30, n_envs=1, half_life=2.0)
    rng = np.random.default_rng(5)
    train(buffer, reference, rng, 40)
    restored = pickle.loads(pickle.dumps(buffer))
    assert (restored.sampler.fading.n_add_calls, restored.sampler.fading.offset) == (
        buffer.sampler.fading.n_add_calls,
        buffer.sampler.fading.offset,
    )
    for copy in (buffer, restored):  # the same future on both
        add(copy, FadingReference(30, 1, 2.0, 0.6, 1e-6), 45)
    np.testing.assert_array_equal(restored.tree[np.arange(30)], buffer.tree[np.arange(30)])
    assert restored.sampler.fading.offset == buffer.sampler.fading.offset


def test_without_a_half_life_the_tree_holds_exactly_the_written_priorities_and_weights_the_plain_formula():
    rng = np.random.default_rng(6)
    buffer = PrioritizedReplayBuffer(40, OBS_SPACE, ACTION_SPACE, device="cpu", beta_start=0.6)
    written = np.zeros(40)
    for step in range(60):
        obs = np.zeros((1, 3), dtype=np.float32)
        buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
        written[step % 40] = buffer.max_priority
        set_random_seed(step)
        samples = buffer.sample(8)
        errors = rng.exponential(1.0, 8)
        buffer.update_priorities(samples.indices, errors)
        written[samples.indices] = (errors + 1e-6) ** 0.6
        written_now = written[: buffer.n_transitions]
        np.testing.assert_array_equal(buffer.tree[np.arange(buffer.n_transitions)], written_now)
    set_random_seed(99)
    beta = buffer.beta
    samples = buffer.sample(8)
    expected = ((written[samples.indices] / written.min()) ** -beta).astype(np.float32)
    assert th.equal(samples.weights.ravel(), th.as_tensor(expected))
    assert buffer.mean_priority == buffer.tree.total / 40


@pytest.mark.parametrize(
    ("half_life", "kwargs", "message"),
    [
        (0.0, {}, "priority_half_life must be"),
        (-3.0, {}, "priority_half_life must be"),
        (np.nan, {}, "priority_half_life must be"),
        (True, {}, "priority_half_life must be"),
        ("10", {}, "priority_half_life must be"),
        (0.1, {}, "below buffer_size"),
        (10.0, {"prioritization": "rank"}, "prioritization='proportional'"),
    ],
)
def test_bad_half_lives_are_refused(half_life, kwargs, message):
    with pytest.raises(ValueError, match=message):
        PrioritizedReplayBuffer(100, OBS_SPACE, ACTION_SPACE, priority_half_life=half_life, **kwargs)
    with pytest.raises(ValueError, match=message):
        PrioritizedDictReplayBuffer(
            100, spaces.Dict({"a": OBS_SPACE}), ACTION_SPACE, priority_half_life=half_life, **kwargs
        )


def deeply_faded_buffer(**kwargs) -> PrioritizedReplayBuffer:
    """200 slots at half-life 2 (up to 2 ** -100 of fading), the oldest at the smallest priority, the rest fresh."""
    buffer = PrioritizedReplayBuffer(
        200, OBS_SPACE, ACTION_SPACE, device="cpu", priority_half_life=2.0, beta_start=1.0, beta_end=1.0, **kwargs
    )
    obs = np.zeros((1, 3), dtype=np.float32)
    buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    buffer.update_priorities(np.array([0]), np.array([0.0]))  # the smallest priority there is, epsilon ** alpha
    for _ in range(199):  # it ages until it is the next to be overwritten; the rest enter at max_priority
        buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    return buffer


def test_deep_fading_floors_the_weights_of_the_largest_priorities_at_the_smallest_trainable_weight():
    buffer = deeply_faded_buffer()
    oldest = buffer.priorities_at(np.array([0]))[0]
    assert oldest == pytest.approx(1e-6**0.6 * 2.0 ** (-199 / 2), rel=1e-9)
    set_random_seed(0)
    batch = buffer.sample(64)
    # Divided by the weight that leaves a transition of max_priority at the floor, clipped at 1; without the floor the
    # freshest sample's weight would be (oldest / max_priority) ** beta, about 1e-32.
    effective = buffer.priorities_at(batch.indices)
    expected = np.minimum((effective / (buffer.max_priority * SMALLEST_FADED_WEIGHT_FACTOR)) ** -1.0, 1.0)
    np.testing.assert_allclose(batch.weights.numpy().ravel(), expected, rtol=1e-5)
    assert batch.weights.min() == pytest.approx(SMALLEST_FADED_WEIGHT_FACTOR, rel=1e-5)  # the newest transition's
    assert 199 in batch.indices


def test_shallow_fading_leaves_the_buffer_normalized_weights_as_they_were(monkeypatch):
    buffer = deeply_faded_buffer()
    monkeypatch.setattr(sampler_module, "SMALLEST_FADED_WEIGHT_FACTOR", 1e-40)  # a floor below these weights
    set_random_seed(0)
    batch = buffer.sample(64)
    probabilities = buffer.priorities_at(batch.indices)
    expected = (probabilities / buffer.priorities_at(np.arange(200)).min()) ** -1.0
    np.testing.assert_allclose(batch.weights.numpy().ravel(), expected, rtol=1e-6)


def critic_change_over_100_steps(doublings: float) -> float:
    """The largest change of a SAC critic's parameters over 100 training steps on a buffer of 600 slots filled twice
    with priority_half_life = 600 / doublings, weight_normalization="buffer", beta 1."""
    n_threads = th.get_num_threads()
    th.set_num_threads(1)
    model = sb3_per.SAC(
        "MlpPolicy",
        "Pendulum-v1",
        buffer_size=600,
        learning_starts=600,
        batch_size=64,
        policy_kwargs={"net_arch": [32, 32]},
        seed=0,
        replay_buffer_class=PrioritizedReplayBuffer,
        replay_buffer_kwargs={
            "priority_half_life": 600 / doublings,
            "weight_normalization": "buffer",
            "beta_anneal_steps": "auto",
        },
    )
    model.learn(1200)  # beta_anneal_steps="auto": beta is 1 at the end
    before = [parameter.detach().clone() for parameter in model.critic.parameters()]
    for _ in range(100):
        model.train(1, 64)
    th.set_num_threads(n_threads)
    return max(
        float((old - new.detach()).abs().max()) for old, new in zip(before, model.critic.parameters(), strict=True)
    )


@pytest.mark.slow
def test_the_critic_keeps_learning_however_deep_the_fading(monkeypatch):
    """Measured by the critic's change, not by the weights: 50 half-lives per buffer with "buffer" normalization
    trains the critic about as much as no fading does; without the floor it does not train it at all."""
    unfaded = critic_change_over_100_steps(1e-3)
    assert critic_change_over_100_steps(50.0) > 0.3 * unfaded
    monkeypatch.setattr(sampler_module, "SMALLEST_FADED_WEIGHT_FACTOR", 0.0)
    assert critic_change_over_100_steps(50.0) < 1e-3 * unfaded


def test_a_half_life_that_would_fade_the_smallest_priority_below_float64_is_refused():
    # epsilon ** alpha = 2 ** -950. 1000 slots at half-life 12.5 fade it by up to 2 ** -80, below float64's normal
    # range (2 ** -1022): a transition of TD error 0 would end at priority 0, never to be sampled again.
    # beta 0 (no weight depends on epsilon) and "batch": only the priority check is left to refuse it.
    settings = dict(epsilon=2.0**-950, alpha=1.0, beta_start=0.0, beta_end=0.0, weight_normalization="batch")
    with pytest.raises(ValueError, match=r"epsilon \*\* alpha = .* fades by up to 2 \*\* -80 .*priority_half_life"):
        PrioritizedReplayBuffer(1000, OBS_SPACE, ACTION_SPACE, priority_half_life=12.5, **settings)
    # At half-life 1000 / 70 (up to 2 ** -70) it stays a normal float64: a transition at it ages through a rescale
    # of the store (at 64 half-lives) and keeps its faded priority, exactly.
    half_life = 1000 / 70
    buffer = PrioritizedReplayBuffer(
        1000, OBS_SPACE, ACTION_SPACE, device="cpu", priority_half_life=half_life, **settings
    )
    obs = np.zeros((1, 3), dtype=np.float32)
    buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    buffer.update_priorities(np.array([0]), np.array([0.0]))  # the smallest priority there is, epsilon ** alpha
    for _ in range(999):  # it ages until it is the next to be overwritten
        buffer.add(obs, obs, np.zeros((1, 1)), np.zeros(1), np.zeros(1), [{}])
    assert buffer.sampler.fading.offset > 0
    expected = 2.0**-950 * 2.0 ** (-999 / half_life)
    assert expected > np.finfo(np.float64).tiny
    assert buffer.priorities_at(np.array([0]))[0] == pytest.approx(expected, rel=1e-9)
    assert buffer.tree.min == buffer.tree[0] > 0.0  # still the smallest stored priority, not gone to zero


def test_a_rescale_before_the_buffer_is_full_keeps_tagged_sums_exact():
    # half-life 2: a rescale every ~130 adds, long before 1000 slots fill. The oldest of 500 slots fades by
    # 2 ** -250, which "buffer" weight normalization refuses (its weights would underflow): "batch" has no such limit.
    buffer, reference = faded_pair(1000, n_envs=2, half_life=2.0, tag_key="regime", weight_normalization="batch")
    tags = np.random.default_rng(5).integers(0, 3, 89)
    train(buffer, reference, np.random.default_rng(6), 120, tags)
    assert buffer.sampler.fading.offset > 0 and not buffer.full
    n_stored = buffer.n_transitions
    effective = buffer.priorities_at(np.arange(n_stored))
    stored_tags = buffer.tags_at(np.arange(n_stored))
    shares = buffer.tag_priority_shares()
    for tag in np.unique(stored_tags):
        assert shares[tag] == pytest.approx(effective[stored_tags == tag].sum() / effective.sum(), rel=1e-9)

"""
Positive control: the Blind Cliffwalk of Schaul et al. (2016, "Prioritized Experience Replay", section 3.1,
figures 1 and 2, appendix B.1), learned by tabular Q-learning from a replay memory that is one of
``sb3_per``'s buffers or Stable-Baselines3's own.

The paper's setup, followed here:

- A chain of ``n`` states and two actions. In each state one action is "right" (it moves on; in the last
  state it ends the episode with reward 1) and the other is "wrong" (it ends the episode with reward 0).
  Which action is right alternates from state to state, so nothing generalises across actions.
- The replay memory holds every transition of all ``2**n`` action sequences, each executed until
  termination, the sequences in random order: ``2**(n + 1) - 2`` transitions, exactly one of which sees
  the reward, each at the frequency a random behaviour policy would meet it.
- Q-learning, ``delta = r + gamma * (1 - done) * max_a Q(s', a) - Q(s, a)`` and
  ``Q(s, a) += eta * delta``, one replayed transition per update (batch size 1), ``gamma = 1 - 1 / n``,
  ``eta = 1 / 4``, Q initialised from a normal distribution of standard deviation 0.1.
- Learned: the mean squared error of the Q table against the true Q values, over all ``2 n``
  state-action pairs, below ``1e-3``. The result of a run is the number of updates until then.
- Replay: uniform (the paper's black curve) against stochastic prioritization, proportional
  (``P(i) ∝ (|delta_i| + epsilon) ** alpha``) and rank-based (``P(i) ∝ rank(i) ** -alpha``), priorities
  updated from the TD error of each replayed transition, which every transition enters at the largest
  priority (1), as in the paper's algorithm 1.
- The median over seeds (the paper uses 10) of the updates needed, with the minimum and maximum, against
  the memory size on log-log axes.

Deviations from the paper, and choices it leaves open:

- Tabular Q for all three replays. The paper's figure 2 shows the stochastic (proportional and rank)
  variants with linear function approximation (one-hot state plus a bias feature), and tabular Q only
  for greedy TD-error prioritization and the hindsight oracle, neither of which is here.
- ``alpha = 1`` for both prioritizations (the paper does not say which it used on this toy; its Atari
  values, 0.6 and 0.7, were tuned for DQN) and ``epsilon = 1e-6``, ``sb3_per``'s default.
- No importance-sampling weights (``beta = 0``, so ``sb3_per`` returns weights of 1, not applied): the
  paper introduces them only afterwards (section 3.4), for the Atari agent.
- "N(0, 0.1)" is read as a standard deviation of 0.1.
- Rank-based sampling uses ``sb3_per``'s heap order as the ranks (re-sorted every 10 000 updates), the
  paper's own approximation.
- Uniform replay is SB3's ``ReplayBuffer``, sampled with replacement.
- A run that has not learned after ``max_updates`` updates is censored: it counts as infinitely slow in
  the median, so a median above ``max_updates`` is reported as unknown (NaN) rather than as a number.
- The paper's chain lengths run from 2 to 16; the default grid stops earlier to keep uniform replay, which
  needs the most updates, within minutes on one core.

Sampling uses NumPy's global generator, as SB3's buffers do; each run seeds it, and a separate generator
of the same seed draws the memory order and the initial Q table, so every replay method of one seed
starts from the same memory and the same table.

A plug-in of ``comparison.study`` (``BlindCliffwalkStudy``, run by ``scripts/blind_cliffwalk_study.py``): a run is
one chain length, replay method and seed, seconds long, trained again from its start if an interruption left it
unfinished. Layout of the output folder (``docs/results/blind_cliffwalk`` by default)::

    runs/n{n_states}_{method}_s{seed}/   config.json, updates.csv (written last: the updates the run needed, empty
                                         if it did not learn)
    blind_cliffwalk.csv, blind_cliffwalk.png   the report (``SUMMARY_COLUMNS``, a row per chain length and method)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import product
from pathlib import Path
from typing import Any, NamedTuple, cast

import numpy as np
import pandas as pd
from gymnasium import spaces
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from stable_baselines3.common.buffers import ReplayBuffer

from comparison.experiment import write_csv_atomically
from comparison.study import (
    JsonConfig,
    check_integer_fields,
    finished_result_rows,
    holds_config,
    positive_integer,
    restart_run_dir,
)
from comparison.study_report import collect_rows
from sb3_per import PrioritizedReplayBuffer, PrioritizedReplayBufferSamples

#: Replay methods: SB3's uniform buffer, and ``sb3_per``'s buffer with each prioritization.
METHODS = ("uniform", "proportional", "rank")
#: The paper's step size and convergence threshold (appendix B.1).
STEP_SIZE = 0.25
MSE_THRESHOLD = 1e-3
#: Standard deviation of the initial Q values (the paper's "N(0, 0.1)").
INITIAL_Q_STD = 0.1
#: The command line's grid: chain lengths and the update cap.
DEFAULT_N_STATES = tuple(range(2, 13))
DEFAULT_MAX_UPDATES = 1_000_000
#: A run's result file, and its columns: the run's labels and the updates it needed (empty: it did not learn).
UPDATES_FILE = "updates.csv"
UPDATE_COLUMNS = ("n_states", "method", "seed", "updates")
SUMMARY_FILE = "blind_cliffwalk.csv"
PLOT_FILE = "blind_cliffwalk.png"
#: Columns of the summary table, one row per chain length and method.
SUMMARY_COLUMNS = (
    "n_states",
    "n_transitions",
    "method",
    "n_seeds",
    "n_learned",
    "median_updates",
    "fewest_updates",
    "most_updates",
)


class Transitions(NamedTuple):
    """Transitions as parallel arrays, one entry per transition."""

    states: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    next_states: np.ndarray
    dones: np.ndarray


@dataclass(frozen=True)
class BlindCliffwalk:
    """
    The Blind Cliffwalk chain of ``n_states`` states (Schaul et al. 2016, figure 1).

    :param n_states: Number of states in the chain (at least 1)
    """

    n_states: int

    def __post_init__(self) -> None:
        if int(self.n_states) != self.n_states or self.n_states < 1:
            raise ValueError(f"n_states must be a positive integer, got {self.n_states!r}")

    @property
    def gamma(self) -> float:
        """The paper's discount, ``1 - 1 / n``, which keeps the values on one scale whatever ``n``."""
        return 1.0 - 1.0 / self.n_states

    @property
    def n_transitions(self) -> int:
        """Number of transitions in the memory of all ``2**n`` sequences: ``2**(n + 1) - 2``."""
        return 2 ** (self.n_states + 1) - 2

    def right_action(self, state: int) -> int:
        """The action that moves on from ``state``: it alternates, so no action is right everywhere."""
        return state % 2

    def true_q(self) -> np.ndarray:
        """The optimal Q table, shape ``(n_states, 2)``: ``gamma ** (steps left)`` for right, 0 for wrong."""
        q = np.zeros((self.n_states, 2))
        for state in range(self.n_states):
            q[state, self.right_action(state)] = self.gamma ** (self.n_states - 1 - state)
        return q

    def episode(self, actions: tuple[int, ...]) -> Transitions:
        """
        The transitions of executing ``actions`` (one per state) from the first state until termination.
        A terminal transition's next state is its own state: the ``done`` flag masks it out of every target.
        """
        steps = []
        for state, action in enumerate(actions):
            if action != self.right_action(state):
                steps.append((state, action, 0.0, state, True))
                break
            last = state == self.n_states - 1
            steps.append((state, action, 1.0 if last else 0.0, state if last else state + 1, last))
        states, taken, rewards, next_states, dones = zip(*steps, strict=True)
        return Transitions(np.array(states), np.array(taken), np.array(rewards), np.array(next_states), np.array(dones))

    def exhaustive_memory(self, rng: np.random.Generator) -> Transitions:
        """
        Every transition of all ``2**n`` action sequences, each executed until termination, the sequences
        in the order ``rng`` shuffles them into (appendix B.1): ``2**(n + 1) - 2`` transitions.
        """
        sequences = list(product((0, 1), repeat=self.n_states))
        episodes = [self.episode(sequences[i]) for i in rng.permutation(len(sequences))]
        return Transitions(*(np.concatenate(field) for field in zip(*episodes, strict=True)))


def check_method(method: str) -> None:
    """Raise ``ValueError``, naming it, if ``method`` is not one of ``METHODS``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")


def check_max_updates(max_updates: int) -> None:
    """Raise ``ValueError``, naming it, if ``max_updates`` is not a positive integer."""
    if int(max_updates) != max_updates or max_updates < 1:
        raise ValueError(f"max_updates must be a positive integer, got {max_updates!r}")


def make_replay_buffer(method: str, capacity: int, n_states: int, alpha: float = 1.0) -> ReplayBuffer:
    """
    An empty replay buffer of ``capacity`` transitions over the chain's spaces: SB3's ``ReplayBuffer`` for
    ``"uniform"``, ``sb3_per.PrioritizedReplayBuffer`` with that prioritization otherwise (no
    importance-sampling correction: ``beta = 0``).

    :param method: One of ``METHODS``
    :param capacity: Number of transitions it holds
    :param n_states: Number of states of the chain (the observation space is ``Discrete(n_states)``)
    :param alpha: Prioritization exponent of the prioritized buffers
    """
    check_method(method)
    observation_space, action_space = spaces.Discrete(n_states), spaces.Discrete(2)
    if method == "uniform":
        return ReplayBuffer(capacity, observation_space, action_space, device="cpu")
    return PrioritizedReplayBuffer(
        capacity,
        observation_space,
        action_space,
        device="cpu",
        alpha=alpha,
        beta_start=0.0,
        beta_end=0.0,
        prioritization=method,
    )


def fill_buffer(buffer: ReplayBuffer, memory: Transitions) -> None:
    """Add every transition of ``memory`` to ``buffer`` in order, one ``add`` per step of one env."""
    for state, action, reward, next_state, done in zip(*memory, strict=True):
        buffer.add(
            np.array([state]), np.array([next_state]), np.array([action]), np.array([reward]), np.array([done]), [{}]
        )


def updates_to_learn(
    n_states: int,
    method: str,
    seed: int,
    max_updates: int,
    alpha: float = 1.0,
) -> int | None:
    """
    Number of Q-learning updates, one replayed transition each, until the Q table of the Blind Cliffwalk
    of ``n_states`` states is learned (mean squared error to the true Q below ``MSE_THRESHOLD``), or None
    if it is not after ``max_updates``.

    :param n_states: Chain length
    :param method: Replay, one of ``METHODS``
    :param seed: Seeds the memory order, the initial Q table and the buffer's sampling
    :param max_updates: Updates after which the run gives up
    :param alpha: Prioritization exponent of the prioritized methods
    """
    check_max_updates(max_updates)
    chain = BlindCliffwalk(n_states)
    buffer = make_replay_buffer(method, chain.n_transitions, n_states, alpha)
    rng = np.random.default_rng(seed)
    fill_buffer(buffer, chain.exhaustive_memory(rng))
    q = rng.normal(0.0, INITIAL_Q_STD, size=(n_states, 2))
    target_q = chain.true_q()
    prioritized = buffer if isinstance(buffer, PrioritizedReplayBuffer) else None
    # the mean squared error is below MSE_THRESHOLD when the sum over the 2 n entries is below this
    squared_error_limit = MSE_THRESHOLD * q.size
    np.random.seed(seed)  # noqa: NPY002 (SB3's buffers and sb3_per's sample with NumPy's global generator)
    for update in range(1, max_updates + 1):
        sample = buffer.sample(1)
        state, action = int(sample.observations.item()), int(sample.actions.item())
        bootstrap = (1.0 - sample.dones.item()) * q[int(sample.next_observations.item())].max()
        td_error = sample.rewards.item() + chain.gamma * bootstrap - q[state, action]
        q[state, action] += STEP_SIZE * td_error
        if prioritized is not None:
            # Its samples are PrioritizedReplayBufferSamples: they carry their indices.
            indices = cast(PrioritizedReplayBufferSamples, sample).indices
            prioritized.update_priorities(indices, np.array([td_error]))
        errors = (q - target_q).ravel()
        if errors @ errors < squared_error_limit:
            return update
    return None


def summarize_runs(n_states: int, method: str, updates: list[int | None]) -> dict[str, float | int | str]:
    """
    One summary row (``SUMMARY_COLUMNS``) for the runs of one chain length and method. A run that did not
    learn (None) counts as infinitely slow: a median or maximum it decides is NaN, meaning "above the cap".

    :param n_states: Chain length
    :param method: Replay method
    :param updates: Updates to learn of each seed's run, None for a run that did not learn
    """
    if not updates:
        raise ValueError("updates must hold at least one run, got an empty list")
    values = np.array([np.inf if u is None else u for u in updates], dtype=float)

    def finite_or_nan(value: float) -> float:
        return float(value) if np.isfinite(value) else float("nan")

    return {
        "n_states": n_states,
        "n_transitions": BlindCliffwalk(n_states).n_transitions,
        "method": method,
        "n_seeds": len(updates),
        "n_learned": int(np.isfinite(values).sum()),
        "median_updates": finite_or_nan(np.median(values)),
        "fewest_updates": finite_or_nan(values.min()),
        "most_updates": finite_or_nan(values.max()),
    }


@dataclass(frozen=True)
class BlindCliffwalkConfig(JsonConfig):
    """
    One run: ``updates_to_learn`` of one chain length, replay method and seed.

    :param n_states: Chain length
    :param method: Replay, one of ``METHODS``
    :param seed: Seeds the memory order, the initial Q table and the buffer's sampling
    :param max_updates: Updates after which the run gives up
    :param alpha: Prioritization exponent of the prioritized methods
    """

    n_states: int
    method: str
    seed: int
    max_updates: int = DEFAULT_MAX_UPDATES
    alpha: float = 1.0

    def __post_init__(self) -> None:
        BlindCliffwalk(self.n_states)
        check_method(self.method)
        check_integer_fields(self, ("seed",), minimum=0)
        check_max_updates(self.max_updates)

    @property
    def run_name(self) -> str:
        """Name of the run's folder, e.g. ``n12_rank_s3``."""
        return f"n{self.n_states}_{self.method}_s{self.seed}"


def check_updates(rows: pd.DataFrame, config: BlindCliffwalkConfig, source: Path | str) -> None:
    """
    Check that ``rows`` are the finished run of ``config``: one row of ``UPDATE_COLUMNS`` with its labels, and
    updates that are empty (it did not learn) or an integer from 1 to ``config.max_updates``.

    :raises ValueError: naming ``source`` and what is wrong
    """
    expected = [config.n_states, config.method, config.seed]
    if list(rows.columns) != list(UPDATE_COLUMNS) or rows.iloc[:, :3].values.tolist() != [expected]:
        raise ValueError(f"{source} is not one row of {list(UPDATE_COLUMNS)} for {expected}")
    updates = float(rows["updates"].iloc[0])
    if not (math.isnan(updates) or (updates.is_integer() and 1 <= updates <= config.max_updates)):
        raise ValueError(f"{source} holds updates={updates}, expected empty or an integer in 1 .. {config.max_updates}")


def finished_updates(config: BlindCliffwalkConfig, run_dir: Path) -> pd.DataFrame | None:
    """
    ``config``'s ``updates.csv`` rows if ``run_dir`` holds its finished run (``check_updates`` passes), else None.

    :raises ValueError: naming the file, if ``run_dir`` holds another config
    """
    return finished_result_rows(config, run_dir, UPDATES_FILE, check_updates)


def summary_table(configs: Sequence[BlindCliffwalkConfig], out_dir: Path) -> pd.DataFrame:
    """
    The summary table (``SUMMARY_COLUMNS``) of the finished runs of ``configs`` in ``out_dir``: a row per chain
    length and method, in plan order.

    :param configs: the plan
    :param out_dir: the study's folder
    """
    runs = collect_rows(configs, out_dir, finished_updates, UPDATE_COLUMNS)
    rows = [
        summarize_runs(int(n), str(method), [None if math.isnan(u) else int(u) for u in cell["updates"]])
        for (n, method), cell in runs.groupby(["n_states", "method"], sort=False)
    ]
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def plot_summary(summary: pd.DataFrame, path: Path) -> None:
    """
    Median updates to learn against memory size, log-log, one line per method with its min-max band (the
    paper's faint lines), written to ``path``.

    :param summary: Table of ``SUMMARY_COLUMNS``, as ``summary_table`` returns
    :param path: Image file to write
    """
    colors = {"uniform": "black", "proportional": "tab:blue", "rank": "tab:red"}
    # matplotlib's object API on an Agg canvas: no pyplot, so no global figure state
    fig = Figure(figsize=(6, 4.5))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for method, rows in summary.groupby("method", sort=False):
        rows = rows.sort_values("n_transitions")
        color = colors.get(str(method))
        ax.plot(rows["n_transitions"], rows["median_updates"], "o-", color=color, label=str(method))
        ax.fill_between(rows["n_transitions"], rows["fewest_updates"], rows["most_updates"], color=color, alpha=0.15)
    n_seeds = int(summary["n_seeds"].max())
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="transitions in the replay memory (2^(n+1) - 2 for n states)",
        ylabel="updates until Q is learned (MSE < 1e-3)",
        title=f"Blind Cliffwalk, tabular Q-learning, batch 1: median (band: min-max) of {n_seeds} seeds",
    )
    ax.title.set_fontsize(9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="replay")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


class BlindCliffwalkStudy:
    """The Blind Cliffwalk as ``comparison.study.Study`` (see this module's docstring)."""

    name = "blind_cliffwalk"

    def plan(
        self,
        seeds: Sequence[int],
        n_states: Iterable[int] = DEFAULT_N_STATES,
        methods: Iterable[str] = METHODS,
        **settings: Any,
    ) -> list[BlindCliffwalkConfig]:
        """
        One config per chain length, method and seed, in that order (the seeds innermost).

        :param seeds: the seeds
        :param n_states: chain lengths
        :param methods: replay methods, each one of ``METHODS``
        :param settings: further ``BlindCliffwalkConfig`` fields (``max_updates``, ``alpha``)
        :raises ValueError: a list is empty, or a value or setting is not valid
        """
        seeds, n_states, methods = list(seeds), list(n_states), list(methods)
        for name, values in (("n_states", n_states), ("methods", methods), ("seeds", seeds)):
            if not values:
                raise ValueError(f"{name} must not be empty, got {values!r}")
        return [
            BlindCliffwalkConfig(n, method, seed, **settings) for n in n_states for method in methods for seed in seeds
        ]

    def train(self, config: BlindCliffwalkConfig, run_dir: Path) -> None:
        """
        Run ``config`` into ``run_dir`` from its start (emptying the folder an interrupted attempt left):
        ``config.json``, then ``updates.csv``.

        :raises ValueError: ``run_dir`` holds another config
        """
        holds_config(config, run_dir)  # raises if the folder is another run's
        restart_run_dir(config, run_dir)
        updates = updates_to_learn(config.n_states, config.method, config.seed, config.max_updates, config.alpha)
        row = [config.n_states, config.method, config.seed, math.nan if updates is None else updates]
        write_csv_atomically(pd.DataFrame([row], columns=list(UPDATE_COLUMNS)), Path(run_dir) / UPDATES_FILE)

    def finished(self, config: BlindCliffwalkConfig, run_dir: Path) -> bool:
        """Whether ``run_dir`` holds ``config``'s finished run (``finished_updates``)."""
        return finished_updates(config, run_dir) is not None

    def report(self, configs: Sequence[BlindCliffwalkConfig], out_dir: Path, command: str) -> Path:
        """
        Write ``blind_cliffwalk.csv`` (``summary_table``) and, if a run has finished, ``blind_cliffwalk.png``
        (``plot_summary``) into ``out_dir``; return the CSV's path. ``command`` is not quoted: the CSV holds numbers
        only, and the study's page gives the command.
        """
        summary = summary_table(configs, out_dir)
        path = Path(out_dir) / SUMMARY_FILE
        write_csv_atomically(summary, path)
        if len(summary):
            plot_summary(summary, Path(out_dir) / PLOT_FILE)
        return path

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """``--n-states``, ``--methods``, ``--max-updates`` and ``--alpha``; 10 seeds unless ``--seeds`` says."""
        parser.add_argument(
            "--n-states", type=positive_integer, nargs="+", default=list(DEFAULT_N_STATES), help="chain lengths"
        )
        parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS, help="replay methods")
        parser.add_argument(
            "--max-updates", type=positive_integer, default=DEFAULT_MAX_UPDATES, help="updates before a run gives up"
        )
        parser.add_argument("--alpha", type=float, default=1.0, help="prioritization exponent")
        parser.set_defaults(seeds=10)

    def plan_options(self, args: argparse.Namespace) -> dict[str, Any]:
        """The chain lengths, the methods, and the update cap and alpha of every run."""
        return {
            "n_states": args.n_states,
            "methods": args.methods,
            "max_updates": args.max_updates,
            "alpha": args.alpha,
        }

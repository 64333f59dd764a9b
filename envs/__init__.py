"""Gymnasium environments for sb3-per; importing the package registers ``PairsTrading-v0`` and ``NoisyBandit-v0``.

In the repository this folder is ``envs/`` and its code imports it as ``envs``; installed (``pip install -e .``
from the clone, or a wheel built from it), it is the package ``sb3_per_envs``, a name no user's own ``envs``
package collides with::

    import gymnasium as gym
    gym.make("sb3_per_envs:PairsTrading-v0")

Its modules import one another relatively, so either name works. The environments know nothing about prioritized
replay (nothing here imports ``sb3_per``). Importing is cheap and has no global side effects beyond the
registration: no simulation, no RNG or warning-filter changes.
"""

from gymnasium.envs.registration import register, registry

from .baselines import FlatPolicy, RandomPolicy, ZScorePolicy, run_episodes, zscore_target_position
from .noisy_bandit import NOISY_KEY, NoisyBanditEnv, held_out_contexts, learnable_reward
from .pairs_trading import (
    FEATURE_NAMES,
    OBS_CORRELATION,
    OBS_POSITION,
    OBS_REGIME,
    OBS_SPREAD_AR1,
    OBS_VOL_RATIO,
    OBS_ZSCORE,
    OBS_ZSCORE_CHANGE,
    REGIME_FEATURE_NAMES,
    REGIME_UNKNOWN,
    SUMMARY_KEYS,
    PairsTradingEnv,
)
from .price_data import (
    SAMPLE_COLUMNS,
    SAMPLE_CSV_PATH,
    PriceHistory,
    load_price_history,
    load_prices_csv,
    validate_prices,
)
from .regime_model import BREAK, NORMAL, REGIME_NAMES, STRESS, PairPath, RegimeParams, simulate_path
from .walk_forward import RowRange, walk_forward_env_kwargs, walk_forward_split

ENV_ID = "PairsTrading-v0"
#: The noise test's env: a contextual bandit with pure reward noise on a share of its contexts
NOISY_BANDIT_ID = "NoisyBandit-v0"

# Under the name this package was imported by (envs or sb3_per_envs), once per process.
if ENV_ID not in registry:
    register(id=ENV_ID, entry_point=f"{__name__}.pairs_trading:PairsTradingEnv")
if NOISY_BANDIT_ID not in registry:
    register(id=NOISY_BANDIT_ID, entry_point=f"{__name__}.noisy_bandit:NoisyBanditEnv")

__all__ = [
    "BREAK",
    "ENV_ID",
    "FEATURE_NAMES",
    "NOISY_BANDIT_ID",
    "NOISY_KEY",
    "NORMAL",
    "OBS_CORRELATION",
    "OBS_POSITION",
    "OBS_REGIME",
    "OBS_SPREAD_AR1",
    "OBS_VOL_RATIO",
    "OBS_ZSCORE",
    "OBS_ZSCORE_CHANGE",
    "REGIME_FEATURE_NAMES",
    "REGIME_NAMES",
    "REGIME_UNKNOWN",
    "SAMPLE_COLUMNS",
    "SAMPLE_CSV_PATH",
    "STRESS",
    "SUMMARY_KEYS",
    "FlatPolicy",
    "NoisyBanditEnv",
    "PairPath",
    "PairsTradingEnv",
    "PriceHistory",
    "RandomPolicy",
    "RegimeParams",
    "RowRange",
    "ZScorePolicy",
    "held_out_contexts",
    "learnable_reward",
    "load_price_history",
    "load_prices_csv",
    "run_episodes",
    "simulate_path",
    "validate_prices",
    "walk_forward_env_kwargs",
    "walk_forward_split",
    "zscore_target_position",
]

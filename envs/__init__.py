"""Gymnasium environments for sb3-per; ``import envs`` registers ``PairsTrading-v0``.

The environments know nothing about prioritized replay (nothing here imports ``sb3_per``). Importing is cheap and
has no global side effects beyond the registration: no simulation, no RNG or warning-filter changes.
"""

from gymnasium.envs.registration import register, registry

from envs.baselines import FlatPolicy, RandomPolicy, ZScorePolicy, run_episodes, zscore_target_position
from envs.pairs_trading import (
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
from envs.price_data import (
    SAMPLE_COLUMNS,
    SAMPLE_CSV_PATH,
    PriceHistory,
    load_price_history,
    load_prices_csv,
    validate_prices,
)
from envs.regime_model import BREAK, NORMAL, REGIME_NAMES, STRESS, PairPath, RegimeParams, simulate_path
from envs.walk_forward import RowRange, walk_forward_env_kwargs, walk_forward_split

ENV_ID = "PairsTrading-v0"

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="envs.pairs_trading:PairsTradingEnv")

__all__ = [
    "BREAK",
    "ENV_ID",
    "FEATURE_NAMES",
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
    "PairPath",
    "PairsTradingEnv",
    "PriceHistory",
    "RandomPolicy",
    "RegimeParams",
    "RowRange",
    "ZScorePolicy",
    "load_price_history",
    "load_prices_csv",
    "run_episodes",
    "simulate_path",
    "validate_prices",
    "walk_forward_env_kwargs",
    "walk_forward_split",
    "zscore_target_position",
]

"""
DQN on CartPole-v1 with the RL Zoo's tuned hyperparameters: SB3's uniform buffer against sb3_per's PER at alphas
0 (uniform through the sum tree: a control), 0.2, 0.4 and 0.6 (see comparison/cartpole_per.py). Resumable.

    python scripts/cartpole_per.py [--seeds 10] [--steps 20000] [--out docs/results/cartpole_per]
"""

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.cartpole_per import cartpole_main

if __name__ == "__main__":
    cartpole_main()

"""
DQN on CartPole-v1 with the RL Zoo's tuned hyperparameters: SB3's uniform buffer against sb3_per's PER at alphas 0
(uniform through the sum tree: a control), 0.2, 0.4 and 0.6 (see comparison/cartpole_per.py), resumable: runs go into
docs/results/cartpole_per/runs/ one at a time (or --workers N at once), and a rerun trains only the unfinished ones.

    python scripts/cartpole_per_study.py run [--seeds 10] [--first-seed 0] [--variants uniform per_a0.6]
        [--steps 20000] [--eval-freq 5000] [--eval-episodes 20] [--shard 0 2] [--max-runs N]
        [--out docs/results/cartpole_per]                                       # train what is left, then report
    python scripts/cartpole_per_study.py report                                 # report only
    python scripts/cartpole_per_study.py pending                                # how many runs are unfinished
"""

import sys

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.cartpole_per import CartPolePerStudy
from comparison.study import study_main

if __name__ == "__main__":
    sys.exit(study_main(CartPolePerStudy()))

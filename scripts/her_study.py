"""
HER with SB3's uniform buffer against sb3_per's PrioritizedHerReplayBuffer on goal-conditioned tasks (see
comparison/her.py): SAC on gymnasium-robotics' FetchReach and DQN on SB3's BitFlippingEnv. Runs go into
docs/results/her/runs/ one at a time (or --workers N at once), and a rerun trains only the unfinished runs (each from
its start: a run takes minutes). FetchReach needs gymnasium-robotics: pip install -e ".[robotics]".

    python scripts/her_study.py run --seeds 5 [--tasks bit_flipping fetch_reach] [--variants her per_her]
        [--fetch-reach-steps 20000] [--bit-flipping-steps 4000] [--shard 0 2] [--max-runs N] [--out docs/results/her]
    python scripts/her_study.py report                                            # report only
    python scripts/her_study.py pending                                           # how many runs are unfinished
"""

import sys

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.her import HerStudy
from comparison.study import study_main

if __name__ == "__main__":
    sys.exit(study_main(HerStudy()))

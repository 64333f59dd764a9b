"""
Positive control: Schaul et al. (2016)'s Blind Cliffwalk, learned by tabular Q-learning from SB3's uniform
replay buffer and from sb3_per's proportional and rank-based ones (see comparison/blind_cliffwalk.py), resumable:
runs go into docs/results/blind_cliffwalk/runs/, and a rerun does only the unfinished ones.

    python scripts/blind_cliffwalk_study.py run [--n-states 2 3 ... 12] [--seeds 10] [--methods uniform rank]
        [--max-updates 1000000] [--alpha 1.0] [--shard 0 2] [--max-runs N]
        [--out docs/results/blind_cliffwalk]                                    # run what is left, then report
    python scripts/blind_cliffwalk_study.py report                              # report only
    python scripts/blind_cliffwalk_study.py pending                             # how many runs are unfinished
"""

import sys

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.blind_cliffwalk import BlindCliffwalkStudy
from comparison.study import study_main

if __name__ == "__main__":
    sys.exit(study_main(BlindCliffwalkStudy()))

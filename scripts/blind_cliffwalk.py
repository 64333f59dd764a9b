"""
Positive control: Schaul et al. (2016)'s Blind Cliffwalk, learned by tabular Q-learning from SB3's uniform
replay buffer and from sb3_per's proportional and rank-based ones (see comparison/blind_cliffwalk.py).

    python scripts/blind_cliffwalk.py [--n-states 2 3 ... 12] [--seeds 10] [--out-dir docs/results/blind_cliffwalk]
"""

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.blind_cliffwalk import blind_cliffwalk_main

if __name__ == "__main__":
    blind_cliffwalk_main()

"""
DQN, PER-DQN and ReLo-DQN on MinAtar Breakout and Seaquest with the ReLo authors' settings (see comparison/minatar.py),
resumable: runs go into docs/results/minatar/runs/ one at a time (or --workers N at once), and a rerun trains only the
unfinished ones. Needs the GPL-licensed MinAtar: pip install -e ".[minatar]".

    python scripts/minatar_study.py run --seeds 5 [--first-seed 0] [--games breakout seaquest] [--variants dqn per]
        [--frames 1000000] [--log-interval 50000] [--eval-episodes 10] [--shard 0 2] [--max-runs N]
        [--out docs/results/minatar]                                            # train what is left, then report
    python scripts/minatar_study.py report                                      # report only
    python scripts/minatar_study.py pending                                     # how many runs are unfinished

(Not scripts/minatar.py: a script of that name would shadow the minatar package for every script in scripts/.)
"""

import sys

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.minatar import MinAtarStudy
from comparison.study import study_main

if __name__ == "__main__":
    sys.exit(study_main(MinAtarStudy()))

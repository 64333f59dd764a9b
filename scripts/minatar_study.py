"""
DQN, PER-DQN and ReLo-DQN on MinAtar Breakout and Seaquest with the ReLo authors' settings
(see comparison/minatar.py), resumable: runs go into docs/results/minatar/runs/ one at a time, and a rerun trains only
the unfinished ones. Needs the GPL-licensed MinAtar: pip install -e ".[minatar]".

    python scripts/minatar_study.py run [--max-runs N] [--seeds 5] [--frames 1000000]  # train what is left, report
    python scripts/minatar_study.py report                                               # report only
    python scripts/minatar_study.py pending                                              # unfinished runs

(Not scripts/minatar.py: a script of that name would shadow the minatar package for every script in scripts/.)
"""

import sys

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.minatar_report import minatar_main

if __name__ == "__main__":
    sys.exit(minatar_main())

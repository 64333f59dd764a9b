"""
SAC with uniform replay, PER, ReLo and LA3P on Gymnasium's MuJoCo tasks (see comparison/mujoco.py), resumable: runs go
into docs/results/mujoco/runs/ one at a time (or --workers N at once), each saving a checkpoint every 50,000 steps, and
a rerun trains only the unfinished runs, each from its checkpoint. Needs MuJoCo: pip install -e ".[mujoco]".

    python scripts/mujoco_study.py run --seeds 5 [--tasks hopper halfcheetah] [--variants uniform per] [--steps 300000]
        [--shard 0 2] [--workers 2] [--max-runs N] [--out docs/results/mujoco]      # train what is left, then report
    python scripts/mujoco_study.py report                                         # report only
    python scripts/mujoco_study.py pending                                        # how many runs are unfinished
"""

import sys

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.mujoco import MuJoCoStudy
from comparison.study import study_main

if __name__ == "__main__":
    sys.exit(study_main(MuJoCoStudy()))

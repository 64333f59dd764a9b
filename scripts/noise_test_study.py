"""
The noise test: each replay scheme's attention on pure-noise transitions, and its learning speed (see
comparison/noise_test.py), resumable: runs go into docs/results/noise_test/runs/ one at a time (or --workers N at once),
and a rerun trains only the unfinished ones.

    python scripts/noise_test_study.py run --seeds 5 [--first-seed 0] [--variants per relo] [--total-steps 4000]
        [--epsilon 1e-6] [--shard 0 2] [--max-runs N] [--out docs/results/noise_test]  # train what is left, then report
    python scripts/noise_test_study.py report                                            # report only
    python scripts/noise_test_study.py pending                                           # how many runs are unfinished
"""

import sys

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.noise_test import NoiseTestStudy
from comparison.study import study_main

if __name__ == "__main__":
    sys.exit(study_main(NoiseTestStudy()))

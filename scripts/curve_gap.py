"""How much faster each replay variant learns than uniform, seed against seed: see comparison/curve_gap.py."""

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.curve_gap import curve_gap_main

if __name__ == "__main__":
    curve_gap_main()

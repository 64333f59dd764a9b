"""
Issue 46's four controls side by side (noise test, pairs env, MinAtar Breakout and Seaquest) for uniform, PER, ReLo,
ExpectedTD and ExpectedReLo, from the committed results (see comparison/controls.py); trains nothing.

    python scripts/controls_report.py          # writes docs/results/controls/summary.md
"""

import sys
from pathlib import Path

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)

from comparison.controls import write_controls

if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(f"usage: python scripts/controls_report.py (no arguments), got {sys.argv[1:]}")
    print(f"report: {write_controls(Path('docs/results/controls'), 'python scripts/controls_report.py')}")

"""
``scripts/curve_gap.py``: how much faster or slower each variant learns than uniform, seed against seed, over a
window of env steps, from a comparison's ``evaluations.csv`` (say, the committed full preset's part-way).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from comparison.schema import EVALUATIONS_FILE
from comparison.statistics import DEFAULT_BOOTSTRAP
from comparison.summary import curve_gap_lines
from comparison.tables import load_evaluations


def curve_gap_parser() -> argparse.ArgumentParser:
    """Parser of ``scripts/curve_gap.py``."""
    parser = argparse.ArgumentParser(
        prog="curve_gap.py",
        description="For each variant of a comparison: the mean return over its evaluations from --from to --to env "
        "steps minus that of uniform's run of the same seed, averaged over seeds with a paired bootstrap "
        f"{DEFAULT_BOOTSTRAP.level} CI, and the seeds above and below uniform's (sign test).",
    )
    parser.add_argument(
        "out",
        type=Path,
        nargs="?",
        default=Path("docs/results/full"),
        help=f"the comparison's output folder, holding {EVALUATIONS_FILE} (default: docs/results/full)",
    )
    parser.add_argument("--from", dest="low", type=int, default=None, help="first env step counted (default: first)")
    parser.add_argument("--to", dest="high", type=int, default=None, help="last env step counted (default: last)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="seeds counted (default: all)")
    parser.add_argument("--rng", type=int, default=0, help="bootstrap seed (default: 0, the report's)")
    return parser


def curve_gap_main(argv: Sequence[str] | None = None) -> list[str]:
    """Entry point of ``scripts/curve_gap.py``: prints and returns the lines of :func:`curve_gap_lines`."""
    parser = curve_gap_parser()
    args = parser.parse_args(argv)
    try:
        evals = load_evaluations(args.out / EVALUATIONS_FILE)
    except (FileNotFoundError, ValueError) as error:
        parser.error(str(error))
    if args.seeds is not None:
        missing = sorted(set(args.seeds) - set(evals["seed"].astype(int)))
        if missing:
            parser.error(f"--seeds: no run of seed {missing} in {args.out / EVALUATIONS_FILE}")
        evals = evals.loc[evals["seed"].isin(args.seeds)]
    try:
        lines = curve_gap_lines(evals, low=args.low, high=args.high, rng=args.rng)
    except ValueError as error:  # --from after --to, or no step in the window that every run evaluated
        parser.error(f"--from {args.low} --to {args.high}: {error}")
    print("\n".join(lines))
    return lines

"""
The reference runs: per-run CSVs of ``compare.py --quick --seeds 0`` made before a refactor, committed in
``docs/results/reference/quick_s0/``, and the check that today's code writes the same files, byte for byte.

A refactor changes no result: rerun the quick preset of every replay variant and compare. Byte identity holds on the
machine kind that made the references (torch's and numpy's kernels may round differently on another CPU); the check
says which files differ.

    python scripts/check_reference.py                 # every variant with a reference
    python scripts/check_reference.py --variants per lap
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

from comparison.cli import compare_main
from comparison.schema import EVALUATIONS_FILE, RUNS_DIR, TELEMETRY_FILE

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "docs" / "results" / "reference" / "quick_s0"
REFERENCE_FILES = (EVALUATIONS_FILE, TELEMETRY_FILE)


def reference_variants(reference_dir: Path = REFERENCE_DIR) -> list[str]:
    """The variants with a reference run (folders ``<variant>_s0``), sorted."""
    return sorted(path.name.removesuffix("_s0") for path in reference_dir.glob("*_s0") if path.is_dir())


def differing_files(runs_dir: Path, variants: Sequence[str], reference_dir: Path = REFERENCE_DIR) -> list[str]:
    """
    :param runs_dir: a comparison's ``runs/`` folder holding ``<variant>_s0`` runs
    :param variants: the variants to compare
    :param reference_dir: the references
    :return: ``<variant>_s0/<file>`` of every reference file that the run does not reproduce byte for byte (a
        missing file counts as different)
    """
    different = []
    for variant in variants:
        run = f"{variant}_s0"
        for name in REFERENCE_FILES:
            expected, produced = reference_dir / run / name, runs_dir / run / name
            if not produced.is_file() or produced.read_bytes() != expected.read_bytes():
                different.append(f"{run}/{name}")
    return different


def check_main(argv: Sequence[str] | None = None) -> int:
    """Rerun the quick preset's seed 0 of the given variants and compare with the references; 1 if any differs."""
    known = reference_variants()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", choices=known, default=known, help="default: all with a reference")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as out:
        compare_main(["--quick", "--seeds", "0", "--variants", *args.variants, "--out", out, "--no-progress-bar"])
        different = differing_files(Path(out) / RUNS_DIR, args.variants)
    for variant in args.variants:
        print(f"{variant}: {'DIFFERS' if any(d.startswith(f'{variant}_s0/') for d in different) else 'same bytes'}")
    return 1 if different else 0

"""
The reference runs: per-run CSVs of ``compare.py --quick --seeds 0`` made before a refactor, committed in
``docs/results/reference/quick_s0/``, and the check that today's code writes the same files, byte for byte.

A refactor changes no result: rerun the quick preset of every replay variant and compare. Byte identity holds on the
machine kind that made the references (torch's and numpy's kernels may round differently on another CPU); the check
prints, per file, "same bytes" or how far apart the numbers are, so that rounding on another machine (differences in
the last digits) is told apart from a changed result.

    python scripts/check_reference.py                 # every variant with a reference
    python scripts/check_reference.py --variants per lap
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from comparison.cli import compare_main
from comparison.schema import EVALUATIONS_FILE, RUNS_DIR, TELEMETRY_FILE

REFERENCE_DIR = Path(__file__).resolve().parent.parent / "docs" / "results" / "reference" / "quick_s0"
REFERENCE_FILES = (EVALUATIONS_FILE, TELEMETRY_FILE)


def reference_variants(reference_dir: Path = REFERENCE_DIR) -> list[str]:
    """The variants with a reference run (folders ``<variant>_s0``), sorted."""
    return sorted(path.name.removesuffix("_s0") for path in reference_dir.glob("*_s0") if path.is_dir())


def file_difference(expected: Path, produced: Path) -> str:
    """
    How a produced CSV compares with its reference: ``"same bytes"``, or how far apart, so that a refactor check (which
    wants the same bytes) and a check on another machine (last-digit rounding) can be told apart.

    :return: ``"same bytes"``; ``"missing"``; ``"other columns"`` or ``"N rows against M"``; or ``"differs: largest
        relative difference X (column C)"``, over the numeric columns (text columns that differ are named instead)
    """
    if not produced.is_file():
        return "missing"
    if produced.read_bytes() == expected.read_bytes():
        return "same bytes"
    reference, made = pd.read_csv(expected), pd.read_csv(produced)
    if list(reference.columns) != list(made.columns):
        return "other columns"
    if len(reference) != len(made):
        return f"{len(made)} rows against {len(reference)}"
    largest, where = 0.0, ""
    for column in reference.columns:
        a, b = reference[column], made[column]
        if not (pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b)):
            if not a.equals(b):
                return f"differs: text column {column} differs"
            continue
        x, y = a.to_numpy(dtype=float), b.to_numpy(dtype=float)
        both_nan = np.isnan(x) & np.isnan(y)
        scale = np.maximum(np.abs(x), np.abs(y))
        relative = np.where(both_nan | (x == y), 0.0, np.abs(x - y) / np.where(scale > 0, scale, 1.0))
        if np.isnan(relative).any():
            return f"differs: NaN in one file only (column {column})"
        if relative.size and relative.max() > largest:
            largest, where = float(relative.max()), column
    return f"differs: largest relative difference {largest:.3g} (column {where})"


def file_differences(runs_dir: Path, variants: Sequence[str], reference_dir: Path = REFERENCE_DIR) -> dict[str, str]:
    """
    :param runs_dir: a comparison's ``runs/`` folder holding ``<variant>_s0`` runs
    :param variants: the variants to compare
    :param reference_dir: the references
    :return: ``file_difference`` of every reference file, by ``<variant>_s0/<file>``
    """
    return {
        f"{variant}_s0/{name}": file_difference(
            reference_dir / f"{variant}_s0" / name, runs_dir / f"{variant}_s0" / name
        )
        for variant in variants
        for name in REFERENCE_FILES
    }


def check_main(argv: Sequence[str] | None = None) -> int:
    """
    Rerun the quick preset's seed 0 of the given variants and compare with the references, a line per file: 1 if any
    file is not the same bytes.
    """
    known = reference_variants()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--variants", nargs="+", choices=known, default=known, help="default: all with a reference")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as out:
        compare_main(["--quick", "--seeds", "0", "--variants", *args.variants, "--out", out, "--no-progress-bar"])
        differences = file_differences(Path(out) / RUNS_DIR, args.variants)
    for name, difference in differences.items():
        print(f"{name}: {difference}")
    return 0 if all(difference == "same bytes" for difference in differences.values()) else 1

"""scripts/check_reference.py tells, per file, the same bytes from last-digit rounding (another machine) from a changed
result, and names the file."""

from __future__ import annotations

from pathlib import Path

from comparison.reference import file_difference, file_differences


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_each_file_is_the_same_bytes_or_says_how_far_apart(tmp_path):
    reference = write(tmp_path / "ref.csv", "run,step,mean_return\nper_s0,0,0.012345678901234\nper_s0,1,0.5\n")
    assert file_difference(reference, write(tmp_path / "same.csv", reference.read_text())) == "same bytes"
    rounded = write(tmp_path / "rounded.csv", "run,step,mean_return\nper_s0,0,0.012345678901235\nper_s0,1,0.5\n")
    assert file_difference(reference, rounded) == "differs: largest relative difference 8.11e-14 (column mean_return)"
    changed = write(tmp_path / "changed.csv", "run,step,mean_return\nper_s0,0,0.02\nper_s0,1,0.5\n")
    assert file_difference(reference, changed) == "differs: largest relative difference 0.383 (column mean_return)"
    shorter = write(tmp_path / "short.csv", "run,step,mean_return\nper_s0,0,0.012345678901234\n")
    assert file_difference(reference, shorter) == "1 rows against 2"
    renamed = write(tmp_path / "renamed.csv", "run,step,mean_return\nlap_s0,0,0.012345678901234\nper_s0,1,0.5\n")
    assert file_difference(reference, renamed) == "differs: text column run differs"
    assert file_difference(reference, tmp_path / "absent.csv") == "missing"


def test_the_differences_name_each_run_and_file(tmp_path):
    for root in (tmp_path / "reference", tmp_path / "runs"):
        write(root / "per_s0" / "evaluations.csv", "step,x\n0,1.0\n")
        write(root / "per_s0" / "telemetry.csv", "step,y\n0,2.0\n")
    write(tmp_path / "runs" / "per_s0" / "telemetry.csv", "step,y\n0,2.5\n")
    assert file_differences(tmp_path / "runs", ["per"], tmp_path / "reference") == {
        "per_s0/evaluations.csv": "same bytes",
        "per_s0/telemetry.csv": "differs: largest relative difference 0.2 (column y)",
    }

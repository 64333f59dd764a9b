"""compare.py as a new user meets it: quick usage errors, one-line errors, its own folder for walk-forward runs."""

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from comparison.cli import compare_main
from envs import SAMPLE_CSV_PATH
from envs.price_data import price_file_sha256

REPO = Path(__file__).resolve().parents[2]
TINY = ["--quick", "--seeds", "0", "--variants", "uniform", "--no-progress-bar", "--total-steps", "200"]
TINY += ["--learning-starts", "100", "--eval-freq", "100", "--eval-episodes", "2", "--batch-size", "32"]
TINY += ["--net-arch", "16", "16", "--env-kwargs", '{"episode_length": 30}']
WALK_FORWARD = ["--prices", str(SAMPLE_CSV_PATH), "--test-fraction", "0.3"]


def _compare(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=120, check=False, **kwargs
    )


def test_a_mistyped_command_is_refused_before_torch_is_imported():
    done = _compare("-X", "importtime", "scripts/compare.py", "--seeds", "abc")
    assert done.returncode == 2 and "argument --seeds: must be an integer >= 0, got 'abc'" in done.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")]
    assert imported and not [name for name in imported if name.split(".")[0] in ("torch", "matplotlib", "sb3_per")]


def test_a_command_passing_the_quick_check_gets_the_full_one(capsys):
    with pytest.raises(SystemExit) as stop:
        compare_main(["--variants", "nope"])
    assert stop.value.code == 2 and "argument --variants: invalid choice: 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        compare_main(["--help"])
    assert "Presets (over the defaults" in capsys.readouterr().out


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="sends a signal to a process (Linux)")
def test_ctrl_c_while_compare_py_imports_prints_one_line_and_exits_130(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "scripts/compare.py", *TINY, "--out", str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # importing torch and the plots takes seconds; training has not begun
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130
    assert stderr.strip().splitlines() == ["compare.py: interrupted; rerun the same command to resume"], stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("under", "problem"), [("", "is a file, not a folder"), ("/sub", "lies under")])
def test_an_out_that_cannot_be_a_folder_is_a_usage_error(tmp_path, capsys, under, problem):
    path = tmp_path / "a_file"
    path.write_text("not a folder")
    with pytest.raises(SystemExit) as stop:
        compare_main([*TINY, "--out", f"{path}{under}"])
    error = capsys.readouterr().err
    assert stop.value.code == 2 and f"--out {path}{under} {problem}" in error and "Traceback" not in error


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prices", str(SAMPLE_CSV_PATH)], "--prices needs --test-from YYYY-MM-DD or --test-fraction F"),
        (["--test-fraction", "0.3"], "error: --test-fraction only applies with --prices FILE.csv"),
        (["--test-from", "2020-01-02", "--price-columns", "a", "b"], "--price-columns and --test-from only apply"),
        ([*WALK_FORWARD, "--price-columns", "a", "b"], "name the price columns of legs A and B with --price-columns"),
        (["--prices", str(SAMPLE_CSV_PATH), "--test-fraction", "0.99"], "--test-fraction=0.99 leaves the training"),
        (["--prices", str(SAMPLE_CSV_PATH), "--test-from", "2020-01-02"], "use --test-fraction instead"),
    ],
)
def test_walk_forward_usage_errors_name_the_flags(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        compare_main([*TINY, "--out", str(tmp_path), *argv])
    error = capsys.readouterr().err
    assert stop.value.code == 2 and message in error, error
    assert not re.search(r"\b(test_from|test_fraction|price_columns)\b", error.split("error:", 1)[1]), error


def test_a_walk_forward_comparison_has_an_output_folder_of_its_own(tmp_path, monkeypatch, planned):
    monkeypatch.chdir(tmp_path)
    _, out = planned(["--quick", *WALK_FORWARD])
    assert out == Path("results/walk_forward/pairs_sample/quick") != planned(["--quick"])[1]


def test_runs_on_a_price_file_edited_in_place_are_refused_naming_the_prices_hash(
    tmp_path, planned, finished_run, capsys
):
    prices = tmp_path / "pair.csv"
    shutil.copy(SAMPLE_CSV_PATH, prices)
    argv = [*TINY, "--out", str(tmp_path / "out"), "--prices", str(prices), "--test-fraction", "0.3"]
    configs, _ = planned(argv)
    assert [config.prices_sha256 for config in configs] == [price_file_sha256(prices)]
    finished_run(tmp_path / "out", configs[0])
    prices.write_text(prices.read_text().replace("\n1", "\n2", 1))  # one price edited, same rows
    with pytest.raises(SystemExit) as stop:
        compare_main([*argv, "--report-only"])
    error = capsys.readouterr().err
    assert stop.value.code == 2 and "of this plan (prices_sha256: " in error, error


def test_the_end_of_a_comparison_prints_its_headline_and_where_its_files_are(tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "compare.py"), *TINY, *WALK_FORWARD],
        cwd=tmp_path,  # the default --out is relative
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = Path("results/walk_forward/pairs_sample/quick")
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "Final return, IQM over seeds:" and len(lines) == 5, done.stdout
    assert re.fullmatch(r"  uniform  [+-]\d\.\d{3}  \(1 seed\)", lines[1]) and lines[2].startswith("  zscore ")
    assert lines[-1].startswith(f"Report: {out / 'summary.md'} ") and f"each run's files in {out / 'runs'}" in lines[-1]
    # real prices have no regime labels: no regime figures, no chart of them
    summary = (tmp_path / out / "summary.md").read_text()
    assert re.search(r"^\| uniform \| 1 \| .* \| n/a \| n/a \| n/a \|$", summary, re.MULTILINE), summary
    assert not (tmp_path / out / "regime_returns.png").exists()
    assert (pd.read_csv(tmp_path / out / "telemetry.csv")["tag"] == -1).all()


def test_the_variant_names_known_before_the_imports_are_the_experiments():
    from comparison.experiment import VARIANTS
    from comparison.schema import VARIANT_NAMES

    assert tuple(VARIANTS) == VARIANT_NAMES


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--variants", "perr"], "argument --variants: invalid choice: 'perr'"),
        (["--total-steps", "-5"], "argument --total-steps: must be an integer >= 1, got '-5'"),
        (["--eval-seed", "x"], "argument --eval-seed: must be an integer >= 0, got 'x'"),
        (["--seeds", "-1"], "argument --seeds: must be an integer >= 0, got '-1'"),
        (["--workers", "0"], "argument --workers: must be an integer >= 1, got '0'"),
        (["--seeds", "0", "0"], "--seeds lists a value twice: [0, 0]"),
    ],
)
def test_usage_errors_come_before_the_experiment_is_imported(argv, message):
    code = (
        "import sys\n"
        "from comparison.cli import compare_main\n"
        "try:\n"
        f"    compare_main({argv!r})\n"
        "except SystemExit as stop:\n"
        "    assert stop.code == 2\n"
        "assert 'torch' not in sys.modules and 'stable_baselines3' not in sys.modules, 'imported before the check'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert message in result.stderr


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--half-life", "10000"], "--half-life is used by none of the plan's variants (uniform, per)"),
        (
            ["--variants", "per", "--lap-min-priority", "0.1"],
            "--lap-min-priority is used by none of the plan's variants",
        ),
        (["--variants", "uniform", "--alpha", "0.4"], "--alpha is used by none of the plan's variants (uniform)"),
    ],
)
def test_a_replay_setting_no_variant_of_the_plan_uses_is_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        compare_main([*argv, "--out", "unused"])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err

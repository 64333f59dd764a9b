"""``scripts/study_queue.sh`` trains a study's plan to the end, a batch at a time, and commits each finished run's
folder with the report after each batch, and nothing of a run that has not finished."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A study of two variants whose runs write one line; the run "b_s1" writes nothing the first time it is trained
# (an interrupted run), so that the first batch that trains it leaves it unfinished; the run FAIL_RUN raises.
FAKE_STUDY = """
import json, os, sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from comparison.study import JsonConfig, holds_config, restart_run_dir, run_dir, study_main

@dataclass(frozen=True)
class Config(JsonConfig):
    seed: int
    variant: str

    @property
    def run_name(self):
        return f"{self.variant}_s{self.seed}"

class FakeStudy:
    name = "fake"

    def plan(self, seeds):
        return [Config(seed, variant) for seed in seeds for variant in ("a", "b")]

    def train(self, config, directory):
        restart_run_dir(config, directory)
        if config.run_name == os.environ.get("FAIL_RUN"):
            raise RuntimeError(f"{config.run_name} cannot train")
        flag = Path.cwd() / "b_s1_tried"  # the queue runs in the repository's root
        if config.run_name == "b_s1" and not flag.exists():
            flag.write_text("")
            return
        (directory / "result.txt").write_text("done\\n")

    def finished(self, config, directory):
        return holds_config(config, directory) and (directory / "result.txt").is_file()

    def report(self, configs, out_dir, command):
        done = [c.run_name for c in configs if self.finished(c, run_dir(out_dir, c))]
        (out_dir / "summary.md").write_text(f"{command}: {done}\\n")
        return out_dir / "summary.md"

    def add_arguments(self, parser):
        pass

    def plan_options(self, args):
        return {}

if __name__ == "__main__":
    sys.exit(study_main(FakeStudy()))
"""


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True, text=True).stdout


def commit_subjects(folder: Path) -> list[str]:
    """
    The subjects of the repository's commits, newest first, each queue commit's "; trained by CODE" checked (CODE is
    the commit the training started from: the commit's parent, in a repository only the queue commits to) and cut.
    """
    subjects = []
    for line in git(folder, "log", "--format=%s%x00%p").splitlines():
        subject, parent = line.split("\0")
        subject, _, code = subject.partition("; trained by ")
        assert code in ("", parent), f"{subject}: trained by {code}, but its parent is {parent}"
        subjects.append(subject)
    return subjects


def make_git_repository(folder: Path) -> None:
    """A git repository in ``folder`` with a first, empty commit and a committer."""
    git(folder, "init", "-q")
    git(folder, "config", "user.email", "queue@test")
    git(folder, "config", "user.name", "queue test")
    git(folder, "commit", "-q", "--allow-empty", "-m", "start")


def make_repository(tmp_path: Path) -> None:
    """A repository with the queue's scripts, the fake study and a .venv/bin/python that is this one."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name in ("study_queue.sh", "commit_results.sh", "child_process.sh"):
        shutil.copy(ROOT / "scripts" / name, scripts / name)
    (scripts / "fake_study.py").write_text(FAKE_STUDY)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/usr/bin/env bash\nexec {sys.executable} "$@"\n')  # this venv's python
    python.chmod(0o755)
    make_git_repository(tmp_path)


def run_script(tmp_path: Path, script: str, *arguments: str, **environment: str) -> subprocess.CompletedProcess[str]:
    """``bash scripts/SCRIPT ARGUMENTS`` in the repository ``tmp_path``, this clone importable, ``environment`` set."""
    return subprocess.run(
        ["bash", f"scripts/{script}", *arguments],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_queue(tmp_path: Path, *arguments: str, **environment: str) -> subprocess.CompletedProcess[str]:
    return run_script(tmp_path, "study_queue.sh", "fake", *arguments, **environment)


def test_the_queue_commits_finished_runs_and_the_report_after_each_batch(tmp_path: Path):
    make_repository(tmp_path)
    out = "results/fake"
    (tmp_path / out).mkdir(parents=True)
    (tmp_path / out / "README.md").write_text("a page being written by hand\n")  # not the queue's to commit
    queue = run_queue(tmp_path, "2", "--seeds", "2", "--out", out)
    assert queue.returncode == 0, queue.stderr
    assert "every run of this fake queue has finished" in queue.stdout
    # batches: a_s0 b_s0 | a_s1 b_s1 (b_s1 unfinished) | b_s1
    assert "trained by" in git(tmp_path, "log", "-1", "--format=%s")
    assert commit_subjects(tmp_path) == [
        "fake study: finished runs and report (0 runs pending in this queue)",
        "fake study: finished runs and report (1 runs pending in this queue)",
        "fake study: finished runs and report (2 runs pending in this queue)",
        "start",
    ]
    second = git(tmp_path, "show", "--name-only", "--format=", "HEAD~1").split()
    assert f"{out}/runs/a_s1/result.txt" in second and not any("b_s1" in path for path in second)
    tracked = git(tmp_path, "ls-files").split()
    assert sorted(tracked) == sorted(
        [f"{out}/summary.md"]
        + [
            f"{out}/runs/{run}/{name}"
            for run in ("a_s0", "b_s0", "a_s1", "b_s1")
            for name in ("config.json", "result.txt")
        ]
    )
    assert "['a_s0', 'b_s0', 'a_s1', 'b_s1']" in (tmp_path / out / "summary.md").read_text()
    assert git(tmp_path, "status", "--porcelain", "--", out) == f"?? {out}/README.md\n"  # the only file left out


def test_the_minatar_queue_commits_the_controls_page_rebuilt_with_its_report(tmp_path: Path):
    make_repository(tmp_path)
    scripts = tmp_path / "scripts"
    (scripts / "minatar_study.py").write_text(FAKE_STUDY)
    (scripts / "controls_report.py").write_text(
        "from pathlib import Path\n"
        "page = Path('docs/results/controls/summary.md')\n"
        "page.parent.mkdir(parents=True, exist_ok=True)\n"
        "page.write_text(str(sorted(Path('results/fake/runs').glob('*'))))\n"
    )
    queue = run_script(tmp_path, "study_queue.sh", "minatar", "1", "--seeds", "1", "--out", "results/fake")
    assert queue.returncode == 0, queue.stderr
    first, last = (git(tmp_path, "show", "--name-only", "--format=", commit).split() for commit in ("HEAD~1", "HEAD"))
    assert "docs/results/controls/summary.md" in first and "results/fake/runs/a_s0/result.txt" in first
    # rebuilt after each batch, so that it holds the runs committed with it
    assert "b_s0" in (tmp_path / "docs/results/controls/summary.md").read_text()
    assert "docs/results/controls/summary.md" in last
    # any other study's queue leaves the page alone
    other = tmp_path / "other"
    other.mkdir()
    make_repository(other)
    (other / "scripts" / "controls_report.py").write_text("raise SystemExit('not to be run')\n")
    assert run_queue(other, "1", "--seeds", "1", "--out", "results/fake").returncode == 0
    assert not (other / "docs").exists()


def test_a_failed_run_stops_the_queue_after_its_batch_is_committed(tmp_path: Path):
    make_repository(tmp_path)
    out = "results/fake"
    queue = run_queue(tmp_path, "2", "--seeds", "1", "--workers", "2", "--out", out, FAIL_RUN="b_s0")
    assert queue.returncode == 1
    assert "RuntimeError: b_s0 cannot train" in queue.stdout and "run b_s0 FAILED" in queue.stdout
    assert "a run of this fake queue failed (exit status 1); the finished ones are committed" in queue.stderr
    assert commit_subjects(tmp_path)[0] == "fake study: finished runs and report (1 runs pending in this queue)"
    assert sorted(git(tmp_path, "ls-files").split()) == [
        f"{out}/runs/a_s0/config.json",
        f"{out}/runs/a_s0/result.txt",
        f"{out}/summary.md",
    ]


def test_a_bad_name_or_batch_is_refused_before_anything_runs(tmp_path: Path):
    for arguments, said in (
        (["nosuch", "1"], "NAME: no scripts/nosuch_study.py"),
        (["minatar", "0"], "BATCH must be an integer >= 1, got '0'"),
        (["minatar"], "usage: bash scripts/study_queue.sh NAME BATCH"),
    ):
        queue = subprocess.run(
            ["bash", str(ROOT / "scripts" / "study_queue.sh"), *arguments], capture_output=True, text=True, timeout=30
        )
        assert queue.returncode == 2 and said in queue.stderr


# A stand-in for .venv/bin/python in scripts/full_queue.sh: it logs each call's arguments; a report writes its
# summary into the --out folder (the full preset's by default), the controls page its own, and a training nothing.
FAKE_COMPARE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$QUEUE_TEST_DIR/calls"
out=docs/results/full
previous=""
for arg in "$@"; do
    [ "$previous" = "--out" ] && out="$arg"
    previous="$arg"
done
case "$*" in
    *controls_report.py*) mkdir -p docs/results/controls && echo page > docs/results/controls/summary.md ;;
    *--report-only*) mkdir -p "$out" && echo report > "$out/summary.md" ;;
esac
exit 0
"""


def full_queue_repository(tmp_path: Path) -> None:
    """A git repository with full_queue.sh, and FAKE_COMPARE_PYTHON as its .venv/bin/python."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name in ("full_queue.sh", "commit_results.sh", "child_process.sh"):
        shutil.copy(ROOT / "scripts" / name, scripts / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_COMPARE_PYTHON)
    python.chmod(0o755)
    make_git_repository(tmp_path)


def run_full_queue(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return run_script(tmp_path, "full_queue.sh", *arguments, QUEUE_TEST_DIR=str(tmp_path))


def test_the_full_queue_passes_its_folder_and_options_to_every_compare_call(tmp_path: Path):
    full_queue_repository(tmp_path)
    out = "docs/results/tuned"
    arguments = ["--seeds", "3", "3", "--out", out, "expected_td", "--", "--regressor-learning-rate", "3e-4"]
    queue = run_full_queue(tmp_path, *arguments)
    assert queue.returncode == 0, queue.stderr
    train, report, controls = (tmp_path / "calls").read_text().splitlines()
    assert train.startswith("scripts/compare.py --full --variants expected_td --seeds 3 --workers 1 --no-progress-bar")
    assert train.endswith("--regressor-learning-rate 3e-4") and f"--out {out}" not in train  # a scratch folder
    assert (
        report
        == f"scripts/compare.py --full --report-only --no-progress-bar --out {out} --regressor-learning-rate 3e-4"
    )
    assert controls == "scripts/controls_report.py"
    assert commit_subjects(tmp_path)[0] == f"Full preset: expected_td seed 3 finished ({out}), report rebuilt"
    assert sorted(git(tmp_path, "ls-files").split()) == ["docs/results/controls/summary.md", f"{out}/summary.md"]


@pytest.mark.parametrize(
    "arguments",
    [[], ["--out"], ["--seeds", "0", "20", "relo"], ["--", "--alpha", "0.5"], ["--out", "", "relo"]],
)
def test_the_full_queue_refuses_bad_arguments(arguments: list[str]):
    queue = subprocess.run(
        ["bash", str(ROOT / "scripts" / "full_queue.sh"), *arguments], capture_output=True, text=True, timeout=30
    )
    assert queue.returncode == 2 and "usage: bash scripts/full_queue.sh" in queue.stderr


def background_chain_repository(tmp_path: Path, queue_line: str = "") -> Path:
    """A git repository with background_plan.sh and stand-in queues that log their arguments (after ``queue_line``);
    the MinAtar step fails."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name in ("background_plan.sh", "child_process.sh"):
        shutil.copy(ROOT / "scripts" / name, scripts / name)
    for queue in ("full_queue.sh", "study_queue.sh"):
        (scripts / queue).write_text(
            f'{queue_line}\necho "{queue} $*" >> "$QUEUE_TEST_DIR/calls"\n'
            'case "$*" in minatar*) exit 3 ;; esac\nexit 0\n'
        )
    git(tmp_path, "init", "-q")
    return scripts


def test_background_chains_run_their_queues_in_order_and_go_on_past_a_failed_one(tmp_path: Path):
    scripts = background_chain_repository(tmp_path)
    calls = tmp_path / "calls"
    chains = {}
    for chain in ("0", "1"):
        ran = subprocess.run(
            ["bash", "scripts/background_plan.sh", chain],
            cwd=tmp_path,
            env={**os.environ, "QUEUE_TEST_DIR": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert ran.returncode == 0
        chains[chain] = (calls.read_text().splitlines(), ran.stderr)
        calls.unlink()
    assert chains["0"][0] == [
        "full_queue.sh --seeds 0 9 expected_relo_root",
        "study_queue.sh minatar 1 --seeds 5 --games breakout seaquest",
        "study_queue.sh mujoco 1 --seeds 5 --shard 0 2",
        "study_queue.sh minatar 1 --seeds 5",
    ]
    assert "step failed (exit status 3): scripts/study_queue.sh minatar" in chains["0"][1]
    assert chains["1"][0] == [
        "full_queue.sh --seeds 10 19 expected_relo_root",
        "full_queue.sh --out docs/results/full_expected_td_tuned expected_td -- --regressor-learning-rate 3e-4",
        "full_queue.sh --out docs/results/full_relo_authors_offset relo -- --relo-epsilon 1e-5",
        "study_queue.sh mujoco 1 --seeds 5 --shard 1 2",
    ]
    refused = subprocess.run(["bash", str(scripts / "background_plan.sh"), "2"], capture_output=True, text=True)
    assert refused.returncode == 2 and "usage: bash scripts/background_plan.sh CHAIN" in refused.stderr


def test_a_chain_started_twice_refuses_the_second_start(tmp_path: Path):
    background_chain_repository(tmp_path, queue_line="sleep 5")
    environment = {**os.environ, "QUEUE_TEST_DIR": str(tmp_path)}
    first = subprocess.Popen(["bash", "scripts/background_plan.sh", "1"], cwd=tmp_path, env=environment)
    try:
        deadline = time.monotonic() + 20
        while not (tmp_path / ".git" / "background_plan_1.lock").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)
        second = subprocess.run(
            ["bash", "scripts/background_plan.sh", "1"], cwd=tmp_path, env=environment, capture_output=True, text=True
        )
        assert second.returncode == 1 and "background_plan 1 is already running" in second.stderr
        other = subprocess.run(
            ["bash", "scripts/background_plan.sh", "0"],
            cwd=tmp_path,
            env={**environment, "QUEUE_TEST_DIR": str(tmp_path / "other")},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "already running" not in other.stderr  # the other chain has a lock of its own
    finally:
        first.kill()
        first.wait()


def test_a_queue_started_with_nothing_pending_commits_what_an_earlier_start_finished(tmp_path: Path):
    make_repository(tmp_path)
    out = "results/fake"
    for run in ("a_s0", "b_s0"):  # finished by a start that was stopped before its commit
        directory = tmp_path / out / "runs" / run
        directory.mkdir(parents=True)
        variant, seed = run[0], int(run[-1])
        (directory / "config.json").write_text(f'{{"seed": {seed}, "variant": "{variant}"}}')
        (directory / "result.txt").write_text("done\n")
    queue = run_queue(tmp_path, "1", "--seeds", "1", "--out", out)
    assert queue.returncode == 0, queue.stderr
    assert git(tmp_path, "log", "-1", "--format=%s").strip() == (
        "fake study: finished runs and report (0 runs pending in this queue)"
    )
    assert f"{out}/runs/b_s0/result.txt" in git(tmp_path, "ls-files").split()


def test_the_full_queue_rebuilds_once_for_seeds_that_had_finished(tmp_path: Path):
    full_queue_repository(tmp_path)
    for seed in (3, 4):  # both seeds finished before this start (and seed 4's commit was lost)
        run = tmp_path / "docs/results/full/runs" / f"relo_s{seed}"
        run.mkdir(parents=True)
        (run / "evaluations.csv").write_text("done\n")
    queue = run_full_queue(tmp_path, "--seeds", "3", "4", "relo")
    assert queue.returncode == 0, queue.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [call.split()[0] + (" report" if "--report-only" in call else "") for call in calls] == [
        "scripts/compare.py",
        "scripts/compare.py",
        "scripts/compare.py report",
        "scripts/controls_report.py",
    ]
    assert git(tmp_path, "log", "-1", "--format=%s").strip() == (
        "Full preset: report rebuilt from the finished runs of docs/results/full"
    )
    assert "docs/results/full/runs/relo_s4/evaluations.csv" in git(tmp_path, "ls-files").split()


def test_a_lock_left_by_a_killed_git_command_is_removed_and_a_live_one_kept(tmp_path: Path):
    make_git_repository(tmp_path)
    (tmp_path / "result.txt").write_text("done\n")
    git_dir = tmp_path / ".git"
    queue_lock = git_dir / "full_queue.lock"  # a queue's flock file: never git's to remove
    for lock in (git_dir / "index.lock", queue_lock):
        lock.write_text("")
        os.utime(lock, (time.time() - 600, time.time() - 600))
    commit = subprocess.run(
        ["bash", "-c", f"source {ROOT / 'scripts' / 'commit_results.sh'} && commit_results 'a result' result.txt"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert commit.returncode == 0 and git(tmp_path, "log", "-1", "--format=%s").strip() == "a result"
    assert queue_lock.exists() and not (git_dir / "index.lock").exists()
    (git_dir / "index.lock").write_text("")  # a git command's own, a moment old: left alone
    subprocess.run(
        ["bash", "-c", f"source {ROOT / 'scripts' / 'commit_results.sh'} && remove_stale_git_locks"],
        cwd=tmp_path,
        check=True,
    )
    assert (git_dir / "index.lock").exists()


def test_the_code_version_names_the_commit_and_flags_an_edited_package(tmp_path: Path):
    make_git_repository(tmp_path)
    (tmp_path / "sb3_per").mkdir()
    (tmp_path / "sb3_per" / "x.py").write_text("a = 1\n")
    (tmp_path / "notes.md").write_text("notes\n")
    git(tmp_path, "add", "sb3_per/x.py", "notes.md")
    git(tmp_path, "commit", "-q", "-m", "code")

    def code_version() -> str:
        source = f"source {ROOT / 'scripts' / 'commit_results.sh'} && code_version"
        return subprocess.run(["bash", "-c", source], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    head = git(tmp_path, "rev-parse", "--short", "HEAD")
    (tmp_path / "notes.md").write_text("other notes\n")  # neither the package nor the experiment
    (tmp_path / "sb3_per" / "new.py").write_text("b = 2\n")  # untracked: no training imports it unasked
    assert code_version() == head
    (tmp_path / "sb3_per" / "x.py").write_text("a = 2\n")
    assert code_version() == head.strip() + "+uncommitted\n"

"""Stopping scripts/compare.py with a real signal: workers end at once, finished runs are kept, one line, exit 128+N."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def command(tiny_run_argv) -> list[str]:
    """Four tiny runs, one at a time: the first finishes within seconds, the others are still to come when it does."""
    return [
        "scripts/compare.py",
        "--quick",
        "--seeds",
        "0",
        "1",
        "--workers",
        "1",
        *tiny_run_argv(total_steps=400, learning_starts=200, eval_freq=200, eval_episodes=2, episode_length=40),
        "--no-progress-bar",
    ]


def _session_processes(session: int) -> list[int]:
    """Live (not zombie) processes of a session, from /proc (no psutil needed)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        if int(fields[3]) == session and fields[0] != "Z":  # fields after the name: state, ppid, pgrp, session
            pids.append(int(stat.parent.name))
    return pids


def _wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc (Linux)")
@pytest.mark.parametrize(
    ("signum", "to_group", "code"), [(signal.SIGINT, True, 130), (signal.SIGTERM, False, 143)], ids=["ctrl-c", "kill"]
)
def test_a_signal_stops_the_comparison_keeping_its_finished_runs(signum, to_group, code, command, tmp_path):
    out = tmp_path / "out"
    stderr_path = tmp_path / "stderr.txt"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with stderr_path.open("w") as stderr:
        # Its own session, as a terminal's foreground job: Ctrl-C is a SIGINT to the whole process group.
        process = subprocess.Popen(
            [sys.executable, *command, "--out", str(out)],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            assert _wait_for(lambda: any(out.glob("runs/*/evaluations.csv")), timeout=240), stderr_path.read_text()
            assert len(_session_processes(process.pid)) > 1  # a worker is training the next run
            if to_group:
                os.killpg(process.pid, signum)
            else:
                os.kill(process.pid, signum)
            returncode = process.wait(timeout=60)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    assert returncode == code
    assert _wait_for(lambda: not _session_processes(process.pid), timeout=15), "a worker outlived the comparison"

    text = stderr_path.read_text()
    assert "Traceback" not in text, text
    match = re.search(r"^(\d) of 4 runs finished and kept; rerun the same command to resume$", text, re.MULTILINE)
    assert match, text
    finished = sorted(path.parent.name for path in out.glob("runs/*/evaluations.csv"))
    assert int(match.group(1)) == len(finished) < 4
    for name in finished:  # kept whole: every evaluation of the run
        assert list(pd.read_csv(out / "runs" / name / "evaluations.csv")["step"]) == [0, 200, 400]

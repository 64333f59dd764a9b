"""A comparison killed outright (SIGKILL, no chance to end its workers) takes its runs with it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# One run far longer than the test waits for it (the whole run would take minutes).
COMMAND = ["scripts/compare.py", "--quick", "--seeds", "0", "--variants", "uniform", "--total-steps", "50000"]
COMMAND += ["--eval-freq", "50000", "--eval-episodes", "2", "--net-arch", "16", "--no-progress-bar"]


def _workers(parent: int) -> list[int]:
    """The run processes (multiprocessing's spawned children) of process ``parent``."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [int(pid) for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait_for(condition, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not condition():
        time.sleep(0.1)
    return condition()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="workers end with their parent through Linux's prctl")
def test_a_worker_dies_with_its_comparison_killed_by_sigkill(tmp_path):
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, *COMMAND, "--out", str(out)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    workers: list[int] = []
    try:
        # training has begun: the run wrote its settings
        assert _wait_for(lambda: (out / "runs" / "uniform_s0" / "config.json").exists(), timeout=120)
        workers = _workers(process.pid)
        assert len(workers) == 1
        process.kill()
        process.wait(timeout=10)
        assert _wait_for(lambda: not _alive(workers[0]), timeout=20), "the worker outlived its comparison"
    finally:
        for pid in [process.pid, *workers]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)

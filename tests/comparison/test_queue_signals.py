"""``kill <queue pid>`` stops the queue scripts' training in progress too, as their headers say, and the queue exits
at once with 128 + the signal's number (the training is redone on the next start)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A stand-in for .venv/bin/python: a queue's "pending" count is 1, a report and the list of finished runs are empty,
# and a training writes its pid then sleeps for a minute (what a queue that forwards no signal would wait for).
FAKE_PYTHON = """#!/usr/bin/env bash
for arg in "$@"; do
    case "$arg" in
        pending) echo 1; exit 0 ;;
        report|--report-only|finished|scripts/controls_report.py) exit 0 ;;
    esac
done
echo $$ > "$QUEUE_TEST_DIR/training.pid"
exec sleep 60
"""


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize(
    ("script", "arguments"),
    [("study_queue.sh", ["minatar", "1"]), ("full_queue.sh", ["--seeds", "0", "0", "relo"])],
)
@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_a_signal_to_the_queue_stops_its_training_and_the_queue(tmp_path, script, arguments, sent):
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for name in (script, "commit_results.sh", "child_process.sh", "minatar_study.py"):
        shutil.copy(ROOT / "scripts" / name, scripts / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    queue = subprocess.Popen(
        ["bash", str(scripts / script), *arguments],
        cwd=tmp_path,
        env={**os.environ, "QUEUE_TEST_DIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a shell started in the background (`cmd &`, as a CI runner or nohup may start pytest)
        # passes SIGINT on ignored, and bash cannot trap a signal ignored on entry
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    pid_file = tmp_path / "training.pid"
    deadline = time.monotonic() + 30
    while not (pid_file.is_file() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    training = int(pid_file.read_text())
    assert alive(training)

    queue.send_signal(sent)
    _, stderr = queue.communicate(timeout=15)  # a queue that waits for its training would take a minute

    assert queue.returncode == 128 + sent
    assert f"stopped by SIG{sent.name[3:]}" in stderr
    deadline = time.monotonic() + 5
    while alive(training) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(training)

"""PER-SAC vs uniform SAC over seeds on the pairs-trading env, with baselines and a report. See --help."""

import os
import signal
from types import FrameType

import _repository  # noqa: F401  (the clone on sys.path: first, before comparison and envs)


def exit_interrupted(signum: int, frame: FrameType | None) -> None:
    """
    Ctrl-C before the runs start (torch is still being imported, say) or after they end: one line, as a Ctrl-C during
    the runs gets (``compare_main``, whose own handler ends the runs), and the shell's exit status of a command ended
    by SIGINT. It exits at once: raised as ``KeyboardInterrupt`` the signal could land in a finalizer or in a
    library's ``except BaseException`` while modules are imported, and be lost; no run is in progress to clean up.
    """
    os.write(2, b"compare.py: interrupted; rerun the same command to resume\n")
    os._exit(128 + signum)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, exit_interrupted)
    from comparison.cli import compare_main

    compare_main()

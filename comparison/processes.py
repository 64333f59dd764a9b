"""
Runs trained in processes of their own, a few at a time, for any study: ``train_in_processes`` is the pool that
``comparison.study.run_study`` (``--workers``) and the pairs comparison's local backend (``comparison.runner``) share,
and ``stop_on_signals`` turns the first Ctrl-C or SIGTERM into ``RunsInterrupted``, which ends the runs in progress.

A run's process is spawned afresh (no state of the parent's torch), trains with one torch thread, ends with its parent
(``PR_SET_PDEATHSIG`` on Linux) and ignores SIGINT: the parent alone decides, ending its children with SIGTERM. A run
ended part-way leaves no result file, so a rerun redoes it. This module imports nothing heavy.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from multiprocessing import get_context
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import Any

#: Trains one run, called as ``train(config, directory, on_steps=...)``: ``on_steps`` takes the env steps the run
#: takes as it goes (ints, which it may never call).
Train = Callable[..., object]
#: Called once per run as it ends: its config and None, or its config and its error text.
Record = Callable[[Any, str | None], None]
#: Called as a run goes: its config and the env steps it took since the previous call.
Advance = Callable[[Any, int], None]

# Seconds a terminated run process has to exit before it is killed.
_GRACE_SECONDS = 5.0
# prctl's option: the signal a process receives when its parent ends (linux/prctl.h).
_PR_SET_PDEATHSIG = 1


class RunsInterrupted(BaseException):
    """
    Runs stopped by a signal (like ``KeyboardInterrupt``, not an ``Exception``, so that no handler of a run's failure
    catches it).

    :param signum: the signal, e.g. ``signal.SIGINT`` or ``signal.SIGTERM``
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """
    Within the block, the first SIGINT (Ctrl-C) or SIGTERM raises ``RunsInterrupted`` in the main thread (which ends
    the running runs: see ``train_in_processes``), and later ones are ignored while that unwinds, so a second Ctrl-C
    cannot cut the clean-up short. The previous handlers are restored after the block.
    """
    stopping = (signal.SIGINT, signal.SIGTERM)

    def interrupt(signum: int, frame: FrameType | None) -> None:
        for other in stopping:
            signal.signal(other, signal.SIG_IGN)
        raise RunsInterrupted(signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in stopping}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def exit_status_interrupted(stop: RunsInterrupted) -> int:
    """
    The exit status of a command whose runs ``stop`` ended: the shell's convention for a command ended by a signal,
    128 + its number (130 for Ctrl-C, 143 for kill). From here on SIGINT and SIGTERM are ignored, so that a second
    Ctrl-C cannot turn the exit (and torch's clean-up at exit) into a traceback.
    """
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    return 128 + stop.signum


def train_in_processes(
    train: Train,
    runs: Sequence[tuple[Any, Path]],
    workers: int,
    record: Record,
    advance: Advance,
    on_start: Callable[[Any], None] | None = None,
) -> None:
    """
    Train each run of ``runs`` (its config and its folder) in a fresh process, ``workers`` at a time, in order. A
    run that fails is recorded and the others go on. On any exception here (Ctrl-C, SIGTERM turned into one by
    ``stop_on_signals``) the running children are terminated at once, so no run goes on or starts after it.

    :param train: trains a run in its process; it must pickle (a module-level function, or a ``functools.partial``
        of one with picklable arguments)
    :param runs: the runs, each its config and its folder
    :param workers: how many runs train at once
    :param record: called in this process as each run ends
    :param advance: called in this process with the env steps a run reports
    :param on_start: called in this process with each run's config as its process starts
    """
    context = get_context("spawn")
    queue = list(runs)
    running: dict[BaseProcess, tuple[Any, Connection]] = {}
    try:
        while queue or running:
            while queue and len(running) < workers:
                config, directory = queue.pop(0)
                receiver, sender = context.Pipe(duplex=False)
                process: BaseProcess = context.Process(
                    target=_train_in_child, args=(train, config, directory, sender, os.getpid())
                )
                _start_child(process)
                if on_start is not None:
                    on_start(config)
                sender.close()  # the child holds the sending end: EOF here once it is gone
                running[process] = (config, receiver)
            # Ready when a child has sent its steps or outcome, or has died without (end of file): never blocks a
            # child on a full pipe, as waiting for its exit first would with a long traceback.
            for ready in wait([receiver for _, receiver in running.values()]):
                process = next(p for p, (_, receiver) in running.items() if receiver is ready)
                config, receiver = running[process]
                try:
                    message = receiver.recv()
                except EOFError:
                    message = None
                else:
                    if isinstance(message, int):
                        advance(config, message)
                        continue
                del running[process]
                process.join()
                receiver.close()
                if message is None and process.exitcode != 0:
                    message = f"the run's process ended with exit code {process.exitcode} before it finished"
                record(config, message)
    finally:
        _end_processes(running)


def configure_torch_threads(n_threads: int = 1) -> None:
    """One torch thread per run: runs go in parallel processes, one per core (torch is imported here, not at load)."""
    import torch

    torch.set_num_threads(n_threads)


def _train_in_child(train: Train, config: Any, directory: Path, messages: Connection, parent: int) -> None:
    """
    A run in its own process, which ends with its parent (``_end_with_parent``); sends the parent the env steps it
    takes as it goes (ints), then its outcome (None when it finished, else its error text), and ends. It starts
    with SIGINT blocked (see ``_start_child``) and keeps it so: Ctrl-C in a terminal reaches every process of the
    group, and the parent alone decides, ending its children with SIGTERM.
    """
    _end_with_parent(parent)
    # Ignored too, not only blocked: a library may unblock it in a thread it starts (then the run's exit, still
    # in its clean-up, would print a KeyboardInterrupt).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    configure_torch_threads(1)
    try:
        train(config, directory, on_steps=messages.send)
        messages.send(None)
    except Exception:
        messages.send(traceback.format_exc())


def _end_with_parent(parent: int) -> None:
    """
    Have the kernel kill this process when its parent, process ``parent``, ends, SIGKILL included (Linux's
    ``PR_SET_PDEATHSIG``; elsewhere a parent that is killed outright leaves its runs going); end it at once if the
    parent is gone already. A run whose parent is gone would train on into a folder that a rerun is rebuilding.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # it ended before the call above: the signal will not come
        os._exit(1)


def _end_processes(processes: Iterable[BaseProcess]) -> None:
    """Terminate the processes and wait for them (killing any that outlive the grace period)."""
    processes = list(processes)
    for process in processes:
        process.terminate()
    deadline = time.monotonic() + _GRACE_SECONDS
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()


def _start_child(process: BaseProcess) -> None:
    """
    Start ``process`` with SIGINT blocked, a mask it inherits from the very start (a Ctrl-C while it imports would
    otherwise print its traceback); a SIGINT arriving here meanwhile is delivered to this process right after.
    """
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        process.start()
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})

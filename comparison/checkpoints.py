"""
Checkpoints of a study's run (``comparison/mujoco_training.py``, ``comparison/minatar.py``): what a run that a stopped
machine interrupted resumes from, so that it loses at most the steps since its last checkpoint.

A run's folder holds, while it trains, its ``config.json``, SB3's ``progress.csv`` and every so often a ``checkpoint/``
folder (``model.zip``, ``replay_buffer.pkl``, the result rows so far ``rows.csv``, SB3's logged rows so far
``progress.csv``, and ``state.json``: the step and whatever else the run keeps), written whole into
``checkpoint.partial/`` and then put in place by renames (an interruption between them leaves
``checkpoint.previous/``, which counts). SB3's logger starts ``progress.csv`` anew when a run resumes: the rows are
joined at each checkpoint and at the end. Once the run's result file is written the checkpoint is deleted; an
interruption between the two leaves a checkpoint beside a finished run, never used again. Each resume adds its step to
``resumed.json``, which the reports name, since a resumed run is not bit-identical to an uninterrupted one (a new env,
generators seeded anew by ``resume_seed``). This module imports nothing heavy: a study's report reads
``resumed_steps``.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import warnings
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

PROGRESS_FILE = "progress.csv"
CHECKPOINT_DIR = "checkpoint"
#: Where a checkpoint is written before it is put in place.
PARTIAL_CHECKPOINT_DIR = "checkpoint.partial"
#: Where the checkpoint it replaces waits until it is in place.
PREVIOUS_CHECKPOINT_DIR = "checkpoint.previous"
MODEL_FILE = "model.zip"
BUFFER_FILE = "replay_buffer.pkl"
ROWS_FILE = "rows.csv"
STATE_FILE = "state.json"
#: The steps a run resumed from, in order.
RESUMED_FILE = "resumed.json"
#: What reading a checkpoint that is cut short or corrupt raises: a zip or pickle broken off, a file missing, rows
#: that are not the run's
UNREADABLE = (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile, pickle.UnpicklingError)

Resumed = TypeVar("Resumed")


@dataclass
class Checkpoint:
    """
    What a checkpoint holds besides the model and its replay buffer.

    :param rows: the run's result rows so far
    :param progress: SB3's logged rows so far
    :param state: ``num_timesteps`` and whatever else the run keeps (JSON values)
    """

    rows: pd.DataFrame
    progress: pd.DataFrame
    state: dict[str, Any]

    @property
    def step(self) -> int:
        """The env step the checkpoint was saved at."""
        return int(self.state["num_timesteps"])


def read_progress(path: Path) -> pd.DataFrame:
    """The rows of SB3's ``progress.csv`` at ``path`` (none if it is missing or empty)."""
    try:
        return pd.read_csv(path)
    except (FileNotFoundError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def joined(*frames: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``frames`` one after the other (empty frames left out)."""
    kept = [frame for frame in frames if not frame.empty]
    return pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()


def resume_seed(seed: int, step: int) -> int:
    """The seed of the generators (env, replay sampling, exploration) of the run of ``seed`` resumed at ``step``."""
    return int(np.random.SeedSequence([seed, step]).generate_state(1)[0])


def save_checkpoint(
    model: Any, run_dir: Path, rows: pd.DataFrame, progress: pd.DataFrame, state: Mapping[str, Any]
) -> None:
    """
    Save a run's state into ``checkpoint/`` of its folder ``run_dir``, in place of the one there.

    :param model: the SB3 model, saved with its replay buffer
    :param run_dir: the run's folder
    :param rows: the result rows so far
    :param progress: SB3's logged rows so far
    :param state: what else the run keeps (JSON values); the model's ``num_timesteps`` is added
    """
    partial = Path(run_dir) / PARTIAL_CHECKPOINT_DIR
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir()
    model.save(partial / MODEL_FILE)
    model.save_replay_buffer(partial / BUFFER_FILE)
    rows.to_csv(partial / ROWS_FILE, index=False)
    progress.to_csv(partial / PROGRESS_FILE, index=False)
    (partial / STATE_FILE).write_text(json.dumps({"num_timesteps": model.num_timesteps, **state}))
    put_in_place(partial, Path(run_dir))


def load_checkpoint(
    checkpoint: Path, run_dir: Path, load_model: Callable[[Path], Any], seed: int
) -> tuple[Any, Checkpoint]:
    """
    The model of a run as its ``checkpoint`` holds it, with its replay buffer, the generators seeded by
    ``resume_seed(seed, step)`` and no last observation (the next ``learn`` resets the model's env); the step is
    added to ``resumed.json`` in ``run_dir``.

    :param checkpoint: the checkpoint folder (``checkpoint_folder``)
    :param run_dir: the run's folder
    :param load_model: the model saved at a path, on the run's new training env (e.g. ``SAC.load(path, env=...)``)
    :param seed: the run's seed
    :return: the model and the rest of what the checkpoint holds
    """
    state = json.loads((checkpoint / STATE_FILE).read_text())
    saved = Checkpoint(pd.read_csv(checkpoint / ROWS_FILE), read_progress(checkpoint / PROGRESS_FILE), state)
    model = load_model(checkpoint / MODEL_FILE)
    model.load_replay_buffer(checkpoint / BUFFER_FILE)
    model.set_random_seed(resume_seed(seed, saved.step))
    model._last_obs = None  # the saved one is of the old env: learn resets the new one
    from comparison.experiment import write_text_atomically  # not at load: it brings torch

    resumed = {"resumed_at": [*resumed_steps(run_dir), saved.step]}
    write_text_atomically(json.dumps(resumed), Path(run_dir) / RESUMED_FILE)
    return model, saved


def resumed_or_none(run_dir: Path, resume: Callable[[Path], Resumed]) -> Resumed | None:
    """
    ``resume(checkpoint)`` of the run's checkpoint (``checkpoint_folder``); None where there is none, or where it
    cannot be read or ``resume`` refuses it (``UNREADABLE``, e.g. a ``ValueError`` for a checkpoint trained under
    other settings): that one is deleted with a ``UserWarning``, so that the run starts from its first step rather
    than failing at every start. The caller has checked that the folder holds the run's config.

    :param run_dir: the run's folder
    :param resume: what the run makes of its checkpoint's folder (``load_checkpoint`` and its checks)
    """
    checkpoint = checkpoint_folder(run_dir)
    if checkpoint is None:
        return None
    try:
        return resume(checkpoint)
    except UNREADABLE as error:
        warnings.warn(
            f"{checkpoint} cannot be resumed from ({type(error).__name__}: {error}); the run starts from its first "
            "step",
            UserWarning,
            stacklevel=2,
        )
        remove_checkpoints(run_dir)
        return None


def put_in_place(partial: Path, run_dir: Path) -> None:
    """Make the complete checkpoint ``partial`` the run's ``checkpoint/``, by renames (the old one is deleted)."""
    current, previous = run_dir / CHECKPOINT_DIR, run_dir / PREVIOUS_CHECKPOINT_DIR
    if current.exists():
        shutil.rmtree(previous, ignore_errors=True)
        os.replace(current, previous)
    os.replace(partial, current)
    shutil.rmtree(previous, ignore_errors=True)


def checkpoint_folder(run_dir: Path) -> Path | None:
    """The run's checkpoint: ``checkpoint/``, or ``checkpoint.previous/`` if a save stopped between its renames."""
    for name in (CHECKPOINT_DIR, PREVIOUS_CHECKPOINT_DIR):
        if (run_dir / name).is_dir():
            return run_dir / name
    return None


def remove_checkpoints(run_dir: Path) -> None:
    """Delete the run's checkpoint folders."""
    for name in (CHECKPOINT_DIR, PREVIOUS_CHECKPOINT_DIR, PARTIAL_CHECKPOINT_DIR):
        shutil.rmtree(run_dir / name, ignore_errors=True)


def resumed_steps(run_dir: Path) -> list[int]:
    """The steps from which the run in ``run_dir`` has resumed, in order (``resumed.json``; none if it has not)."""
    path = Path(run_dir) / RESUMED_FILE
    return [int(step) for step in json.loads(path.read_text())["resumed_at"]] if path.exists() else []


def resumed_notes(run_dirs: Mapping[str, Path]) -> list[str]:
    """A line for each run (folders by run name) that resumed from a checkpoint, with the steps."""
    resumed = {name: resumed_steps(directory) for name, directory in run_dirs.items()}
    return [f"- {name}: resumed at step {', '.join(map(str, steps))}" for name, steps in resumed.items() if steps]

"""A run's checkpoint: put in place whole, found after a cut between renames, and the resumes recorded."""

from __future__ import annotations

import json
from pathlib import Path

from comparison import checkpoints


def test_a_checkpoint_is_put_in_place_whole_and_one_cut_between_renames_still_counts(tmp_path: Path):
    def partial_holding(name: str) -> Path:
        partial = tmp_path / checkpoints.PARTIAL_CHECKPOINT_DIR
        partial.mkdir()
        (partial / name).write_text(name)
        return partial

    assert checkpoints.checkpoint_folder(tmp_path) is None
    checkpoints.put_in_place(partial_holding("first"), tmp_path)
    checkpoints.put_in_place(partial_holding("second"), tmp_path)
    current = tmp_path / checkpoints.CHECKPOINT_DIR
    assert checkpoints.checkpoint_folder(tmp_path) == current
    assert [path.name for path in current.iterdir()] == ["second"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [checkpoints.CHECKPOINT_DIR]
    current.rename(tmp_path / checkpoints.PREVIOUS_CHECKPOINT_DIR)  # a save cut between its two renames
    assert checkpoints.checkpoint_folder(tmp_path) == tmp_path / checkpoints.PREVIOUS_CHECKPOINT_DIR
    checkpoints.put_in_place(partial_holding("third"), tmp_path)
    assert [path.name for path in current.iterdir()] == ["third"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [checkpoints.CHECKPOINT_DIR]
    checkpoints.remove_checkpoints(tmp_path)
    assert checkpoints.checkpoint_folder(tmp_path) is None


def test_the_notes_name_each_resumed_run_with_its_steps_and_nothing_else(tmp_path: Path):
    resumed, uninterrupted = tmp_path / "a_s0", tmp_path / "a_s1"
    resumed.mkdir()
    (resumed / checkpoints.RESUMED_FILE).write_text(json.dumps({"resumed_at": [400, 800]}))
    assert checkpoints.resumed_steps(resumed) == [400, 800] and checkpoints.resumed_steps(uninterrupted) == []
    notes = checkpoints.resumed_notes({"a_s0": resumed, "a_s1": uninterrupted})
    assert notes == ["- a_s0: resumed at step 400, 800"]


def test_each_resume_of_each_run_draws_its_own_seed():
    seeds = {checkpoints.resume_seed(seed, step) for seed in range(3) for step in (200, 400)}
    assert len(seeds) == 6 and checkpoints.resume_seed(0, 200) == checkpoints.resume_seed(0, 200)

"""A run is finished only when its settings match and its files hold all of it; otherwise it is redone."""

import json
from dataclasses import replace

import pandas as pd
import pytest

from comparison.experiment import train_run, write_atomically, write_text_atomically
from comparison.runner import PairsStudy, collect_runs, is_finished, run_comparison, run_dir, unfinished_reason
from comparison.study import pending, run_study


def _cut_last_line(path):
    text = path.read_text()
    path.write_text(text[: text.rstrip("\n").rfind("\n") + 1])


def _cut_last_cells(path):
    text = path.read_text().rstrip("\n")
    path.write_text(text[: text.rfind(",", 0, text.rfind(","))] + "\n")


def _keep_header(path):
    path.write_text(path.read_text().splitlines()[0] + "\n")


def _append(line):
    def damage(path):
        path.write_text(path.read_text() + line + "\n")

    return damage


def _repeat_last_line(path):
    path.write_text(path.read_text() + path.read_text().splitlines()[-1] + "\n")


# (file, damage, what the reason says besides the file's path)
DAMAGES = {
    "evaluations cut at a row": ("evaluations.csv", _cut_last_line, "holds 2 evaluation(s) at steps 0, 100, not"),
    "evaluations cut in a row": ("evaluations.csv", _cut_last_cells, "no value in column 'return_break' at step 200"),
    "evaluations header only": ("evaluations.csv", _keep_header, "has no rows"),
    "evaluations 0 bytes": ("evaluations.csv", lambda path: path.write_text(""), "is empty"),
    "evaluations garbage row": ("evaluations.csv", _append("x,y,z,w"), "column 'seed'"),
    "evaluations too many cells": ("evaluations.csv", _append("," * 20), "not a table of its header's columns"),
    "evaluations repeated row": ("evaluations.csv", _repeat_last_line, "duplicated (run, step) rows"),
    "evaluations of another run": ("evaluations.csv", _append("per_s9,per,9,300" + ",0" * 9), "run is not"),
    "telemetry missing": ("telemetry.csv", lambda path: path.unlink(), "no such file"),
    "telemetry cut at a row": ("telemetry.csv", _cut_last_line, "one row per tag at each of the run's evaluations"),
    "telemetry garbage row": ("telemetry.csv", _append("x,uniform,0,0,1,1,1,1,1"), "column 'step'"),
    "progress missing": ("progress.csv", lambda path: path.unlink(), "no such file"),
    "config.json missing": ("config.json", lambda path: path.unlink(), "no such file"),
}


def test_a_run_with_all_its_files_is_finished(tmp_path, finished_run, tiny_config):
    config = tiny_config(variant="uniform")
    finished_run(tmp_path, config)
    assert unfinished_reason(tmp_path, config) is None and is_finished(tmp_path, config)


@pytest.mark.parametrize(("name", "damage", "reason"), DAMAGES.values(), ids=DAMAGES.keys())
def test_a_run_whose_files_do_not_hold_all_of_it_is_not_finished_and_says_which_file(
    tmp_path, finished_run, tiny_config, name, damage, reason
):
    config = tiny_config(variant="uniform")
    path = finished_run(tmp_path, config) / name
    damage(path)
    assert not is_finished(tmp_path, config)
    text = unfinished_reason(tmp_path, config)
    assert str(path) in text and reason in text, text


def test_collect_runs_combines_only_the_runs_whose_files_are_whole(tmp_path, finished_run, tiny_config):
    good, cut = (tiny_config(variant="uniform", seed=seed) for seed in (0, 1))
    finished_run(tmp_path, good)
    _append("x,uniform,1,0,1,1,1,1,1")(finished_run(tmp_path, cut) / "telemetry.csv")
    evaluations, telemetry = collect_runs([good, cut], tmp_path)
    assert set(evaluations["run"]) == {"uniform_s0"} and set(telemetry["seed"]) == {0}
    assert evaluations["step"].dtype == telemetry["step"].dtype == "int64"


@pytest.mark.slow
def test_a_run_without_its_telemetry_is_redone_and_the_comparison_completes(tmp_path, finished_run, tiny_config):
    config = tiny_config(variant="uniform")
    (finished_run(tmp_path, config) / "telemetry.csv").unlink()
    result = run_comparison([config], tmp_path, workers=1, command="c", progress=False)
    assert result["failures"] == {}
    assert list(pd.read_csv(tmp_path / "evaluations.csv")["step"]) == [0, 100, 200]
    assert set(pd.read_csv(tmp_path / "telemetry.csv")["step"]) == {0, 100, 200}
    assert pd.read_csv(tmp_path / "evaluations.csv")["mean_return"].ne(0.0).any()  # trained, not the stand-in
    assert is_finished(tmp_path, config)


def test_a_run_folder_without_settings_is_redone_with_the_settings_asked_for(tmp_path, finished_run, tiny_config):
    trained_with = tiny_config(variant="per", alpha=0.6)
    (finished_run(tmp_path, trained_with) / "config.json").unlink()
    assert not is_finished(tmp_path, replace(trained_with, alpha=0.5))


def test_the_evaluation_steps_of_a_config_are_those_a_run_evaluates_at(tmp_path, tiny_config):
    config = tiny_config(variant="uniform", total_steps=250)
    rows = train_run(config, tmp_path / "run")
    assert list(rows["step"]) == config.evaluation_steps == [0, 100, 200, 250]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON list, not an object of RunConfig's fields"),
        (json.dumps({"variant": "per", "colour": "red"}), "unknown key(s) ['colour']"),
        (json.dumps({"variant": "per", "seed": "one"}), "wrong type"),
        (json.dumps({"variant": "per", "alpha": -1}), "alpha must be"),
    ],
)
def test_unreadable_settings_are_refused_naming_the_file_and_what_is_wrong(
    tmp_path, finished_run, tiny_config, text, problem
):
    config = tiny_config(variant="per")
    path = finished_run(tmp_path, config) / "config.json"
    path.write_text(text)
    with pytest.raises(ValueError) as error:
        is_finished(tmp_path, config)
    message = str(error.value)
    assert f"{path} is no config of this study" in message and problem in message, message
    assert "other settings" not in message


def test_other_settings_are_refused_naming_each_setting_that_differs(tmp_path, finished_run, tiny_config):
    config = tiny_config(variant="per")
    finished_run(tmp_path, config)
    with pytest.raises(
        ValueError, match=r"other settings than the run per_s0's of this plan \(alpha: 0.6 there, 0.5 now\)"
    ):
        is_finished(tmp_path, replace(config, alpha=0.5))


def test_a_run_written_before_a_config_field_existed_is_still_recognised(tmp_path, finished_run, tiny_config):
    config = tiny_config(variant="lap")
    directory = finished_run(tmp_path, config)
    stored = json.loads(config.to_json())
    del stored["lap_alpha"]  # a field added later, at its default
    (directory / "config.json").write_text(json.dumps(stored))
    assert is_finished(tmp_path, config)
    with pytest.raises(ValueError, match="other settings"):
        is_finished(tmp_path, replace(config, lap_alpha=0.5))


def test_a_finished_run_stays_finished_when_a_default_its_variant_ignores_changes(tmp_path, finished_run, tiny_config):
    config = tiny_config(variant="per")
    directory = finished_run(tmp_path, config)
    # written when lap_min_priority's default was another value: PER never reads it
    (directory / "config.json").write_text(replace(config, lap_min_priority=1.0).to_json())
    assert is_finished(tmp_path, config)
    assert is_finished(tmp_path, replace(config, lap_min_priority=0.5))
    with pytest.raises(ValueError, match="other settings"):
        is_finished(tmp_path, replace(config, alpha=0.9))


def test_report_only_names_each_run_it_leaves_out_and_why(tmp_path, finished_run, tiny_config, capsys):
    from comparison.cli import compare_main

    argv = ["--quick", "--out", str(tmp_path), "--variants", "uniform", "--seeds", "0", "1", "--report-only"]
    argv += ["--total-steps", "200", "--learning-starts", "100", "--eval-freq", "100", "--eval-episodes", "2"]
    argv += ["--batch-size", "32", "--net-arch", "16", "16", "--env-kwargs", '{"episode_length": 30}']
    for seed in (0, 1):
        finished_run(tmp_path, tiny_config(variant="uniform", seed=seed))
    _cut_last_line(run_dir(tmp_path, tiny_config(variant="uniform", seed=1)) / "evaluations.csv")
    compare_main(argv)
    assert "left out of the report: uniform_s1: " in capsys.readouterr().err
    assert set(pd.read_csv(tmp_path / "evaluations.csv")["run"]) == {"uniform_s0"}


def test_a_file_written_atomically_is_the_old_one_or_the_new_one_never_a_part(tmp_path):
    path = tmp_path / "summary.md"
    write_text_atomically("old\n", path)

    def write_half_then_fail(partial):
        partial.write_text("ne")
        assert path.read_text() == "old\n"  # a reader meanwhile sees the old file whole
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        write_atomically(path, write_half_then_fail)
    assert path.read_text() == "old\n"
    write_atomically(path, lambda partial: partial.write_text("new\n"))
    assert path.read_text() == "new\n"
    # the failed write's partial file was this process's, reused by the next write
    assert [p.name for p in tmp_path.iterdir()] == ["summary.md"]


def test_run_study_drives_the_pairs_study_by_the_comparisons_resume_rule(tmp_path, finished_run, tiny_config):
    study = PairsStudy()
    done, todo = tiny_config(variant="uniform", seed=0), tiny_config(variant="uniform", seed=1)
    finished_run(tmp_path, done)
    assert pending(study, [done, todo], tmp_path) == [todo]
    progress = run_study(study, [done, todo], tmp_path, announce=lambda line: None)
    assert progress.trained == ["uniform_s1"] and progress.pending == []
    assert is_finished(tmp_path, todo) and study.finished(todo, run_dir(tmp_path, todo))
    other = replace(todo, alpha=0.5, variant="per")
    run_dir(tmp_path, other).mkdir(parents=True)
    (run_dir(tmp_path, other) / "config.json").write_text(replace(other, alpha=0.9).to_json())
    with pytest.raises(ValueError, match=r"per_s1's of this plan \(alpha: 0.9 there, 0.5 now\)"):
        study.train(other, run_dir(tmp_path, other))
    assert study.report([done, todo], tmp_path, "python scripts/compare.py") == tmp_path / "summary.md"
    assert "python scripts/compare.py" in (tmp_path / "summary.md").read_text()

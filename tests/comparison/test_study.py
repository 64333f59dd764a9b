"""The generic study protocol's runner and command line (``comparison.study``), on a fake study that trains in
milliseconds: resume, redone and foreign runs, shards, and argparse errors."""

from __future__ import annotations

import argparse
import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from comparison.study import (
    CONFIG_FILE,
    holds_config,
    pending,
    positive_integer,
    run_dir,
    run_study,
    shard_plan,
    study_main,
    study_parser,
    write_config,
)

RESULT_FILE = "result.csv"


@dataclass(frozen=True)
class FakeConfig:
    """A run of the fake study: its result file holds the lines 0 .. ``rows - 1``."""

    seed: int
    variant: str = "a"
    rows: int = 3

    @property
    def run_name(self) -> str:
        return f"{self.variant}_s{self.seed}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> FakeConfig:
        try:
            return cls(**json.loads(text))
        except (TypeError, json.JSONDecodeError) as error:
            raise ValueError(str(error)) from None


class FakeStudy:
    """A study whose runs write a small CSV; it keeps what it trained and the commands its reports quoted."""

    name = "fake"

    def __init__(self) -> None:
        self.trained: list[str] = []
        self.commands: list[str] = []

    def plan(self, seeds: Sequence[int], variants: Sequence[str] = ("a", "b"), rows: int = 3) -> list[FakeConfig]:
        unknown = sorted(set(variants) - {"a", "b", "c"})
        if unknown:
            raise ValueError(f"variants must be among a, b, c, got {unknown}")
        return [FakeConfig(seed, variant, rows) for seed in seeds for variant in variants]

    def train(self, config: FakeConfig, run_dir: Path) -> None:
        self.trained.append(config.run_name)
        run_dir.mkdir(parents=True, exist_ok=True)
        write_config(config, run_dir)
        (run_dir / RESULT_FILE).write_text("".join(f"{line}\n" for line in range(config.rows)))

    def finished(self, config: FakeConfig, run_dir: Path) -> bool:
        if not holds_config(config, run_dir):
            return False
        path = run_dir / RESULT_FILE
        return path.exists() and path.read_text().splitlines() == [str(line) for line in range(config.rows)]

    def report(self, configs: Sequence[FakeConfig], out_dir: Path, command: str) -> Path:
        self.commands.append(command)
        finished = [config.run_name for config in configs if self.finished(config, run_dir(out_dir, config))]
        path = out_dir / "summary.md"
        path.write_text(f"{command}\n{len(finished)} of {len(configs)}: {', '.join(finished)}\n")
        return path

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--variants", nargs="+", default=["a", "b"])
        parser.add_argument("--rows", type=positive_integer, default=3)

    def plan_options(self, args: argparse.Namespace) -> dict[str, Any]:
        return {"variants": args.variants, "rows": args.rows}


def names(configs: Sequence[FakeConfig]) -> list[str]:
    return [config.run_name for config in configs]


def test_run_study_trains_the_unfinished_runs_in_plan_order_then_none(tmp_path: Path):
    study = FakeStudy()
    plan = study.plan(range(2))
    lines: list[str] = []
    progress = run_study(study, plan, tmp_path, announce=lines.append)
    assert progress.trained == study.trained == ["a_s0", "b_s0", "a_s1", "b_s1"]
    assert progress.pending == []
    assert lines[0] == "run a_s0: training" and lines[1].startswith("run a_s0: done in")
    again = run_study(study, plan, tmp_path, announce=lines.append)
    assert again.trained == [] and study.trained == ["a_s0", "b_s0", "a_s1", "b_s1"]


def test_max_runs_stops_after_that_many_and_the_rest_stays_pending(tmp_path: Path):
    study = FakeStudy()
    plan = study.plan(range(2))
    progress = run_study(study, plan, tmp_path, max_runs=3, announce=lambda line: None)
    assert progress.trained == ["a_s0", "b_s0", "a_s1"]
    assert progress.pending == ["b_s1"]
    with pytest.raises(ValueError, match="max_runs must be a positive integer or None, got 0"):
        run_study(study, plan, tmp_path, max_runs=0)


def test_a_half_written_run_is_redone_and_only_it(tmp_path: Path):
    study = FakeStudy()
    plan = study.plan(range(2))
    run_study(study, plan, tmp_path, announce=lambda line: None)
    (run_dir(tmp_path, plan[2]) / RESULT_FILE).write_text("0\n1\n")  # an attempt cut short
    assert pending(study, plan, tmp_path) == [plan[2]]
    progress = run_study(study, plan, tmp_path, announce=lambda line: None)
    assert progress.trained == ["a_s1"]
    assert pending(study, plan, tmp_path) == []


def test_a_run_folder_of_another_config_raises_naming_its_file(tmp_path: Path):
    study = FakeStudy()
    config = FakeConfig(0, "a", rows=3)
    directory = run_dir(tmp_path, config)
    directory.mkdir(parents=True)
    (directory / CONFIG_FILE).write_text(FakeConfig(0, "a", rows=5).to_json())
    with pytest.raises(ValueError, match=r"other settings than the run a_s0's of this plan \(rows: 5 there, 3 now\)"):
        run_study(study, [config], tmp_path)
    (directory / CONFIG_FILE).write_text("{not json")  # garbage is named as such, not as other settings
    with pytest.raises(ValueError, match=f"{directory / CONFIG_FILE} is no config of this study"):
        run_study(study, [config], tmp_path)
    assert study.trained == []


def test_holds_config_compares_the_configs_in_the_form_same_run_gives(tmp_path: Path):
    config = FakeConfig(0, "a", rows=3)
    write_config(FakeConfig(0, "a", rows=5), tmp_path)
    assert holds_config(config, tmp_path, same_run=lambda stored: FakeConfig(stored.seed, stored.variant))
    with pytest.raises(ValueError, match=r"\(variant: 'a' there, 'b' now\)"):
        holds_config(FakeConfig(0, "b"), tmp_path, same_run=lambda stored: FakeConfig(stored.seed, stored.variant))


def test_a_run_planned_twice_raises(tmp_path: Path):
    with pytest.raises(ValueError, match="each run may appear once"):
        run_study(FakeStudy(), [FakeConfig(0), FakeConfig(0)], tmp_path)


def test_shards_partition_the_plan_in_its_order():
    plan = FakeStudy().plan(range(4), variants=("a", "b", "c"))[:11]
    shards = [shard_plan(plan, index, 3) for index in range(3)]
    assert sorted(names([config for shard in shards for config in shard])) == sorted(names(plan))
    assert sum(len(shard) for shard in shards) == len(plan)
    for shard in shards:
        assert shard == [config for config in plan if config in shard]
    for index, count in ((3, 3), (-1, 2), (0, 0)):
        with pytest.raises(ValueError, match=f"index={index}, count={count}"):
            shard_plan(plan, index, count)


def test_shards_deal_each_seeds_runs_in_turn_so_no_variant_is_left_to_one_shard():
    plan = FakeStudy().plan(range(4), variants=("a", "b"))  # seed-major: a even number of runs a seed
    shards = [shard_plan(plan, index, 2) for index in range(2)]
    assert names(shards[0]) == ["a_s0", "b_s1", "a_s2", "b_s3"]
    assert names(shards[1]) == ["b_s0", "a_s1", "b_s2", "a_s3"]


def test_the_command_line_runs_reports_and_counts_pending(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    study = FakeStudy()
    assert study_main(study, ["pending", "--seeds", "2", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "4"
    assert study_main(study, ["run", "--seeds", "2", "--first-seed", "3", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "trained 4 run(s); 0 pending" in out and f"report: {tmp_path / 'summary.md'}" in out
    assert study.trained == ["a_s3", "b_s3", "a_s4", "b_s4"]
    assert "4 of 4" in (tmp_path / "summary.md").read_text()
    assert study_main(study, ["pending", "--seeds", "2", "--first-seed", "3", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "0"
    assert study.commands == [
        f"python scripts/fake_study.py run --seeds 2 --first-seed 3 --out {tmp_path} --variants a b --rows 3"
    ]


def test_shards_from_the_command_line_train_their_part_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    study = FakeStudy()
    common = ["--seeds", "2", "--out", str(tmp_path)]
    assert study_main(study, ["run", *common, "--shard", "1", "2"]) == 0
    assert study.trained == ["b_s0", "a_s1"]
    assert "trained 2 run(s); 0 pending" in capsys.readouterr().out
    assert "2 of 4" in (tmp_path / "summary.md").read_text()  # the report covers the whole plan
    study_main(study, ["pending", *common, "--shard", "0", "2"])
    study_main(study, ["pending", *common])
    assert capsys.readouterr().out.split() == ["2", "2"]
    assert "--shard" not in study.commands[0]


def test_the_quoted_command_plans_the_same_runs(tmp_path: Path):
    study = FakeStudy()
    argv = ["report", "--seeds", "3", "--first-seed", "7", "--variants", "c", "a", "--rows", "4"]
    study_main(study, [*argv, "--out", str(tmp_path), "--shard", "0", "3", "--max-runs", "1"])
    tokens = shlex.split(study.commands[0])
    assert tokens[:3] == ["python", "scripts/fake_study.py", "run"]
    again = study_parser(study).parse_args(tokens[2:])
    original = study_parser(study).parse_args(argv)
    planned = study.plan(range(again.first_seed, again.first_seed + again.seeds), **study.plan_options(again))
    assert planned == study.plan(range(7, 10), **study.plan_options(original))
    assert again.out == tmp_path and again.shard == (0, 1) and again.max_runs is None


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "--seeds", "0"], ["--seeds", "'0'"]),
        (["run", "--seeds", "two"], ["--seeds", "'two'"]),
        (["run", "--first-seed", "-1"], ["--first-seed", "'-1'"]),
        (["run", "--max-runs", "0"], ["--max-runs", "'0'"]),
        (["run", "--workers", "0"], ["--workers", "'0'"]),
        (["run", "--shard", "2", "2"], ["--shard", "index=2, count=2"]),
        (["pending", "--shard", "0", "0"], ["--shard", "index=0, count=0"]),
        (["run", "--rows", "0"], ["--rows", "'0'"]),
        (["run", "--variants", "z"], ["variants", "'z'"]),
        (["train"], ["action", "'train'"]),
    ],
)
def test_bad_values_are_argparse_errors_naming_option_and_value(
    argv: list[str], named: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    study = FakeStudy()
    out = tmp_path / "study"
    with pytest.raises(SystemExit) as exit_info:
        study_main(study, [*argv, "--out", str(out)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    for text in named:
        assert text in error
    assert study.trained == [] and not out.exists()


class PidStudy(FakeStudy):
    """The fake study, whose runs also write the id of the process that trained them; the run of seed 13 fails."""

    def train(self, config: FakeConfig, run_dir: Path) -> None:
        if config.seed == 13:
            raise RuntimeError("seed 13 cannot train")
        super().train(config, run_dir)
        (run_dir / "pid").write_text(str(os.getpid()))


def test_workers_train_each_run_in_a_fresh_process_the_same_files_and_a_failure_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    study = PidStudy()
    pool = tmp_path / "pool"
    argv = ["run", "--seeds", "3", "--first-seed", "12", "--variants", "a", "--workers", "2", "--out", str(pool)]
    assert study_main(study, argv) == 1
    out = capsys.readouterr().out
    assert all(f"run a_s{seed}: training" in out for seed in (12, 13, 14))
    assert "run a_s12: done in" in out and "run a_s14: done in" in out
    assert "run a_s13: failed after" in out and "RuntimeError: seed 13 cannot train" in out
    assert "trained 2 run(s); 1 pending" in out and "run a_s13 FAILED" in out
    assert study.trained == []  # trained in other processes
    assert study.commands == [
        f"python scripts/fake_study.py run --seeds 3 --first-seed 12 --out {pool} --variants a --rows 3"
    ]
    plan = study.plan([12, 13, 14], variants=["a"])
    assert pending(study, plan, pool) == [plan[1]]
    done = [plan[0], plan[2]]
    pids = {int((run_dir(pool, config) / "pid").read_text()) for config in done}
    assert len(pids) == 2 and os.getpid() not in pids
    run_study(study, done, tmp_path / "here", announce=lambda line: None)
    for config in done:
        for name in (CONFIG_FILE, RESULT_FILE):
            assert (run_dir(pool, config) / name).read_bytes() == (
                run_dir(tmp_path / "here", config) / name
            ).read_bytes()
    with pytest.raises(ValueError, match="workers must be a positive integer, got 0"):
        run_study(study, plan, pool, workers=0)


def test_finished_lists_the_finished_run_folders_of_the_whole_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    study = FakeStudy()
    plan = study.plan(range(2))
    run_study(study, plan[:3], tmp_path, announce=lambda line: None)
    (run_dir(tmp_path, plan[1]) / RESULT_FILE).write_text("0\n")  # cut short
    for shard in (["--shard", "0", "2"], ["--shard", "1", "2"], []):
        assert study_main(study, ["finished", "--seeds", "2", "--out", str(tmp_path), *shard]) == 0
        assert capsys.readouterr().out.splitlines() == [
            str(run_dir(tmp_path, plan[0])),
            str(run_dir(tmp_path, plan[2])),
        ]

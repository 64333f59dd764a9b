"""The goal-conditioned study (``comparison/her.py``): its configs and plan, the variants' settings, the mujoco 4
workaround for FetchReach, finished runs, the report, the command line, and on a tiny budget runs trained end to end,
skipped once finished and redone when cut short."""

from __future__ import annotations

import math
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from stable_baselines3 import HerReplayBuffer

import comparison.her_training as training
from comparison.her import (
    EVALUATION_COLUMNS,
    EVALUATIONS_FILE,
    TASKS,
    HerConfig,
    HerStudy,
    plan_runs,
)
from comparison.her_report import CURVES_FILE, SUCCESS_TABLE, SUMMARY_FILE
from comparison.study import CONFIG_FILE, pending, run_dir, run_study, study_main
from sb3_per import DQN, PER, SAC, PrioritizedHerReplayBuffer

ROOT = Path(__file__).resolve().parents[2]
#: Runs of seconds: five evaluations of a few episodes.
TINY_BITS = dict(task="bit_flipping", total_steps=400, eval_freq=100, eval_episodes=5)
TINY_FETCH = dict(
    task="fetch_reach", total_steps=300, eval_freq=100, eval_episodes=2, learning_starts=100, buffer_size=1_000
)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"task": "fetch_push"}, "task must be one of"),
        ({"variant": "uniform"}, "variant must be one of"),
        ({"seed": -1}, "seed must be an integer >= 0, got -1"),
        ({"seed": 0.5}, "seed must be an integer >= 0, got 0.5"),
        ({"total_steps": 0}, "total_steps must be an integer >= 1, got 0"),
        ({"eval_episodes": 0}, "eval_episodes must be an integer >= 1, got 0"),
        ({"buffer_size": True}, "buffer_size must be an integer >= 1, got True"),
        ({"learning_starts": "10"}, "learning_starts must be an integer >= 0, got '10'"),
        ({"eval_freq": 3_000}, "eval_freq=3000 must divide total_steps=20000"),
        (
            {"task": "bit_flipping", "total_steps": 300, "eval_freq": 3},
            "eval_freq must be a multiple of bit_flipping's",
        ),
        ({"learning_starts": 20_000}, "learning_starts must be below total_steps=20000, got 20000"),
    ],
)
def test_config_errors_name_the_field_and_value(fields: dict, named: str):
    with pytest.raises(ValueError, match=f"^{named}"):
        HerConfig(**fields)


def test_a_config_takes_its_tasks_defaults_records_them_and_reads_back():
    bits = HerConfig(task="bit_flipping", variant="per_her", seed=3)
    defaults = TASKS["bit_flipping"]
    assert (
        (bits.total_steps, bits.eval_freq, bits.eval_episodes)
        == (4_000, 100, 50)
        == (
            defaults.total_steps,
            defaults.eval_freq,
            defaults.eval_episodes,
        )
    )
    assert (bits.learning_starts, bits.buffer_size) == (20, 100_000)
    assert '"total_steps": 4000' in bits.to_json() and HerConfig.from_json(bits.to_json()) == bits
    fetch = HerConfig(total_steps=5_000)
    assert (fetch.task, fetch.total_steps, fetch.eval_freq, fetch.learning_starts) == (
        "fetch_reach",
        5_000,
        1_000,
        1_000,
    )
    assert HerConfig.from_json(fetch.to_json()) == fetch != HerConfig()
    assert bits.run_name == "bit_flipping_per_her_s3"
    assert bits.evaluation_steps()[:2] == [0, 100] and bits.evaluation_steps()[-1] == 4_000
    with pytest.raises(ValueError, match="not a HerConfig"):
        HerConfig.from_json('{"task": "bit_flipping", "n_bits": 12}')


def test_the_plan_is_seed_major_with_the_variants_of_a_task_side_by_side():
    plan = plan_runs(range(5))
    assert len(plan) == 20
    assert [config.run_name for config in plan[:5]] == [
        "bit_flipping_her_s0",
        "bit_flipping_per_her_s0",
        "fetch_reach_her_s0",
        "fetch_reach_per_her_s0",
        "bit_flipping_her_s1",
    ]
    assert [config.seed for config in plan] == [seed for seed in range(5) for _ in range(4)]
    chosen = plan_runs([7], tasks=["fetch_reach"], variants=["per_her"], steps={"fetch_reach": 10_000})
    assert [(config.run_name, config.total_steps) for config in chosen] == [("fetch_reach_per_her_s7", 10_000)]
    with pytest.raises(ValueError, match=r"steps names tasks that are not planned: \['fetch_reach'\]"):
        plan_runs([0], tasks=["bit_flipping"], steps={"fetch_reach": 10_000})


def test_each_variant_trains_bit_flipping_with_dqn_and_its_buffer():
    configs = {variant: HerConfig(variant=variant, **TINY_BITS) for variant in ("her", "per_her")}
    models = {
        variant: training.make_model(config, training.make_training_env(config)) for variant, config in configs.items()
    }
    for model in models.values():
        assert isinstance(model, DQN) and model.n_envs == 2 and model.gradient_steps == 2
        assert (model.learning_rate, model.batch_size, model.learning_starts, model.target_update_interval) == (
            2e-3,
            32,
            20,
            100,
        )
        assert model.exploration_final_eps == 0.02 and model.replay_buffer.n_sampled_goal == 5
    her, per_her = models["her"], models["per_her"]
    assert type(her.replay_buffer) is HerReplayBuffer and her.replay_scheme is None
    assert isinstance(per_her.replay_buffer, PrioritizedHerReplayBuffer) and isinstance(per_her.replay_scheme, PER)
    buffer = per_her.replay_buffer
    assert (buffer.alpha, buffer.beta_start, buffer.beta_end, buffer.beta_anneal_steps) == (0.6, 0.4, 1.0, "auto")
    assert training.observation_normalizer(her) is None


class FussyJoint(int):
    """A joint type that, like mujoco 4's, does not compare equal to a NumPy integer of its value."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and int(self) == int(other)

    __hash__ = int.__hash__


def test_the_joint_types_are_given_as_integers_only_where_they_do_not_match_numpy():
    members = {"mjJNT_FREE": FussyJoint(0), "mjJNT_SLIDE": FussyJoint(2), "mjJNT_HINGE": FussyJoint(3)}
    fussy = types.SimpleNamespace(mjtJoint=types.SimpleNamespace(__members__=members, **members), mj_step="step")
    assert not training.mujoco_joint_types_match_numpy(fussy)
    patched = training.IntegerJointTypes(fussy)
    assert training.mujoco_joint_types_match_numpy(patched) and patched.mj_step == "step"
    assert np.int32(2) in (patched.mjtJoint.mjJNT_HINGE, patched.mjtJoint.mjJNT_SLIDE)


def test_fetch_reach_trains_sac_with_the_zoos_settings_on_normalized_envs():
    pytest.importorskip("gymnasium_robotics")
    from stable_baselines3.common.vec_env import VecNormalize

    config = HerConfig(variant="per_her", **TINY_FETCH)
    model = training.make_model(config, training.make_training_env(config))
    assert isinstance(model, SAC) and isinstance(model.get_env(), VecNormalize)
    assert (model.learning_rate, model.batch_size, model.gamma, model.ent_coef) == (1e-3, 256, 0.95, "auto")
    assert model.policy_kwargs["net_arch"] == [64, 64] and model.replay_buffer.n_sampled_goal == 4
    assert isinstance(model.replay_buffer, PrioritizedHerReplayBuffer) and isinstance(model.replay_scheme, PER)
    observation, _ = training.make_task_env(config).reset(seed=0)
    normalize = training.observation_normalizer(model)
    assert normalize is not None and set(normalize(observation)) == {"observation", "achieved_goal", "desired_goal"}


def evaluation_rows(config: HerConfig, final: float, **overrides: object) -> pd.DataFrame:
    """``evaluations.csv`` of ``config`` as a finished run writes it: a success rate rising linearly to ``final``."""
    steps = config.evaluation_steps()
    rows = pd.DataFrame(
        {
            "task": config.task,
            "variant": config.variant,
            "seed": config.seed,
            "step": steps,
            "success_rate": np.linspace(0.0, final, len(steps)),
            "mean_return": -10.0,
            "n_episodes": config.eval_episodes,
            "elapsed_s": np.arange(len(steps), dtype=float),
        },
        columns=list(EVALUATION_COLUMNS),
    )
    for column, value in overrides.items():
        rows.loc[rows.index[-1], column] = value
    return rows


def write_finished_run(out_dir: Path, config: HerConfig, final: float, **overrides: object) -> Path:
    """Write ``config``'s run into ``out_dir`` as a finished run leaves it, without training it."""
    directory = run_dir(out_dir, config)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_FILE).write_text(config.to_json())
    evaluation_rows(config, final, **overrides).to_csv(directory / EVALUATIONS_FILE, index=False)
    return directory


@pytest.mark.parametrize(
    ("overrides", "finished"),
    [
        ({}, True),
        ({"success_rate": math.nan}, False),
        ({"success_rate": 1.5}, False),
        ({"elapsed_s": math.inf}, False),
        ({"step": 300}, False),
        ({"variant": "her"}, False),
        ({"n_episodes": 4}, False),
    ],
)
def test_finished_checks_the_evaluations(tmp_path: Path, overrides: dict, finished: bool):
    config = HerConfig(variant="per_her", **TINY_BITS)
    directory = write_finished_run(tmp_path, config, 0.5, **overrides)
    assert HerStudy().finished(config, directory) is finished


def test_finished_needs_the_whole_file_and_refuses_another_config(tmp_path: Path):
    study, config = HerStudy(), HerConfig(**TINY_BITS)
    directory = write_finished_run(tmp_path, config, 1.0)
    assert study.finished(config, directory)
    evaluation_rows(config, 1.0).iloc[:-1].to_csv(directory / EVALUATIONS_FILE, index=False)
    assert not study.finished(config, directory)
    other = HerConfig(**{**TINY_BITS, "eval_episodes": 6})
    with pytest.raises(ValueError, match=f"{directory / CONFIG_FILE} holds a config with other settings"):
        study.finished(other, directory)
    with pytest.raises(ValueError, match=f"{directory / CONFIG_FILE} holds a config with other settings"):
        study.train(other, directory)
    assert (directory / CONFIG_FILE).read_text() == config.to_json()


def test_the_report_gives_each_variants_success_and_the_same_seed_comparison(tmp_path: Path):
    finals = {"her": (1.0, 0.5, 0.0), "per_her": (1.0, 1.0, 0.5)}
    configs = [HerConfig(variant=variant, seed=seed, **TINY_BITS) for variant in finals for seed in range(3)]
    for config in configs:
        write_finished_run(tmp_path, config, finals[config.variant][config.seed])
    unfinished = HerConfig(**TINY_FETCH)
    summary = HerStudy().report([*configs, unfinished], tmp_path, "python scripts/her_study.py run").read_text()
    assert summary.splitlines()[0].startswith("# Goal-conditioned tasks")
    assert "Finished runs: 6 of 7 planned." in summary and "## bit_flipping (BitFlippingEnv, DQN)" in summary
    assert "| her | 3 | 0.50 [" in summary and "| 1.00, 0.50, 0.00 |" in summary  # IQM of 3 seeds: their mean
    assert "| per_her | 3 | 0.83 [" in summary
    # per seed: 1.0 - 1.0, 1.0 - 0.5, 0.5 - 0.0; over the run (linear from 0 over 5 evaluations): half of that
    assert "| per_her | 3 | +0.33 [" in summary and "| 2/0 (p=0.50) | +0.17 [" in summary
    assert "fetch_reach" not in summary.split("## bit_flipping")[1].split("Success rate:")[0]
    rows = pd.read_csv(tmp_path / SUCCESS_TABLE)
    assert len(rows) == 6 * 5 and list(rows.columns) == list(EVALUATION_COLUMNS)
    assert (tmp_path / CURVES_FILE).stat().st_size > 10_000


def test_the_report_of_no_finished_run_says_so(tmp_path: Path):
    path = HerStudy().report(plan_runs([0], tasks=["bit_flipping"]), tmp_path, "command")
    assert path == tmp_path / SUMMARY_FILE and "Finished runs: 0 of 2 planned." in path.read_text()
    assert not (tmp_path / CURVES_FILE).exists()


def test_the_command_line_counts_the_plan_and_refuses_bad_values_before_importing_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert study_main(HerStudy(), ["pending", "--seeds", "5", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "20"
    assert study_main(HerStudy(), ["pending", "--tasks", "bit_flipping", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "10"
    for argv, named in ((["--fetch-reach-steps", "1500"], "'1500'"), (["--variants", "uniform"], "'uniform'")):
        with pytest.raises(SystemExit):
            study_main(HerStudy(), ["run", *argv, "--out", str(tmp_path)])
        assert argv[0] in (error := capsys.readouterr().err) and named in error
    code = (
        "import sys\nfrom comparison.her import HerStudy\nfrom comparison.study import study_main\n"
        "try:\n    study_main(HerStudy(), ['run', '--bit-flipping-steps', '10'])\n"
        "except SystemExit as stop:\n    print(stop.code, 'torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["2", "False"] and "--bit-flipping-steps" in result.stderr


def test_bit_flipping_runs_finish_are_then_skipped_and_one_cut_short_is_redone(tmp_path: Path):
    study = HerStudy()
    plan = plan_runs([0], tasks=["bit_flipping"], **{key: value for key, value in TINY_BITS.items() if key != "task"})
    progress = run_study(study, plan, tmp_path, announce=lambda line: None)
    assert progress.trained == ["bit_flipping_her_s0", "bit_flipping_per_her_s0"] and progress.pending == []
    directory = run_dir(tmp_path, plan[1])
    rows = pd.read_csv(directory / EVALUATIONS_FILE)
    assert list(rows.columns) == list(EVALUATION_COLUMNS) and list(rows["step"]) == [0, 100, 200, 300, 400]
    assert rows["success_rate"].between(0, 1).all() and (rows["n_episodes"] == 5).all()
    assert (rows["mean_return"] >= -10).all() and rows["elapsed_s"].is_monotonic_increasing
    assert list(pd.read_csv(directory / "progress.csv")["time/total_timesteps"]) == [0, 100, 200, 300, 400]
    assert run_study(study, plan, tmp_path, announce=lambda line: None).trained == []

    rows.iloc[:-1].to_csv(directory / EVALUATIONS_FILE, index=False)  # an attempt cut short
    (directory / "left_by_the_attempt.txt").write_text("")
    assert pending(study, plan, tmp_path) == [plan[1]]
    progress = run_study(study, plan, tmp_path, announce=lambda line: None)
    assert progress.trained == ["bit_flipping_per_her_s0"] and progress.pending == []
    redone = pd.read_csv(directory / EVALUATIONS_FILE)
    pd.testing.assert_frame_equal(redone.drop(columns="elapsed_s"), rows.drop(columns="elapsed_s"))  # same seed
    assert not (directory / "left_by_the_attempt.txt").exists()
    summary = study.report(plan, tmp_path, "command").read_text()
    assert "Finished runs: 2 of 2 planned." in summary and "| per_her | 1 |" in summary


@pytest.fixture
def fetch_out(tmp_path: Path) -> Path:
    pytest.importorskip("gymnasium_robotics")
    return tmp_path


def test_a_tiny_fetch_reach_run_trains_evaluates_and_finishes(fetch_out: Path):
    study, config = HerStudy(), HerConfig(variant="per_her", **TINY_FETCH)
    assert run_study(study, [config], fetch_out, announce=lambda line: None).trained == [config.run_name]
    rows = pd.read_csv(run_dir(fetch_out, config) / EVALUATIONS_FILE)
    assert list(rows["step"]) == [0, 100, 200, 300] and (rows["n_episodes"] == 2).all()
    assert rows["mean_return"].between(-50, 0).all()  # FetchReach: -1 per step away from the goal, 50 steps
    assert study.finished(config, run_dir(fetch_out, config))
    assert "fetch_reach (FetchReach-v4, SAC)" in study.report([config], fetch_out, "command").read_text()

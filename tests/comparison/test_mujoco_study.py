"""The MuJoCo study (``comparison/mujoco.py``): its configs and plan, the variants' settings, the reward noise outside
SB3's Monitor, finished runs, the checkpoints, the report, the command line, and on a tiny budget an interrupted run
that resumes from its checkpoint."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.monitor import Monitor

import comparison.mujoco_training as training
from comparison import checkpoints
from comparison.minatar import RewardNoise
from comparison.mujoco import (
    EVALUATION_COLUMNS,
    EVALUATIONS_FILE,
    SETTINGS_FILE,
    VARIANTS,
    MuJoCoConfig,
    MuJoCoStudy,
    differing_settings,
    plan_runs,
)
from comparison.mujoco_report import CURVES_FILE, RETURNS_TABLE, SUMMARY_FILE
from comparison.statistics import keyed_generator, normalised_iqm_ci
from comparison.study import CONFIG_FILE, pending, run_dir, run_study, study_main
from comparison.study_report import interval_cell
from sb3_per import LA3P, PER, PrioritizedReplayBuffer, ReLo

ROOT = Path(__file__).resolve().parents[2]
#: A run of seconds: four evaluations of one episode, a checkpoint at step 400.
TINY = dict(
    total_steps=600, eval_freq=200, checkpoint_freq=400, learning_starts=100, eval_episodes=1, buffer_size=1_000
)


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"task": "ant"}, "task must be one of"),
        ({"variant": "lap"}, "variant must be one of"),
        ({"seed": -1}, "seed must be an integer >= 0, got -1"),
        ({"seed": 1.5}, "seed must be an integer >= 0, got 1.5"),
        ({"total_steps": 0}, "total_steps must be an integer >= 1, got 0"),
        ({"eval_episodes": 0}, "eval_episodes must be an integer >= 1, got 0"),
        ({"buffer_size": True}, "buffer_size must be an integer >= 1, got True"),
        ({"eval_freq": 7_000}, "eval_freq=7000 must divide total_steps=300000"),
        ({"checkpoint_freq": 15_000}, "checkpoint_freq must be a multiple of eval_freq=10000, got 15000"),
        ({"learning_starts": 300_000}, "learning_starts must be below total_steps=300000, got 300000"),
        ({"task": "hopper", "reward_noise_std": 0.5}, "reward_noise_std must be hopper's 0.0, got 0.5"),
    ],
)
def test_config_errors_name_the_field_and_value(fields: dict, named: str):
    with pytest.raises(ValueError, match=f"^{named}"):
        MuJoCoConfig(**fields)


def test_config_records_the_tasks_reward_noise_and_reads_back():
    noisy = MuJoCoConfig(task="hopper_noisy", variant="relo", seed=3)
    assert noisy.reward_noise_std == 1.0 and json.loads(noisy.to_json())["reward_noise_std"] == 1.0
    assert MuJoCoConfig.from_json(noisy.to_json()) == noisy
    assert MuJoCoConfig(task="halfcheetah").reward_noise_std == 0.0
    assert noisy.run_name == "hopper_noisy_relo_s3"
    assert noisy.evaluation_steps()[:2] == [0, 10_000] and noisy.evaluation_steps()[-1] == 300_000
    with pytest.raises(ValueError, match="not a MuJoCoConfig"):
        MuJoCoConfig.from_json('{"task": "hopper", "frames": 3}')


def test_the_default_plan_is_seed_major_with_the_noisy_task_last():
    plan = plan_runs(range(2))
    assert len(plan) == 2 * (4 + 4 + 3)
    assert [config.run_name for config in plan[:9]] == [
        *(f"hopper_{variant}_s0" for variant in VARIANTS),
        *(f"halfcheetah_{variant}_s0" for variant in VARIANTS),
        "hopper_uniform_s1",
    ]
    noisy = [config.run_name for config in plan if config.task == "hopper_noisy"]
    assert noisy == [config.run_name for config in plan[-6:]]
    assert noisy[:3] == ["hopper_noisy_uniform_s0", "hopper_noisy_per_s0", "hopper_noisy_relo_s0"]
    chosen = plan_runs([0], tasks=["walker", "hopper_noisy"], variants=["la3p"], total_steps=20_000)
    assert [config.run_name for config in chosen] == ["walker_la3p_s0", "hopper_noisy_la3p_s0"]
    assert all(config.total_steps == 20_000 for config in chosen)


def test_each_variant_trains_sac_with_its_replay_settings():
    assert set(training.VARIANT_SETTINGS) == set(VARIANTS)
    models = {
        variant: training.make_model(config, training.make_training_env(config))
        for variant in VARIANTS
        for config in [MuJoCoConfig(variant=variant, **TINY)]
    }
    for model in models.values():
        assert (model.batch_size, model.learning_rate, model.tau, model.gamma) == (256, 3e-4, 0.005, 0.99)
        assert model.learning_starts == 100 and model.policy_kwargs["net_arch"] == [256, 256]
        assert model.ent_coef == "auto" and model.device.type == "cpu"
    assert type(models["uniform"].replay_buffer) is ReplayBuffer and models["uniform"].replay_scheme is None
    per, relo, la3p = (models[variant] for variant in ("per", "relo", "la3p"))
    assert isinstance(per.replay_scheme, PER) and isinstance(per.replay_buffer, PrioritizedReplayBuffer)
    assert (per.replay_buffer.alpha, per.replay_buffer.beta_start, per.replay_buffer.beta_anneal_steps) == (
        0.6,
        0.4,
        "auto",
    )
    assert isinstance(relo.replay_scheme, ReLo) and isinstance(relo.replay_buffer, PrioritizedReplayBuffer)
    assert (relo.replay_buffer.alpha, relo.replay_buffer.epsilon, relo.replay_buffer.weight_normalization) == (
        0.5,
        1e-5,
        "batch",
    )
    assert isinstance(la3p.replay_scheme, LA3P) and isinstance(la3p.replay_buffer, PrioritizedReplayBuffer)
    assert (la3p.replay_buffer.alpha, la3p.replay_buffer.inverse_sampling) == (0.4, True)
    assert la3p.replay_scheme.min_priority == 0.2  # the authors' 1 on rewards they scale by 5


def test_the_reward_noise_sits_outside_the_monitor_so_logged_returns_are_the_tasks_own():
    config = MuJoCoConfig(task="hopper_noisy", seed=5)
    env = training.make_training_env(config)
    noise = env.envs[0]  # type: ignore[attr-defined]
    assert isinstance(noise, RewardNoise) and noise.std == 1.0 and isinstance(noise.env, Monitor)
    clean = gym.make("Hopper-v5")
    clean.reset(seed=5)
    env.reset()
    actions = np.random.default_rng(0).uniform(-1, 1, size=(1_000, 3)).astype(np.float32)
    noisy_rewards, clean_rewards = [], []
    for action in actions:
        _, reward, done, infos = env.step(action[np.newaxis])
        clean_rewards.append(float(clean.step(action)[1]))
        noisy_rewards.append(float(reward[0]))
        if done[0]:
            break
    assert done[0], "the time limit ends a Hopper episode within 1,000 steps"
    assert infos[0]["episode"]["r"] == pytest.approx(sum(clean_rewards), abs=1e-4)
    noise_drawn = np.array(noisy_rewards) - np.array(clean_rewards)
    assert np.all(np.abs(noise_drawn) > 1e-6) and 0.3 < noise_drawn.std() < 3.0
    clean_env = training.make_training_env(MuJoCoConfig(task="hopper"))
    assert isinstance(clean_env.envs[0], Monitor)  # type: ignore[attr-defined]


def evaluation_rows(config: MuJoCoConfig, final: float, **overrides: object) -> pd.DataFrame:
    """``evaluations.csv`` of ``config`` as a finished run writes it: a return rising linearly to ``final``."""
    steps = config.evaluation_steps()
    rows = pd.DataFrame(
        {
            "task": config.task,
            "variant": config.variant,
            "seed": config.seed,
            "step": steps,
            "eval_return_mean": np.linspace(0.0, final, len(steps)),
            "eval_return_std": 1.0,
            "eval_episodes": config.eval_episodes,
            "train_return_mean": [math.nan, *np.linspace(0.0, final, len(steps) - 1)],
            "elapsed_s": np.arange(len(steps), dtype=float),
        },
        columns=list(EVALUATION_COLUMNS),
    )
    for column, value in overrides.items():
        rows.loc[rows.index[-1], column] = value
    return rows


def write_finished_run(out_dir: Path, config: MuJoCoConfig, final: float, **overrides: object) -> Path:
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
        ({"eval_return_mean": math.nan}, False),
        ({"elapsed_s": math.inf}, False),
        ({"step": 500}, False),
        ({"variant": "per"}, False),
        ({"eval_episodes": 2}, False),
    ],
)
def test_finished_checks_the_evaluations(tmp_path: Path, overrides: dict, finished: bool):
    config = MuJoCoConfig(**TINY)
    directory = write_finished_run(tmp_path, config, 10.0, **overrides)
    assert MuJoCoStudy().finished(config, directory) is finished


def test_finished_needs_the_whole_file_and_refuses_another_config(tmp_path: Path):
    study, config = MuJoCoStudy(), MuJoCoConfig(**TINY)
    directory = write_finished_run(tmp_path, config, 10.0)
    evaluation_rows(config, 10.0).iloc[:-1].to_csv(directory / EVALUATIONS_FILE, index=False)
    assert not study.finished(config, directory)
    (directory / EVALUATIONS_FILE).unlink()
    assert not study.finished(config, directory)
    other = MuJoCoConfig(**{**TINY, "eval_episodes": 2})
    with pytest.raises(ValueError, match=f"{directory / CONFIG_FILE} holds a config with other settings"):
        study.finished(other, directory)
    with pytest.raises(ValueError, match=f"{directory / CONFIG_FILE} holds a config with other settings"):
        study.train(other, directory)
    assert (directory / CONFIG_FILE).read_text() == config.to_json()


def test_the_report_compares_each_variant_with_uniform_per_task_and_across_tasks(tmp_path: Path):
    finals = {("hopper", "uniform"): (100.0, 200.0, 300.0), ("hopper", "per"): (150.0, 250.0, 250.0)}
    finals |= {("hopper_noisy", "uniform"): (50.0, 60.0, 70.0), ("hopper_noisy", "relo"): (40.0, 50.0, 90.0)}
    configs = [
        MuJoCoConfig(task=task, variant=variant, seed=seed, **TINY)
        for (task, variant), values in finals.items()
        for seed in range(3)
    ]
    for config in configs:
        write_finished_run(tmp_path, config, finals[config.task, config.variant][config.seed])
    (run_dir(tmp_path, configs[4]) / checkpoints.RESUMED_FILE).write_text(json.dumps({"resumed_at": [400]}))
    unfinished = MuJoCoConfig(task="hopper", variant="la3p", seed=0, **TINY)
    run_dir(tmp_path, unfinished).mkdir(parents=True)  # resumed, still training: not a finished run's note
    (run_dir(tmp_path, unfinished) / checkpoints.RESUMED_FILE).write_text(json.dumps({"resumed_at": [200]}))
    summary = MuJoCoStudy().report([*configs, unfinished], tmp_path, "python scripts/mujoco_study.py run").read_text()
    assert summary.splitlines()[0].startswith("# MuJoCo")
    assert "Finished runs: 12 of 13 planned." in summary
    assert "| uniform | 3 | 200.0 [" in summary  # IQM of 3 seeds: their mean
    assert "| per | 3 | 216.7 [" in summary and "| 150, 250, 250 |" in summary
    assert "| per | +8.3% [" in summary and "| 2/1 (p=1.00) |" in summary  # 150 > 100, 250 > 200, 250 < 300
    assert "| per | 1 | 3 | 1.083 [" in summary  # (150 + 250 + 250) / 3 / 200
    # its interval resamples uniform's runs too (not the pooled runs alone, with uniform's IQM held fixed)
    value, interval = normalised_iqm_ci(
        [([100.0, 200.0, 300.0], [150.0, 250.0, 250.0])], rng=keyed_generator(0, "all", "final", "per")
    )
    assert f"| per | 1 | 3 | {interval_cell(value, interval, digits=3)} |" in summary
    assert "| relo | 1 | 3 |" not in summary and "uniform's IQM below 0.001): hopper_noisy." in summary
    assert "## hopper_noisy" in summary and "N(0, 1^2) added to each training reward" in summary
    assert "- hopper_per_s1: resumed at step 400" in summary and "hopper_la3p_s0" not in summary
    assert "- hopper_per_s1: none recorded (trained before runs recorded their settings)" in summary
    assert "1.039 [1.023, 1.051]" in summary and "PER 0.94, LAP 1.09, LA3P 1.31" in summary
    returns = pd.read_csv(tmp_path / RETURNS_TABLE)
    assert len(returns) == 12 * 4 and list(returns.columns) == list(EVALUATION_COLUMNS)
    assert (tmp_path / CURVES_FILE).stat().st_size > 10_000


def test_the_report_of_no_finished_run_says_so(tmp_path: Path):
    path = MuJoCoStudy().report(plan_runs([0], **TINY), tmp_path, "command")
    assert path == tmp_path / SUMMARY_FILE and "Finished runs: 0 of 11 planned." in path.read_text()
    assert not (tmp_path / CURVES_FILE).exists()


def test_the_command_line_counts_the_plan_and_refuses_bad_values_before_importing_torch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    assert study_main(MuJoCoStudy(), ["pending", "--seeds", "2", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "22"
    for argv, named in ((["--steps", "25000"], "'25000'"), (["--tasks", "ant"], "'ant'")):
        with pytest.raises(SystemExit):
            study_main(MuJoCoStudy(), ["run", *argv, "--out", str(tmp_path)])
        assert argv[0] in (error := capsys.readouterr().err) and named in error
    code = (
        "import sys\nfrom comparison.mujoco import MuJoCoStudy\nfrom comparison.study import study_main\n"
        "try:\n    study_main(MuJoCoStudy(), ['run', '--seeds', '0'])\n"
        "except SystemExit as stop:\n    print(stop.code, 'torch' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["2", "False"] and "--seeds" in result.stderr


@pytest.mark.slow
def test_an_interrupted_run_resumes_from_its_checkpoint_and_records_where(tmp_path: Path, train_until_a_checkpoint):
    study = MuJoCoStudy()
    config = MuJoCoConfig(task="hopper", variant="la3p", **TINY)
    directory = run_dir(tmp_path, config)
    train_until_a_checkpoint(lambda: study.train(config, directory))
    checkpoint = directory / checkpoints.CHECKPOINT_DIR
    assert {path.name for path in checkpoint.iterdir()} == {"model.zip", "replay_buffer.pkl", "rows.csv"} | {
        "progress.csv",
        "state.json",
    }
    assert json.loads((checkpoint / "state.json").read_text())["num_timesteps"] == 400
    saved = pd.read_csv(checkpoint / "rows.csv")
    assert list(saved["step"]) == [0, 200, 400]
    assert not (directory / EVALUATIONS_FILE).exists() and pending(study, [config], tmp_path) == [config]

    progress = run_study(study, [config], tmp_path, announce=lambda line: None)
    assert progress.trained == [config.run_name] and progress.pending == []
    rows = pd.read_csv(directory / EVALUATIONS_FILE)
    assert list(rows.columns) == list(EVALUATION_COLUMNS) and list(rows["step"]) == [0, 200, 400, 600]
    pd.testing.assert_frame_equal(rows.iloc[:3], saved)  # kept from the checkpoint, not trained again
    assert rows["elapsed_s"].is_monotonic_increasing and np.isfinite(rows["eval_return_mean"]).all()
    assert rows["train_return_mean"].iloc[1:].notna().all()  # Hopper's random episodes end within 200 steps
    assert json.loads((directory / checkpoints.RESUMED_FILE).read_text()) == {"resumed_at": [400]}
    assert list(pd.read_csv(directory / "progress.csv")["time/total_timesteps"]) == [0, 200, 400, 600]
    assert checkpoints.checkpoint_folder(directory) is None and study.finished(config, directory)
    summary = study.report([config], tmp_path, "command").read_text()
    assert "Finished runs: 1 of 1 planned." in summary and "- hopper_la3p_s0: resumed at step 400" in summary
    assert len(pd.read_csv(tmp_path / RETURNS_TABLE)) == 4


@pytest.mark.slow
def test_a_run_records_its_settings_and_a_resume_under_other_settings_starts_afresh(
    tmp_path: Path, train_until_a_checkpoint
):
    study = MuJoCoStudy()
    config = MuJoCoConfig(task="hopper", variant="la3p", **TINY)
    directory = run_dir(tmp_path, config)
    train_until_a_checkpoint(lambda: study.train(config, directory))
    settings = json.loads((directory / SETTINGS_FILE).read_text())
    assert settings == training.recorded_settings(config)
    assert "min_priority=0.2" in settings["sac"]["replay_scheme"] and settings["packages"]["mujoco"].startswith("4.0")
    settings["sac"]["replay_buffer_kwargs"]["alpha"] = 0.5  # as if the code had changed since the checkpoint
    (directory / SETTINGS_FILE).write_text(json.dumps(settings))
    with pytest.warns(UserWarning, match="records other settings than this code's: sac.replay_buffer_kwargs.alpha"):
        run_study(study, [config], tmp_path, announce=lambda line: None)
    assert not (directory / checkpoints.RESUMED_FILE).exists()  # trained from its first step
    assert json.loads((directory / SETTINGS_FILE).read_text()) == training.recorded_settings(config)
    assert "Every finished run recorded the settings" in study.report([config], tmp_path, "command").read_text()
    (directory / SETTINGS_FILE).write_text(json.dumps(settings))
    summary = study.report([config], tmp_path, "command").read_text()
    assert "- hopper_la3p_s0: other than the code's now at sac.replay_buffer_kwargs.alpha" in summary


def test_differing_settings_name_each_dotted_key():
    saved = {"sac": {"alpha": 0.5, "net": [256, 256]}, "packages": {"torch": "2.13.0"}}
    current = {"sac": {"alpha": 0.4, "net": [256, 256], "tau": 0.005}, "packages": {"torch": "2.13.0"}}
    assert differing_settings(saved, current) == ["sac.alpha", "sac.tau"]
    assert differing_settings(saved, saved) == [] and differing_settings(None, saved) == ["(the whole record)"]


def test_the_settings_record_holds_the_buffers_defaults_and_a_missing_or_other_record_is_refused(tmp_path: Path):
    config = MuJoCoConfig(task="hopper", variant="la3p", **TINY)
    settings = training.recorded_settings(config)
    assert settings["buffer_defaults"]["epsilon"] == 1e-6  # in force: the variant's kwargs leave it unset
    assert training.installed_version("no-such-package-here") == "absent"
    with pytest.raises(ValueError, match=f"{tmp_path / SETTINGS_FILE} cannot be read"):
        training.check_settings(config, tmp_path)
    settings["buffer_defaults"]["epsilon"] = 1e-5  # as if the library's default had changed since the run began
    (tmp_path / SETTINGS_FILE).write_text(json.dumps(settings))
    with pytest.raises(ValueError, match=r"other settings than this code's: buffer_defaults\.epsilon$"):
        training.check_settings(config, tmp_path)

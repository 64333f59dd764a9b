"""The comparison pipeline: one run, the evaluation, the CLIs, resumability and the end-to-end report."""

import json
import re
import subprocess
from dataclasses import replace
from pathlib import Path

import gymnasium as gym
import numpy as np
import pandas as pd
import pytest
import torch as th

from comparison.cli import compare_main, train_main
from comparison.experiment import (
    VARIANTS,
    RunConfig,
    baseline_rows,
    episode_summaries,
    make_eval_envs,
    make_model,
    summarize_episodes,
    train_run,
)
from comparison.runner import PRESETS, is_finished, plan_runs, run_dir
from comparison.schema import METRIC_COLUMNS, TELEMETRY_COLUMNS
from comparison.statistics import iqm
from envs import ZScorePolicy, run_episodes
from sb3_per import LA3P, LAP, PAL, PER, SAC, PrioritizedReplayBuffer

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiny(tiny_run_argv) -> list[str]:
    """Arguments of runs of 400 steps, evaluated at steps 0, 200 and 400 on 3 episodes."""
    return tiny_run_argv(total_steps=400, learning_starts=200, eval_freq=200, eval_episodes=3, episode_length=40)


def test_lockstep_evaluation_matches_playing_the_episodes_one_by_one():
    seeds = [11, 12, 13, 14]
    policy = ZScorePolicy()
    batched = episode_summaries(policy, make_eval_envs("envs:PairsTrading-v0", {}, len(seeds)), seeds)
    env = gym.make("envs:PairsTrading-v0")
    one_by_one = [run_episodes(env, policy, 1, seed=seed)[0][0] for seed in seeds]
    pd.testing.assert_frame_equal(pd.DataFrame(batched), pd.DataFrame(one_by_one), check_exact=True)


def test_lockstep_evaluation_of_a_sac_policy_equals_the_sequential_one_up_to_float32_rounding():
    # One batched forward pass of a network does not round as one row at a time does (BLAS sums in another order;
    # actions differ in their last float32 bit), so a network's metrics agree to ~1e-9, not bit for bit.
    config = RunConfig(net_arch=(16, 16), env_kwargs={"episode_length": 30}, eval_episodes=6)
    env = gym.make(config.env_id, **config.env_kwargs)
    model = make_model(config, env)
    lockstep = episode_summaries(model, make_eval_envs(config.env_id, config.env_kwargs, 6), config.eval_seeds)
    sequential = [run_episodes(env, model, 1, seed=seed)[0][0] for seed in config.eval_seeds]
    pd.testing.assert_frame_equal(pd.DataFrame(lockstep), pd.DataFrame(sequential), check_exact=False, atol=1e-6)
    assert pd.DataFrame(lockstep)["turnover"].gt(0).all()  # the policy traded: the comparison is not trivially equal


def test_summarize_episodes_averages_the_env_summaries():
    summaries = [
        dict(cumulative_return=np.expm1(0.1), sharpe=1.0, max_drawdown=0.1, turnover=4.0, steps=10.0)
        | dict(return_normal=0.06, return_stress=0.03, return_break=0.01),
        dict(cumulative_return=np.expm1(-0.3), sharpe=-1.0, max_drawdown=0.3, turnover=2.0, steps=10.0)
        | dict(return_normal=-0.1, return_stress=-0.1, return_break=-0.1),
    ]
    metrics = summarize_episodes(summaries)
    assert metrics["mean_return"] == pytest.approx(-0.1)
    assert metrics["std_return"] == pytest.approx(0.2)
    assert metrics["sharpe"] == 0.0 and metrics["turnover"] == 3.0 and metrics["max_drawdown"] == pytest.approx(0.2)
    assert metrics["return_normal"] == pytest.approx(-0.02) and metrics["n_episodes"] == 2


def test_baselines_are_evaluated_on_the_given_episodes():
    rows = baseline_rows("envs:PairsTrading-v0", {}, [1, 2, 3, 4, 5])
    assert list(rows["variant"]) == ["zscore", "flat"]
    assert list(rows.columns) == ["variant", *METRIC_COLUMNS]
    flat = rows.set_index("variant").loc["flat"]
    assert flat["mean_return"] == 0.0 and flat["turnover"] == 0.0
    assert rows.set_index("variant").loc["zscore", "turnover"] > 0


@pytest.mark.parametrize("variant", ["per", "rank", "lap", "la3p", "faded"])
def test_prioritized_variants_anneal_beta_with_the_runs_training_progress(variant):
    assert RunConfig(variant=variant).replay_kwargs()["beta_anneal_steps"] == "auto"


@pytest.mark.parametrize("variant", ["uniform", "pal"])
def test_uniform_variants_only_tag_their_replay(variant):
    assert RunConfig(variant=variant).replay_kwargs() == {"tag_key": "regime"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(variant="prioritised"), "variant"),
        (dict(lap_alpha=-0.4), "alpha"),
        (dict(total_steps=0), "total_steps"),
        (dict(total_steps=100, learning_starts=100), "learning_starts"),
        (dict(alpha=-1.0), "alpha"),
        (dict(beta_start=2.0), "beta_start"),
        (dict(eval_episodes=0), "eval_episodes"),
        (dict(variant="faded", half_life=0.0), "priority_half_life"),
        (dict(variant="faded", half_life=100.0, buffer_size=1_000_000), "priority_half_life"),
        # checked by the variant's replay scheme, which names its own parameter
        (dict(variant="la3p", la3p_fraction=1.5), "fraction must be in"),
        (dict(variant="lap", lap_min_priority=0.0), "min_priority must be"),
        (dict(variant="pal", lap_min_priority=0.0), "min_priority must be"),
        (dict(variant="la3p", lap_min_priority=0.0), "min_priority must be"),
    ],
)
def test_run_config_rejects_bad_settings(fields, message):
    with pytest.raises(ValueError, match=message):
        RunConfig(**fields)


@pytest.mark.parametrize("fields", [dict(la3p_fraction=1.5), dict(lap_min_priority=0.0)])
def test_a_replay_scheme_setting_is_checked_only_by_the_variants_whose_scheme_uses_it(fields):
    assert RunConfig(variant="per", **fields).canonical() == RunConfig(variant="per")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--replay", "prioritised"], "--replay"),
        (["--alpha", "-1"], "alpha must be"),
        (["--total-steps", "0"], "argument --total-steps: must be an integer >= 1, got '0'"),
        (["--total-steps", "ten"], "--total-steps"),
        (["--env-kwargs", "[1, 2]"], "JSON object"),
        (["--env-kwargs", "{bad"], "not valid JSON"),
        (["--total-steps", "100", "--learning-starts", "500"], "learning_starts"),
        (["--env-kwargs", '{"no_such_option": 1}'], "no_such_option"),
        (["--ent-coef", "often"], "ent_coef"),
        (["--net-arch", "0"], "net_arch"),
        (["--seed", "1000003"], "evaluation episodes"),
        (["--gamma", "1.5"], "gamma"),
    ],
)
def test_train_cli_rejects_bad_arguments_with_a_clear_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_train_cli_refuses_a_folder_of_another_runs_settings(tmp_path, capsys):
    directory = tmp_path / "per_s3"
    directory.mkdir()
    (directory / "config.json").write_text(RunConfig(variant="per", seed=3, alpha=0.9).to_json())
    with pytest.raises(SystemExit) as exit_info:
        train_main(["--replay", "per", "--seed", "3", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "other settings than the run per_s3's of this plan (alpha: 0.9 there, 0.6 now)" in capsys.readouterr().err


@pytest.mark.slow
def test_train_cli_runs_one_evaluated_run_and_writes_its_files(tmp_path, tiny):
    directory = train_main(["--replay", "per", "--seed", "3", "--out", str(tmp_path), "--no-progress-bar", *tiny])
    assert directory == tmp_path / "per_s3"
    names = {path.name for path in directory.iterdir()}
    assert {"config.json", "progress.csv", "evaluations.csv", "model.zip"} <= names
    assert any(name.startswith("events.out.tfevents") for name in names)
    assert json.loads((directory / "config.json").read_text())["seed"] == 3
    evaluations = pd.read_csv(directory / "evaluations.csv")
    assert list(evaluations["step"]) == [0, 200, 400]
    assert (evaluations["n_episodes"] == 3).all()
    progress = pd.read_csv(directory / "progress.csv")
    assert "train/per_beta" in progress.columns and "eval/mean_return" in progress.columns
    telemetry = pd.read_csv(directory / "telemetry.csv")
    assert set(telemetry["step"]) == {0, 200, 400} and telemetry["priority_share"].notna().any()


@pytest.mark.parametrize(
    ("variant", "buffer_class", "scheme", "prioritization", "alpha", "inverse", "half_life"),
    [
        # scheme None: sb3_per's default, PER() on a prioritized or tagged buffer
        ("uniform", "TaggedReplayBuffer", None, None, None, False, None),
        ("per", "PrioritizedReplayBuffer", None, "proportional", 0.7, False, None),
        ("rank", "PrioritizedReplayBuffer", None, "rank", 0.7, False, None),
        ("lap", "PrioritizedReplayBuffer", LAP(min_priority=0.02), "proportional", 0.3, False, None),
        ("pal", "TaggedReplayBuffer", PAL(alpha=0.3, min_priority=0.02), None, None, False, None),
        (
            "la3p",
            "PrioritizedReplayBuffer",
            LA3P(fraction=0.25, pal_alpha=0.3, min_priority=0.02),
            "proportional",
            0.3,
            True,
            None,
        ),
        ("faded", "PrioritizedReplayBuffer", None, "proportional", 0.7, False, 20_000.0),
    ],
)
def test_each_variant_builds_the_algorithm_and_buffer_of_its_paper(
    variant, buffer_class, scheme, prioritization, alpha, inverse, half_life
):
    config = RunConfig(
        variant=variant, alpha=0.7, lap_alpha=0.3, lap_min_priority=0.02, la3p_fraction=0.25, half_life=20_000.0
    )
    env = gym.make("envs:PairsTrading-v0")
    model = make_model(config, env)
    assert type(model.replay_buffer).__name__ == buffer_class
    assert model.replay_buffer.tag_key == "regime"
    assert model.replay_scheme == scheme
    trained_with = model.replay_scheme or PER()
    assert trained_with.td_error_reduction == ("max" if variant in ("lap", "pal", "la3p") else "mean")
    if prioritization is None:
        assert not isinstance(model.replay_buffer, PrioritizedReplayBuffer)
    else:
        assert (model.replay_buffer.prioritization, model.replay_buffer.alpha) == (prioritization, alpha)
        assert model.replay_buffer.beta_anneal_steps == "auto"
        assert model.replay_buffer.inverse_sampling is inverse
        assert model.replay_buffer.priority_half_life == half_life
    if variant == "pal":
        assert trained_with.alpha == 0.3
    if variant == "la3p":
        assert trained_with.pal_alpha == 0.3
        assert (trained_with.fraction, trained_with.budget) == (0.25, "matched")
    if variant in ("lap", "pal", "la3p"):
        assert trained_with.min_priority == 0.02
    assert set(VARIANTS) == {
        "uniform",
        *("per", "rank", "lap", "pal", "la3p", "faded"),
        *("relo", "expected_td", "tqc", "tqc_uper"),
        *("expected_relo", "expected_relo_root", "gated_relo", "signal_share_relo"),
        *("per_no_is", "regime_weighted", "per_critic_only", "per_reward_priority", "per_reward_floor"),
        "relo_online_loss",
    }


@pytest.mark.slow
def test_the_rank_lap_and_pal_variants_run_end_to_end_in_the_quick_comparison(tmp_path, tiny):
    variants = ["rank", "lap", "pal"]
    argv = ["--quick", "--out", str(tmp_path), "--seeds", "0", "--variants", *variants, "--no-progress-bar", *tiny]
    assert compare_main(argv)["failures"] == {}
    evaluations = pd.read_csv(tmp_path / "evaluations.csv")
    assert sorted(set(evaluations["variant"])) == sorted(variants)
    assert np.isfinite(evaluations[list(METRIC_COLUMNS)].to_numpy()).all()
    summary = (tmp_path / "summary.md").read_text()
    for variant in variants:
        assert re.search(rf"^\| {variant} \| 1 \| [+-]\d+\.\d+ ", summary, re.MULTILINE), summary


@pytest.mark.slow
def test_quick_comparison_end_to_end_then_resumes_without_rerunning(tmp_path, tiny):
    argv = ["--quick", "--out", str(tmp_path), "--workers", "2", "--no-progress-bar", *tiny]
    result = compare_main(argv)
    assert result["failures"] == {}
    files = ("evaluations.csv", "telemetry.csv", "baselines.csv", "summary.md", "learning_curves.png")
    for name in (*files, "regime_returns.png", "replay_attention.png"):
        assert (tmp_path / name).stat().st_size > 0
    for name in ("learning_curves.png", "regime_returns.png", "replay_attention.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    telemetry = pd.read_csv(tmp_path / "telemetry.csv")
    assert list(telemetry.columns) == list(TELEMETRY_COLUMNS)
    assert set(zip(telemetry["variant"], telemetry["seed"], strict=True)) == {
        (variant, seed) for variant in ("uniform", "per") for seed in (0, 1)
    }

    evaluations = pd.read_csv(tmp_path / "evaluations.csv")
    assert set(zip(evaluations["variant"], evaluations["seed"], strict=True)) == {
        (variant, seed) for variant in ("uniform", "per") for seed in (0, 1)
    }
    assert np.isfinite(evaluations[list(METRIC_COLUMNS)].to_numpy()).all()
    baselines = pd.read_csv(tmp_path / "baselines.csv")
    assert set(baselines["variant"]) == {"zscore", "flat"}

    summary = (tmp_path / "summary.md").read_text()
    assert "## Where each replay's attention goes" in summary
    assert re.search(r"^\| uniform \| normal \| \d+\.\d% \| — \| \d+\.\d% \|", summary, re.MULTILINE), summary
    finals = evaluations.sort_values("step").groupby("run").tail(1)
    for variant in ("uniform", "per"):
        row = re.search(rf"^\| {variant} \| 2 \| ([+-]\d+\.\d+) ", summary, re.MULTILINE)
        assert row is not None, summary
        assert float(row.group(1)) == pytest.approx(iqm(finals[finals["variant"] == variant]["mean_return"]), abs=5e-4)

    configs = plan_runs(RunConfig(), {"uniform": [0, 1], "per": [0, 1]})
    for config in configs:  # only the small files a clone can commit: no model, no TensorBoard events
        names = {path.name for path in run_dir(tmp_path, config).iterdir()}
        assert names == {"config.json", "progress.csv", "telemetry.csv", "evaluations.csv"}
    run_files = ("progress.csv", "telemetry.csv", "evaluations.csv")
    files = [run_dir(tmp_path, c) / name for c in configs for name in run_files]
    written = {path: path.stat().st_mtime_ns for path in files}
    compare_main(argv)
    assert {path: path.stat().st_mtime_ns for path in files} == written
    assert pd.read_csv(tmp_path / "evaluations.csv").equals(evaluations)

    # --report-only: the report of the plan's finished runs, training none (per_s1 made half-written, seed 2 new)
    (run_dir(tmp_path, configs[-1]) / "evaluations.csv").unlink()
    compare_main([*argv, "--seeds", "0", "1", "2", "--report-only"])
    assert not (run_dir(tmp_path, configs[-1]) / "evaluations.csv").exists()
    assert not run_dir(tmp_path, replace(configs[0], seed=2)).exists()
    assert set(pd.read_csv(tmp_path / "evaluations.csv")["run"]) == {"uniform_s0", "per_s0", "uniform_s1"}
    assert "| per | 1 |" in (tmp_path / "summary.md").read_text()


def test_report_only_with_no_finished_run_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        compare_main(["--quick", "--out", str(tmp_path), "--report-only"])
    assert stop.value.code == 2
    assert f"--report-only: none of the plan's 4 runs has finished in {tmp_path}" in capsys.readouterr().err


def test_a_finished_run_with_other_settings_is_refused(tmp_path):
    config = RunConfig(variant="per", seed=0)
    directory = run_dir(tmp_path, config)
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(RunConfig(variant="per", seed=0, alpha=0.9).to_json())
    with pytest.raises(ValueError, match="other settings"):
        is_finished(tmp_path, config)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seeds", "0", "0"], "--seeds lists"),
        (["--variants", "per", "per"], "--variants lists"),
        (["--seeds", "0", "1000000"], "--seeds: seed=1000000 is one of the evaluation episodes"),
        (["--seeds", "-1"], "argument --seeds: must be an integer >= 0, got '-1'"),
        (["--variants", "faded", "--half-life", "1000"], "faded: priority_half_life=1000.0 is below"),
    ],
)
def test_compare_cli_rejects_bad_runs_with_a_usage_error(argv, message, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        compare_main(["--quick", "--out", str(tmp_path), *argv])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert message in error and "Traceback" not in error


def tiny_config(**fields) -> RunConfig:
    settings = dict(total_steps=300, learning_starts=100, eval_freq=100, eval_episodes=2, batch_size=32)
    return RunConfig(net_arch=(16, 16), env_kwargs={"episode_length": 30}, **{**settings, **fields})


def test_evaluating_more_often_does_not_change_training(tmp_path):
    often = train_run(tiny_config(eval_freq=50), tmp_path / "often", save_model=True)
    rarely = train_run(tiny_config(eval_freq=300), tmp_path / "rarely", save_model=True)
    assert len(often) > len(rarely)
    assert often.iloc[-1]["mean_return"] == rarely.iloc[-1]["mean_return"]
    a = SAC.load(tmp_path / "often" / "model.zip").policy.state_dict()
    b = SAC.load(tmp_path / "rarely" / "model.zip").policy.state_dict()
    assert all(th.equal(a[name], b[name]) for name in a)


def test_an_interrupted_run_is_rerun_from_scratch(tmp_path):
    config = tiny_config()
    directory = run_dir(tmp_path, config)
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(config.to_json())
    (directory / "events.out.tfevents.stale").write_text("left by a killed run")
    assert not is_finished(tmp_path, config)
    train_run(config, directory)
    assert is_finished(tmp_path, config)
    assert not (directory / "events.out.tfevents.stale").exists()


@pytest.mark.parametrize(("flag", "committed"), [("--quick", False), (None, False), ("--full", True)])
def test_only_the_full_presets_results_are_committed_by_default(flag, committed, tmp_path, monkeypatch):
    _, out = _planned([flag] if flag else [], monkeypatch, tmp_path)
    assert not out.is_absolute()
    ignored = subprocess.run(["git", "check-ignore", "-q", str(out / "runs")], cwd=REPO, check=False).returncode == 0
    assert ignored is not committed


def test_compare_help_gives_each_presets_net_arch(capsys):
    with pytest.raises(SystemExit):
        compare_main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    for name, preset in PRESETS.items():
        arch = preset.overrides.get("net_arch", RunConfig().net_arch)
        assert f"{' '.join(map(str, arch))} for {name}" in text
    assert PRESETS["quick"].overrides["net_arch"] != RunConfig().net_arch  # the case the help once got wrong


def _planned(argv, monkeypatch, tmp_path) -> tuple[list[RunConfig], Path]:
    """The configs and output directory that ``compare_main(argv)`` hands to the runner (which is not run)."""
    given = {}

    def capture(configs, out, **_):
        given.update(configs=configs, out=out)
        raise SystemExit(0)

    monkeypatch.setattr("comparison.runner.run_comparison", capture)
    monkeypatch.chdir(tmp_path)  # the default --out is relative: keep any file written out of the repository
    with pytest.raises(SystemExit):
        compare_main(argv)
    return given["configs"], given["out"]


def test_the_full_preset_plans_twenty_seeds_of_eight_variants_and_ten_of_rank_and_pal_seeds_outermost(
    monkeypatch, tmp_path
):
    configs, out = _planned(["--full"], monkeypatch, tmp_path)
    assert out == Path("docs/results/full")
    runs = [(config.seed, config.variant) for config in configs]
    order = ["uniform", "per", "lap", "la3p", "faded", "rank", "pal", "relo", "expected_td", "expected_relo_root"]
    fewer = {"rank", "pal"}
    expected = [(seed, variant) for seed in range(20) for variant in order if seed < 10 or variant not in fewer]
    assert runs == expected and len(runs) == 8 * 20 + 2 * 10
    assert {(c.total_steps, c.eval_episodes, c.eval_freq) for c in configs} == {(100_000, 50, 5_000)}


def test_variants_and_seeds_given_on_the_command_line_override_the_presets_plan(monkeypatch, tmp_path):
    configs, _ = _planned(["--full", "--variants", "rank", "uniform"], monkeypatch, tmp_path)
    assert [(c.seed, c.variant) for c in configs[:3]] == [(0, "rank"), (0, "uniform"), (1, "rank")]
    assert len(configs) == 10 + 20
    configs, _ = _planned(["--full", "--seeds", "4", "2", "--variants", "pal"], monkeypatch, tmp_path)
    assert [(c.seed, c.variant) for c in configs] == [(4, "pal"), (2, "pal")]


def test_a_validation_run_of_the_faded_half_life_uses_its_own_seeds_and_evaluation_episodes(monkeypatch, tmp_path):
    argv = ["--seeds", "100", "101", "--variants", "faded", "--eval-seed", "2000000", "--half-life", "10000"]
    configs, out = _planned([*argv, "--out", "results/validation/h10000"], monkeypatch, tmp_path)
    assert [(c.variant, c.seed, c.half_life, c.eval_seed) for c in configs] == [
        ("faded", 100, 10000.0, 2_000_000),
        ("faded", 101, 10000.0, 2_000_000),
    ]
    assert out == Path("results/validation/h10000")
    assert configs[0].replay_kwargs()["priority_half_life"] == 10000.0
    la3p, _ = _planned(["--variants", "la3p", "--la3p-fraction", "0.25"], monkeypatch, tmp_path)
    assert {c.la3p_fraction for c in la3p} == {0.25}
    floored, _ = _planned(["--variants", "per_reward_floor", "--reward-floor", "0.02"], monkeypatch, tmp_path)
    assert {c.replay_kwargs()["reward_floor"] for c in floored} == {0.02}


SETTINGS_OF_SOME_VARIANTS = dict(
    alpha=0.5,
    beta_start=0.3,
    lap_alpha=0.3,
    lap_min_priority=0.05,
    la3p_fraction=0.25,
    half_life=20_000.0,
    regime_weights=(1.0, 3.0, 1.0),
    reward_floor=0.02,
    regressor_learning_rate=3e-3,
)


@pytest.mark.parametrize(
    ("variant", "kept"),
    [
        ("uniform", set()),
        ("per", {"alpha", "beta_start"}),
        ("rank", {"alpha", "beta_start"}),
        ("faded", {"alpha", "beta_start", "half_life"}),
        ("lap", {"lap_alpha", "lap_min_priority"}),
        ("pal", {"lap_alpha", "lap_min_priority"}),
        ("la3p", {"lap_alpha", "lap_min_priority", "la3p_fraction"}),
        ("per_no_is", {"alpha"}),
        ("regime_weighted", {"regime_weights"}),
        ("per_critic_only", {"alpha", "beta_start"}),
        ("per_reward_priority", {"alpha", "beta_start"}),
        ("per_reward_floor", {"alpha", "beta_start", "reward_floor"}),
        ("expected_td", {"alpha", "beta_start", "regressor_learning_rate"}),
        ("expected_relo_root", {"beta_start", "regressor_learning_rate"}),
    ],
)
def test_canonical_configs_keep_only_the_settings_their_variant_uses(variant, kept):
    config = RunConfig(variant=variant, **SETTINGS_OF_SOME_VARIANTS).canonical()
    default = RunConfig(variant=variant)
    changed = {name for name in SETTINGS_OF_SOME_VARIANTS if getattr(config, name) != getattr(default, name)}
    assert changed == kept
    # what the run builds is unchanged by dropping the settings its variant ignores
    env = gym.make("envs:PairsTrading-v0")
    full, canonical = make_model(RunConfig(variant=variant, **SETTINGS_OF_SOME_VARIANTS), env), make_model(config, env)
    assert full.replay_buffer_kwargs == canonical.replay_buffer_kwargs
    assert full.replay_scheme == canonical.replay_scheme
    if "regressor_learning_rate" in kept:
        assert full.replay_scheme.learning_rate == SETTINGS_OF_SOME_VARIANTS["regressor_learning_rate"]


@pytest.mark.parametrize("half_life", [10_000.0, 40_000.0])
def test_a_faded_half_life_the_config_accepts_builds_its_model(half_life):
    config = RunConfig(variant="faded", half_life=half_life)
    model = make_model(config, gym.make(config.env_id))
    assert model.replay_buffer.priority_half_life == half_life


@pytest.mark.parametrize("half_life", [5_000.0, 7_000.0, 7_500.0, 9_000.0])  # about the limit, 7,300 at 1e6
def test_the_config_refuses_a_faded_half_life_exactly_when_the_buffer_would(half_life):
    accepted = RunConfig(variant="faded")
    env = gym.make(accepted.env_id)
    try:
        config = replace(accepted, half_life=half_life)
    except ValueError:
        with pytest.raises(ValueError, match="priority_half_life"):  # the buffer refuses the same kwargs
            PrioritizedReplayBuffer(
                accepted.buffer_size,
                env.observation_space,
                env.action_space,
                **{**accepted.replay_kwargs(), "priority_half_life": half_life},
            )
    else:
        assert make_model(config, env).replay_buffer.priority_half_life == half_life


def test_a_faded_half_life_the_buffer_would_refuse_is_refused_by_the_config():
    # 1,000,000 / 1,000 = 1,000 halvings, past what the sum tree holds exactly (the buffer's check)
    with pytest.raises(ValueError, match=r"priority_half_life=1000\.0 is below buffer_size / 512"):
        RunConfig(variant="faded", half_life=1_000.0)
    RunConfig(variant="per", half_life=1_000.0)  # a variant without fading ignores it
    # 400 halvings: the buffer-normalized IS weights have a floor (the buffer's faded_weights_floored), so accepted
    assert RunConfig(variant="faded", half_life=2_500.0).replay_kwargs()["priority_half_life"] == 2_500.0
    # epsilon ** alpha = 1e-160: * 2 ** -400 (4e-281) is a normal float64, * 2 ** -500 (3e-311) is not: refused
    RunConfig(variant="faded", half_life=2_500.0, epsilon=1e-160, alpha=1.0, beta_start=0.0, beta_end=0.0)
    with pytest.raises(ValueError, match=r"half_life=2000\.0 is too short .*below float64's normal range"):
        RunConfig(variant="faded", half_life=2_000.0, epsilon=1e-160, alpha=1.0, beta_start=0.0, beta_end=0.0)


def test_a_setting_one_variant_ignores_does_not_unfinish_its_runs():
    with_default = plan_runs(RunConfig(), {"uniform": [0], "per": [0], "faded": [0]})
    with_other_half_life = plan_runs(RunConfig(half_life=20_000.0), {"uniform": [0], "per": [0], "faded": [0]})
    assert with_default[:2] == with_other_half_life[:2]
    assert with_default[2] != with_other_half_life[2]

"""The noise test (comparison/noise_test.py), a plug-in of comparison.study: PER chases reward noise, ExpectedTD does
not; finished runs are kept, unfinished ones trained again, another config's folder refused."""

from __future__ import annotations

import math
import shlex
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import comparison.noise_test as noise_test
from comparison.noise_test import (
    COLUMNS,
    EVALUATIONS_FILE,
    SUMMARY_FILE,
    NoiseTestConfig,
    NoiseTestStudy,
    finished_evaluations,
    plan_runs,
    summary_table,
)
from comparison.study import CONFIG_FILE, run_dir, run_study, study_main

STUDY = NoiseTestStudy()
#: A run of the noise test that trains in about 15 s of one core (measured: 13-18 s CPU per variant)
SMALL = dict(total_steps=2_000, learning_starts=250, eval_freq=1_000, batch_size=128)


def finished_in(out_dir: Path, config: NoiseTestConfig) -> bool:
    """Whether the study folder ``out_dir`` holds ``config``'s finished run."""
    return STUDY.finished(config, run_dir(out_dir, config))


@pytest.mark.slow
def test_per_chases_the_noisy_transitions_and_expected_td_does_not(tmp_path):
    """
    Seed 101 (a validation seed of docs/results/noise_validation; 0-4 are the evaluation seeds), SMALL settings,
    otherwise the noise test's own (noise share 0.5, std 1, 64x64 networks, alpha 0.6). Measured at these settings,
    the noisy transitions' final priority share minus their buffer share: PER +0.154 / +0.155 / +0.168 and
    ExpectedTD -0.017 / -0.017 / +0.003 on seeds 100 / 101 / 102 (buffer shares 0.498 / 0.496 / 0.519). Asserted:
    PER above the buffer share by more than 0.08; ExpectedTD within the project's criterion, buffer share + 0.1.
    """
    configs = plan_runs([101], ["per", "expected_td"], **SMALL)
    progress = run_study(STUDY, configs, tmp_path, announce=lambda line: None)
    assert progress.trained == ["per_s101", "expected_td_s101"] and progress.pending == []
    final = {
        config.variant: finished_evaluations(config, run_dir(tmp_path, config)).set_index("step").loc[2_000]
        for config in configs
    }
    per, expected_td = final["per"], final["expected_td"]
    assert per["noisy_buffer_share"] == expected_td["noisy_buffer_share"]  # same seed, same env: the same buffer
    assert 0.45 < per["noisy_buffer_share"] < 0.55
    assert per["noisy_priority_share"] > per["noisy_buffer_share"] + 0.08
    assert expected_td["noisy_priority_share"] <= expected_td["noisy_buffer_share"] + 0.1


# --- the configuration and the plan -------------------------------------------------------------------------


def test_an_unknown_variant_raises_value_error_naming_it():
    with pytest.raises(ValueError, match=r"variant must be one of \[.*'per'.*\], got 'ucb'"):
        NoiseTestConfig(variant="ucb")


def test_learning_starts_outside_the_run_raises_value_error_naming_it():
    with pytest.raises(ValueError, match=r"learning_starts must be in \[0, 1000\), got 1000"):
        NoiseTestConfig(total_steps=1_000, learning_starts=1_000)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("seed", -1, r"seed must be an integer >= 0, got -1"),
        ("eval_freq", 0, r"eval_freq must be an integer >= 1, got 0"),
        ("noise_share", 1.5, r"noise_share must be in \[0, 1\], got 1\.5"),
        ("epsilon", 0.0, r"epsilon must be a finite number > 0, got 0\.0"),
        ("net_arch", (64, 0), r"net_arch must be positive layer widths, got \(64, 0\)"),
    ],
)
def test_a_bad_setting_raises_value_error_naming_it_and_its_value(field, value, message):
    with pytest.raises(ValueError, match=message):
        NoiseTestConfig(**{field: value})


def test_evaluations_are_every_eval_freq_from_zero_and_at_the_last_step():
    config = NoiseTestConfig(variant="relo", seed=7, total_steps=1_100, learning_starts=100, eval_freq=500)
    assert config.eval_steps == [0, 500, 1_000, 1_100]
    assert config.run_name == "relo_s7"


def test_the_config_round_trips_through_its_json_with_net_arch_a_tuple():
    config = NoiseTestConfig(variant="tqc_uper", seed=3, net_arch=[32, 16])
    assert config.net_arch == (32, 16)
    assert NoiseTestConfig.from_json(config.to_json()) == config
    with pytest.raises(ValueError, match=r"not a NoiseTestConfig: "):
        NoiseTestConfig.from_json('{"variant": "per", "colour": "red"}')


def test_the_plan_runs_each_seeds_variants_in_order_and_the_default_is_every_variant():
    names = [config.run_name for config in plan_runs(range(100, 102), ["relo", "per"], total_steps=1_000)]
    assert names == ["relo_s100", "per_s100", "relo_s101", "per_s101"]
    assert [config.variant for config in STUDY.plan([0])] == list(noise_test.VARIANTS)
    with pytest.raises(ValueError, match="variant must be one of"):
        plan_runs([0], ["ucb"])


# --- resuming: a finished run is kept only if it is complete and of the same config ---------------------------


def finished_rows(config: NoiseTestConfig, value: float = 0.5) -> pd.DataFrame:
    """A row of ``COLUMNS`` (every figure ``value``) at each evaluation step, as a finished run writes them."""
    return pd.DataFrame(
        [{column: value for column in COLUMNS} | {"step": step} for step in config.eval_steps], columns=list(COLUMNS)
    )


def write_run(out_dir: Path, config: NoiseTestConfig, rows: pd.DataFrame) -> Path:
    """Write a run's ``config.json`` and ``evaluations.csv`` into its folder, as a run does; return the CSV's path."""
    directory = run_dir(out_dir, config)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / CONFIG_FILE).write_text(config.to_json())
    rows.to_csv(directory / EVALUATIONS_FILE, index=False)
    return directory / EVALUATIONS_FILE


CONFIG = NoiseTestConfig(variant="per", seed=101, total_steps=1_000, learning_starts=100, eval_freq=500)


def test_a_complete_run_of_the_same_config_is_finished(tmp_path):
    write_run(tmp_path, CONFIG, finished_rows(CONFIG))
    assert finished_in(tmp_path, CONFIG)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda path: path.write_text(finished_rows(CONFIG).iloc[:-1].to_csv(index=False)),  # last evaluation missing
        lambda path: path.write_text(finished_rows(CONFIG).assign(clean_reward=math.nan).to_csv(index=False)),
        lambda path: path.write_text(finished_rows(CONFIG).drop(columns="noisy_reward").to_csv(index=False)),
        lambda path: path.write_text(""),
        lambda path: path.unlink(),
        lambda path: (path.parent / CONFIG_FILE).unlink(),
    ],
    ids=["missing_row", "nan_reward", "missing_column", "empty_csv", "no_csv", "no_config"],
)
def test_an_incomplete_run_is_not_finished(tmp_path, spoil):
    spoil(write_run(tmp_path, CONFIG, finished_rows(CONFIG)))
    assert not finished_in(tmp_path, CONFIG)


@pytest.mark.parametrize(
    ("config_text", "message"),
    [
        ("{not json", r"is no config of this study \(not a NoiseTestConfig: "),
        (replace(CONFIG, epsilon=1e-7).to_json(), "holds a config with other settings than the run per_s101's"),
    ],
    ids=["broken_config", "other_config"],
)
def test_a_foreign_run_raises_value_error_naming_its_config_rather_than_being_trained_over(
    tmp_path, monkeypatch, config_text, message
):
    path = write_run(tmp_path, CONFIG, finished_rows(CONFIG))
    (path.parent / CONFIG_FILE).write_text(config_text)
    monkeypatch.setattr(noise_test, "run", lambda config: pytest.fail(f"trained {config.run_name}"))
    with pytest.raises(ValueError, match=message):
        finished_in(tmp_path, CONFIG)
    with pytest.raises(ValueError, match=message):
        run_study(STUDY, [CONFIG], tmp_path, announce=lambda line: None)
    assert (path.parent / CONFIG_FILE).read_text() == config_text  # the other run's folder is left as it was


def test_run_study_keeps_finished_runs_and_redoes_the_others(tmp_path, monkeypatch):
    finished, partial = CONFIG, replace(CONFIG, variant="expected_td")
    write_run(tmp_path, finished, finished_rows(finished, value=0.25))
    write_run(tmp_path, partial, finished_rows(partial).iloc[:1])
    trained = []

    def fake_run(config: NoiseTestConfig) -> pd.DataFrame:
        trained.append(config)
        return finished_rows(config, value=0.75)

    monkeypatch.setattr(noise_test, "run", fake_run)
    progress = run_study(STUDY, [finished, partial], tmp_path, announce=lambda line: None)

    assert trained == [partial] and progress.trained == ["expected_td_s101"] and progress.pending == []
    assert finished_evaluations(finished, run_dir(tmp_path, finished))["clean_reward"].unique().tolist() == [0.25]
    assert finished_evaluations(partial, run_dir(tmp_path, partial))["clean_reward"].unique().tolist() == [0.75]
    # once all are finished, nothing trains again
    run_study(STUDY, [finished, partial], tmp_path, announce=lambda line: None)
    assert trained == [partial]


def test_an_interrupted_run_leaves_no_finished_run_behind_and_is_trained_again(tmp_path, monkeypatch):
    write_run(tmp_path, CONFIG, finished_rows(CONFIG).iloc[:1])  # an earlier attempt's partial rows

    def interrupted_run(config: NoiseTestConfig) -> pd.DataFrame:
        raise KeyboardInterrupt

    monkeypatch.setattr(noise_test, "run", interrupted_run)
    with pytest.raises(KeyboardInterrupt):
        run_study(STUDY, [CONFIG], tmp_path, announce=lambda line: None)
    assert not finished_in(tmp_path, CONFIG)
    assert sorted(path.name for path in run_dir(tmp_path, CONFIG).iterdir()) == [CONFIG_FILE]  # its rows are gone
    monkeypatch.setattr(noise_test, "run", finished_rows)
    assert run_study(STUDY, [CONFIG], tmp_path, announce=lambda line: None).trained == ["per_s101"]
    assert finished_in(tmp_path, CONFIG)


def test_a_run_whose_rows_fail_the_check_writes_no_result_file(tmp_path, monkeypatch):
    monkeypatch.setattr(noise_test, "run", lambda config: finished_rows(config).iloc[:-1])
    with pytest.raises(ValueError, match=r"evaluations\.csv holds the steps \[0, 500\], expected \[0, 500, 1000\]"):
        run_study(STUDY, [CONFIG], tmp_path, announce=lambda line: None)
    assert not (run_dir(tmp_path, CONFIG) / EVALUATIONS_FILE).exists()


# --- the command line and the report ----------------------------------------------------------------------------


def test_the_command_line_trains_the_plan_and_quotes_a_command_that_plans_it_again(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(noise_test, "run", lambda config: finished_rows(config, value=0.5))
    small = ["--variants", "relo", "uniform", "--seeds", "2", "--first-seed", "100", "--total-steps", "1000"]
    assert study_main(STUDY, ["run", *small, "--epsilon", "1e-7", "--out", str(tmp_path)]) == 0
    assert "trained 4 run(s); 0 pending" in capsys.readouterr().out
    assert sorted(path.name for path in (tmp_path / "runs").iterdir()) == [
        *("relo_s100", "relo_s101", "uniform_s100", "uniform_s101")
    ]
    assert NoiseTestConfig.from_json((tmp_path / "runs" / "relo_s101" / CONFIG_FILE).read_text()) == (
        NoiseTestConfig(variant="relo", seed=101, total_steps=1_000, epsilon=1e-7)
    )
    summary = (tmp_path / SUMMARY_FILE).read_text()
    assert "Means over seeds [100, 101]" in summary and "1000 steps" in summary and "epsilon 1e-07" in summary
    assert [line.split(" | ")[0] for line in summary.splitlines() if line.startswith("| ") and "|-" not in line][
        1:
    ] == [*("| relo", "| uniform")]
    command = summary.split("Command: `")[1].split("`")[0]
    assert command.startswith("python scripts/noise_test_study.py run --seeds 2 --first-seed 100 ")
    # The quoted command plans the runs trained: as pending, it finds every run of its plan finished.
    assert study_main(STUDY, ["pending", *shlex.split(command)[3:]]) == 0
    assert capsys.readouterr().out.strip() == "0"
    with pytest.raises(SystemExit):
        study_main(STUDY, ["pending", "--total-steps", "0", "--out", str(tmp_path)])
    assert "argument --total-steps: must be an integer >= 1, got '0'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        study_main(STUDY, ["pending", "--total-steps", "400", "--out", str(tmp_path)])
    assert "learning_starts must be in [0, 400), got 500" in capsys.readouterr().err


def test_the_report_covers_the_finished_runs_only(tmp_path):
    plan = plan_runs([0, 1], ["per"], total_steps=1_000)
    write_run(tmp_path, plan[0], finished_rows(plan[0], value=0.25))
    write_run(tmp_path, plan[1], finished_rows(plan[1]).iloc[:1])  # unfinished: left out
    summary = STUDY.report(plan, tmp_path, "the command").read_text()
    assert "| per | 1 | 0.250 [0.250, 0.250] |" in summary and summary.endswith("Command: `the command`\n")


# --- the summary ------------------------------------------------------------------------------------------------


def test_summary_takes_each_seeds_last_evaluation_and_averages_the_seeds():
    def row(variant: str, seed: int, step: int, share: float, priority: float, reward: float) -> dict:
        figures = dict(noisy_buffer_share=share, noisy_priority_share=priority, noisy_sample_share=share)
        figures |= dict(clean_reward=reward, noisy_reward=reward, priority_error_correlation=math.nan)
        return {"step": step, **figures, "variant": variant, "seed": seed}

    rows = pd.DataFrame(
        [  # out of step order; only step 100 is final; step 0 stays out of the mean over the run
            row("per", 0, 100, 0.5, 0.7, 0.9),
            row("per", 0, 0, 0.9, 0.9, -5.0),
            row("per", 0, 50, 0.9, 0.9, 0.5),
            row("per", 1, 0, 0.9, 0.9, -5.0),
            row("per", 1, 50, 0.9, 0.9, 0.3),
            row("per", 1, 100, 0.4, 0.8, 0.7),
            row("uniform", 0, 0, 0.9, math.nan, -5.0),
            row("uniform", 0, 100, 0.6, math.nan, 0.2),
        ]
    )
    table = summary_table(rows)
    per = next(line for line in table.splitlines() if line.startswith("| per |"))
    uniform = next(line for line in table.splitlines() if line.startswith("| uniform |"))
    cells = [cell.strip() for cell in per.strip("|").split("|")]
    # seeds, buffer share, priority share, sample share, final clean reward, mean over the run, noisy reward, rho
    assert cells[1] == "2"
    assert [cell.split()[0] for cell in cells[2:]] == ["0.450", "0.750", "0.450", "0.800", "0.600", "0.800", "n/a"]
    uniform_cells = [cell.strip() for cell in uniform.strip("|").split("|")]
    assert uniform_cells[1] == "1" and uniform_cells[3] == "n/a"
    assert uniform_cells[2] == "0.600 [0.600, 0.600]"

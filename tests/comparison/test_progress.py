"""Progress over long work: the bar counts the env steps of all runs, fed by the runs as they train."""

import re

import pandas as pd
from stable_baselines3.common.env_util import make_vec_env

from comparison.experiment import StepReports, make_model, train_run
from comparison.runner import run_pending


def test_step_reports_sum_to_the_steps_taken_and_come_no_oftener_than_asked(tiny_config):
    config = tiny_config(variant="per")
    model = make_model(config, make_vec_env(config.env_id, n_envs=1, seed=0, env_kwargs=config.env_kwargs))
    every_step, seldom = [], []
    model.learn(config.total_steps, callback=[StepReports(every_step.append, 0.0), StepReports(seldom.append, 3600)])
    assert every_step == [1] * config.total_steps + [0]  # the last report, at the end of training, has nothing left
    assert seldom == [config.total_steps]


def test_a_run_reports_its_steps_and_trains_as_it_does_without_reporting(tmp_path, tiny_config):
    config = tiny_config(variant="per")
    reports = []
    reported = train_run(config, tmp_path / "reported", on_steps=reports.append)
    assert sum(reports) == config.total_steps
    pd.testing.assert_frame_equal(reported, train_run(config, tmp_path / "silent"), check_exact=True)


def test_the_progress_bar_counts_the_env_steps_of_all_runs_and_drops_a_failed_runs(tmp_path, tiny_config, capsys):
    good = tiny_config(variant="uniform", seed=0)
    bad = tiny_config(variant="uniform", seed=1, env_kwargs={"no_such_option": 1})  # fails as the run starts
    failures = run_pending([good, bad], tmp_path, workers=2, progress=True)
    assert list(failures) == [bad.run_name]
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert re.match(r"env steps: 100%\|.*\| 200/200 \[.*, 2/2 runs\]$", last), last

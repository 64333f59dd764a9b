"""The comparison's ray backend: one Ray task per run, same files and numbers as the local backend, resumable."""

import json
import subprocess
import sys
import textwrap
from dataclasses import replace

import pandas as pd
import pytest

from comparison.cli import compare_main
from comparison.experiment import RunConfig
from comparison.runner import is_finished, run_comparison, run_dir, run_pending

ray = pytest.importorskip("ray")

RUNS = ("uniform_s0", "per_s0")


@pytest.fixture(scope="module")
def tiny(tiny_run_argv) -> list[str]:
    """Even smaller than the quick preset: one seed, 200 gradient steps, evaluations at steps 0, 100, 200 and 300."""
    return [
        "--quick",
        "--seeds",
        "0",
        "--variants",
        "uniform",
        "per",
        *tiny_run_argv(total_steps=300, learning_starts=100, eval_freq=100, eval_episodes=2, episode_length=30),
        "--no-progress-bar",
    ]


@pytest.fixture(scope="module")
def local_ray():
    """A Ray on this machine with 2 CPUs, started by the test ("local": never a cluster someone else started)."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def ray_comparison(local_ray, tiny, tmp_path_factory):
    """The tiny comparison through the command line with ``--backend ray``, and the options of ``ray.remote``."""
    out = tmp_path_factory.mktemp("ray_comparison")
    argv = [*tiny, "--out", str(out), "--backend", "ray"]
    remote_options = []
    real_remote = ray.remote

    def spy(*args, **options):
        remote_options.append(options)
        return real_remote(*args, **options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ray, "remote", spy)
        result = compare_main(argv)
    return argv, out, result, remote_options


@pytest.mark.slow
def test_ray_backend_runs_the_tiny_comparison_then_resumes_without_rerunning(ray_comparison, monkeypatch):
    argv, out, result, remote_options = ray_comparison
    assert remote_options == [{"num_cpus": 1}]  # the runs were Ray tasks of one CPU
    assert ray.is_initialized()  # the test's Ray was used, not shut down
    assert result["failures"] == {}
    for name in ("evaluations.csv", "baselines.csv", "summary.md", "learning_curves.png"):
        assert (out / name).stat().st_size > 0
    for name in RUNS:
        files = {path.name for path in (out / "runs" / name).iterdir()}
        # the small files only, no .tmp left
        assert files == {"config.json", "progress.csv", "telemetry.csv", "evaluations.csv"}
        assert list(pd.read_csv(out / "runs" / name / "evaluations.csv")["step"]) == [0, 100, 200, 300]
    evaluations = pd.read_csv(out / "evaluations.csv")
    assert set(evaluations["run"]) == set(RUNS)
    assert set(pd.read_csv(out / "telemetry.csv")["variant"]) == {"uniform", "per"}

    written = {path: path.stat().st_mtime_ns for path in (out / "runs").rglob("*")}

    def no_task(*args, **options):
        raise AssertionError("a finished run was submitted to Ray again")

    monkeypatch.setattr(ray, "remote", no_task)
    assert compare_main(argv)["failures"] == {}
    assert {path: path.stat().st_mtime_ns for path in (out / "runs").rglob("*")} == written
    assert pd.read_csv(out / "evaluations.csv").equals(evaluations)


@pytest.mark.slow
def test_a_run_computes_the_same_on_the_local_backend_which_never_imports_ray(ray_comparison, tmp_path):
    _, out, _, _ = ray_comparison
    ray_run = out / "runs" / "per_s0"
    script = textwrap.dedent(
        """
        import json, sys
        from pathlib import Path
        from comparison.experiment import RunConfig
        from comparison.runner import run_pending

        config = RunConfig(**json.loads(Path(sys.argv[1]).read_text()))
        failures = run_pending([config], Path(sys.argv[2]), workers=1, progress=False, backend="local")
        assert failures == {}, failures
        print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "ray")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(ray_run / "config.json"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []  # the local backend did not import ray

    local_run = tmp_path / "runs" / "per_s0"
    assert (local_run / "config.json").read_text() == (ray_run / "config.json").read_text()
    # Every column of every row, exactly: same seeds, one torch thread, the same CPU code on both backends.
    for name in ("evaluations.csv", "telemetry.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(local_run / name), pd.read_csv(ray_run / name), check_exact=True)
    assert sorted(p.name for p in local_run.iterdir()) == sorted(p.name for p in ray_run.iterdir())


def test_a_failing_run_on_ray_is_reported_with_its_error_and_the_others_finish(local_ray, tmp_path):
    good = RunConfig(
        seed=3,
        total_steps=150,
        learning_starts=100,
        eval_freq=150,
        eval_episodes=1,
        batch_size=16,
        net_arch=(8,),
        env_kwargs={"episode_length": 20},
    )
    # Valid as a config; the env refuses the option when the task builds it, on the Ray worker.
    bad = replace(good, seed=4, env_kwargs={"no_such_option": 1})
    failures = run_pending([bad, good], tmp_path, workers=1, progress=False, backend="ray")
    assert list(failures) == [bad.run_name]
    assert "no_such_option" in failures[bad.run_name].strip().splitlines()[-1]
    assert is_finished(tmp_path, good) and not is_finished(tmp_path, bad)
    assert ray.is_initialized()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--backend", "spark"], "--backend: invalid choice: 'spark'"),
        (["--ray-address", "auto"], "--ray-address is only used with --backend ray"),
        (["--backend", "ray", "--workers", "2"], "--workers applies to --backend local"),
    ],
)
def test_compare_cli_rejects_backend_options_that_do_not_go_together(argv, message, tiny, capsys, tmp_path):
    with pytest.raises(SystemExit) as exit_info:
        compare_main([*tiny, "--out", str(tmp_path), *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_compare_cli_hands_the_backend_and_ray_address_to_the_runner(monkeypatch, tiny, tmp_path):
    given = {}

    class Stop(Exception):
        pass

    def fake_run_comparison(configs, out, **options):
        given.update(options)
        raise Stop

    monkeypatch.setattr("comparison.runner.run_comparison", fake_run_comparison)
    with pytest.raises(Stop):
        compare_main([*tiny, "--out", str(tmp_path), "--backend", "ray", "--ray-address", "ray://head:10001"])
    assert given["backend"] == "ray" and given["ray_address"] == "ray://head:10001"
    with pytest.raises(Stop):
        compare_main([*tiny, "--out", str(tmp_path)])
    assert given["backend"] == "local" and given["ray_address"] is None


def test_the_runner_names_an_unknown_backend(tmp_path):
    config = RunConfig()
    with pytest.raises(ValueError, match="'spark'"):
        run_pending([config], tmp_path, workers=1, backend="spark")
    with pytest.raises(ValueError, match="'spark'"):
        run_comparison([config], tmp_path, command="", backend="spark")
    with pytest.raises(ValueError, match="only used by the ray backend"):
        run_comparison([config], tmp_path, command="", ray_address="auto")
    assert not run_dir(tmp_path, config).exists()

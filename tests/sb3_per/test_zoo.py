"""The RL Baselines3 Zoo launcher: ``python -m sb3_per.zoo`` trains sb3_per's algorithms with prioritized replay."""

import argparse
import re
import subprocess
import sys

import numpy as np
import pytest
import sb3_contrib
import stable_baselines3
import yaml

import sb3_per
from sb3_per import zoo
from sb3_per.buffers import PrioritizedReplayBuffer


@pytest.fixture(autouse=True, scope="module")
def undo_the_zoos_gymnasium_patch():
    """
    Importing rl_zoo3 replaces gymnasium's TimeLimit with its own (rl_zoo3/gym_patches.py), for the whole
    process: put gymnasium's back after this module, so that the tests that run after it see plain gymnasium.
    """
    import gymnasium.envs.registration
    import gymnasium.wrappers
    import gymnasium.wrappers.common

    saved = gymnasium.wrappers.TimeLimit, gymnasium.wrappers.common.TimeLimit
    yield
    gymnasium.wrappers.TimeLimit, gymnasium.wrappers.common.TimeLimit = saved
    vars(gymnasium.envs.registration).pop("TimeLimit", None)


EXPECTED_ALGOS = {
    "per_sac": sb3_per.SAC,
    "per_td3": sb3_per.TD3,
    "per_ddpg": sb3_per.DDPG,
    "per_dqn": sb3_per.DQN,
    "per_tqc": sb3_per.TQC,
    "per_qrdqn": sb3_per.QRDQN,
}
HYPERPARAM_FILES = sorted(zoo.HYPERPARAMS_DIR.glob("*.yml"))
CONFIGS = [
    (path.stem, env_id) for path in HYPERPARAM_FILES for env_id in yaml.safe_load(path.read_text(encoding="utf-8"))
]


def test_algorithm_table_holds_the_per_algorithms():
    import rl_zoo3.enjoy
    import rl_zoo3.exp_manager
    import rl_zoo3.hyperparams_opt
    import rl_zoo3.train

    algos = zoo.register_algorithms()
    assert zoo.register_algorithms() is algos  # idempotent
    for module in (rl_zoo3, rl_zoo3.train, rl_zoo3.enjoy, rl_zoo3.exp_manager):
        assert module.ALGOS is algos  # one table, bound by every module that imported it
    for name, cls in EXPECTED_ALGOS.items():
        assert algos[name] is cls
        stock = name.removeprefix("per_")
        stock_module = sb3_contrib if stock in ("tqc", "qrdqn") else stable_baselines3
        assert algos[stock] is getattr(stock_module, stock.upper())  # the zoo's own entries are untouched
        assert rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER[name] is rl_zoo3.hyperparams_opt.HYPERPARAMS_SAMPLER[stock]
    assert {path.stem for path in HYPERPARAM_FILES} == set(EXPECTED_ALGOS)


def test_names_resolve_where_the_zoo_evaluates_hyperparameter_strings():
    import rl_zoo3.exp_manager
    import rl_zoo3.utils

    zoo.register_algorithms()
    for text in (
        "sb3_per.PrioritizedReplayBuffer",
        "PrioritizedReplayBuffer",
        "sb3_per.buffers.PrioritizedReplayBuffer",
    ):
        assert eval(text, vars(rl_zoo3.exp_manager)) is PrioritizedReplayBuffer  # the YAML files' namespace
    parser = argparse.ArgumentParser()
    parser.add_argument("--hyperparams", nargs="+", action=rl_zoo3.utils.StoreDict)  # --hyperparams overrides
    args = parser.parse_args(["--hyperparams", "replay_buffer_class:sb3_per.PrioritizedReplayBuffer"])
    assert args.hyperparams == {"replay_buffer_class": PrioritizedReplayBuffer}
    args = parser.parse_args(["--hyperparams", 'replay_scheme:"LAP(min_priority=0.01)"'])
    assert zoo.evaluated_scheme(args.hyperparams)["replay_scheme"] == sb3_per.LAP(min_priority=0.01)


def test_a_replay_scheme_string_is_parsed_into_its_scheme_and_anything_else_refused():
    scheme = zoo.evaluated_scheme({"replay_scheme": "LA3P(fraction=0.25)", "policy_kwargs": "dict(net_arch=[8])"})
    assert scheme["replay_scheme"] == sb3_per.LA3P(fraction=0.25)
    assert scheme["policy_kwargs"] == "dict(net_arch=[8])"  # the zoo's own keys are left to the zoo
    assert zoo.evaluated_scheme({"replay_scheme": sb3_per.PAL()})["replay_scheme"] == sb3_per.PAL()
    with pytest.raises(ValueError, match=r"fraction must be in \(0, 1\], got 2"):
        zoo.evaluated_scheme({"replay_scheme": "LA3P(fraction=2)"})
    for text in ("LAP(foo=1)", "PER('max', 'loss', True, 4)"):  # an argument the scheme does not have, or too many
        with pytest.raises(ValueError, match=rf"replay_scheme {re.escape(repr(text))}: .*argument"):
            zoo.evaluated_scheme({"replay_scheme": text})
    assert zoo.parsed_scheme("sb3_per.ExpectedTD(hidden_sizes=(32, 32))") == sb3_per.ExpectedTD(hidden_sizes=(32, 32))
    assert zoo.parsed_scheme(" PER('max') ") == sb3_per.PER("max")
    for text in (
        "__import__('os')",
        "().__class__.__bases__[0].__subclasses__()",
        "LAP(min_priority=__import__('os').getpid())",
        "LAP(**{'min_priority': 0.1})",
        "(lambda: PER())()",
        "PER().__class__(td_error_reduction='max')",
        "os.system('true')",
        "PrioritizedReplayBuffer(10)",
        "LAP(min_priority=0.01",
    ):
        with pytest.raises(ValueError, match=r"replay_scheme must be a call of one of PER, LAP, .* with literal argum"):
            zoo.evaluated_scheme({"replay_scheme": text})


@pytest.mark.parametrize(("algo", "env_id"), CONFIGS, ids=[f"{algo}-{env_id}" for algo, env_id in CONFIGS])
def test_no_file_pins_a_setting_that_a_scheme_gives_its_buffer(algo: str, env_id: str):
    # The user's replay_buffer_kwargs win over a scheme's paper settings: a pinned alpha would silently keep LAP at 0.6
    kwargs_text = yaml.safe_load((zoo.HYPERPARAMS_DIR / f"{algo}.yml").read_text(encoding="utf-8"))[env_id]
    kwargs = eval(kwargs_text.get("replay_buffer_kwargs", "dict()"), {"dict": dict})
    scheme_settings = set().union(
        *(scheme.buffer_settings(EXPECTED_ALGOS[algo]) for scheme in (sb3_per.LAP(), sb3_per.LA3P(), sb3_per.ReLo()))
    )
    assert scheme_settings >= {"alpha", "epsilon", "weight_normalization"} and not scheme_settings & set(kwargs)


def test_the_launcher_trains_on_one_torch_thread_unless_told_otherwise():
    assert zoo.with_one_torch_thread(["--algo", "per_sac"]) == ["--algo", "per_sac", "--num-threads", "1"]
    for args in (["--num-threads", "4"], ["--num-threads=-1"], ["--algo", "sac", "--num-threads", "2"]):
        assert zoo.with_one_torch_thread(args) == args


@pytest.mark.parametrize(("algo", "env_id"), CONFIGS, ids=[f"{algo}-{env_id}" for algo, env_id in CONFIGS])
def test_packaged_hyperparameters_build_a_prioritized_model(algo, env_id, tmp_path):
    from rl_zoo3.exp_manager import ExperimentManager

    zoo.register_algorithms()
    raw = yaml.safe_load(zoo.default_config(algo).read_text(encoding="utf-8"))[env_id]
    assert "PrioritizedReplayBuffer" in raw["replay_buffer_class"]
    manager = ExperimentManager(
        argparse.Namespace(),
        algo,
        env_id,
        str(tmp_path),
        hyperparams={"buffer_size": 1_000},  # small, to build quickly
        seed=0,
        verbose=0,
        device="cpu",
        config=str(zoo.default_config(algo)),
    )
    model, _ = manager.setup_experiment()  # the zoo's own reading, evaluation and construction
    model.env.close()
    assert type(model) is EXPECTED_ALGOS[algo]
    buffer = model.replay_buffer
    assert type(buffer) is PrioritizedReplayBuffer
    assert (buffer.alpha, buffer.beta_start, buffer.beta_end) == (0.6, 0.4, 1.0)
    # beta follows the run's progress, so it reaches beta_end at the end whatever -n says.
    assert buffer.beta_anneal_steps == "auto"
    assert raw["replay_scheme"] == "PER()" and model.replay_scheme == sb3_per.PER()


@pytest.mark.slow
def test_tiny_zoo_training_updates_priorities(tmp_path, monkeypatch):
    from rl_zoo3.exp_manager import ExperimentManager

    trained = []
    save_trained_model = ExperimentManager.save_trained_model

    def record_and_save(self, model):
        trained.append(model)
        save_trained_model(self, model)

    monkeypatch.setattr(ExperimentManager, "save_trained_model", record_and_save)
    # No --conf-file: the launcher picks sb3_per/hyperparams/per_sac.yml.
    args = ["train", "--algo", "per_sac", "--env", "PairsTrading-v0", "-n", "300", "--seed", "0", "--verbose", "0"]
    overrides = ["learning_starts:100", "batch_size:32", "buffer_size:1000", 'replay_scheme:"LAP(min_priority=0.5)"']
    overrides.append("replay_buffer_kwargs:dict(alpha=0.5, beta_start=0.4, beta_anneal_steps='auto')")
    zoo.main([*args, "--eval-freq", "-1", "-f", str(tmp_path), "--hyperparams", *overrides])
    (model,) = trained
    assert type(model) is sb3_per.SAC
    assert model.replay_scheme == sb3_per.LAP(min_priority=0.5)
    assert model.num_timesteps == 300
    buffer = model.replay_buffer
    assert type(buffer) is PrioritizedReplayBuffer
    assert (buffer.alpha, buffer.beta_anneal_steps) == (0.5, "auto")
    # the last training call came after the run's last step: beta has reached beta_end
    assert buffer.beta == pytest.approx(1.0)
    assert buffer.priorities_at(np.arange(buffer.n_transitions)).min() >= 0.5**0.5  # LAP's floor, to the alpha
    # Stock SAC would sample the buffer without ever updating a priority.
    assert buffer.n_priority_updates == buffer.n_sample_calls > 0
    priorities = buffer.tree[np.arange(buffer.n_transitions)]
    assert np.unique(priorities).size > 1

    run = tmp_path / "per_sac" / "PairsTrading-v0_1"
    loaded = sb3_per.SAC.load(run / "PairsTrading-v0.zip")
    assert loaded.replay_buffer_class is PrioritizedReplayBuffer and loaded.replay_scheme == model.replay_scheme
    args = yaml.load((run / "PairsTrading-v0" / "args.yml").read_text(), Loader=yaml.UnsafeLoader)
    assert args["conf_file"] == str(zoo.default_config("per_sac"))

    enjoy = ["enjoy", "--algo", "per_sac", "--env", "PairsTrading-v0", "-f", str(tmp_path), "--no-render", "-n", "20"]
    zoo.main([*enjoy, "--verbose", "0", "--device", "cpu"])  # the zoo loads and runs the trained per_sac agent


def test_default_config_is_added_only_for_per_algorithms_without_one():
    per_sac = str(zoo.default_config("per_sac"))
    args = ["--algo", "per_sac", "--env", "E"]
    assert zoo.with_default_config(args) == [*args, "--conf-file", per_sac]
    assert zoo.with_default_config(["--algo=per_td3"])[-1] == str(zoo.default_config("per_td3"))
    for args in (
        ["--algo", "per_sac", "-conf", "my.yml"],
        ["--conf-file=my.yml", "--algo", "per_sac"],
        ["--algo", "sac"],
    ):
        assert zoo.with_default_config(args) == args


def test_clear_errors(tmp_path, monkeypatch, capsys):
    with pytest.raises(SystemExit) as exit_info:
        zoo.main(["fly"])
    assert exit_info.value.code == 2
    assert "unknown command 'fly'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="only for"):
        zoo.default_config("sac")
    monkeypatch.setattr(zoo, "HYPERPARAMS_DIR", tmp_path)
    with pytest.raises(FileNotFoundError, match="--conf-file"):
        zoo.with_default_config(["--algo", "per_sac"])
    monkeypatch.setitem(sys.modules, "rl_zoo3", None)
    monkeypatch.setitem(sys.modules, "rl_zoo3.train", None)
    with pytest.raises(SystemExit) as exit_info:
        zoo.main(["train", "--algo", "per_sac"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "pip install 'sb3-per[zoo]'" in error  # one line, the wheel's command


def test_importing_sb3_per_does_not_import_the_zoo():
    code = "import sys, sb3_per, sb3_per.zoo; assert not any(name.startswith('rl_zoo3') for name in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

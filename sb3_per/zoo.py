"""Run RL Baselines3 Zoo experiments with prioritized replay: a thin launcher around ``rl_zoo3``.

The zoo builds its algorithms from a fixed table (stock SB3 classes, which never update priorities) and evaluates
strings of its hyperparameter files, such as ``replay_buffer_class``, in its own module namespace, where ``sb3_per``
is not defined. This launcher, before handing the command line to the zoo unchanged:

- adds ``per_sac``, ``per_td3``, ``per_ddpg``, ``per_dqn``, ``per_tqc`` and ``per_qrdqn`` (``sb3_per.SAC``,
  ``TD3``, ``DDPG``, ``DQN``, ``TQC``, ``QRDQN``) to the zoo's algorithm table, and to its hyperparameter samplers
  (as the stock algorithm's), so ``-optimize`` works too;
- makes ``sb3_per``, ``PrioritizedReplayBuffer`` and the replay schemes (``PER``, ``LAP``, ``PAL``, ``LA3P``)
  resolvable in hyperparameter files and in ``--hyperparams`` overrides, e.g.
  ``replay_buffer_class: sb3_per.PrioritizedReplayBuffer``;
- makes a ``replay_scheme`` string, e.g. ``replay_scheme: "LAP(min_priority=0.01)"``, into its scheme: a call of an
  exported scheme with literal arguments, parsed (``parsed_scheme``), never evaluated; anything else is refused;
- trains and enjoys on one torch thread unless ``--num-threads`` says otherwise;
- imports ``sb3_per_envs``, which registers ``PairsTrading-v0``;
- for a ``per_*`` algorithm without ``--conf-file``/``-conf``, uses the hyperparameters shipped with sb3-per,
  ``sb3_per/hyperparams/<algo>.yml`` (the zoo's default folder has none for these names).

Install the zoo with ``pip install "sb3-per[zoo]"`` (from a clone: ``pip install -e ".[zoo]"``), then::

    python -m sb3_per.zoo train --algo per_sac --env PairsTrading-v0 -f logs --seed 0
    python -m sb3_per.zoo train --algo per_dqn --env CartPole-v1 -n 20000
    python -m sb3_per.zoo enjoy --algo per_sac --env PairsTrading-v0 -f logs --no-render -n 2520

Every option of ``rl_zoo3.train`` (``python -m sb3_per.zoo train --help``) and ``rl_zoo3.enjoy`` passes through; the
zoo's stock algorithms (``sac``, ``ppo``, ...) keep working. The shipped files set ``beta_anneal_steps='auto'``, so
beta reaches ``beta_end`` at the end of the run whatever its length (``-n``).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import sb3_per
from sb3_per.buffers import PrioritizedReplayBuffer
from sb3_per.ddpg import DDPG
from sb3_per.dqn import DQN
from sb3_per.qrdqn import QRDQN
from sb3_per.sac import SAC
from sb3_per.schemes import LA3P, LAP, PAL, PER, UPER, ExpectedReLo, ExpectedTD, ReLo, ReplayScheme
from sb3_per.td3 import TD3
from sb3_per.tqc import TQC

#: Algorithms added to the zoo's table, with the stock zoo algorithm whose hyperparameter sampler they reuse.
ZOO_ALGOS: dict[str, type] = {
    "per_sac": SAC,
    "per_td3": TD3,
    "per_ddpg": DDPG,
    "per_dqn": DQN,
    "per_tqc": TQC,
    "per_qrdqn": QRDQN,
}
_STOCK_ALGO = {name: name.removeprefix("per_") for name in ZOO_ALGOS}

#: The replay schemes a ``replay_scheme`` string may call, by name.
SCHEMES: dict[str, type[ReplayScheme]] = {
    scheme.__name__: scheme for scheme in (PER, LAP, PAL, LA3P, ReLo, UPER, ExpectedTD, ExpectedReLo)
}
#: Names made resolvable where the zoo evaluates strings of hyperparameter files and of ``--hyperparams``.
EVAL_NAMES: dict[str, Any] = {"sb3_per": sb3_per, "PrioritizedReplayBuffer": PrioritizedReplayBuffer, **SCHEMES}
#: The hyperparameter whose string value the launcher evaluates, as the zoo evaluates ``policy_kwargs``.
SCHEME_KEY = "replay_scheme"

#: Folder of the hyperparameter files shipped with sb3-per, one ``<algo>.yml`` per ``per_*`` algorithm.
HYPERPARAMS_DIR = Path(__file__).resolve().parent / "hyperparams"

#: Zoo commands the launcher runs, and the module and function of each.
COMMANDS: dict[str, tuple[str, str]] = {"train": ("rl_zoo3.train", "train"), "enjoy": ("rl_zoo3.enjoy", "enjoy")}

_INSTALL_HINT = "the RL Zoo launcher needs rl_zoo3: pip install 'sb3-per[zoo]' (from a clone: pip install -e '.[zoo]')"


def _import_zoo_module(name: str) -> ModuleType:
    """Import a module of rl_zoo3, with an install hint when rl_zoo3 is missing.

    :param name: module name, e.g. ``"rl_zoo3.train"``
    :return: the module
    """
    try:
        return importlib.import_module(name)
    except ImportError as error:
        if error.name is not None and error.name.split(".")[0] != "rl_zoo3":
            raise  # rl_zoo3 is there, one of its own dependencies is not: the original message says which
        raise ImportError(_INSTALL_HINT) from error


def register_algorithms() -> dict[str, type]:
    """Add the ``per_*`` algorithms and the names of ``EVAL_NAMES`` to rl_zoo3, and register ``PairsTrading-v0``.

    Idempotent. Every loaded ``rl_zoo3`` module is patched, so call it after importing the zoo modules to be used
    (``main`` does): the algorithm table is updated in place wherever a module holds one (``from rl_zoo3.utils import
    ALGOS`` binds the same dict), and the names are added to each module's globals, the namespace its ``eval`` of
    hyperparameter strings sees, without replacing a name the module already defines.

    :return: the zoo's algorithm table, ``rl_zoo3.utils.ALGOS``
    :raises ImportError: rl_zoo3 is not installed
    """
    for name in ("rl_zoo3.utils", "rl_zoo3.exp_manager", "rl_zoo3.hyperparams_opt"):
        _import_zoo_module(name)
    import sb3_per_envs  # noqa: F401  (registers PairsTrading-v0)

    _evaluate_scheme_strings(sys.modules["rl_zoo3.exp_manager"].ExperimentManager)
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "rl_zoo3" or name.startswith("rl_zoo3.")):
            continue
        table = getattr(module, "ALGOS", None)
        if isinstance(table, dict):
            table.update(ZOO_ALGOS)
        for key, value in EVAL_NAMES.items():
            vars(module).setdefault(key, value)

    hyperparams_opt = sys.modules["rl_zoo3.hyperparams_opt"]
    for table_name in ("HYPERPARAMS_SAMPLER", "HYPERPARAMS_CONVERTER"):
        table = getattr(hyperparams_opt, table_name, None)
        if isinstance(table, dict):
            for name, stock in _STOCK_ALGO.items():
                if stock in table:
                    table.setdefault(name, table[stock])
    return sys.modules["rl_zoo3.utils"].ALGOS


def parsed_scheme(text: str) -> ReplayScheme:
    """
    A ``replay_scheme`` string of a hyperparameter file: a call of one of the exported schemes (bare or as
    ``sb3_per.NAME``) with literal arguments, e.g. ``"LAP(min_priority=0.01)"`` or ``"ExpectedTD(hidden_sizes=(32,
    32))"``. It is parsed, never evaluated.

    :raises ValueError: for anything else (another name, an expression, ``**kwargs``), naming the string
    """
    usage = (
        f"replay_scheme must be a call of one of {', '.join(SCHEMES)} with literal arguments, e.g. "
        f"'LAP(min_priority=0.01)', got {text!r}"
    )
    try:
        call = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as error:
        raise ValueError(usage) from error
    if not isinstance(call, ast.Call):
        raise ValueError(usage)
    function = call.func
    if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Name) and function.value.id == "sb3_per":
        name = function.attr
    elif isinstance(function, ast.Name):
        name = function.id
    else:
        raise ValueError(usage)
    if name not in SCHEMES or any(keyword.arg is None for keyword in call.keywords):
        raise ValueError(usage)
    try:
        args = [ast.literal_eval(arg) for arg in call.args]
        kwargs = {str(keyword.arg): ast.literal_eval(keyword.value) for keyword in call.keywords}
    except ValueError as error:
        raise ValueError(usage) from error
    try:
        return SCHEMES[name](*args, **kwargs)
    except TypeError as error:  # an argument the scheme does not have, or too many
        raise ValueError(f"replay_scheme {text!r}: {error}") from None


def evaluated_scheme(hyperparams: dict[str, Any]) -> dict[str, Any]:
    """
    :param hyperparams: one env's hyperparameters, as the zoo read them
    :return: them, with a ``replay_scheme`` string (e.g. ``"LAP(min_priority=0.01)"``) made into its scheme by
        ``parsed_scheme``
    """
    scheme = hyperparams.get(SCHEME_KEY)
    if not isinstance(scheme, str):
        return hyperparams
    return {**hyperparams, SCHEME_KEY: parsed_scheme(scheme)}


def _evaluate_scheme_strings(manager_class: Any) -> None:
    """Make the zoo's ``ExperimentManager`` evaluate ``replay_scheme`` strings where it evaluates its own (once)."""
    preprocess = manager_class._preprocess_hyperparams
    if getattr(preprocess, "evaluates_replay_scheme", False):
        return

    def preprocess_with_scheme(self: Any, hyperparams: dict[str, Any]) -> Any:
        return preprocess(self, evaluated_scheme(hyperparams))

    preprocess_with_scheme.evaluates_replay_scheme = True  # type: ignore[attr-defined]
    manager_class._preprocess_hyperparams = preprocess_with_scheme


def default_config(algo: str) -> Path:
    """Path of the hyperparameter file shipped for a ``per_*`` algorithm.

    :param algo: one of ``ZOO_ALGOS``
    :return: ``sb3_per/hyperparams/<algo>.yml``
    :raises ValueError: ``algo`` is not one of ``ZOO_ALGOS``
    :raises FileNotFoundError: the file is missing from the installation
    """
    if algo not in ZOO_ALGOS:
        raise ValueError(f"no hyperparameters are shipped for {algo!r}, only for {sorted(ZOO_ALGOS)}")
    path = HYPERPARAMS_DIR / f"{algo}.yml"
    if not path.is_file():
        raise FileNotFoundError(f"the hyperparameter file of {algo} is missing: {path}; pass one with --conf-file")
    return path


def with_default_config(train_args: Sequence[str]) -> list[str]:
    """Add ``--conf-file sb3_per/hyperparams/<algo>.yml`` to ``train`` arguments that pick a ``per_*`` algorithm
    and no config.

    The arguments are read the way the zoo reads them (argparse, abbreviations and ``--opt=value`` included).

    :param train_args: arguments of ``rl_zoo3.train``, without the command name
    :return: the arguments, with the config added when needed
    """
    parser = argparse.ArgumentParser(prog="python -m sb3_per.zoo train", add_help=False)
    parser.add_argument("--algo", default=None)
    parser.add_argument("-conf", "--conf-file", default=None)
    known, _ = parser.parse_known_args(list(train_args))
    if known.algo in ZOO_ALGOS and known.conf_file is None:
        return [*train_args, "--conf-file", str(default_config(known.algo))]
    return list(train_args)


def with_one_torch_thread(command_args: Sequence[str]) -> list[str]:
    """
    Add ``--num-threads 1`` to zoo arguments that set no ``--num-threads``: small networks train fastest on one torch
    thread, and torch's default of one per core crawls on a busy machine (the project's scripts use one thread too).
    ``--num-threads -1`` keeps torch's default.

    :param command_args: arguments of ``rl_zoo3.train`` or ``rl_zoo3.enjoy``, without the command name
    """
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--num-threads", default=None)
    known, _ = parser.parse_known_args(list(command_args))
    return list(command_args) if known.num_threads is not None else [*command_args, "--num-threads", "1"]


def main(argv: Sequence[str] | None = None) -> None:
    """Run a zoo command (``train`` or ``enjoy``) with the ``per_*`` algorithms available.

    :param argv: command and its arguments, e.g. ``["train", "--algo", "per_sac", "--env", "PairsTrading-v0"]``;
        ``sys.argv[1:]`` by default. The zoo reads them from ``sys.argv``, which is restored afterwards.
    :raises SystemExit: no or an unknown command, or rl_zoo3 not installed (exit status 2, one line saying so), or
        the zoo's own argument errors
    """
    args = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: python -m sb3_per.zoo {{{','.join(COMMANDS)}}} [zoo options]  (algorithms: {', '.join(ZOO_ALGOS)})"
    if not args or args[0] in ("-h", "--help"):
        print(usage)
        raise SystemExit(0 if args else 2)
    command, command_args = args[0], args[1:]
    if command not in COMMANDS:
        print(f"{usage}\nunknown command {command!r}", file=sys.stderr)
        raise SystemExit(2)

    module_name, function_name = COMMANDS[command]
    try:
        run = getattr(_import_zoo_module(module_name), function_name)
    except ImportError as error:
        print(f"python -m sb3_per.zoo: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    register_algorithms()
    if command == "train":
        command_args = with_default_config(command_args)
    command_args = with_one_torch_thread(command_args)

    saved_argv = sys.argv
    sys.argv = [f"sb3_per.zoo {command}", *command_args]
    try:
        run()
    finally:
        sys.argv = saved_argv


if __name__ == "__main__":
    main()

"""The algorithms' constructors pass SB3's arguments through: every argument reaches SB3's constructor as given, and
the signature that type checkers read (sb3_per/__init__.pyi) is the installed SB3's, plus ``replay_scheme``."""

import ast
import inspect
from pathlib import Path

import gymnasium as gym
import pytest
import sb3_contrib
import stable_baselines3

import sb3_per
from sb3_per.per_algorithm import PrioritizedReplayMixin, constructor_with_replay_scheme
from sb3_per.sac import SACTrainingSteps

STUB = Path(sb3_per.__file__).with_name("__init__.pyi")
SB3_CLASSES = {
    "SAC": stable_baselines3.SAC,
    "TD3": stable_baselines3.TD3,
    "DDPG": stable_baselines3.DDPG,
    "DQN": stable_baselines3.DQN,
    "TQC": sb3_contrib.TQC,
    "QRDQN": sb3_contrib.QRDQN,
}


def stub_constructors() -> dict[str, ast.FunctionDef]:
    """The ``__init__`` of each class that the stub declares, by class name."""
    tree = ast.parse(STUB.read_text())
    return {
        node.name: next(item for item in node.body if isinstance(item, ast.FunctionDef) and item.name == "__init__")
        for node in tree.body
        if isinstance(node, ast.ClassDef)
    }


def stub_parameters(constructor: ast.FunctionDef) -> list[tuple[str, inspect._ParameterKind, object]]:
    """Name, kind and default (``inspect.Parameter.empty`` if none) of each parameter but ``self``."""
    arguments = constructor.args
    positional = arguments.args[1:]
    defaults = [inspect.Parameter.empty] * (len(positional) - len(arguments.defaults)) + [
        ast.literal_eval(default) for default in arguments.defaults
    ]
    keyword_defaults = [
        inspect.Parameter.empty if default is None else ast.literal_eval(default) for default in arguments.kw_defaults
    ]
    return [
        *((arg.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, d) for arg, d in zip(positional, defaults, strict=True)),
        *(
            (arg.arg, inspect.Parameter.KEYWORD_ONLY, d)
            for arg, d in zip(arguments.kwonlyargs, keyword_defaults, strict=True)
        ),
    ]


def runtime_parameters(algorithm: type) -> list[tuple[str, inspect._ParameterKind, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(algorithm).parameters.values()]


def test_the_stub_declares_every_algorithm_of_the_package():
    algorithms = {
        name
        for name in sb3_per.__all__
        if isinstance(getattr(sb3_per, name), type) and issubclass(getattr(sb3_per, name), PrioritizedReplayMixin)
    } - {"PrioritizedReplayMixin"}
    assert set(stub_constructors()) == algorithms == set(SB3_CLASSES)


def test_the_stub_exports_what_the_package_exports():
    """Type checkers read the stub instead of __init__.py: a name exported there but not here is unknown to them."""
    tree = ast.parse(STUB.read_text())
    reexported = {
        alias.asname for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names if alias.asname
    }
    declared = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    public = {name for name in reexported | declared if not name.startswith("_")}
    assert public == set(sb3_per.__all__)


@pytest.mark.parametrize("name", sorted(SB3_CLASSES))
def test_the_signature_is_the_installed_sb3s_with_a_keyword_only_replay_scheme(name):
    algorithm = getattr(sb3_per, name)
    sb3_parameters = runtime_parameters(SB3_CLASSES[name])
    expected = [*sb3_parameters, ("replay_scheme", inspect.Parameter.KEYWORD_ONLY, None)]
    assert runtime_parameters(algorithm) == expected
    # What type checkers read: a parameter that SB3 adds, drops, renames or whose default it changes shows here
    assert stub_parameters(stub_constructors()[name]) == expected


@pytest.mark.parametrize("name", sorted(SB3_CLASSES))
def test_every_argument_reaches_sb3_as_given_by_position_or_by_keyword(name):
    env_id = "CartPole-v1" if "DQN" in name else "Pendulum-v1"
    positional = ("MlpPolicy", gym.make(env_id), 7e-4, 1234, 56, 78)  # policy, env, learning_rate, buffer_size, ...
    keywords = {
        "gamma": 0.5,
        "seed": 3,
        "policy_kwargs": {"net_arch": [8]},
        "replay_buffer_class": sb3_per.PrioritizedReplayBuffer,
    }
    ours = getattr(sb3_per, name)(*positional, **keywords, replay_scheme=sb3_per.PER())
    theirs = SB3_CLASSES[name](*positional, **keywords)
    read = ("learning_rate", "buffer_size", "learning_starts", "batch_size", "gamma", "seed", "policy_kwargs")
    read += ("replay_buffer_class",)
    assert [getattr(ours, key) for key in read] == [getattr(theirs, key) for key in read]
    assert ours.replay_scheme == sb3_per.PER()
    assert sum(p.numel() for p in ours.policy.parameters()) == sum(p.numel() for p in theirs.policy.parameters())


def test_replay_scheme_is_checked_before_sb3_builds_anything():
    with pytest.raises(ValueError, match=r"replay_scheme must be a replay scheme.*'PER'"):
        sb3_per.SAC("MlpPolicy", "no-such-env-is-ever-made", replay_scheme="PER")


class _AnotherSAC(stable_baselines3.SAC):
    """A user's SAC subclass with a constructor of its own."""

    def __init__(self, *args, my_option: int = 1, **kwargs):
        self.my_option = my_option
        super().__init__(*args, **kwargs)


def built_with_my_option(algorithm: type, my_option: int):
    """A small prioritized model of ``algorithm`` on Pendulum, given ``my_option`` and ``PER()``."""
    return algorithm(
        "MlpPolicy",
        "Pendulum-v1",
        buffer_size=100,
        my_option=my_option,
        replay_buffer_class=sb3_per.PrioritizedReplayBuffer,
        replay_scheme=sb3_per.PER(),
    )


def test_a_users_class_between_sb3_per_and_sb3_is_constructed_too():
    class Both(sb3_per.SAC, _AnotherSAC):
        pass

    model = built_with_my_option(Both, 2)
    assert model.my_option == 2
    assert model.replay_scheme == sb3_per.PER()


def test_a_base_with_keyword_arguments_takes_replay_scheme_before_them():
    class MySAC(SACTrainingSteps, _AnotherSAC):
        __init__ = constructor_with_replay_scheme(_AnotherSAC)

    parameters = list(inspect.signature(MySAC).parameters)
    assert parameters[-3:] == ["my_option", "replay_scheme", "kwargs"]
    model = built_with_my_option(MySAC, 3)
    assert model.my_option == 3
    assert model.replay_scheme == sb3_per.PER()


@pytest.mark.parametrize("name", list(SB3_CLASSES))
def test_the_replay_scheme_docstring_names_each_scheme_the_algorithm_takes_and_refuses(name):
    from sb3_per.per_algorithm import check_replay_scheme
    from sb3_per.schemes.base import ReplayScheme

    algorithm = getattr(sb3_per, name)
    text = algorithm.__doc__.split(":param replay_scheme:")[1].split(":param")[0]
    schemes = [
        scheme
        for scheme in map(vars(sb3_per).get, sb3_per.__all__)
        if isinstance(scheme, type) and issubclass(scheme, ReplayScheme) and scheme is not ReplayScheme
    ]
    for scheme in schemes:
        try:
            check_replay_scheme(scheme(), algorithm)
        except ValueError:
            assert f"``{scheme.__name__}``" in text, f"{name} refuses {scheme.__name__}: the docstring should say so"
        else:
            assert f"``{scheme.__name__}()``" in text, f"{name} takes {scheme.__name__}: the docstring should name it"

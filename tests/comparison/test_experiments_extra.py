"""The ``experiments`` extra installs every package that the experiment's modules (``comparison/``, ``scripts/``)
import when they load: ``bash scripts/main.sh`` and ``pip install -e ".[experiments]"`` install that extra alone.

Imports inside functions (ray, MinAtar) belong to extras of their own and are not counted."""

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
OWN_PACKAGES = {"comparison", "envs", "sb3_per", "sb3_per_envs", "scripts", "_repository"}


def module_level_imports(path: Path) -> set[str]:
    """The top-level names of the modules a file imports when it loads (not inside functions or classes)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            names.add(node.module.split(".")[0])
    return names


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_closure(distribution: str, extras: set[str]) -> set[str]:
    """The distributions that installing ``distribution[extras]`` brings, itself included (as installed here)."""
    seen: set[str] = set()
    stack = [(distribution, frozenset(extras))]
    while stack:
        name, wanted = stack.pop()
        if normalized(name) in seen:
            continue
        seen.add(normalized(name))
        for line in importlib.metadata.requires(name) or []:
            requirement = Requirement(line)
            environments = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            if requirement.marker is None or any(requirement.marker.evaluate(env) for env in environments):
                stack.append((requirement.name, frozenset(requirement.extras)))
    return seen


def test_the_experiments_extra_installs_what_the_experiment_imports():
    providers = importlib.metadata.packages_distributions()
    closure = installed_closure("sb3-per", {"experiments"})
    files = sorted((ROOT / "comparison").glob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))
    assert len(files) > 20
    missing: dict[str, str] = {}
    for path in files:
        for module in module_level_imports(path) - OWN_PACKAGES - set(sys.stdlib_module_names):
            distributions = {normalized(name) for name in providers.get(module, [])}
            assert distributions, f"{path.relative_to(ROOT)} imports {module}, which no installed package provides"
            if not distributions & closure:
                missing[f"{path.relative_to(ROOT)}: {module}"] = ", ".join(sorted(distributions))
    assert not missing, f"imported but not installed by sb3-per[experiments]: {missing}"


def test_the_closure_follows_extras_and_leaves_out_other_extras():
    """The check above could pass by counting too much: the dev extra's test tools are not in the closure."""
    closure = installed_closure("sb3-per", {"experiments"})
    assert {"pandas", "matplotlib", "stable-baselines3", "torch"} <= closure
    assert "pytest" not in closure and "hypothesis" not in closure and "ray" not in closure

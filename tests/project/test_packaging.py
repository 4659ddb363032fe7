"""environment.yml must stay in step with pyproject.toml (no conda can be reached here to try it)."""
import re
try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CONDA_TO_PYPI = {"pytorch": "torch", "python-graphviz": "graphviz"}
NOT_PYTHON_PACKAGES = {"python", "graphviz", "pip", "font-ttf-noto-cjk"}


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


def test_environment_yml_names_the_same_dependencies_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = {_name(r) for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        wanted |= {_name(r) for r in extra}
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert {"python", "graphviz", "pip"} <= {_name(d) for d in conda}
    named = {CONDA_TO_PYPI.get(_name(d), _name(d)) for d in conda if _name(d) not in NOT_PYTHON_PACKAGES}
    named |= {_name(d) for d in pip if not d.startswith("-e")}
    assert named == wanted
    assert '-e ".[lab,test]"' in pip


def test_python_floor_matches():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert project["requires-python"] == ">=3.10"
    assert "python>=3.10" in env["dependencies"]


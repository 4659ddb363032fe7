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



def _project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_console_script_runs_the_same_commands_as_python_m():
    assert _project()["scripts"] == {"gan-lessons": "gan_lessons.__main__:run"}
    import subprocess
    import sys
    code = "import sys; from gan_lessons.__main__ import run; sys.argv = ['gan-lessons', '--help']; run()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    plain = subprocess.run([sys.executable, "-m", "gan_lessons", "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == plain.stdout and "train" in done.stdout


def test_citation_names_the_project_s_version_and_the_fields_its_schema_requires():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert {"cff-version", "message", "title", "authors"} <= set(cff)       # required by CFF 1.2.0
    assert cff["cff-version"] == "1.2.0" and all("name" in a or "family-names" in a for a in cff["authors"])
    assert str(cff["version"]) == _project()["version"] and cff["license"] == _project()["license"]
    assert "## Unreleased" in (ROOT / "CHANGELOG.md").read_text()


def test_a_workflow_runs_the_tests_on_pull_requests_and_the_full_command_on_main():
    flow = yaml.safe_load((ROOT / ".github/workflows/tests.yml").read_text())
    on = flow[True] if True in flow else flow["on"]                     # YAML reads a bare `on:` as True
    assert "pull_request" in on and on["push"]["branches"] == ["main"]
    runs = {name: [s.get("run", "") for s in job["steps"]] for name, job in flow["jobs"].items()}
    assert "make quick" in runs["quick"] and "pull_request" in flow["jobs"]["quick"]["if"]
    assert "make test-all" in runs["full"]          # make test, then the lessons' other copies
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme and "make quick" in (ROOT / "Makefile").read_text()
    ci_packages = re.search(r"apt-get install .*?--no-install-recommends (.*?)\s+#", (ROOT / ".ci/run").read_text()).group(1)
    assert ci_packages.split() == runs["full"][-2].split("--no-install-recommends ")[1].split()


def test_generated_notebooks_are_marked_as_generated():
    lines = (ROOT / ".gitattributes").read_text().splitlines()
    for folder in ("notebooks/", "notebooks/zh/", "notebooks/student/", "notebooks/zh/student/"):
        assert f"{folder}*.ipynb linguist-generated=true" in lines


def test_pre_commit_runs_ruff_and_the_source_check():
    hooks = [h for r in yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())["repos"] for h in r["hooks"]]
    entries = " ".join(h["entry"] for h in hooks)
    assert "ruff check" in entries and "tools/build_notebook.py --check" in entries


def test_binder_builds_from_the_project_s_environment_and_the_badge_opens_a_lesson():
    """Binder (repo2docker) reads environment.yml and runs postBuild at the root (no binder/ folder, which would
    hide them); postBuild installs this checkout's package; the README's badge and the site's launch button open
    lessons that exist."""
    assert (ROOT / "environment.yml").exists() and not (ROOT / "binder").exists() and not (ROOT / ".binder").exists()
    post = (ROOT / "postBuild").read_text()
    assert "pip install --no-deps -e ." in post and (ROOT / "postBuild").stat().st_mode & 0o111
    badges = re.findall(r"\(https://mybinder\.org/v2/gh/gan-lessons/gan-lessons/main\?urlpath=lab/tree/([^)\s]+)\)",
                        (ROOT / "README.md").read_text())
    assert badges and all((ROOT / path).exists() for path in badges), badges
    assert "binderhub_url: https://mybinder.org" in (ROOT / "site" / "_config.yml").read_text()

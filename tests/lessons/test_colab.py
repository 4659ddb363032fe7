"""Colab compatibility: lessons 05 and 06 under Colab's ipywidgets 7.7.1, and the setup cell's bootstrap
installing this package from a git URL (a local one here) without touching what Colab already has."""
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gan_lessons.lesson import REPO_URL, SETUP_CELL

pytestmark = [pytest.mark.slow, pytest.mark.extended]

ROOT = Path(__file__).resolve().parents[2]


def pip(*args, **kw):
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, **kw)


@pytest.fixture(scope="module")
def colab_widgets(tmp_path_factory):
    """ipywidgets 7.7.1 (and the one module it needs that newer stacks dropped), layered over this environment."""
    overlay = tmp_path_factory.mktemp("ipywidgets-7.7.1")
    result = pip("install", "-q", "--no-deps", "--target", str(overlay), "ipywidgets==7.7.1", "ipython_genutils")
    assert result.returncode == 0, result.stderr
    return overlay


def test_lessons_05_and_06_pass_nbval_with_ipywidgets_7_7_1(colab_widgets):
    env = {**os.environ, "PYTHONPATH": str(colab_widgets)}
    version = subprocess.run([sys.executable, "-c", "import ipywidgets; print(ipywidgets.__version__)"],
                             capture_output=True, text=True, env=env).stdout.strip()
    assert version == "7.7.1"
    notebooks = [str(ROOT / "notebooks" / n) for n in ("05_gan_update_strategies.ipynb", "06_train_mnist_gan.ipynb")]
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                             "--nbval", "--nbval-current-env", "--nbval-sanitize-with", str(ROOT / "tests/sanitize.cfg"),
                             "-o", "addopts=", "-o", "testpaths=", *notebooks],
                            capture_output=True, text=True, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stdout[-3000:]


def test_setup_cell_installs_only_torchviz_and_this_package_from_git(tmp_path):
    """Run the real setup cell with Colab faked, the repository URL pointed at this checkout, and pip asked for
    a plan (--dry-run --report) instead of an install: the plan may hold this package and torchviz, never
    torch or ipywidgets."""
    report = tmp_path / "report.json"
    cell = SETUP_CELL.replace(REPO_URL, f"file://{ROOT}")
    cell = cell.replace('"install", "-q",', f'"install", "--dry-run", "--report", {str(report)!r},')
    assert REPO_URL not in cell and "--dry-run" in cell
    script = ("import sys, types\nsys.modules['google'] = types.ModuleType('google')\n"
              "sys.modules['google.colab'] = types.ModuleType('google.colab')\n"
              "from IPython.testing.globalipapp import start_ipython\nip = start_ipython()\n"
              f"result = ip.run_cell({cell!r})\nresult.raise_error()\n")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    output = run.stdout + run.stderr
    assert run.returncode == 0 and "ERROR" not in output, output[-3000:]
    assert "Would install" in output
    planned = {item["metadata"]["name"].lower() for item in json.loads(report.read_text())["install"]}
    assert "gan-lessons" in planned                       # built from the git URL
    assert not planned & {"torch", "torchvision", "ipywidgets", "matplotlib", "graphviz", "tqdm", "numpy"}, planned
    assert planned <= {"gan-lessons", "torchviz"}, planned


def test_git_install_ships_the_assets(tmp_path):
    result = pip("wheel", "-q", "--no-deps", "-w", str(tmp_path), f"gan-lessons @ git+file://{ROOT}")
    assert result.returncode == 0, result.stderr
    names = zipfile.ZipFile(next(tmp_path.glob("gan_lessons-*.whl"))).namelist()
    for asset in ("classifier.pt", "classifier.json", "generator.pt", "generator.json", "generator_no_tanh.pt",
                  "generator_no_tanh.json"):
        assert f"gan_lessons/assets/{asset}" in names


# Colab's versions (googlecolab/backend-info, 2026-08), which `make check-colab` installs and the README names.
COLAB_PINS = ["torch==2.11.0", "torchvision==0.26.0", "ipython==7.34.0", "ipywidgets==7.7.1", "ipykernel==6.17.1"]


def test_check_colab_installs_colabs_versions_with_the_package_and_checks_them_before_its_tests():
    """`make -n` prints the recipe without running it: one pip command line holds every pin and the package (so
    nothing the package needs upgrades a pin), the versions check comes next, then nbval and the widget tests."""
    plan = subprocess.run(["make", "-n", "--no-print-directory", "check-colab"], capture_output=True, text=True, cwd=ROOT)
    assert plan.returncode == 0, plan.stderr
    install = next(line for line in plan.stdout.splitlines() if " -m pip install " in line).split()
    assert all(pin in install for pin in COLAB_PINS) and "'.[test]'" in install, install
    steps = [plan.stdout.index(s) for s in (" -m pip install ", "not the pinned versions", "--nbval-lax notebooks",
                                             "tests/package/test_widgets.py")]
    assert steps == sorted(steps), steps
    readme = (ROOT / "docs" / "setup.md").read_text()
    named = ", ".join(f"{n} {v}" for n, v in (p.split("==") for p in COLAB_PINS[:4]))
    assert named.replace("ipython", "IPython") + " and ipykernel 6.17.1" in " ".join(readme.split())

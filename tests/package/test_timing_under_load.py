"""Every lesson cell that times something, in both languages and the student copies, run while another process keeps
every core busy: no cell fails, and a timing claim holds or says that it cannot decide (gan_lessons/timing.py)."""
import json
import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest
import torch
from nbclient import NotebookClient

pytestmark = [pytest.mark.slow, pytest.mark.extended]

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "build" / "timing_under_load.jsonl"
# What makes a code cell a timing cell: it reads a clock, or calls what does.
TIMES = re.compile(r"perf_counter|process_time|time\.time\(|timeit|interleaved_ms|\btiming\.|costs\.measure\(")

BUSY = ("import torch, os\ntorch.set_num_threads(os.cpu_count())\na = torch.randn(768, 768)\n"
        "while True:\n    a = torch.tanh(a @ a)\n")


@contextmanager
def busy_machine():
    """A third process keeping every core busy (matrix products on all cores) for as long as the block runs."""
    load = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        yield load
    finally:
        load.kill()
        load.wait()


def _timing_notebooks():
    found = {}
    for path in sorted((ROOT / "notebooks").rglob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cells = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and TIMES.search(c.source)]
        if cells:
            found[path.relative_to(ROOT).as_posix()] = cells
    return found


TIMING_NOTEBOOKS = _timing_notebooks()


def test_the_timing_cells_are_found_in_both_languages_and_the_student_copies():
    lessons = {Path(p).name for p in TIMING_NOTEBOOKS}
    assert lessons                                                   # the search finds some
    for lesson in lessons:
        copies = {p for p in TIMING_NOTEBOOKS if Path(p).name == lesson}
        assert copies == {f"notebooks/{lesson}", f"notebooks/student/{lesson}", f"notebooks/zh/{lesson}",
                          f"notebooks/zh/student/{lesson}"}, copies


def test_a_timing_cell_output_is_not_compared_by_nbval():
    for path, cells in TIMING_NOTEBOOKS.items():
        nb = nbformat.read(ROOT / path, as_version=4)
        for i in cells:
            ignored = "nbval-ignore-output" in nb.cells[i].metadata.get("tags", [])
            times = "interleaved_ms" in nb.cells[i].source or "perf_counter" in nb.cells[i].source
            assert not times or ignored, (path, i)


def _code_shape(source):
    sys.path.insert(0, str(ROOT / "tools"))
    from parity import code_shape
    return code_shape(source)


def test_every_copy_of_a_timing_cell_runs_the_same_code():
    """The answered lesson and its student copy hold the same timing cells, and the Chinese ones the same code once
    strings and comments are set aside: running one copy per language under load runs them all."""
    for path, cells in TIMING_NOTEBOOKS.items():
        name = Path(path).name
        english = nbformat.read(ROOT / "notebooks" / name, as_version=4)
        nb = nbformat.read(ROOT / path, as_version=4)
        # a student copy against the answered lesson of its language, by cell id (its release moves some cells);
        # a Chinese lesson against the English one, cell by cell
        answered = path.replace("/student/", "/")
        if answered != path:
            own = nbformat.read(ROOT / answered, as_version=4)
            pairs = [(i, [c.id for c in own.cells].index(nb.cells[i].id)) for i in cells]
            assert [j for _, j in pairs] == TIMING_NOTEBOOKS[answered], path
        else:
            own, pairs = english, [(i, i) for i in cells]
            assert cells == TIMING_NOTEBOOKS[f"notebooks/{name}"], path
        for i, j in pairs:
            if "# SOLUTION" in own.cells[j].source:       # a prediction: the student copy leaves its answer out
                continue
            assert _code_shape(nb.cells[i].source) == _code_shape(english.cells[j].source), (path, i)


# One copy per language: the English lesson and the Chinese student copy (the test above covers the other two).
UNDER_LOAD = sorted(p for p in TIMING_NOTEBOOKS if p.startswith(("notebooks/0", "notebooks/1", "notebooks/zh/student/")))


@pytest.mark.parametrize("path", UNDER_LOAD)
def test_timing_cells_pass_while_another_process_keeps_every_core_busy(path):
    """Each notebook with a timing cell, run up to its last one: the cells before the first timing cell on a quiet
    machine (they only prepare), from there on while a third process loads every core. No cell fails, and a timing
    claim either holds or says, in one line, that it cannot decide. What each said is appended to
    build/timing_under_load.jsonl (a record, not a timed test)."""
    nb = nbformat.read(ROOT / path, as_version=4)
    cells = TIMING_NOTEBOOKS[path]
    client = NotebookClient(nb, timeout=900, resources={"metadata": {"path": str((ROOT / path).parent)}})
    with client.setup_kernel():
        for i in range(cells[0]):
            client.execute_cell(nb.cells[i], i)
        with busy_machine():
            for i in range(cells[0], cells[-1] + 1):
                client.execute_cell(nb.cells[i], i)
    said = []
    for i in cells:
        text = "".join(o.get("text", "") for o in nb.cells[i].outputs if o.output_type == "stream")
        assert not [o for o in nb.cells[i].outputs if o.output_type == "error"], (path, i)
        if "claim_timing" in nb.cells[i].source:
            verdicts = re.findall(r"^(?:✓|\?) .*$", text, flags=re.M)
            assert len(verdicts) == 1, text                    # one line: it holds, or it cannot decide
            said.append(verdicts[0])
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    with open(RECORD, "a", encoding="utf-8") as f:
        f.write(json.dumps({"notebook": path, "said": said, "torch": torch.__version__, "cores": os.cpu_count(),
                            "when": time.strftime("%Y-%m-%dT%H:%M:%S")}, ensure_ascii=False) + "\n")

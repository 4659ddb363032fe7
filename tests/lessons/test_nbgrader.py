"""The lessons through nbgrader itself, as an instructor runs a course: a throw-away course directory with the
repository's nbgrader_config.py, `generate_assignment` on three lessons (one Chinese), `autograde` of a full, a
partly right and an empty submission, their scores, the feedback, and `validate` on an unsolved release."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.extended]

nbgrader_api = pytest.importorskip("nbgrader.api")

ROOT = Path(__file__).resolve().parents[2]
# (assignment, lesson, the exercise the partial submission gets right, a wrong answer for another one: its cell's
# new source and a word its feedback must contain)
WRONG_INIT = ("def init_weights(m):\n    if isinstance(m, nn.Linear):\n        m.weight.normal_(0.0, 0.02)\n\n"
              "my_answer = init_weights\n")
WRONG_D_STEP = ("def d_step(G, D, opt_D, z, x_real):\n    x_fake = G(z)\n"
                "    loss_D = F.binary_cross_entropy_with_logits(D(x_real), torch.ones(len(x_real))) + \\\n"
                "        F.binary_cross_entropy_with_logits(D(x_fake), torch.zeros(len(z)))\n"
                "    opt_D.zero_grad()\n    loss_D.backward()\n    opt_D.step()\n    return loss_D\n\n"
                "my_answer = d_step\n")
LESSONS = [("leaf", "notebooks/01_leaf_tensors.ipynb", "sgd_step_answer", ("init_answer", WRONG_INIT, "leaf Variable")),
           ("detach", "notebooks/04_detach_and_no_grad.ipynb", "sample_answer", ("d_step_answer", WRONG_D_STEP, "reached G")),
           ("leaf_zh", "notebooks/zh/01_leaf_tensors.ipynb", "init_answer", ("sgd_step_answer", None, None))]


def nbgrader(course, *args):
    """nbgrader's command line, run as an instructor runs it: with the environment's bin/ on PATH (its gradebook
    runs `alembic` from there)."""
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    run = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                         env=env)
    return run.returncode, run.stdout + run.stderr


def by_id(nb):
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if "nbgrader" in c.metadata}


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """A course directory as the instructor's guide makes it; every lesson generated, and three submissions of
    each autograded and given feedback."""
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    for assignment, lesson, _, _ in LESSONS:
        (course / "source" / assignment).mkdir(parents=True)
        shutil.copy(ROOT / lesson, course / "source" / assignment)
        code, out = nbgrader(course, "generate_assignment", assignment)
        assert code == 0, out
    for assignment, lesson, right, (wrong_id, wrong_source, _) in LESSONS:
        name = Path(lesson).name
        released = nbformat.read(course / "release" / assignment / name, as_version=4)
        answered = nbformat.read(ROOT / lesson, as_version=4)
        partial = nbformat.read(course / "release" / assignment / name, as_version=4)
        by_id(partial)[right].source = by_id(answered)[right].source
        if wrong_source is not None:
            by_id(partial)[wrong_id].source = wrong_source
        for student, nb in (("full", answered), ("partial", partial), ("empty", released)):
            folder = course / "submitted" / student / assignment
            folder.mkdir(parents=True)
            nbformat.write(nb, folder / name)
        code, out = nbgrader(course, "autograde", assignment)
        assert code == 0, out
        code, out = nbgrader(course, "generate_feedback", assignment)
        assert code == 0, out
    return course


def test_scores_are_the_exercises_solved(course):
    with nbgrader_api.Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for assignment, lesson, _, _ in LESSONS:
            tests = sum("nbgrader" in c.metadata and c.metadata["nbgrader"]["grade"]
                        for c in nbformat.read(ROOT / lesson, as_version=4).cells)
            scores = {s: gb.find_submission(assignment, s) for s in ("full", "partial", "empty")}
            assert all(s.max_score == tests for s in scores.values()), assignment
            assert (scores["full"].score, scores["partial"].score, scores["empty"].score) == (tests, 1, 0), assignment


def test_feedback_shows_each_checkers_line(course):
    for assignment, lesson, _, (_, wrong_source, word) in LESSONS:
        name = Path(lesson).with_suffix(".html").name
        html = {s: (course / "feedback" / s / assignment / name).read_text(encoding="utf-8")
                for s in ("full", "partial", "empty")}
        assert "✓" in html["full"] and "AssertionError" not in html["full"], assignment
        assert "✓" in html["partial"] and "AssertionError" in html["partial"], assignment
        if wrong_source is not None:   # the wrong answer's own feedback line names the mistake
            assert re.search(rf"✗[^<]*{word}", html["partial"]), assignment
        assert re.search(r"\? \w+(: not solved yet\.|：还没有作答。)", html["empty"]), assignment


def test_validate_fails_on_an_unsolved_release_and_names_the_exercises(course):
    for assignment, lesson, _, _ in LESSONS:
        release = course / "release" / assignment / Path(lesson).name
        code, out = nbgrader(course, "validate", str(release))
        assert "VALIDATION FAILED" in out, out[-2000:]
        for cell in by_id(nbformat.read(release, as_version=4)).values():
            if cell.metadata["nbgrader"]["grade"]:
                assert re.search(r"exercises\.check_\w+", cell.source).group() in out, assignment


def test_every_lesson_generates_with_the_configuration_as_it_is(tmp_path):
    """Every lesson in both languages, with no override flag: nbgrader accepts the metadata, and the release holds
    no answer, no why= text and no stored output."""
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    for assignment, folder in (("en", ROOT / "notebooks"), ("zh", ROOT / "notebooks" / "zh")):
        (tmp_path / "source" / assignment).mkdir(parents=True)
        for lesson in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
            shutil.copy(lesson, tmp_path / "source" / assignment)
        code, out = nbgrader(tmp_path, "generate_assignment", assignment)
        assert code == 0, out
        released = sorted((tmp_path / "release" / assignment).glob("*.ipynb"))
        assert len(released) == 14
        for path in released:
            nb = nbformat.read(path, as_version=4)
            for cell in nb.cells:
                assert not re.search(r"BEGIN SOLUTION|# SOLUTION|\bwhy=(?!hidden\()", cell.source), path.name
                assert not cell.get("outputs"), path.name
            grades = [c.metadata["nbgrader"] for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
            assert grades and all(m["points"] == 1 and m["locked"] for m in grades), path.name


def test_the_instructor_notes_give_the_points_per_lesson():
    points = {}
    for lesson in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        points[lesson.name[:2]] = sum(c.metadata.get("nbgrader", {}).get("points", 0)
                                      for c in nbformat.read(lesson, as_version=4).cells)
    by_count = {}
    for number, count in points.items():
        by_count.setdefault(count, []).append(number)
    notes = (ROOT / "notebooks" / "README.md").read_text(encoding="utf-8")
    said = re.search(r"Points per lesson are\s+its build exercises: (?P<text>.*?) \((?P<total>\d+) in all\)", notes, re.S)
    assert said and int(said["total"]) == sum(points.values())
    for count, numbers in by_count.items():
        if count != 1:
            listed = re.search(rf"\b{count} for lessons? ((?:\d\d(?:, | and )?)+)", said["text"].replace("\n", " "))
            assert listed and sorted(re.findall(r"\d\d", listed.group(1))) == numbers, (count, numbers)

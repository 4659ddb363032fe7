"""Student copies of the lessons, made by nbgrader itself: `nbgrader generate_assignment` with the repository's
nbgrader_config.py, in a throw-away course directory, one assignment per language. nbgrader replaces each build
exercise's reference body by its stub and clears the outputs; gan_lessons.release.StudentCopy (first in the
configuration) blanks the predictions, hides their explanations, moves what answers the exercises after them and
points the links from the copy's folder.

The committed copies live in notebooks/student/ and notebooks/zh/student/ (Colab opens them from GitHub);
tests/lessons/test_student.py fails when they differ from what this tool makes.

    python tools/student.py [--check]"""
import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "notebooks"
FOLDERS = {"lessons": LESSONS, "lessons_zh": LESSONS / "zh"}     # assignment: the folder of its lessons
REGENERATE = "python tools/student.py"


def lessons(folder: Path) -> list:
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def generate(course: Path, assignment: str, notebooks: list, release_folder: Path = None) -> Path:
    """Run nbgrader generate_assignment on these notebooks, in the course directory `course`; the release's folder."""
    source = course / "source" / assignment
    source.mkdir(parents=True, exist_ok=True)
    for nb in notebooks:
        shutil.copy(nb, source / nb.name)
    links = [f"--StudentCopy.lessons_folder={Path(notebooks[0]).parent}",
             f"--StudentCopy.release_folder={release_folder}"] if release_folder else []
    run = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force", "--no-db",
                          f"--CourseDirectory.root={course}", *links], cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"nbgrader generate_assignment {assignment} failed:\n{run.stdout[-3000:]}{run.stderr[-3000:]}")
    return course / "release" / assignment


def copies(course: Path) -> dict:
    """{committed copy's path: the text nbgrader made for it}, for every lesson in both languages."""
    made = {}
    for assignment, folder in FOLDERS.items():
        release = generate(course, assignment, lessons(folder), folder / "student")
        for nb in lessons(folder):
            made[folder / "student" / nb.name] = (release / nb.name).read_text(encoding="utf-8")
    return made


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--check", action="store_true", help="write nothing; fail if a committed copy is not up to date")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as course:
        made = copies(Path(course))
    if a.check:
        committed = {path for folder in FOLDERS.values() for path in (folder / "student").glob("*.ipynb")}
        stale = sorted({str(path.relative_to(ROOT)) for path, text in made.items()
                        if not path.exists() or path.read_text(encoding="utf-8") != text} |
                       {str(path.relative_to(ROOT)) for path in committed - set(made)})
        if stale:
            sys.exit(f"student copies missing, extra or out of date: {', '.join(stale)}; run `{REGENERATE}`")
        print(f"{len(made)} student copies match nbgrader's release")
        return
    for folder in FOLDERS.values():
        for old in (folder / "student").glob("*.ipynb"):
            if old not in made:
                old.unlink()
    for path, text in made.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"{len(made)} student copies written by nbgrader generate_assignment")


if __name__ == "__main__":
    main()

"""How long a careful student takes over each lesson: a walkthrough of its student copy at a declared pace.

The walk goes through the lesson from its first cell to the end of its Exercises, and the verdicts and summary the
student copy moves after them; a "Going further" section after the exercises is a side road, timed on its own and
outside the slot. At each cell it adds:
- markdown: its words (code spans and table cells included) read at `words_per_min`;
- code: its non-blank lines read at `code_line_s` each, then the cell run: the seconds it took when this script ran
  the answered lesson in a fresh kernel (measured, `--run`), plus `look_s` to look at what it printed, and its
  printed lines at `output_line_s` each (at most `output_lines_read` per cell: a long listing is skimmed), each
  figure or widget at `figure_s`;
- a prediction (a cell tagged `predict`): `predict_min` to think and answer, on top of reading and running it;
- a build (an nbgrader solution cell): `build_line_min` per line of the reference's body (comments and blank lines
  left out), plus `wrong_try_min` for one wrong try (run the checker, read its feedback, find the line, run again).

The pace is a model, written down so that anyone can change it and see what follows: it is what "a careful
student" means here. The figures it gives are measured on the lessons as they are: their words, lines, outputs,
predictions, builds and the cells' run times in seconds on the machine that ran this script.

    python benchmarks/walkthrough.py --run      # execute every English lesson, time its cells, write the results
    python benchmarks/walkthrough.py            # the lessons re-read, with the last results file's run times

The results file (benchmarks/results/DATE_walkthrough.json) holds each lesson's parts in minutes and the cells' run
times; tests/lessons/test_active_lessons.py recomputes every part but the run times from the notebooks and checks
them and the instructor notes' minutes against it."""
import argparse
import difflib
import json
import re
import sys
import time
from dataclasses import asdict, dataclass
from datetime import date
from pathlib import Path

import nbformat

from gan_lessons import release

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "notebooks"
RESULTS = ROOT / "benchmarks" / "results"
SLOT, DOUBLE_SLOT = 60, 100
DOUBLE = ("11", "12", "13")               # the double slots: the engine in two, and the lab


@dataclass(frozen=True)
class Pace:
    words_per_min: float = 150.0      # two thirds of the 238 a minute adults read non-fiction at (Brysbaert 2019)
    code_line_s: float = 6.0
    look_s: float = 5.0
    output_line_s: float = 1.5
    output_lines_read: int = 30
    figure_s: float = 30.0
    predict_min: float = 2.0
    build_line_min: float = 1.0
    wrong_try_min: float = 4.0


@dataclass
class Parts:
    """Minutes of one stretch of a lesson, by what the student does in them."""
    reading: float = 0.0        # markdown
    code: float = 0.0           # reading code cells
    outputs: float = 0.0        # looking at what cells printed and drew
    running: float = 0.0        # waiting for cells to run (measured)
    predictions: float = 0.0
    builds: float = 0.0

    @property
    def total(self) -> float:
        return self.reading + self.code + self.outputs + self.running + self.predictions + self.builds

    def rounded(self) -> dict:
        return {**{k: round(v, 1) for k, v in asdict(self).items()}, "total": round(self.total, 1)}


def answered(lesson: str) -> Path:
    return next(LESSONS.glob(f"{lesson}_*.ipynb"))


def student(lesson: str) -> Path:
    return LESSONS / "student" / answered(lesson).name


def words(markdown: str) -> int:
    text = re.sub(r"\]\([^)]*\)", "]", markdown)           # a link's target is not read
    text = re.sub(r"<[^>]+>", " ", text)                    # nor an HTML tag
    return len(re.findall(r"[A-Za-z0-9_.]+", text))


def code_lines(source: str) -> int:
    return sum(1 for line in source.splitlines()
               if line.strip() and not line.startswith("from gan_lessons.lesson import hidden"))


def statements(lines) -> list:
    """The lines that say something: no blank line, no comment, a trailing comment cut off."""
    kept = (re.sub(r"\s+#.*$", "", line).strip() for line in lines)
    return [line for line in kept if line and not line.startswith("#")]


def solution_lines(source: str) -> list:
    """The lines of a build's reference body, between the solution markers."""
    inside, body = False, []
    for line in source.splitlines():
        if "### BEGIN SOLUTION" in line:
            inside = True
        elif "### END SOLUTION" in line:
            inside = False
        elif inside:
            body.append(line)
    return statements(body)


def broken_twin(source: str, shown: list) -> list:
    """The bodies of `NAME_broken` for each function NAME the build defines, when a cell above shows it for the build
    to start from (the debugging lab: "copy the broken body into the exercise's function and fix it")."""
    twin = []
    for name in re.findall(r"^def (\w+)\(", source, flags=re.M):
        for cell in shown:
            lines = cell.splitlines()
            start = next((i for i, line in enumerate(lines) if line.startswith(f"def {name}_broken(")), None)
            if start is not None:
                body = lines[start + 1:]
                end = next((i for i, line in enumerate(body) if line.strip() and not line.startswith((" ", "\t"))),
                           len(body))
                twin += statements(body[:end])
                break
    return twin


def written(source: str, shown: list) -> int:
    """Lines a build asks the student to write: the reference's, less those its broken twin gives them in place (a
    line moved elsewhere is written again)."""
    reference = solution_lines(source)
    matcher = difflib.SequenceMatcher(a=broken_twin(source, shown), b=reference, autojunk=False)
    return len(reference) - sum(block.size for block in matcher.get_matching_blocks())


def output_cost(outputs: list, pace: Pace) -> float:
    """Seconds to look at a cell's outputs."""
    lines, figures = 0, 0
    for out in outputs:
        data = out.get("data", {})
        if out.get("output_type") == "error":
            lines += 3                                          # the error's last lines, which the lesson asks about
        elif any(k.startswith("image/") for k in data) or "application/vnd.jupyter.widget-view+json" in data:
            figures += 1
        else:
            text = out.get("text") or data.get("text/plain") or ""
            lines += len(("".join(text) if isinstance(text, list) else text).splitlines())
    return min(lines, pace.output_lines_read) * pace.output_line_s + figures * pace.figure_s


def going_further(cell) -> bool:
    return cell.cell_type == "markdown" and cell.source.lstrip().startswith(release.FURTHER["en"])


def untimed(lesson: str, run_s: dict) -> list:
    """The answered lesson's code cells that have no run time in run_s (added or changed since it was measured)."""
    cells = nbformat.read(answered(lesson), as_version=4).cells
    return [cell.get("id") for cell in cells if cell.cell_type == "code" and cell.get("id") not in run_s]


def walk(lesson: str, run_s: dict = None, pace: Pace = Pace()) -> dict:
    """{'slot': Parts, 'side roads': Parts} of one lesson. run_s: each code cell's measured run time, by the
    answered lesson's cell id (None: not counted)."""
    ans, stu = nbformat.read(answered(lesson), as_version=4), nbformat.read(student(lesson), as_version=4)
    by_id = {cell.get("id"): cell for cell in ans.cells}
    slot, side = Parts(), Parts()
    here, shown = slot, []
    for cell in stu.cells:
        if going_further(cell):
            here = side
        if release.LATER in cell.metadata.get("tags", []):   # the verdicts and the summary, moved to the end
            slot.reading += words(cell.source) / pace.words_per_min
            continue
        if cell.cell_type == "markdown":
            here.reading += words(cell.source) / pace.words_per_min
            continue
        here.code += code_lines(cell.source) * pace.code_line_s / 60
        twin = by_id.get(cell.get("id"))
        if twin is not None:
            here.outputs += (pace.look_s + output_cost(twin.get("outputs", []), pace)) / 60
            if run_s is not None:
                here.running += run_s[cell.get("id")] / 60
            grading = twin.metadata.get("nbgrader", {})
            if grading.get("solution") and "### BEGIN SOLUTION" in twin.source:
                here.builds += written(twin.source, shown) * pace.build_line_min + pace.wrong_try_min
            shown.append(twin.source)
        if "predict" in cell.metadata.get("tags", []):
            here.predictions += pace.predict_min
    return {"slot": slot, "side roads": side}


def run_times(lesson: str) -> dict:
    """{cell id: seconds} of each code cell of the answered lesson, run top to bottom in a fresh kernel from its
    folder."""
    from nbclient import NotebookClient
    nb = nbformat.read(answered(lesson), as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", record_timing=True,
                   resources={"metadata": {"path": str(LESSONS)}}).execute()
    seconds = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            timing = cell.metadata.get("execution", {})
            start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
            seconds[cell.get("id")] = round(max(0.0, stamp(end) - stamp(start)), 2) if start and end else 0.0
    return seconds


def stamp(iso: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def lessons() -> list:
    return sorted(p.name[:2] for p in LESSONS.glob("[0-9][0-9]_*.ipynb"))


def latest() -> Path:
    found = sorted(RESULTS.glob("*_walkthrough.json"))
    if not found:
        sys.exit("no walkthrough results yet: run python benchmarks/walkthrough.py --run")
    return found[-1]


def limit(lesson: str) -> int:
    return DOUBLE_SLOT if lesson in DOUBLE else SLOT


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", action="store_true", help="execute every lesson, time its cells, write a results file")
    a = p.parse_args(argv)
    pace = Pace()
    if a.run:
        import platform

        import torch
        timed = {}
        for lesson in lessons():
            t0 = time.perf_counter()
            timed[lesson] = run_times(lesson)
            print(f"{lesson}: ran in {time.perf_counter() - t0:.0f} s", flush=True)
        results = {"torch": torch.__version__, "machine": f"{platform.machine()}, {__import__('os').cpu_count()} CPUs",
                   "pace": asdict(pace), "run_s": timed, "lessons": {}}
        out = RESULTS / f"{date.today()}_walkthrough.json"
    else:
        out = latest()
        results = json.loads(out.read_text())
        stale = {lesson: n for lesson in lessons() if (n := len(untimed(lesson, results["run_s"].get(lesson, {}))))}
        if stale:
            sys.exit(f"code cells without a run time (added or changed since {out.name}): {stale}; "
                     "run python benchmarks/walkthrough.py --run")
    for lesson in lessons():
        parts = walk(lesson, results["run_s"][lesson], pace)
        results["lessons"][lesson] = {k: v.rounded() for k, v in parts.items()}
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{'lesson':7}{'reading':>9}{'code':>7}{'outputs':>9}{'running':>9}{'predict':>9}{'builds':>8}"
          f"{'slot':>7}{'limit':>7}{'side roads':>12}")
    for lesson, parts in results["lessons"].items():
        s = parts["slot"]
        print(f"{lesson:7}{s['reading']:9.1f}{s['code']:7.1f}{s['outputs']:9.1f}{s['running']:9.1f}"
              f"{s['predictions']:9.1f}{s['builds']:8.1f}{s['total']:7.0f}{limit(lesson):7}"
              f"{parts['side roads']['total']:12.0f}")
    print(f"({out.relative_to(ROOT)})")


if __name__ == "__main__":
    main()

"""`python -m gan_lessons doctor SCRIPT`: a whole script under the doctor, as `python -m pdb` runs one.

Each run is the real command in a subprocess, compared where it matters with plain `python SCRIPT`: the quiet
corpus (tests/doctor/test_doctor_quiet.py, each test as its own script) exits 0 with no doctor output even under
--strict; a clean script's output and exit status are its own; sys.argv, sys.path[0], __name__ and __file__ are
what python gives; names come from the script's globals and its functions' locals; warnings print once; --strict
exits 3; no such script or module is one line and exit 2. Also: IPython 7.34's cell frames (`<cell line: N>`)
name tensors as today's `<module>` frames do. (tests/doctor/test_doctor_cases.py runs the bug reports as scripts.)"""
import json
import os
import re
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import test_doctor_quiet as quiet
import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.__main__ import main
from gan_lessons.doctor import doctor

pytestmark = pytest.mark.slow

QUIET_SOURCE = Path(quiet.__file__).read_text()

# The quiet corpus as a script: its tests run with no doctor of their own (the command's watches them), the test
# to run named by the script's first argument, its parameter by the second.
QUIET_TAIL = '''

def quietly(step, calls=3):
    for _ in range(calls):
        step()


if __name__ == "__main__":
    import json, sys
    if sys.argv[1] == "--all":                      # every test in turn, in this one process
        for name, value in json.loads(sys.argv[2]):
            globals()[name](*([] if value is None else [value]))
    else:
        globals()[sys.argv[1]](*sys.argv[2:])
'''


def quiet_tests():
    """(test name, parameter or None) for each test of the quiet corpus."""
    for name, test in vars(quiet).items():
        if not name.startswith("test_") or not callable(test):
            continue
        marks = [m for m in getattr(test, "pytestmark", []) if m.name == "parametrize"]
        for value in (marks[0].args[1] if marks else [None]):
            yield name, value


def python(*args, cwd=None):
    """Plain `python ARGS`, as the command line's tests run it (one torch thread)."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def quiet_scripts(tmp_path_factory):
    """(the quiet corpus as a script, the compiled step as a script), written once for the module."""
    folder = tmp_path_factory.mktemp("quiet")
    return (write(folder, "quiet_corpus.py", QUIET_SOURCE + QUIET_TAIL),
            write(folder, "compiled_step.py", quiet.COMPILED_STEP))    # a script with its own doctor inside


def assert_quiet(done):
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert "autograd doctor" not in said and "DoctorWarning" not in said, said[-3000:]


def test_the_quiet_corpus_as_one_script(quiet_scripts, cli):
    """Every quiet test in turn in one run of `doctor --strict`, as a long script that builds many models and
    optimizers would: no warning, exit status 0. (Each test alone, in a run of its own, is the extended test below.)"""
    corpus, compiled = quiet_scripts
    tests = [test for test in quiet_tests() if test[0] != "test_a_compiled_step"]
    assert len(tests) > 20
    assert_quiet(cli("doctor", "--strict", str(corpus), "--all", json.dumps(tests)))
    done = cli("doctor", "--strict", str(compiled))     # that test runs COMPILED_STEP in a subprocess: so does this
    assert_quiet(done)
    assert done.stdout.strip().endswith("quiet")


@pytest.fixture(scope="module")
def quiet_runs(quiet_scripts, cli):
    """Every quiet test run as a script of its own under `doctor --strict`, two at a time, started once."""
    corpus, compiled = quiet_scripts

    def run(test):
        name, value = test
        if name == "test_a_compiled_step":
            return cli("doctor", "--strict", str(compiled))
        return cli("doctor", "--strict", str(corpus), name, *([] if value is None else [value]))

    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        yield {test: pool.submit(run, test) for test in quiet_tests()}


@pytest.mark.extended
@pytest.mark.parametrize("test", list(quiet_tests()), ids=lambda t: t[0] + (f"[{t[1]}]" if t[1] else ""))
def test_the_quiet_corpus_as_scripts(test, quiet_runs):
    done = quiet_runs[test].result()
    assert_quiet(done)
    if test[0] == "test_a_compiled_step":
        assert done.stdout.strip().endswith("quiet")


OUTPUT = """
import sys, torch
print("to stdout", sys.argv[1:])
print("to stderr", file=sys.stderr)
torch.manual_seed(0)
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    loss = model(torch.randn(4, 3)).pow(2).mean()
    loss.backward()
    opt.step()
print(f"loss {loss.item():.6f}")
sys.exit(CODE)
"""


@pytest.mark.parametrize("code", ["None", "4", "'stopped: a message'"])
def test_a_clean_script_output_and_exit_status_are_its_own(tmp_path, cli, code):
    script = write(tmp_path, "train.py", OUTPUT.replace("CODE", code))
    plain, watched = python(str(script), "a", "--b"), cli("doctor", str(script), "a", "--b")
    assert (watched.returncode, watched.stdout, watched.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert watched.returncode == {"None": 0, "4": 4}.get(code, 1)


ALIVE_AT_EXIT = """
import atexit, torch
from torch import nn, optim

def alive():            # no gc.collect(): what is still referenced, as a script's own atexit handler sees it
    import gc
    print("modules alive at exit:", sum(isinstance(o, nn.Module) for o in gc.get_objects()))

atexit.register(alive)

def main():
    G = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    opt_G = optim.SGD(G.parameters(), lr=0.1)
    for _ in range(3):
        opt_G.zero_grad()
        G(torch.ones(2, 2)).sum().backward()
        opt_G.step()

main()
"""


def test_the_script_s_models_are_not_kept_alive_by_the_doctor(tmp_path, cli):
    script = write(tmp_path, "train.py", ALIVE_AT_EXIT)
    plain, watched = python("-W", "ignore", str(script)), cli("doctor", str(script))
    assert plain.stdout == "modules alive at exit: 0\n" and watched.stdout == plain.stdout, watched.stdout


def test_an_error_the_doctor_does_not_know_is_python_s_own(tmp_path, cli):
    script = write(tmp_path, "broken.py", "import torch\n\ndef f(x):\n    return x / {}[x]\n\nf(torch.ones(1))\n")
    plain, watched = python(str(script)), cli("doctor", str(script))
    assert (watched.returncode, watched.stdout, watched.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert watched.returncode == 1 and "autograd doctor" not in watched.stderr


WHERE_AM_I = """
import json, sys
print(json.dumps({"argv": sys.argv, "path0": sys.path[0], "name": __name__, "file": __file__,
                  "helper": __import__("helper").VALUE}))
"""


def test_sys_argv_and_sys_path_are_the_script_s(tmp_path, cli):
    """Run from another folder: sys.path[0] is the script's folder (its helper module imports), sys.argv[1:] is
    passed verbatim (`--` and `-h` and `--strict` included), sys.argv[0] is the script's path as typed and __file__
    its absolute path, as python gives them."""
    script = write(tmp_path, "project/train.py", WHERE_AM_I)
    write(tmp_path, "project/helper.py", "VALUE = 'found next to the script'\n")
    args = ["--", "-h", "--strict", "-m", "x y"]
    plain = json.loads(python(str(Path("project/train.py")), *args, cwd=tmp_path).stdout)
    done = cli("doctor", str(Path("project/train.py")), *args, cwd=tmp_path)
    watched = json.loads(done.stdout)
    assert done.returncode == 0, done.stderr
    assert watched["argv"] == plain["argv"] == [str(Path("project/train.py")), *args]     # argv[0] as typed
    assert Path(watched["file"]) == script.resolve()
    assert (watched["path0"], watched["name"], watched["file"], watched["helper"]) == \
        (plain["path0"], "__main__", plain["file"], "found next to the script")


def test_a_module_with_m_as_python_m_runs_it(tmp_path, cli):
    write(tmp_path, "helper.py", "VALUE = 'found in the working folder'\n")
    write(tmp_path, "tools/__init__.py", "")
    write(tmp_path, "tools/where.py", WHERE_AM_I)
    plain = python("-m", "tools.where", "-v", "--", cwd=tmp_path)
    done = cli("doctor", "--strict", "-m", "tools.where", "-v", "--", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(plain.stdout)


DCGAN_IN_FUNCTIONS = """
import torch
from torch import nn, optim


def step(netG, netD, optimizerD, optimizerG, criterion, real):
    netD.zero_grad()
    criterion(netD(real).view(-1), torch.ones(4)).backward()
    fake = netG(torch.randn(4, 2))
    errD_fake = criterion(netD(fake).view(-1), torch.zeros(4))     # missing fake.detach()
    errD_fake.backward()  # FREES
    optimizerD.step()
    optimizerG.step()                                              # on what errD_fake's backward left in netG
    netG.zero_grad()
    errG = criterion(netD(fake).view(-1), torch.ones(4))
    errG.backward()
    optimizerG.step()


def main():
    torch.manual_seed(0)
    netG, netD = nn.Sequential(nn.Linear(2, 8), nn.Tanh()), nn.Sequential(nn.Linear(8, 1), nn.Sigmoid())
    optimizerD, optimizerG = optim.Adam(netD.parameters()), optim.Adam(netG.parameters())
    for _ in range(2):
        step(netG, netD, optimizerD, optimizerG, nn.BCELoss(), torch.randn(4, 8))


if __name__ == "__main__":
    main()
"""


def test_names_from_the_running_functions_locals(tmp_path, cli):
    """Nothing is global here: the warning names optimizerD and optimizerG from main's and step's locals while they
    run, the diagnosis `fake` from the failing function's, then comes the traceback; exit 1."""
    script = write(tmp_path, "dcgan.py", DCGAN_IN_FUNCTIONS)
    done = cli("doctor", str(script))
    assert done.returncode == 1
    warned, diagnosis = done.stderr.split("\nautograd doctor: ", 1)
    assert "optimizerD.step() and optimizerG.step() both step on the gradients of the backward at line 11" in warned
    assert "freed by: the backward at line 11 (`errD_fake.backward()  # FREES`)" in diagnosis
    assert "through `fake`" in diagnosis
    assert diagnosis.index("fix:") < diagnosis.index("Traceback (most recent call last):")
    traceback = diagnosis.split("Traceback (most recent call last):\n", 1)[1]
    assert traceback.startswith(f'  File "{script}", line ')                 # from the script's frame, as python
    assert traceback.rstrip().splitlines()[-1].startswith("RuntimeError: Trying to backward through the graph")


DOUBLE_SIGMOID = """
import sys, torch
import torch.nn.functional as F
torch.manual_seed(0)
D = torch.nn.Linear(2, 1)
opt_D = torch.optim.SGD(D.parameters(), lr=0.1)
for _ in range(3):
    opt_D.zero_grad()
    loss = F.binary_cross_entropy_with_logits(torch.sigmoid(D(torch.randn(4, 2))), torch.ones(4, 1))
    loss.backward()
    opt_D.step()
print("trained")
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else None)
"""


def test_a_warning_prints_once_and_strict_turns_it_into_exit_3(tmp_path, cli):
    script = write(tmp_path, "sigmoid.py", DOUBLE_SIGMOID)
    runs = {"plain": cli("doctor", str(script)), "strict": cli("doctor", "--strict", str(script)),
            "strict, exit 5": cli("doctor", "--strict", str(script), "5")}
    for how, done in runs.items():
        assert done.stdout == "trained\n", how
        assert done.stderr.count("DoctorWarning: autograd doctor: a sigmoid is fed into") == 1, (how, done.stderr)
    assert runs["plain"].returncode == 0 and "--strict" not in runs["plain"].stderr
    assert runs["strict"].returncode == 3
    assert runs["strict"].stderr.rstrip().splitlines()[-1] == "autograd doctor: --strict: 1 warning above; exit 3"
    assert runs["strict, exit 5"].returncode == 5          # the script's own failure wins


TORCH_WARNS = """
import torch
import torch.nn.functional as F
x = torch.randn(3, 4, requires_grad=True)
softmax = torch.nn.Softmax()
for i in range(3):
    y = F.softmax(x)                 # no dim: torch warns, from Python code, at the caller's line
    z = F.softmax(x * 2)             # the same warning from another line
    (y.sum() + z.sum()).backward()
    w = torch.tensor(x)              # a tensor copied by torch.tensor: torch warns from C++
    v = softmax(x)                   # a module: torch counts 5 frames out, into Module.__call__
print("done")
"""


@pytest.mark.parametrize("flags", [[], ["-W", "error::UserWarning"], ["-W", "ignore"]])
def test_torch_s_own_warnings_print_as_under_python(tmp_path, cli, flags):
    """Once per line (Python's once-per-location registry, not reset per call), at the student's line, and the
    filters of -W obeyed: the same stderr, stdout and exit status as python's."""
    script = write(tmp_path, "warns.py", TORCH_WARNS)
    plain = subprocess.run([sys.executable, *flags, str(script)], capture_output=True, text=True, timeout=300)
    watched = subprocess.run([sys.executable, *flags, "-m", "gan_lessons", "doctor", str(script)],
                             capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert (watched.returncode, watched.stdout) == (plain.returncode, plain.stdout)
    if not flags:
        assert plain.stderr.count("UserWarning") == 4, plain.stderr          # two softmax lines, one copy line,
                                                                              # one in torch's module.py
    if "error::UserWarning" in flags:       # the error's traceback: the doctor's frames are taken out of it
        assert plain.stderr.splitlines()[-1] == watched.stderr.splitlines()[-1], watched.stderr
    else:
        assert watched.stderr == plain.stderr


def test_warnings_inside_a_doctor_block_keep_python_s_registry_and_filters():
    """In-process: a torch warning in a loop under `with doctor():` is shown once for its line; on exit the
    doctor leaves warnings.filters and warnings.showwarning as it found them."""
    filters, shown = list(warnings.filters), warnings.showwarning
    x = torch.randn(2, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        with doctor():
            for _ in range(3):
                F.softmax(x)                      # the warning under test
    assert [str(w.message)[:30] for w in caught] == ["Implicit dimension choice for "]
    assert caught[0].filename == __file__
    assert warnings.filters == filters and warnings.showwarning is shown


CTRL_C = """
import atexit, signal, sys, torch
atexit.register(lambda: print("atexit ran", flush=True))
print(sys.argv[0])
x = torch.ones(2, requires_grad=True)
(x * 2).sum().backward()
signal.raise_signal(signal.SIGINT)
"""


@pytest.mark.skipif(os.name != "posix", reason="python ends by the signal itself on POSIX")
def test_ctrl_c_ends_the_command_as_it_ends_python(tmp_path, cli):
    """The script's traceback once, its atexit handlers run, and the process ends by SIGINT (a parent sees -2),
    as under python; nothing of the doctor's own."""
    write(tmp_path, "interrupted.py", CTRL_C)
    plain = python("interrupted.py", cwd=tmp_path)
    watched = cli("doctor", "interrupted.py", cwd=tmp_path)
    assert plain.returncode == -2
    assert (watched.returncode, watched.stdout, watched.stderr) == (plain.returncode, plain.stdout, plain.stderr)


# (arguments after `doctor`, with TMP for a folder; words the one line must hold)
BAD_INPUT = [
    (["no_such_script.py"], ["no file no_such_script.py", "path of a Python script"]),
    (["no_such_script.py", "--epochs", "3"], ["no file no_such_script.py"]),
    (["tools.train"], ["no file tools.train", "add -m before it"]),
    (["-m", "no_such_module"], ["no module named no_such_module", "check its name"]),
    (["-m", "no_such_package.train"], ["no module named no_such_package.train"]),
    (["-m", "json"], ["json is a package with no __main__ module", "-m json.MODULE"]),
    (["TMP"], ["is a folder with no __main__.py"]),
    ([], ["give a SCRIPT to run, or -m MODULE", "--help"]),
    (["--strict"], ["give a SCRIPT to run, or -m MODULE"]),
    (["-m"], ["-m", "expected one argument"]),
    (["--strictly", "x.py"], ["unrecognized arguments: --strictly"]),
]


@pytest.mark.parametrize("args, words", BAD_INPUT, ids=[" ".join(a) or "nothing" for a, _ in BAD_INPUT])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, words):
    args = [str(tmp_path) if a == "TMP" else a for a in args]
    try:
        code = main(["doctor", *args])
    except SystemExit as stop:                      # argparse's own errors
        code = stop.code
    out = capsys.readouterr()
    assert code == 2 and out.out == ""
    lines = out.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.err
    for word in words:
        assert word in lines[0], lines[0]


def test_bad_input_through_the_real_command(cli):
    done = cli("doctor", "no_such_script.py", "--lr", "1")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == ("error: no file no_such_script.py: give the path of a Python script (or -m MODULE for a "
                           "module)\n")


def test_help_says_the_exit_codes(cli):
    done = cli("doctor", "--help")
    text = " ".join(done.stdout.split())
    assert done.returncode == 0
    assert "usage: python -m gan_lessons doctor [-h] [--strict] (SCRIPT|-m MODULE) [ARGS...]" in text
    assert "--strict exit 3 if the doctor warned" in text and "2 for no such script or module" in text


# IPython 7.34 (Colab's) compiles a cell to code named `<cell line: N>`; today's IPython, like Python, `<module>`.
CELL = """
def my_buggy_loop():
    torch.manual_seed(0)
    G, D = nn.Linear(4, 4), nn.Linear(4, 1)
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    x_fake = G(torch.randn(8, 4))
    fake_for_D = x_fake
    loss_D = F.softplus(D(fake_for_D)).mean()
    opt_D.zero_grad(); loss_D.backward(); opt_D.step()
    loss_G = F.softplus(-D(x_fake)).mean()
    opt_G.zero_grad(); loss_G.backward(); opt_G.step()

diagnosis = diagnosed(my_buggy_loop)
"""


def diagnosed(loop):
    """As lesson 07's check_doctor_bug runs a student's loop: a doctor entered in the checker's frame."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with doctor():
                loop()
    except RuntimeError as error:
        return error.diagnosis


@pytest.mark.parametrize("code_name", ["<module>", "<cell line: 1>", "<cell line: 12>"])
def test_ipython_7_34_cell_frames_name_x_fake_as_module_frames_do(code_name, capsys):
    """Lesson 07's exercise as Colab runs it: an earlier cell left a global `x_fake`; the cell calls the checker,
    which runs the loop. The cell's frame is top-level code whatever IPython names it, so the loop's own x_fake
    is named, not hidden behind the global."""
    namespace = {"torch": torch, "nn": nn, "optim": optim, "F": F, "diagnosed": diagnosed,
                 "x_fake": torch.zeros(8, 4)}                        # an earlier cell's
    code = compile(CELL, "/tmp/ipykernel_1234/567.py", "exec").replace(co_name=code_name)
    exec(code, namespace)
    shared = namespace["diagnosis"].facts["shared part"]
    assert re.search(r"it reaches the second loss through `x_fake`, `fake_for_D`$", shared), shared

"""The doctor's catalogue (gan_lessons/doctor/catalogue.py): every kind raised on the torch installed, recognised as
that kind and diagnosed from records (the tensor, the lines); every wording of every release recognised as its own
kind and no other. The same file runs on other torch releases (`make doctor-versions`): there each program's
message is that release's own wording."""
import re
import subprocess
import sys
import textwrap
import traceback
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from gan_lessons.doctor import DoctorWarning, doctor
from gan_lessons.doctor.catalogue import CATALOGUE, WARNINGS, recognise

SOURCE = Path(__file__).read_text().splitlines()
ROOT = Path(__file__).resolve().parents[2]


def line_of(marker):
    return next(i + 1 for i, text in enumerate(SOURCE) if text.rstrip().endswith(f"# {marker}"))


def diagnose(block):
    with pytest.raises(RuntimeError) as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DoctorWarning)
            with doctor():
                block()
    return caught.value, getattr(caught.value, "diagnosis", None)


@pytest.mark.parametrize("kind", CATALOGUE + WARNINGS, ids=lambda k: k.key)
def test_every_wording_is_recognised_as_its_own_kind_only(kind):
    for wording in kind.wordings:
        matched = [k.key for k in CATALOGUE + WARNINGS if any(w.pattern().search(wording.example())
                                                               for w in k.wordings)]
        assert matched == [kind.key], (wording.text, matched)


def test_a_message_outside_the_catalogue_is_not_recognised():
    assert recognise("CUDA out of memory. Tried to allocate 2.00 GiB") is None
    assert recognise("mat1 and mat2 shapes cannot be multiplied (4x3 and 4x3)") is None


# One program per kind: each raises on this torch, and the diagnosis names what the records say.

class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        out = x.exp()
        ctx.save_for_backward(out)  # the saved-by line, not the first op: # fn-forward
        return out

    @staticmethod
    def backward(ctx, g):
        out, = ctx.saved_tensors
        return g * out


class Sq(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, g):
        a, = ctx.saved_tensors
        a.copy_(2 * a * g)  # fn-write
        return a


def test_version_a_custom_functions_backward_writes_into_what_another_saved():
    def block():
        w = torch.randn(3, requires_grad=True)
        Sq.apply(Exp.apply(w)).sum().backward()  # fn-apply
    error, dx = diagnose(block)
    assert recognise(str(error)).key == "version" and dx.kind == "version"
    assert dx.facts["tensor"].startswith("a tensor Exp.forward saved")
    assert f"line {line_of('fn-forward')}" in dx.facts["saved by"] and f"line {line_of('fn-apply')}" in dx.facts[
        "saved by"]
    assert dx.facts["modified by"].startswith("copy_ in Sq.backward") and f"line {line_of('fn-write')}" in dx.facts[
        "modified by"]


def make_weights():
    with torch.inference_mode():
        return torch.randn(4, 3)  # inference-made


def test_inference_saved_names_the_tensor_and_where_inference_mode_made_it():
    def block():
        w = make_weights()  # inference-call
        x = torch.randn(2, 4, requires_grad=True)
        (x @ w).sum()  # inference-use
    error, dx = diagnose(block)
    assert dx.kind == "inference_saved"
    assert dx.facts["tensor"] == "`w` [4, 3]"
    assert f"line {line_of('inference-made')}" in dx.facts["made"] and "make_weights" in dx.facts["made"]
    assert f"line {line_of('inference-call')}" in dx.facts["made"]
    assert f"line {line_of('inference-use')}" in dx.facts["used"]


def test_inference_inplace_names_the_tensor_and_the_write():
    def block():
        w = make_weights()
        w.add_(1)  # inference-write
    error, dx = diagnose(block)
    assert dx.kind == "inference_inplace" and dx.facts["tensor"] == "`w` [4, 3]"
    assert f"line {line_of('inference-write')}" in dx.facts["changed"]


def test_unused_input_after_set_names_the_replaced_accumulator():
    def block():
        x = torch.randn(3, requires_grad=True)
        y = (x * 2).sum()
        with torch.no_grad():
            x.set_(torch.zeros(3))
        torch.autograd.grad(y, x)  # set-grad
    error, dx = diagnose(block)
    assert dx.kind == "unused_input" and dx.facts["input"] == "`x` [3]"
    assert "former gradient accumulator" in dx.facts["graph"]
    assert f"line {line_of('set-grad')}" in dx.facts["call"]


def test_unused_input_that_the_outputs_never_reach():
    def block():
        x = torch.randn(3, requires_grad=True)
        z = torch.randn(3, requires_grad=True)
        y = (x * 2).sum() + (z.detach() * 3).sum()
        torch.autograd.grad(y, [x, z])  # unused-grad
    error, dx = diagnose(block)
    assert dx.kind == "unused_input" and dx.facts["input"] == "`z` [3]"
    assert "do not reach `z`" in dx.summary


def test_a_leaf_made_by_a_forward_hook_says_which_hook_and_puts_the_out_of_place_fix_first():
    emb = nn.Embedding(10, 4)
    emb.weight.requires_grad_(False)

    def make_inputs_require_grad(module, inputs, output):
        output.requires_grad_(True)  # hook-flag
    emb.register_forward_hook(make_inputs_require_grad)

    def block():
        h = emb(torch.tensor([1, 2, 3]))
        h += 1  # hook-write
    error, dx = diagnose(block)
    assert dx.kind == "leaf_inplace"
    assert f"line {line_of('hook-write')}" in str(dx.facts["where"])
    assert "make_inputs_require_grad" in dx.facts["a leaf because"]
    assert f"line {line_of('hook-flag')}" in dx.facts["a leaf because"]
    assert dx.fixes[0][0].startswith("write out of place")


def test_a_parameter_written_in_place_keeps_no_grad_first():
    w = nn.Parameter(torch.ones(3))

    def block():
        w.sub_(0.1)
    error, dx = diagnose(block)
    assert dx.kind == "leaf_inplace" and "a leaf because" not in dx.facts
    assert "no_grad" in dx.fixes[0][0]


def test_nonleaf_flag_names_the_tensor_and_the_op_that_made_it():
    G = nn.Linear(2, 2)

    def block():
        fake = G(torch.randn(4, 2))  # flag-made
        fake.requires_grad = False  # flag-set
    error, dx = diagnose(block)
    assert dx.kind == "nonleaf_flag" and dx.facts["tensor"] == "`fake` [4, 2]"
    assert f"line {line_of('flag-set')}" in dx.facts["where"]
    assert f"line {line_of('flag-made')}" in dx.facts["made by"]
    assert "detach()" in dx.fixes[0][0]


def test_numpy_on_a_tensor_that_requires_grad():
    G = nn.Linear(2, 2)

    def block():
        fake = G(torch.randn(4, 2))
        fake.numpy()  # numpy-call
    error, dx = diagnose(block)
    assert dx.kind == "numpy_grad" and dx.facts["tensor"] == "`fake` [4, 2]"
    assert f"line {line_of('numpy-call')}" in dx.facts["where"]


class Half(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 0.5  # half-forward

    @staticmethod
    def backward(ctx, g):
        return g[:2]


def test_a_custom_functions_wrong_gradient_names_the_function_and_where_it_ran():
    def block():
        Half.apply(torch.randn(3, requires_grad=True)).sum().backward()  # half-apply
    error, dx = diagnose(block)
    assert dx.kind == "function_gradient"
    assert dx.facts["function"].startswith("Half, applied at") and f"line {line_of('half-apply')}" in dx.facts[
        "function"]


def test_an_out_call_given_a_tensor_that_requires_grad():
    G = nn.Linear(2, 2)

    def block():
        h = torch.sigmoid(G(torch.randn(4, 2)))
        torch.mul(h, 2, out=h)  # out-call
    error, dx = diagnose(block)
    assert dx.kind == "out_grad" and "out=`h`" in dx.summary
    assert f"line {line_of('out-call')}" in dx.facts["call"] and dx.facts["requires grad"] == "`h` [4, 2]"


def test_a_hook_on_a_tensor_without_grad():
    def block():
        x = torch.randn(3)
        x.register_hook(lambda g: g)  # hook-register
    error, dx = diagnose(block)
    assert dx.kind == "hook_no_grad" and dx.facts["tensor"] == "`x` [3]"


def test_the_kinds_diagnosed_before_are_still_recognised_by_the_table():
    G = nn.Linear(2, 2)

    def block():
        y = G(torch.randn(2, 2)).sum()
        y.backward()
        y.backward()
    error, dx = diagnose(block)
    assert dx.kind == "freed"

    def block():
        torch.randn(2, 2).sum().backward()
    error, dx = diagnose(block)
    assert dx.kind == "no_graph"


def test_every_kind_with_a_program_here_is_a_kind_of_the_catalogue():
    tested = {"version", "inference_saved", "inference_inplace", "unused_input", "leaf_inplace", "nonleaf_flag",
              "numpy_grad", "function_gradient", "hook_no_grad", "freed", "no_graph", "out_grad"}
    elsewhere = {"view_inplace": "test_doctor_views.py", "grad_input": "test_doctor.py",
                 "nonscalar": "test_doctor.py", "ddp_unused": "test_catalogue_ddp (below)"}
    assert tested | set(elsewhere) == {k.key for k in CATALOGUE}


def test_ddp_unused_parameters_are_named(tmp_path):
    """DistributedDataParallel over one process (gloo): a layer no loss uses, and its error at the next forward."""
    script = tmp_path / "ddp_unused.py"
    script.write_text(textwrap.dedent("""\
        import os, torch, torch.distributed as dist
        from torch import nn
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
        dist.init_process_group("gloo", rank=0, world_size=1)
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.used, self.spare = nn.Linear(4, 4), nn.Linear(4, 4)
            def forward(self, x):
                return self.used(x)
        model = nn.parallel.DistributedDataParallel(Net())
        for _ in range(2):
            model(torch.randn(2, 4)).sum().backward()
        """))
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = subprocess.run([sys.executable, "-m", "gan_lessons", "doctor", str(script)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120, env={**__import__("os").environ, "PORT": str(port)})
    assert run.returncode == 1, run.stderr
    assert "Expected to have finished reduction" in run.stderr
    assert recognise(run.stderr).key == "ddp_unused"
    assert "model.module.spare.weight" in run.stderr and "model.module.spare.bias" in run.stderr, run.stderr


EXAMPLES = {
    "function": ("""\
        import torch
        class Exp(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x): out = x.exp(); ctx.save_for_backward(out); return out
            @staticmethod
            def backward(ctx, g): out, = ctx.saved_tensors; return g * out
        class Sq(torch.autograd.Function):
            @staticmethod
            def forward(ctx, a): ctx.save_for_backward(a); return a * a
            @staticmethod
            def backward(ctx, g): a, = ctx.saved_tensors; a.copy_(2 * a * g); return a
        w = torch.randn(3, requires_grad=True); Sq.apply(Exp.apply(w)).sum().backward()
        """, ["a tensor Exp.forward saved", "copy_ in Sq.backward", "line 11", "line 4", "line 12"]),
    "inference": ("""\
        import torch
        @torch.inference_mode()
        def make_weights():
            return torch.randn(4, 3)
        w = make_weights()
        x = torch.randn(2, 4, requires_grad=True)
        y = (x @ w).sum()
        """, ["`w` [4, 3]", "line 4", "make_weights", "line 7"]),
    "set_": ("""\
        import torch
        x = torch.randn(3, requires_grad=True)
        y = (x * 2).sum()
        with torch.no_grad():
            x.set_(torch.zeros(3))
        g, = torch.autograd.grad(y, x)
        """, ["`x`", "gradient accumulator was replaced", "line 6"]),
    "hook_leaf": ("""\
        import torch
        emb = torch.nn.Embedding(10, 4)
        emb.weight.requires_grad_(False)
        def make_inputs_require_grad(module, input, output):
            output.requires_grad_(True)
        emb.register_forward_hook(make_inputs_require_grad)
        lin = torch.nn.Linear(4, 2)
        h = emb(torch.tensor([1, 2, 3]))
        h += 1
        """, ["`h`", "line 9", "make_inputs_require_grad", "line 5", "fix: write out of place"]),
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_four_new_mechanisms_as_a_script_under_the_command(name, tmp_path):
    source, expected = EXAMPLES[name]
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(source))
    run = subprocess.run([sys.executable, "-m", "gan_lessons", "doctor", str(script)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 1
    told = run.stdout + run.stderr
    assert "autograd doctor:" in told and "autograd doctor note" not in told, told
    for fact in expected:
        assert fact in told, (fact, told)


def test_why_the_doctor_records_no_save_with_saved_tensors_hooks():
    """docs/doctor.md says the doctor does not record saves with torch.autograd.graph.saved_tensors_hooks because a
    pack hook, even one that returns the tensor as it is, turns off the version check: the error it exists to
    explain would not be raised. Checked on the torch installed; if this fails, the docs' reason is wrong there."""
    def backward_after_a_write(hooks):
        w = torch.randn(3, requires_grad=True)
        with hooks:
            y = w.exp()
        y.add_(1)
        try:
            y.sum().backward()
        except RuntimeError as error:
            return str(error)
        return None

    import contextlib
    assert "modified by an inplace operation" in backward_after_a_write(contextlib.nullcontext())
    assert backward_after_a_write(torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)) is None


class Scaled(nn.Module):
    """A buffer read by the forward, then updated in place by it: torch.compile's backends find the error while
    they trace; eager finds it at the backward."""

    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 8), nn.Linear(8, 1)
        self.register_buffer("scale", torch.ones(8))

    def forward(self, x):
        h = torch.relu(self.a(x)) * self.scale
        self.scale.mul_(0.9)
        return self.b(h)


def _raises_without_the_doctor(block):
    torch._dynamo.reset()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            block()
    except RuntimeError:
        return True
    return False


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_compiled_modules_give_a_diagnosis_with_the_users_lines_and_no_frame_of_the_doctors(backend):
    """Where this torch's backend raises without the doctor, the doctor diagnoses it, with the user's lines only."""
    import os
    doctor_dir = os.path.dirname(os.path.abspath(__import__("gan_lessons.doctor").doctor.__file__))

    def stepped():
        net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
        compiled = torch.compile(net, backend=backend)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        out = compiled(torch.randn(5, 4))  # compiled-forward
        out.mean().backward(retain_graph=True)
        opt.step()  # compiled-step
        (out ** 2).mean().backward()

    def traced():
        scaled = torch.compile(Scaled(), backend=backend)
        scaled(torch.randn(5, 4)).mean().backward()  # traced-call

    checked = 0
    for block, lines in ((stepped, {"saved by": "compiled-forward", "modified by": "compiled-step"}),
                         (traced, {None: "traced-call"})):
        if not _raises_without_the_doctor(block):
            continue
        torch._dynamo.reset()
        with warnings.catch_warnings(record=True) as shown:
            warnings.simplefilter("always")
            error, dx = diagnose(block)
        assert dx is not None and dx.kind == "version", error
        for fact, marker in lines.items():
            assert f"line {line_of(marker)}" in (dx.facts[fact] if fact else dx.text()), dx.text()
        assert "eval_with_key" not in dx.text() and "could not diagnose" not in dx.text()
        frames = [frame.f_code.co_filename for frame, _ in traceback.walk_tb(error.__traceback__)]
        assert not any(f.startswith(doctor_dir) for f in frames)
        assert not any(doctor_dir in str(w.message) for w in shown)
        checked += 1
    if not checked:
        pytest.skip(f"torch {torch.__version__}'s {backend} backend raises neither error")


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_four_new_mechanisms_in_a_notebook_cell(name, ip, capsys):
    """The same programs as one notebook cell after `%load_ext gan_lessons`."""
    source, expected = EXAMPLES[name]
    ip.user_ns.clear()
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DoctorWarning)
        ip.run_cell(textwrap.dedent(source))
    out = capsys.readouterr()
    told = out.out + out.err
    assert "autograd doctor:" in told and "autograd doctor note" not in told, told
    for fact in expected:
        assert fact in told, (fact, told)


KEPT = {          # a tensor kept in a container from one loop pass to the next: (files, the adding line's file, line)
    "deque_in_a_helper_class": ({"memory.py": """\
        import collections
        import torch
        class Memory:
            def __init__(self):
                self.items = collections.deque(maxlen=3)
            def push(self, t):
                self.items.append(t)
            def mean(self):
                return torch.stack(list(self.items)).mean()
        """, "main.py": """\
        import torch
        from memory import Memory
        net = torch.nn.Linear(3, 2)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        mem = Memory()
        for step in range(3):
            y = net(torch.randn(4, 3))
            mem.push(y)
            loss = y.pow(2).mean() + mem.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """}, "memory.py", 7),
    "dict_by_key": ({"main.py": """\
        import torch
        net = torch.nn.Linear(3, 2)
        opt = torch.optim.Adam(net.parameters())
        cache = {}
        for step in range(3):
            y = net(torch.randn(4, 3))
            cache[step % 2] = y
            loss = y.pow(2).mean() + 0.1 * sum(v.pow(2).mean() for v in cache.values())
            opt.zero_grad()
            loss.backward()
            opt.step()
        """}, "main.py", 7),
    "list_rebuilt_on_the_module": ({"main.py": """\
        import torch
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.l = torch.nn.Linear(3, 2)
                self.prev = []
            def forward(self, x):
                h = self.l(x)
                self.prev = self.prev[-2:] + [h * 2]
                return h + torch.stack(self.prev).mean(0)
        net = M()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for step in range(3):
            loss = net(torch.randn(4, 3)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """}, "main.py", 9),
}


@pytest.mark.parametrize("name", KEPT)
def test_a_container_that_keeps_the_old_graph_is_named_with_its_adding_line_and_the_fix_there_runs(name,
                                                                                                    tmp_path):
    """The list (deque, dict) holding the previous pass's tensor is found from the live objects; the line that adds
    to it is named (in the file where it is), and the fix the doctor proposes at that line, applied, runs clean."""
    files, file, line = KEPT[name]
    for each, text in files.items():
        (tmp_path / each).write_text(textwrap.dedent(text))
    command = [sys.executable, "-m", "gan_lessons", "doctor", "main.py"]
    run = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    told = run.stdout + run.stderr
    code = (tmp_path / file).read_text().splitlines()[line - 1].strip()
    kept = next(t for t in told.splitlines() if t.startswith("  - kept by:"))
    assert f"line {line} (`{code}`)" in kept and (file == "main.py") != (f"{file}, line" in kept), told
    fix = next(t for t in told.splitlines() if t.startswith("  fix:"))
    proposed = re.search(r"`: (.*\.detach\(\).*) at line (\d+) \(", fix)
    assert proposed and int(proposed[2]) == line, fix
    lines = (tmp_path / file).read_text().splitlines()
    lines[line - 1] = lines[line - 1][:len(lines[line - 1]) - len(lines[line - 1].lstrip())] + proposed[1]
    (tmp_path / file).write_text("\n".join(lines) + "\n")
    fixed = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert fixed.returncode == 0 and "autograd doctor" not in fixed.stdout + fixed.stderr, fixed.stderr

"""The doctor's parts, each alone: what ops.py reads of one torch call, the records the recorder keeps in the journal
(small dataclasses, read by field), what the namer resolves, what the checks say and what the diagnoser finds, each
part built on a journal of its own; and the journal let go of at the end of the block."""
import gc
import weakref

import pytest
import torch
from torch import nn, optim

from gan_lessons.doctor import DoctorWarning, Where, doctor
from gan_lessons.doctor.checks import Checks
from gan_lessons.doctor.errors import Diagnoser
from gan_lessons.doctor.journal import Journal
from gan_lessons.doctor.naming import Namer, Names
from gan_lessons.doctor.nodes import BackwardCall, InplaceWrite, LeafWrite, Step
from gan_lessons.doctor.ops import frozen_flag, is_inplace, version_of, written_by
from gan_lessons.doctor.recording import Recorder


def test_ops_tell_an_in_place_call_from_an_out_of_place_one():
    assert is_inplace("add_", {}) and is_inplace("__iadd__", {}) and is_inplace("__setitem__", {})
    assert is_inplace("relu", {"inplace": True}) and not is_inplace("relu", {"inplace": False})
    assert not is_inplace("add", {}) and not is_inplace("__add__", {}) and not is_inplace("requires_grad_", {})
    x, buf = torch.ones(2), torch.empty(2)
    assert written_by("mul_", (x, 2), {}) == ([x], "mul_")
    assert written_by("dropout", (x,), {"inplace": True}) == ([x], "dropout(inplace=True)")
    assert written_by("add", (x, 1), {"out": buf}) == ([buf], "add(out=...)")
    assert written_by("add", (x, 1), {}) == ([], None)
    assert written_by("_foreach_lerp_", ([x, buf], [buf, x], 0.1), {}) == ([x, buf], "_foreach_lerp_")
    assert written_by("_foreach_add", ([x], 1), {}) == ([], None)          # out of place: new tensors
    with torch.inference_mode():
        made = torch.ones(1)
    assert version_of(x) == 0 and version_of(made) is None


def test_ops_read_a_requires_grad_switch():
    p = nn.Parameter(torch.ones(1))
    assert frozen_flag(None, "requires_grad_", (p, False), {}) is False
    assert frozen_flag(None, "requires_grad_", (p,), {}) is True
    assert frozen_flag(type(p).requires_grad.__set__, "__set__", (p, False), {}) is False
    assert frozen_flag(None, "add_", (p, 1), {}) is None


def test_the_records_are_typed_and_say_what_happened():
    torch.manual_seed(0)
    net = nn.Linear(3, 1)
    opt = optim.SGD(net.parameters(), lr=0.1)
    with doctor(net=net, opt=opt) as doc:
        opt.zero_grad()
        loss = net(torch.ones(2, 3)).pow(2).mean()
        loss.backward()
        opt.step()
        scale = torch.ones(1)
        scale.mul_(2)
        backward, step, write = doc.journal.backwards[-1], doc.journal.steps[-1], doc.journal.inplace[-1]
    assert isinstance(backward, BackwardCall) and isinstance(step, Step)
    assert "loss.backward()" in backward.where.code and set(backward.depth) == set(net.parameters())
    assert backward.fresh == set(net.parameters()) and id(opt) in backward.used_by and not backward.retain
    assert step.optimizer is opt and "opt.step()" in step.where.code
    assert step.versions == [p._version for p in net.parameters()]
    assert isinstance(write, InplaceWrite) and write.op == "mul_" and write.shape == (1,) and write.version == 1
    assert doc.notes == []


def test_the_namer_resolves_modules_parameters_optimizers_and_variables():
    G = nn.Sequential(nn.Linear(2, 2))
    opt_G = optim.Adam(G.parameters())
    x_fake = G(torch.ones(1, 2))
    with doctor() as doc:
        names = doc.names()
    assert isinstance(names, Names)
    assert names.modules[G] == "G" and names.modules[G[0]] == "G.0"
    assert names.params[G[0].weight] == "G.0.weight" and names.optimizers[id(opt_G)] == "opt_G"
    assert names.variables["x_fake"] is x_fake


def test_a_call_that_raises_leaves_no_argument_held():
    with doctor() as doc:
        a = torch.ones(2, 3)
        held = weakref.ref(a)
        try:
            torch.mm(a, torch.ones(2, 3))           # shapes that cannot multiply: torch raises
        except RuntimeError:
            pass
        assert doc.recorder.versions_before == []
        del a
        gc.collect()
        assert held() is None                       # nothing of the doctor's keeps the argument alive


def _parts(**named):
    journal = Journal()
    namer = Namer(journal, named, namespaces=lambda: [])
    checks = Checks(journal, namer)
    return journal, namer, checks, Recorder(journal, namer, [checks]), Diagnoser(journal, namer, checks.constant_of)


def test_the_recorder_writes_the_journal_and_the_namer_reads_it_without_a_doctor():
    journal, namer, checks, recorder, diagnoser = _parts()
    D = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    with recorder.mode:                         # the recorder alone: no hooks, no doctor
        out = D(torch.ones(1, 2))
        out.mul_(2)
    write = journal.inplace[-1]
    assert write.op == "mul_" and write.shape == (1, 2) and write.version == 1
    info = journal.nodes.get(out.grad_fn)
    assert info is not None and info.op == "mul_" and info.serial == journal.serial
    namer.named["D"] = D                        # a name given later is read when a name is needed
    assert namer.names().modules[D[0]] == "D.0" and namer.name(D[0].weight) == "D.0.weight"
    assert namer.label(torch.zeros(3)) == "a tensor of shape (3,)"


def test_the_checks_say_each_thing_once_per_line_and_keep_it_in_the_journal():
    journal, namer, checks, recorder, diagnoser = _parts()
    where = Where("train.py", 7, "opt_D.step()")
    for _ in range(3):
        checks.inform("wasted work", {"where": where}, [])
    assert [d.kind for d in journal.diagnoses] == ["information"]
    with pytest.warns(DoctorWarning, match="two losses"):
        checks.suspicious("two losses", {"where": where}, [])
    checks.suspicious("two losses", {"where": where}, [])     # the same line: said once
    assert [d.kind for d in journal.diagnoses] == ["information", "suspicious"]


def test_the_diagnoser_reads_a_leaf_write_from_the_journal_alone():
    journal, namer, checks, recorder, diagnoser = _parts()
    w = nn.Parameter(torch.ones(2))
    namer.named["w"] = w
    journal.last_leaf_inplace = LeafWrite(w, "add_", Where("train.py", 3, "w.add_(1)"), False, False)
    error = RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
    dx = diagnoser.diagnose(error)
    assert dx.kind == "leaf_inplace" and dx.summary.startswith("add_ on w,") and dx.facts["where"].line == 3


def test_the_doctor_lets_go_of_the_student_s_objects_when_the_block_ends():
    def train():
        G = nn.Linear(2, 2)
        opt_G = optim.SGD(G.parameters(), lr=0.1)
        with doctor() as doc:
            for _ in range(2):
                opt_G.zero_grad()
                G(torch.ones(1, 2)).pow(2).sum().backward()
                opt_G.step()
            assert doc.journal.steps and doc.names().modules[G] == "G"
        return weakref.ref(G), weakref.ref(opt_G), doc
    G, opt_G, doc = train()
    gc.collect()
    assert G() is None and opt_G() is None      # the doctor, still alive, holds neither
    assert doc.notes == [] and not doc.journal.steps


def test_a_doctor_entered_under_inference_mode_starts_and_leaves_no_note():
    with torch.inference_mode():
        with doctor() as doc:
            y = torch.ones(2) * 2
    assert y.tolist() == [2.0, 2.0] and doc.notes == [] and doc.journal.first_seq > 0

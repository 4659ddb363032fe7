"""The doctor under torchrun: every process is diagnosed and each diagnosis is said once, by rank 0 where it has
it; and the doctor knows DDP's buffers when it names what changed a saved tensor."""
import os
import socket
import subprocess
import sys
import textwrap
import uuid

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from gan_lessons.doctor import doctor, ranks, versions

pytestmark = pytest.mark.slow


@pytest.fixture
def run_of_two(monkeypatch):
    """This process as one of two started by torchrun, in a run of its own."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", uuid.uuid4().hex)
    monkeypatch.setattr(ranks, "LATER", 0.0)


def test_rank_0_says_a_text_and_another_rank_keeps_quiet(run_of_two, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    assert ranks.first_to_say("a diagnosis") and ranks.said("a diagnosis") == "a diagnosis"
    monkeypatch.setenv("RANK", "1")
    assert not ranks.first_to_say("a diagnosis")                     # the same text: said once for both
    assert ranks.first_to_say("what rank 0 did not find")           # rank 1's own, with its rank
    assert ranks.said("what rank 0 did not find\n  - fact") == "what rank 0 did not find [rank 1]\n  - fact"


def test_one_process_always_says_it(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert ranks.rank() is None and ranks.first_to_say("x") and ranks.first_to_say("x")
    monkeypatch.setenv("WORLD_SIZE", "not a number")
    assert ranks.rank() is None


BN_SYNCED_BY_HAND = """
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    D = DDP(nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.LeakyReLU(0.2), nn.Linear(16, 1)))
    x_real, x_fake = torch.randn(8, 8), torch.randn(8, 8)
    loss_D = F.softplus(-D(x_real)).mean() + F.softplus(D(x_fake)).mean()
    with torch.no_grad():
        D.module[1].running_mean.copy_(D.module[1].running_mean * 0.5)
    loss_D.backward()
"""

SEED003_UNDER_DDP = """
    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from gan_lessons import strategies

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    G, D = DDP(nn.Sequential(nn.Linear(4, 8))), DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
    strategies.retain_graph_seed003(G, D, opt_G, opt_D, torch.randn(8, 8), lambda n: torch.randn(n, 4))
"""


def _torchrun(tmp_path, code):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(code))
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GAN_LESSONS_LANG": "en", "TMPDIR": str(tmp_path / "tmp")}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           "-m", "gan_lessons", "doctor", str(script)], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=300)


def test_two_processes_meet_a_hand_made_buffer_sync_and_the_diagnosis_is_said_once(tmp_path):
    run = _torchrun(tmp_path, BN_SYNCED_BY_HAND)
    assert run.returncode != 0
    assert run.stderr.count("[rank0]: RuntimeError: one of the variables needed") == 1     # both processes failed,
    assert run.stderr.count("[rank1]: RuntimeError: one of the variables needed") == 1     # each with its error
    headlines = [line for line in run.stderr.splitlines() if line.startswith("autograd doctor:")]
    assert headlines == ["autograd doctor: D.module.1.running_mean changed in place after the forward saved it"]
    assert "modified by: copy_ at line 14" in run.stderr and "(lesson 14, notebooks/14_several_gpus.ipynb)" in run.stderr
    assert "[rank 1]" not in run.stderr
    assert list((tmp_path / "tmp").glob("gan_lessons_doctor_*")) == []      # nothing left in the temporary folder


def test_seed_003_under_ddp_is_diagnosed_once_and_names_the_step(tmp_path):
    run = _torchrun(tmp_path, SEED003_UNDER_DDP)
    headlines = [line for line in run.stderr.splitlines() if line.startswith("autograd doctor:")]
    assert len(headlines) == 1, run.stderr[-3000:]
    assert "modified by: opt_D.step()" in run.stderr, run.stderr[-3000:]
    assert list((tmp_path / "tmp").glob("gan_lessons_doctor_*")) == []


def test_a_folder_left_by_a_killed_run_is_removed_by_the_next(run_of_two, monkeypatch, tmp_path):
    monkeypatch.setattr(ranks.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(ranks, "_joined", set())
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"gan_lessons_doctor_oldrun_{dead.stdout.strip()}"          # its launcher has exited
    (stale / "pid_1").mkdir(parents=True)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")                    # the run's one process on this machine
    assert ranks.first_to_say("a diagnosis")
    assert not stale.exists() and (tmp_path / os.path.basename(ranks._folder())).exists()
    ranks._leave(ranks._folder())                                   # what this process does at its exit
    assert list(tmp_path.glob("gan_lessons_doctor_*")) == []


@pytest.fixture
def one_process_group():
    """A gloo group of one process, so that DDP wraps a module in this process."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.mark.parametrize("keeps_versions", [False, True])
def test_a_write_to_a_ddp_buffer_the_doctor_did_not_see_is_put_to_ddp_s_copy_where_it_counts(
        one_process_group, monkeypatch, capsys, keeps_versions):
    """A write below torch's Python API (as DDP's own copy on a torch that counts it, or a C++ extension's):
    torch.autograd.graph.increment_version stands in for it."""
    monkeypatch.setattr(versions, "_ddp_keeps_versions", lambda: keeps_versions)
    torch.manual_seed(0)
    D = DDP(nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 1)))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        with doctor(D=D) as doc:
            loss_D = F.softplus(-D(torch.randn(8, 8))).mean() + F.softplus(D(torch.randn(8, 8))).mean()
            torch.autograd.graph.increment_version(D.module[1].running_mean)
            loss_D.backward()
    modifier = doc.diagnoses[0].facts["modified by"]
    if keeps_versions:
        assert "below torch's Python API" in modifier and "does not count as a write on this torch" in modifier
    else:
        assert modifier.startswith("D's copy of rank 0's buffers into every process at the start of each forward")
    assert any("broadcast_buffers=False" in fix for fix, _n in doc.diagnoses[0].fixes)


def _bn_D():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.LeakyReLU(0.2), nn.Linear(16, 1))


def _counting_copy(ddp):
    """Stands in for a torch whose DDP counts its buffer copy as a write: before each forward that DDP says will copy
    the buffers, their version counters move, as a write's would."""
    def bump(module, args):
        if ddp.will_sync_module_buffers():
            for b in ddp.module.buffers():
                torch.autograd.graph.increment_version(b)
    return ddp.register_forward_pre_hook(bump)


def test_a_hand_made_sync_gets_the_one_fix_that_works(one_process_group):
    """Your own write into a buffer between the forwards and the backward: the doctor offers moving it after the
    backward, which runs; it does not offer one forward per backward or DDP's flags, which leave the write there
    (each tried here)."""
    x_real, x_fake = torch.randn(8, 8), torch.randn(8, 8)

    def step(ddp, one_forward=False, write_after=False):
        bn = ddp.module[1]
        if one_forward:
            out = ddp(torch.cat([x_real, x_fake]))
            loss_D = F.softplus(-out[:8]).mean() + F.softplus(out[8:]).mean()
        else:
            loss_D = F.softplus(-ddp(x_real)).mean() + F.softplus(ddp(x_fake)).mean()
        if not write_after:
            with torch.no_grad():
                bn.running_mean.copy_(bn.running_mean * 0.5)
        loss_D.backward()
        if write_after:
            with torch.no_grad():
                bn.running_mean.copy_(bn.running_mean * 0.5)

    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        with doctor() as doc:
            step(DDP(_bn_D(), broadcast_buffers=False))
    d = doc.diagnoses[0]
    assert d.facts["tensor"].startswith("running_mean") or "running_mean" in d.facts["tensor"], d.facts
    assert [fix for fix, _n in d.fixes] == ["write the buffer after the backward, not between the forwards and it "
                                            "(a hand-made sync of statistics belongs after the step)"]
    step(DDP(_bn_D()), write_after=True)                               # the fix offered: it runs
    for tried in (dict(one_forward=True), {}):                         # what it does not offer: still raises
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            step(DDP(_bn_D(), **({"forward_sync_buffers": False} if not tried else {})), **tried)


def test_ddp_s_own_copy_gets_fixes_that_each_run_where_the_copy_counts(one_process_group, monkeypatch):
    monkeypatch.setattr(versions, "_ddp_keeps_versions", lambda: False)
    x_real, x_fake = torch.randn(8, 8), torch.randn(8, 8)

    def step(ddp, one_forward=False):
        if one_forward:
            out = ddp(torch.cat([x_real, x_fake]))
            loss_D = F.softplus(-out[:8]).mean() + F.softplus(out[8:]).mean()
        else:
            loss_D = F.softplus(-ddp(x_real)).mean() + F.softplus(ddp(x_fake)).mean()
        loss_D.backward()

    def warmed(**flags):
        ddp = DDP(_bn_D(), **flags)
        _counting_copy(ddp)
        (-ddp(x_real).mean()).backward()            # a first step: from now on DDP copies before each forward
        return ddp

    ddp = warmed()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        with doctor(D=ddp) as doc:
            step(ddp)
    fixes = [fix for fix, _n in doc.diagnoses[0].fixes]
    assert fixes[0].startswith("one forward of the wrapped module per backward") and "forward_sync_buffers=False" in fixes[1]
    step(warmed(), one_forward=True)                                    # fix 1 runs
    import inspect
    new_flag = "forward_sync_buffers" in inspect.signature(DDP).parameters
    step(warmed(**({"forward_sync_buffers": False} if new_flag else {"broadcast_buffers": False})))   # fix 2 runs

"""benchmarks/doctor_real.py on a tiny checkout written here: its comparison of a plain run and the doctor's, the
doctor's own stderr lines told from Python's, the classic bugs it injects, and its shim (fake data, short runs,
the weights' digest). Its figures come from real repositories (benchmarks/results/*_doctor_real_*.json)."""
import importlib.util
import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.extended]

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("doctor_real", BENCHMARKS / "doctor_real.py")
doctor_real = importlib.util.module_from_spec(spec)
spec.loader.exec_module(doctor_real)

STDERR = """\
/x/train.py:12: UserWarning: torch's own warning
  y = F.softmax(x)
/x/train.py:30: DoctorWarning: autograd doctor: opt.step() runs while 2 of its 2 parameters have no .grad
  - where: line 30 (`opt.step()`)
  fix: check that the loss reaches them
  opt.step()
autograd doctor (information, not a warning): the backward at line 20 went on into G
  - where: line 21 (`opt_D.step()`)
autograd doctor: two losses share part of one graph, and the first backward freed it
  - freed by: the backward at line 8 (`lg.backward()`)
  not: retain_graph=True when a step changes a weight
Traceback (most recent call last):
  File "/x/train.py", line 40, in <module>
    loss.backward()
RuntimeError: Trying to backward through the graph a second time
"""

GAN = """\
import argparse, torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
parser = argparse.ArgumentParser()
parser.add_argument("--n_epochs", type=int, default=50)
opt = parser.parse_args()
G, D = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
opt_G, opt_D = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
bce = nn.BCELoss()
loader = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8, shuffle=True, num_workers=2)
for epoch in range(opt.n_epochs):
    for i, (x_real,) in enumerate(loader):
        ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)
        x_fake = G(torch.randn(8, 4))
        opt_G.zero_grad()
        loss_G = bce(D(x_fake), ones)
        loss_G.backward()
        opt_G.step()
        opt_D.zero_grad()
        loss_D = bce(D(x_real), ones) + bce(D(x_fake.detach()), zeros)
        loss_D.backward()
        opt_D.step()
        print(f"[Epoch {epoch}] [Batch {i}] [D loss: {loss_D.item():.4f}]")
torch.save(G.state_dict(), "G.pt")
"""


def test_the_doctor_s_own_lines_are_told_from_python_s():
    own, rest = doctor_real.doctor_blocks(STDERR)
    assert rest[:2] == ["/x/train.py:12: UserWarning: torch's own warning", "  y = F.softmax(x)"]
    assert rest[2:] == STDERR.splitlines()[-4:]                 # the traceback is Python's
    assert sum(": DoctorWarning: " in line for line in own) == 1 and own[3] == "  opt.step()"
    assert sum(line.startswith("autograd doctor") for line in own) == 2 and len(own) == 9


def test_each_classic_bug_is_injected_once_on_the_first_line_it_fits():
    text = "import torch\n# x.detach() in a comment\nopt.zero_grad()\nd = D(fake.detach())\nl.backward(retain_graph=True)\n"
    bugs = {kind: (line, name, new) for kind, line, name, new in doctor_real.injected(text)}
    assert bugs["detach taken out"][:2] == (4, "fake") and "d = D(fake)\n" in bugs["detach taken out"][2]
    assert bugs["zero_grad taken out"][:2] == (3, "opt") and "\npass\n" in bugs["zero_grad taken out"][2]
    assert bugs["retain_graph taken out"][0] == 5 and "l.backward()\n" in bugs["retain_graph taken out"][2]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """One run of the benchmark on a checkout of two scripts: a correct GAN loop, and one that never runs."""
    checkout = tmp_path_factory.mktemp("checkout")
    (checkout / "gan").mkdir()
    (checkout / "gan" / "train.py").write_text(GAN)
    (checkout / "gan" / "broken.py").write_text("import argparse\nparser = argparse.ArgumentParser()\n"
                                                "opt = parser.parse_args()\nloss.backward()\n")
    (checkout / "gan" / "models.py").write_text("def backward_helper(x):\n    x.backward()\n")   # not a script
    out = tmp_path_factory.mktemp("results") / "report.json"
    doctor_real.main([str(checkout), "--inject", "--name", "tiny", "--out", str(out), "--timeout", "240"])
    return json.loads(out.read_text())


def test_a_correct_loop_behaves_alike_and_a_broken_script_fails_alike(report):
    assert sorted(report["scripts"]) == ["gan/broken.py", "gan/train.py"]
    train, broken = report["scripts"]["gan/train.py"], report["scripts"]["gan/broken.py"]
    assert train["status"] == {"plain": 0, "doctor": 0} and train["identical"] and train["doctor_warnings"] == 0
    assert train["files"] == ["doctor_real_weights.txt", "gan/G.pt"]   # the same bytes in both runs (same_files)
    assert broken["status"] == {"plain": 1, "doctor": 1} and broken["identical"]
    assert report["summary"]["failed_alike"] == ["gan/broken.py"] and report["summary"]["different"] == []


def test_the_shim_cuts_each_loader_to_its_first_batches(report):
    """50 epochs of 8 batches each: 2 batches in the first epoch, none in the 49 after (one line per batch)."""
    assert report["batches"] == 2 and report["scripts"]["gan/train.py"]["stdout_lines"] == 2


def test_the_injected_bugs_change_the_run_and_the_doctor_names_them(report):
    bugs = {e["bug"]: e for e in report["injected"]}
    assert bugs["detach taken out"]["status"]["plain"] == 1 and bugs["detach taken out"]["named"]
    assert bugs["zero_grad taken out"]["behaviour_changed"] and bugs["zero_grad taken out"]["named"]
    assert report["summary"]["injected_that_raise_named"] == report["summary"]["injected_that_raise"] == 1


TRAINER = """\
import torch, torch.nn as nn


class GAN:
    def __init__(self, epochs):
        self.epochs = epochs
        self.G, self.D = nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
        self.G_optimizer = torch.optim.Adam(self.G.parameters())
        self.D_optimizer = torch.optim.Adam(self.D.parameters())

    def train(self):
        bce = nn.BCELoss()
        for epoch in range(self.epochs):
            x_real, z = torch.randn(8, 4), torch.randn(8, 4)
            self.D_optimizer.zero_grad()
            G_ = self.G(z)
            D_loss = bce(self.D(x_real), torch.ones(8, 1)) + bce(self.D(G_.detach()), torch.zeros(8, 1))
            D_loss.backward()
            self.D_optimizer.step()
            self.G_optimizer.zero_grad()
            G_loss = bce(self.D(G_), torch.ones(8, 1))
            G_loss.backward()
            self.G_optimizer.step()
        torch.save(self.G.state_dict(), "G.pt")
"""

MAIN = """\
import argparse
from models.gan import GAN

if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--epoch", type=int, default=3)
    GAN(parser.parse_args().epoch).train()
"""


def test_a_script_whose_training_is_in_a_module_it_imports_is_found_and_the_module_is_injected(tmp_path):
    """main.py calls no backward itself; the trainer class it imports does: the script is a training script, and
    the bugs go into the module, each named by that file's line or the name touched."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "gan.py").write_text(TRAINER)
    (tmp_path / "main.py").write_text(MAIN)
    (tmp_path / "unused.py").write_text("import argparse\nargparse.ArgumentParser().parse_args()\n")
    assert doctor_real.training_scripts(tmp_path, [], []) == {"main.py": ["models/gan.py"]}
    out = tmp_path / "report.json"
    doctor_real.main([str(tmp_path), "--inject", "--name", "modules", "--out", str(out), "--timeout", "240"])
    report = json.loads(out.read_text())
    assert report["scripts"]["main.py"]["identical"] and report["scripts"]["main.py"]["status"]["plain"] == 0
    bugs = {e["bug"]: e for e in report["injected"]}
    assert {e["file"] for e in report["injected"]} == {"models/gan.py"}
    assert bugs["detach taken out"]["status"]["plain"] == 1 and bugs["detach taken out"]["named"], bugs
    assert bugs["zero_grad taken out"]["behaviour_changed"] and bugs["zero_grad taken out"]["named"], bugs


def test_the_modules_a_script_imports_are_followed_through_each_other_and_stay_in_its_folder(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("from .losses import gp\n")
    (tmp_path / "pkg" / "losses.py").write_text("import torch\ndef gp(x):\n    return x\n")
    (tmp_path / "train.py").write_text("import os, torch\nfrom pkg import losses\nimport pkg\n")
    found = {p.relative_to(tmp_path).as_posix() for p in doctor_real.local_modules(tmp_path / "train.py")}
    assert found == {"pkg/__init__.py", "pkg/losses.py"}


def test_a_traceback_s_frames_in_torch_s_own_files_are_left_out_of_the_comparison():
    """Under the doctor's module hooks torch runs a forward through one more frame of its own: the script's
    frames, and the error, are what is compared."""
    frame = '  File "/v/site-packages/torch/nn/modules/module.py", line {n}, in _call_impl\n    return {call}\n'
    script = 'Traceback (most recent call last):\n  File "/x/train.py", line 4, in <module>\n    y = net(x)\n'
    error = '  File "/x/models.py", line 9, in forward\n    return self.fc(x)\nRuntimeError: boom\n'
    plain = (script + frame.format(n=1789, call="forward_call(*args)") + error).splitlines()
    doctored = (script + frame.format(n=1884, call="inner()") + "           ^^^^^^^\n"
                + frame.format(n=1832, call="forward_call(*args)") + error).splitlines()
    assert doctor_real.without_torch_frames(plain) == doctor_real.without_torch_frames(doctored) \
        == (script + error).splitlines()
    assert doctor_real.without_torch_frames((script + error.replace("boom", "other")).splitlines()) != \
        doctor_real.without_torch_frames(plain)


def test_a_tensorboard_event_file_is_compared_by_its_name_with_the_time_masked():
    plain = {"logs/run/events.out.tfevents.1796083771.vm": "a", "G.pt": "x"}
    doctored = {"logs/run/events.out.tfevents.1796083774.vm": "b", "G.pt": "x"}
    assert doctor_real.by_content(plain) == doctor_real.by_content(doctored)
    assert doctor_real.by_content(plain) != doctor_real.by_content({**doctored, "G.pt": "y"})

"""The autograd doctor on real broken code: names, operations and line numbers are checked."""
import contextlib
import itertools
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons import strategies
from gan_lessons.doctor import DoctorWarning, doctor
from gan_lessons.doctor.recording import Recorder
from gan_lessons.models import Discriminator, Generator

SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker):
    """The line number of the line ending in `# <marker>` in this file."""
    return next(i + 1 for i, text in enumerate(SOURCE) if text.rstrip().endswith(f"# {marker}"))


def diagnose(block, **watched):
    with pytest.raises(RuntimeError) as caught:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DoctorWarning)
            with doctor(**watched):
                block()
    return caught.value, caught.value.diagnosis


def test_seed001_toy_version_error_names_weight_forward_line_and_step():
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 2)
    optimG, optimD = optim.Adam(G.parameters()), optim.Adam(D.parameters())

    def block():
        t = torch.tensor([1., 2], requires_grad=True)
        g = G(t)
        d = D(g)  # s001-forward
        d.sum().backward(retain_graph=True)
        optimD.step()  # s001-step
        (g + d).sum().backward()

    error, dx = diagnose(block, G=G, D=D, optimG=optimG, optimD=optimD)
    assert "is at version 2; expected version 1" in str(error)          # the original error, unchanged
    assert dx.kind == "version"
    assert dx.facts["tensor"].startswith("D.weight.T [2, 2] (a transposed view")
    assert f"line {line_of('s001-forward')}" in dx.facts["saved by"] and "linear in D" in dx.facts["saved by"]
    assert dx.facts["modified by"].startswith(f"optimD.step() at line {line_of('s001-step')}")
    assert dx.facts["versions"] == "now 2, saved at 1"
    assert "lesson 04" in dx.text() and "lesson 05" in dx.text()


def loss_nonsaturating(d, g, x_real):
    """Seed 000's loss, as written there."""
    z = torch.randn(x_real.shape[0], g.z_dim)
    gz = g(z)
    dgz = F.sigmoid(d(gz))  # s000-forward
    dx = d(x_real)
    real_label, fake_label = torch.ones(x_real.shape[0]), torch.zeros(x_real.shape[0])
    bce_loss = F.binary_cross_entropy_with_logits
    g_loss = bce_loss(dgz, real_label).mean()  # s000-sigmoid
    d_loss = bce_loss(dx, real_label).mean() + bce_loss(dgz, fake_label).mean()  # s000-dloss
    return d_loss, g_loss


def test_seed000_loop_names_the_512x1_weight_and_warns_about_the_double_sigmoid():
    torch.manual_seed(0)
    g, d = Generator(), Discriminator()
    g_optimizer, d_optimizer = optim.Adam(g.parameters()), optim.Adam(d.parameters())
    x_real = torch.rand(8, 1, 28, 28) * 2 - 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError) as raised:
            with doctor(g=g, d=d, g_optimizer=g_optimizer, d_optimizer=d_optimizer):
                d_loss, g_loss = loss_nonsaturating(d, g, x_real)
                d_optimizer.zero_grad()
                d_loss.backward(retain_graph=True)
                d_optimizer.step()  # s000-step
                g_optimizer.zero_grad()
                g_loss.backward()
    dx = raised.value.diagnosis
    assert "[512, 1]" in str(raised.value)
    assert dx.facts["tensor"].startswith("d.net.7.weight.T [512, 1]")
    assert f"line {line_of('s000-forward')}" in dx.facts["saved by"] and "in d" in dx.facts["saved by"]
    assert dx.facts["modified by"].startswith(f"d_optimizer.step() at line {line_of('s000-step')}")
    # D's weights, changed by D's step: reordered, D would step on G's loss too; the GAN's order is the first fix
    assert dx.fixes[0][0].startswith("in a GAN: detach the fake batch in D's loss"), dx.text()
    sigmoid = [w for w in caught if issubclass(w.category, DoctorWarning) and "sigmoid" in str(w.message)]
    assert sigmoid and sigmoid[0].lineno == line_of("s000-sigmoid")
    # each term's range: G's (target 1) and D's fake term (target 0) are squashed into different intervals
    by_line = {w.lineno: str(w.message) for w in sigmoid}
    assert "(target 1) is squashed into [0.31, 0.69]" in by_line[line_of("s000-sigmoid")]
    assert "(target 0) is squashed into [0.69, 1.31]" in by_line[line_of("s000-dloss")]


def test_seed003_strategy_1_points_into_the_strategy_function():
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    x_real = torch.rand(8, 1, 28, 28) * 2 - 1

    def noise(n):
        return torch.randn(n, 64)

    error, dx = diagnose(lambda: strategies.retain_graph_seed003(G, D, opt_G, opt_D, x_real, noise),
                         G=G, D=D, opt_G=opt_G, opt_D=opt_D)
    source = Path(strategies.__file__).read_text().splitlines()
    step_line = next(i + 1 for i, t in enumerate(source) if "opt_D.step()" in t and "go stale" in t)
    assert dx.facts["tensor"].startswith("D.net.7.weight.T [512, 1]")
    assert dx.facts["modified by"].startswith(f"opt_D.step() at line {step_line}")
    assert "x_fake" in dx.facts["saved by"] or "D(x_fake)" in dx.facts["saved by"]


def test_seed004_loop_names_the_freeing_backward_and_the_shared_forward():
    torch.manual_seed(0)
    model1, model2 = nn.Linear(10, 2), nn.Linear(2, 2)
    optimizer1, optimizer2 = optim.Adam(model1.parameters()), optim.Adam(model2.parameters())
    data, label = torch.randn(4, 10), torch.tensor([0, 1, 1, 0])

    def block():
        a = model1(data)  # s004-shared
        b = model2(a)
        l1, l2 = F.cross_entropy(a, label), F.cross_entropy(b, label)
        optimizer2.zero_grad()
        l2.backward()  # s004-frees
        optimizer2.step()
        optimizer1.zero_grad()
        l1.backward()  # s004-fails

    error, dx = diagnose(block, model1=model1, model2=model2, optimizer1=optimizer1, optimizer2=optimizer2)
    assert dx.kind == "freed"
    assert dx.facts["freed by"] == f"the backward at line {line_of('s004-frees')} (`l2.backward()  # s004-frees`)"
    assert "the forward of model1" in dx.facts["shared part"]
    assert f"line {line_of('s004-shared')}" in dx.facts["shared part"]
    assert dx.facts["failing backward"].startswith(f"line {line_of('s004-fails')}")
    assert "retain_graph=True" in dx.text() and "recompute" in dx.text()


def test_leaf_inplace_names_the_parameter_and_no_grad():
    G = nn.Linear(2, 2)

    def block():
        G.weight += 1  # leaf-line

    error, dx = diagnose(block, G=G)
    assert "G.weight" in dx.summary and dx.facts["where"].line == line_of("leaf-line")
    assert "torch.no_grad()" in dx.text()


def test_nonleaf_grad_read_is_named(capsys):
    G = nn.Linear(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with doctor(G=G) as doc:
            x_fake = G(torch.randn(3, 2))
            x_fake.sum().backward()
            _ = x_fake.grad  # grad-read
    d = next(d for d in doc.diagnoses if d.kind == "nonleaf_grad")
    assert "linear in G" in d.summary and d.facts["where"].line == line_of("grad-read")
    assert "retain_grad()" in d.text()


def test_suspicious_patterns_are_warned():
    torch.manual_seed(0)
    model1, model2 = nn.Linear(3, 2), nn.Linear(2, 1)
    shared = optim.SGD(itertools.chain(model1.parameters(), model2.parameters()), lr=0.1)
    x = torch.randn(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(model1=model1, model2=model2, shared=shared):
            model2(model1(x).detach()).sum().backward()
            shared.step()  # none-grads
            w = model1.weight
            y = (w * w).sum()
            w.data.mul_(2)  # data-mutation
            y.backward()
    messages = {w.lineno: str(w.message) for w in caught if issubclass(w.category, DoctorWarning)}
    assert "have no .grad" in messages[line_of("none-grads")] and "model1.weight" in messages[line_of("none-grads")]
    assert ".data.mul_" in messages[line_of("data-mutation")] and "model1.weight" in messages[line_of("data-mutation")]


def test_D_stepping_on_G_loss_gradients_is_warned():
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 1)
    opt_G, opt_D = optim.SGD(G.parameters(), lr=0.1), optim.SGD(D.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
            loss_G = F.softplus(-D(G(torch.randn(4, 2)))).mean()
            loss_G.backward()
            opt_D.step()  # d-on-g
            opt_G.step()
    hits = [w for w in caught if issubclass(w.category, DoctorWarning) and "trains both nets" in str(w.message)]
    assert hits and hits[0].lineno == line_of("d-on-g")
    assert "opt_D.step() and opt_G.step() both step on the gradients of the backward at" in str(hits[0].message)


class _Trainer:
    """Nets and optimizers held on an object, as a trainer class keeps them."""


def test_D_stepping_on_G_loss_gradients_is_warned_when_an_object_holds_the_nets():
    torch.manual_seed(0)
    t = _Trainer()
    t.G, t.D = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 2)), nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    t.opt_G, t.opt_D = optim.SGD(t.G.parameters(), lr=0.1), optim.SGD(t.D.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(t=t):
            loss_G = F.softplus(-t.D(t.G(torch.randn(4, 2)))).mean()
            loss_G.backward()
            t.opt_D.step()  # d-on-g-held
            t.opt_G.step()
    hits = [w for w in caught if issubclass(w.category, DoctorWarning) and "trains both nets" in str(w.message)]
    assert hits and hits[0].lineno == line_of("d-on-g-held")
    assert "t.opt_D.step() and t.opt_G.step() both step on the gradients" in str(hits[0].message)


def test_a_gan_s_discriminator_is_recognised_by_any_module_on_its_parameters_path():
    from gan_lessons.doctor.naming import looks_like_gan, net_of
    for name in ("D.0.weight", "netD.conv.weight", "t.D.0.weight", "self.discriminator.fc.bias", "critic.w"):
        assert looks_like_gan(name), name
    for name in ("G.0.weight", "t.G.0.weight", "model.decoder.weight", "dense.weight", "distance.weight",
                 "model_dec.weight", "dist_fn.bias"):
        assert not looks_like_gan(name), name
    for name in ("image_discriminator.fc.weight", "disA.0.weight", "dis.conv.bias", "model_d.0.weight",
                 "net_D.1.weight", "mpd.convs.0.weight"):
        assert looks_like_gan(name), name
    assert net_of(["t.D.0.weight", "t.D.0.bias", "t.D.2.weight"]) == "t.D"
    assert net_of(["D.weight", "D.bias"]) == "D" and net_of(["w"]) == "w"


def test_D_s_backward_into_G_cleared_before_G_s_step_is_information_not_a_warning(capsys):
    """The usual WGAN-GP loop: D's loss on a fake batch that is not detached, G's .grad cleared before G's own
    backward. Wasted work, not a wrong gradient: one information line, no DoctorWarning, and --strict would pass."""
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Linear(2, 1)
    opt_G, opt_D = optim.SGD(G.parameters(), lr=0.1), optim.SGD(D.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D) as doc:
            for _ in range(2):
                x_fake = G(torch.randn(4, 2))
                opt_D.zero_grad()
                (D(x_fake).mean() - D(torch.randn(4, 2)).mean()).backward()
                opt_D.step()  # wasted
                opt_G.zero_grad()
                (-D(G(torch.randn(4, 2))).mean()).backward()
                opt_G.step()
    assert not [w for w in caught if issubclass(w.category, DoctorWarning)]
    assert [d.kind for d in doc.diagnoses] == ["information"]
    err = capsys.readouterr().err
    assert err.count("autograd doctor (information, not a warning): the backward at line") == 1, err
    assert "went on from opt_D's parameters into G, whose gradients were cleared before opt_G.step()" in err


def test_doctor_changes_no_result_and_a_clean_step_raises_no_warning():
    def run(with_doctor):
        torch.manual_seed(0)
        G, D = Generator(), Discriminator()
        opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
        x_real, gen = torch.rand(8, 1, 28, 28) * 2 - 1, torch.Generator().manual_seed(1)

        def noise(n):
            return torch.randn(n, 64, generator=gen)

        with warnings.catch_warnings():
            warnings.simplefilter("error", DoctorWarning)
            if with_doctor:
                with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
                    for _ in range(2):
                        strategies.d_first_fresh_fake(G, D, opt_G, opt_D, x_real, noise)
            else:
                for _ in range(2):
                    strategies.d_first_fresh_fake(G, D, opt_G, opt_D, x_real, noise)
        return [p.detach().clone() for p in [*G.parameters(), *D.parameters()]]
    assert all(torch.equal(a, b) for a, b in zip(run(False), run(True)))


def test_other_exceptions_pass_through_untouched():
    error = ValueError("not an autograd problem")
    with pytest.raises(ValueError) as caught:
        with doctor():
            raise error
    assert caught.value is error and not hasattr(error, "diagnosis")


def test_ipython_extension_diagnoses_and_leaves_other_errors_alone(capsys):
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import get_ipython
    ip = get_ipython()
    ip.run_line_magic("load_ext", "gan_lessons")
    ip.run_cell("import torch\nfrom torch import nn\nG = nn.Linear(2, 2)\n")
    capsys.readouterr()
    ip.run_cell("G.weight += 1")
    out = capsys.readouterr()
    assert "a leaf Variable that requires grad" in out.out + out.err
    assert "autograd doctor: add_ on G.weight" in out.out + out.err
    assert "gan_lessons/doctor" not in out.out + out.err and "overrides.py" not in out.out + out.err   # no own frames
    ip.run_cell("raise KeyError('plain')")
    out = capsys.readouterr()
    assert "KeyError" in out.out + out.err and "autograd doctor" not in out.out + out.err
    ip.run_cell("x = torch.ones(2, requires_grad=True) * 2\ny = x.sum() + 1")
    assert ip.user_ns["y"].item() == 5.0


def test_failed_bookkeeping_leaves_a_note_and_the_code_runs(monkeypatch, capsys):
    def broken(*args, **kwargs):
        raise KeyError("bookkeeping bug")
    monkeypatch.setattr(Recorder, "before", broken)
    G = nn.Linear(2, 2)
    expected = G(torch.ones(1, 2)).sum().item()
    with pytest.raises(RuntimeError, match="leaf Variable"):
        with doctor(G=G) as doc:
            y = G(torch.ones(1, 2)).sum()          # runs normally despite the broken recorder
            G.weight += 1
    assert y.item() == expected
    assert any("bookkeeping failed" in note for note in doc.notes)
    assert "autograd doctor note:" in capsys.readouterr().err


@pytest.mark.parametrize("hook", ["pre_forward", "post_forward", "pre_step", "post_step"])
def test_a_failing_hook_leaves_a_note_and_training_runs_as_without_the_doctor(monkeypatch, hook):
    def train(watched):
        torch.manual_seed(0)
        net = nn.Linear(3, 1)
        opt = optim.SGD(net.parameters(), lr=0.1)
        with doctor(net=net, opt=opt) if watched else contextlib.nullcontext() as doc:
            for _ in range(3):
                opt.zero_grad()
                net(torch.ones(4, 3)).pow(2).mean().backward()
                opt.step()
        return net.weight.detach().clone(), doc
    plain, _ = train(False)

    def broken(*args, **kwargs):
        raise KeyError("bookkeeping bug")
    monkeypatch.setattr(Recorder, hook, broken)
    watched, doc = train(True)
    assert torch.equal(plain, watched)
    assert any(f"bookkeeping failed in {hook}" in note for note in doc.notes)
    assert not doc.recorder.paused and torch.overrides._get_current_function_mode() is None   # nothing left behind


def test_long_loops_keep_bounded_records():
    net, opt = nn.Linear(2, 1), None
    opt = optim.SGD(net.parameters(), lr=0.01)
    with warnings.catch_warnings(), doctor(net=net, opt=opt) as doc:
        warnings.simplefilter("ignore", DoctorWarning)      # the .data mutation is warned about each step
        for _ in range(120):
            opt.zero_grad()
            net(torch.randn(3, 2)).sum().backward()
            opt.step()
            net.weight.data.mul_(1.0)
        journal = doc.journal
        assert len(journal.backwards) == 50 and len(journal.steps) == 50 and 0 < len(doc.checks.data_aliases) <= 1001


@pytest.mark.parametrize("after_sigmoid, warns", [
    (lambda p: p.view(-1), True),             # the PyTorch DCGAN tutorial's idiom
    (lambda p: p.squeeze(), True),
    (lambda p: p.reshape(-1)[:4], True),
    (lambda p: p.view(-1) * 2, False),        # not only a reshape: the values changed, no longer a sigmoid's
])
def test_a_sigmoid_behind_reshapes_is_still_found(after_sigmoid, warns):
    torch.manual_seed(0)
    D = torch.nn.Linear(3, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(D=D):
            p = torch.sigmoid(D(torch.randn(4, 3)))
            F.binary_cross_entropy_with_logits(after_sigmoid(p), torch.ones(4))
            F.binary_cross_entropy_with_logits(D(torch.randn(4, 3)).view(-1), torch.ones(4))   # raw logits: quiet
    sigmoid = [w for w in caught if issubclass(w.category, DoctorWarning) and "sigmoid" in str(w.message)]
    assert len(sigmoid) == (1 if warns else 0)


def test_a_data_mutation_in_a_loop_warns_once_per_line():
    """.data clipping between D's forward and its backward, over every parameter, for three passes: the backward
    uses the clipped last weight (saved by its Linear for the first layer's gradient) with activations from the
    unclipped ones. One warning, not twelve (3 passes x 4 parameters)."""
    D = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(D=D):
            for _ in range(3):
                out = D(torch.randn(4, 3))
                for p in D.parameters():
                    p.data.clamp_(-0.01, 0.01)  # clip-too-early
                out.mean().backward()
    data = [w for w in caught if issubclass(w.category, DoctorWarning) and ".data" in str(w.message)]
    assert len(data) == 1 and data[0].lineno == line_of("clip-too-early") and "D.2.weight" in str(data[0].message)


def test_canonical_wgan_clipping_is_quiet():
    """WGAN's clipping after the step and before the next forward is correct: no graph saved the old weights."""
    D = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    opt_D = torch.optim.RMSprop(D.parameters(), lr=5e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with doctor(D=D, opt_D=opt_D):
            for _ in range(3):
                opt_D.zero_grad()
                D(torch.randn(4, 3)).mean().backward()
                opt_D.step()
                for p in D.parameters():
                    p.data.clamp_(-0.01, 0.01)


def test_gradients_left_over_from_G_loss_are_warned_at_D_step():
    """g_first without opt_D.zero_grad(): loss_G's backward fills D's .grad, opt_G steps on it, then loss_D's
    backward adds to it and opt_D steps on the sum."""
    torch.manual_seed(0)
    G, D = nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
    opt_G, opt_D = optim.SGD(G.parameters(), lr=0.1), optim.SGD(D.parameters(), lr=0.1)
    x_real = torch.randn(4, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor():
            opt_G.zero_grad()
            x_fake = G(torch.randn(4, 2))
            F.softplus(-D(x_fake)).mean().backward()  # loss-G
            opt_G.step()
            loss_D = (F.softplus(-D(x_real)) + F.softplus(D(x_fake.detach()))).mean()
            loss_D.backward()                          # no opt_D.zero_grad() before it
            opt_D.step()  # leftover
    hits = [w for w in caught if issubclass(w.category, DoctorWarning) and "adds up gradients" in str(w.message)]
    assert len(hits) == 1 and hits[0].lineno == line_of("leftover")
    assert f"line {line_of('loss-G')}" in str(hits[0].message) and "opt_D.step()" in str(hits[0].message)


def test_the_doctor_keeps_no_graph_alive():
    """A logging forward that is never backpropagated, and a graph kept by retain_graph=True, are freed as soon as
    the student drops them, as without the doctor (the doctor once held 20,000 nodes)."""
    import gc
    import weakref
    D = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 1))
    saved = []

    def pack(t):                  # keep what the graph saves as a detached alias, watched through a weak reference
        alias = t.detach()
        saved.append(weakref.ref(alias))
        return alias
    with doctor(D=D):
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            logged = D(torch.randn(32, 4))                 # never backpropagated
            kept = D(torch.randn(32, 4)).sum()
            kept.backward(retain_graph=True)               # keeps its saved tensors
        assert saved and all(r() is not None for r in saved)
        del logged, kept
        gc.collect()
        assert all(r() is None for r in saved), f"{sum(r() is not None for r in saved)} saved tensors still alive"


def test_embedding_with_padding_idx_leaves_no_bookkeeping_note(capsys):
    """nn.Embedding(padding_idx=0) fills a row through a view made under no_grad; reading that view's grad_fn
    raises inside torch. The doctor used to note "bookkeeping failed" and print it with the next, unrelated error."""
    with pytest.raises(RuntimeError, match="leaf Variable"):
        with doctor() as doc:
            emb = nn.Embedding(10, 4, padding_idx=0)
            emb(torch.tensor([[0, 1, 2]])).sum().backward()
            lin = nn.Linear(2, 2)
            lin.weight += 1
    assert doc.notes == [] and "autograd doctor note" not in capsys.readouterr().err


# --- gradient penalties: errors raised inside torch.autograd.grad, and the silent no-create_graph penalty --------
def gp_setup():
    torch.manual_seed(0)
    D = Discriminator()
    opt_D = optim.Adam(D.parameters(), lr=1e-4, betas=(0.0, 0.9))
    x_real, x_fake = torch.rand(4, 1, 28, 28) * 2 - 1, torch.rand(4, 1, 28, 28) * 2 - 1
    eps = torch.rand(4, 1, 1, 1)
    return D, opt_D, x_real, x_fake, (eps * x_real + (1 - eps) * x_fake).requires_grad_(True)


def test_version_error_inside_the_penalty_autograd_grad_is_diagnosed_like_backward():
    """The critic's forward on the interpolates runs, opt_D steps on the Wasserstein loss, and only then is the
    penalty's gradient taken: D's weights saved by that forward have changed."""
    D, opt_D, x_real, x_fake, x_hat = gp_setup()

    def block():
        out = D(x_hat)  # gp-forward
        opt_D.zero_grad()
        (D(x_fake).mean() - D(x_real).mean()).backward()
        opt_D.step()  # gp-step
        torch.autograd.grad(out, x_hat, torch.ones_like(out), create_graph=True)

    error, dx = diagnose(block, D=D, opt_D=opt_D)
    assert "modified by an inplace operation" in str(error) and dx.kind == "version"
    assert dx.facts["tensor"].startswith("D.net.7.weight.T [512, 1]")
    assert f"line {line_of('gp-forward')}" in dx.facts["saved by"] and "in D" in dx.facts["saved by"]
    assert dx.facts["modified by"].startswith(f"opt_D.step() at line {line_of('gp-step')}")
    assert "lesson 05" in dx.text()


def test_penalty_gradient_taken_twice_is_diagnosed_as_freed():
    """The gradient norm logged first (autograd.grad without create_graph frees the graph), then the penalty's
    gradient taken again from the same forward."""
    D, opt_D, x_real, x_fake, x_hat = gp_setup()

    def block():
        out = D(x_hat)
        logged, = torch.autograd.grad(out, x_hat, torch.ones_like(out))
        grad, = torch.autograd.grad(out, x_hat, torch.ones_like(out), create_graph=True)  # gp-twice

    error, dx = diagnose(block, D=D)
    assert "backward through the graph a second time" in str(error) and dx.kind == "freed"
    assert f"line {line_of('gp-twice')}" in dx.text() and "retain_graph=True" in dx.text()


def test_a_plain_second_backward_of_one_loss_gets_its_own_diagnosis():
    """y.backward(); y.backward(): no second loss shares anything, so the fixes for two losses (detach the shared
    tensor, a fresh forward) do not fit; the diagnosis names both calls and says to call backward once."""
    w = torch.ones(3, requires_grad=True)

    def block():
        y = (w * w).sum()
        y.backward()  # twice-first
        y.backward()  # twice-second

    error, dx = diagnose(block, w=w)
    assert "backward through the graph a second time" in str(error) and dx.kind == "freed"
    assert "differentiated twice" in dx.summary and "detach the shared tensor" not in dx.text()
    assert dx.facts["first backward"].startswith(f"line {line_of('twice-first')}")
    assert dx.facts["second backward"].startswith(f"line {line_of('twice-second')}")
    assert "once per loss" in dx.text()


def test_backward_after_autograd_grad_freed_the_graph_names_the_autograd_grad_line():
    D, opt_D, x_real, x_fake, x_hat = gp_setup()

    def block():
        out = D(x_hat)  # gp-shared
        grad, = torch.autograd.grad(out, x_hat, torch.ones_like(out))  # gp-frees
        loss_D = out.mean() - D(x_real).mean() + 10 * ((grad.flatten(1).norm(dim=1) - 1) ** 2).mean()
        loss_D.backward()  # gp-fails

    error, dx = diagnose(block, D=D)
    assert dx.kind == "freed" and dx.facts["freed by"].startswith(f"the backward at line {line_of('gp-frees')}")
    assert f"line {line_of('gp-shared')}" in dx.facts["shared part"] and "the forward of D" in dx.facts["shared part"]
    assert dx.facts["failing backward"].startswith(f"line {line_of('gp-fails')}")


def test_version_error_inside_jacobian_names_the_inplace_module():
    """torch.autograd.functional.jacobian of a function whose ReLU(inplace=True) overwrites what Tanh saved."""
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.ReLU(inplace=True))

    def block():
        torch.autograd.functional.jacobian(enc, torch.randn(3))  # jac-call

    error, dx = diagnose(block, enc=enc)
    assert dx.kind == "version" and "TanhBackward0" in dx.facts["saved by"]
    assert dx.facts["modified by"].startswith("relu(inplace=True) in enc.2")
    assert f"line {line_of('jac-call')}" in dx.facts["modified by"]


def test_interpolates_without_requires_grad_are_named():
    D, opt_D, x_real, x_fake, _ = gp_setup()

    def block():
        eps = torch.rand(4, 1, 1, 1)
        x_hat = eps * x_real + (1 - eps) * x_fake.detach()         # requires_grad_(True) forgotten
        out = D(x_hat)
        torch.autograd.grad(out, x_hat, torch.ones_like(out), create_graph=True)  # gp-noreq

    error, dx = diagnose(block, D=D)
    assert "One of the differentiated Tensors does not require grad" in str(error)
    assert dx.kind == "grad_input" and dx.facts["input"] == "`x_hat` [4, 1, 28, 28]"
    assert dx.facts["call"].startswith(f"line {line_of('gp-noreq')}")
    assert "x_hat.requires_grad_(True)" in dx.text() and "lesson 08" in dx.text()


def test_penalty_without_grad_outputs_is_diagnosed():
    D, opt_D, x_real, x_fake, x_hat = gp_setup()

    def block():
        out = D(x_hat)
        torch.autograd.grad(out, x_hat, create_graph=True)  # gp-nonscalar

    error, dx = diagnose(block, D=D)
    assert "grad can be implicitly created only for scalar outputs" in str(error)
    assert dx.kind == "nonscalar" and dx.facts["output"].startswith("`out` [4]")
    assert dx.facts["call"].startswith(f"line {line_of('gp-nonscalar')}")
    assert "grad_outputs=torch.ones_like(out)" in dx.text() and "lesson 08" in dx.text()


def penalty_step(D, opt_D, x_real, x_fake, x_hat, create_graph=True, in_loss=True):
    """One critic step of WGAN-GP, its penalty's gradient taken with or without create_graph."""
    out = D(x_hat)
    grad, = torch.autograd.grad(out, x_hat, torch.ones_like(out), create_graph=create_graph)  # gp-grad
    penalty = ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
    opt_D.zero_grad()
    loss_D = D(x_fake).mean() - D(x_real).mean()
    if in_loss:
        loss_D = loss_D + 10 * penalty
    loss_D.backward()  # gp-backward
    opt_D.step()
    return penalty.item()                               # logged


@pytest.mark.parametrize("create_graph, in_loss, warns", [
    (False, True, True),       # the bug: a constant added to loss_D
    (True, True, False),       # the fix
    (False, False, False),     # a gradient norm only logged, never part of a loss: right without create_graph
])
def test_a_penalty_without_create_graph_is_warned_once(create_graph, in_loss, warns):
    D, opt_D, x_real, x_fake, x_hat = gp_setup()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(D=D, opt_D=opt_D):
            for _ in range(3):
                penalty_step(D, opt_D, x_real, x_fake, x_hat, create_graph, in_loss)
    hits = [w for w in caught if issubclass(w.category, DoctorWarning)]
    assert len(hits) == (1 if warns else 0), [str(w.message) for w in hits]
    if warns:
        message = str(hits[0].message)
        assert hits[0].lineno == line_of("gp-grad") and hits[0].filename == __file__
        assert f"the penalty built from the gradient at {__file__}:{line_of('gp-grad')}" in message
        assert "is a constant, because torch.autograd.grad was called without create_graph=True" in message
        assert "trains nothing" in message and f"line {line_of('gp-backward')}" in message
        assert "fix: pass create_graph=True" in message


def adversarial_term_step(way):
    """G's step of an image-to-image GAN: an L1 term plus an adversarial term through D, written `way`."""
    torch.manual_seed(0)
    G, D = nn.Sequential(nn.Linear(4, 8), nn.Tanh()), nn.Sequential(nn.Linear(8, 8), nn.LeakyReLU(0.2),
                                                                    nn.Linear(8, 1))
    opt_G = optim.Adam(G.parameters())
    x, target = torch.randn(6, 4), torch.randn(6, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(G=G, D=D, opt_G=opt_G):
            for _ in range(2):
                fake = G(x)
                if way == "detached":
                    pred_fake = D(fake).detach()  # detached-term
                    adv = F.binary_cross_entropy_with_logits(pred_fake, torch.ones_like(pred_fake))
                    loss_G = 100 * F.l1_loss(fake, target) + adv  # term-added
                elif way in ("a view detached", "added in place", "stacked"):
                    pred_fake = D(fake).view(-1).detach() if way == "a view detached" else D(fake).detach()
                    adv = F.binary_cross_entropy_with_logits(pred_fake, torch.ones_like(pred_fake))
                    if way == "added in place":
                        loss_G = 100 * F.l1_loss(fake, target)
                        loss_G += adv
                    else:
                        loss_G = torch.stack([100 * F.l1_loss(fake, target), adv]).sum()
                elif way == "a target in a squared error":   # the detached score changes the gradient there
                    loss_G = (fake.mean() - D(fake).detach().mean()) ** 2 + F.l1_loss(fake, target)
                elif way == "relativistic":       # D's real scores detached: an offset inside the loss
                    pred_real, pred_fake = D(target).detach(), D(fake)
                    adv = F.binary_cross_entropy_with_logits(pred_fake - pred_real.mean(), torch.ones_like(pred_fake))
                    loss_G = 100 * F.l1_loss(fake, target) + adv
                else:                               # the score's mean detached and logged, not added
                    pred_fake = D(fake)
                    logged = pred_fake.detach().mean()
                    loss_G = 100 * F.l1_loss(fake, target) + F.softplus(-pred_fake).mean()
                    assert logged.requires_grad is False
                opt_G.zero_grad()
                loss_G.backward()  # term-backward
                opt_G.step()
    return [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]


def test_a_loss_term_made_from_a_net_s_detached_output_is_warned_once():
    said = adversarial_term_step("detached")
    assert len(said) == 1, said
    assert said[0].startswith(f"autograd doctor: a term added to this loss at line {line_of('term-added')}"), said
    assert f"is computed from D's output, detached at line {line_of('detached-term')}" in said[0], said
    assert "gives no gradient to the parameters it was computed from" in said[0], said
    assert f"backward: line {line_of('term-backward')}" in said[0] and "without .detach()" in said[0], said


@pytest.mark.parametrize("way", ["a view detached", "added in place", "stacked"])
def test_a_detached_term_is_found_behind_a_view_an_in_place_add_or_a_stack(way):
    said = adversarial_term_step(way)
    assert len(said) == 1 and "is computed from D's output, detached at line" in said[0], said


@pytest.mark.parametrize("way", ["relativistic", "logged", "a target in a squared error"])
def test_a_detached_output_used_as_an_offset_or_logged_is_not_warned(way):
    assert adversarial_term_step(way) == []


def g_step_through_d_on(way):
    """An image-to-image GAN's G step then D step; G's adversarial term written `way`."""
    torch.manual_seed(0)
    G, D = nn.Sequential(nn.Linear(4, 8), nn.Tanh()), nn.Sequential(nn.Linear(8, 8), nn.LeakyReLU(0.2),
                                                                    nn.Linear(8, 1))
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    x, target = torch.randn(6, 4), torch.randn(6, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
            for _ in range(2):
                fake = G(x)
                if way == "one loss for both":      # D's term on the detached fake in the same loss: D steps on it
                    loss = F.l1_loss(fake, target) + F.softplus(-D(fake)).mean() \
                        + F.softplus(D(fake.detach())).mean() + F.softplus(-D(target)).mean()
                    opt_G.zero_grad()
                    opt_D.zero_grad()
                    loss.backward()
                    opt_G.step()
                    opt_D.step()
                    continue
                for p in D.parameters():
                    p.requires_grad_(way != "D frozen")
                noisy = fake.detach() + 0.01 * torch.randn_like(fake) if way == "with noise" else fake.detach()  # cut
                d_fake = D(noisy)  # detached-input
                loss_G = F.mse_loss(d_fake, torch.ones_like(d_fake)) + 10 * F.l1_loss(fake, target)
                opt_G.zero_grad()
                loss_G.backward()  # detached-input-backward
                opt_G.step()
                for p in D.parameters():
                    p.requires_grad_(True)
                opt_D.zero_grad()
                loss_D = F.softplus(D(fake.detach())).mean() + F.softplus(-D(target)).mean()
                loss_D.backward()
                opt_D.step()  # D-step
    return [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]


def test_g_s_term_through_d_on_a_detached_fake_is_warned_at_d_s_step():
    said = g_step_through_d_on("D trained")
    assert len(said) == 1, said
    assert said[0].startswith(f"autograd doctor: the term that runs D at line {line_of('detached-input')} (`d_fake"
                              ), said
    assert f"on G's output detached at line {line_of('cut')} (`noisy = " in said[0], said
    assert "trained nothing: it gives G no gradient (opt_G.step() at line" in said[0], said
    assert "what it gave D was cleared before opt_D.step()" in said[0], said
    assert f"backward: line {line_of('detached-input-backward')}" in said[0], said
    assert "fix: run D on G's output itself in that loss, not on a detached copy" in said[0], said


def test_g_s_term_through_d_on_a_detached_fake_with_noise_added_is_warned_too():
    said = g_step_through_d_on("with noise")
    assert len(said) == 1 and "trained nothing: it gives G no gradient" in said[0], said


def test_g_s_term_through_a_frozen_d_on_a_detached_fake_is_a_constant_term():
    said = g_step_through_d_on("D frozen")
    assert len(said) == 1 and "is computed from D's output on G's output" in said[0], said
    assert "it is a constant to this backward" in said[0], said


def test_d_s_term_on_the_detached_fake_in_one_loss_both_nets_step_on_is_not_called_a_term_that_trained_nothing():
    """(The doctor warns about that loop for another reason: one loss steps both nets.)"""
    said = g_step_through_d_on("one loss for both")
    assert not any("trained nothing" in s or "constant" in s for s in said), said


def test_backward_of_a_constant_penalty_is_diagnosed():
    """The same bug, loud: the penalty backpropagated on its own raises, and the doctor names the autograd.grad."""
    D, opt_D, x_real, x_fake, x_hat = gp_setup()

    def block():
        out = D(x_hat)
        grad, = torch.autograd.grad(out, x_hat, torch.ones_like(out))  # gp-constant
        ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean().backward()

    error, dx = diagnose(block, D=D)
    assert "does not require grad and does not have a grad_fn" in str(error) and dx.kind == "constant"
    assert dx.facts["where"].line == line_of("gp-constant") and "create_graph=True" in dx.text()


def test_the_constant_tracking_is_idle_without_autograd_grad():
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D) as doc:
        strategies.d_first_fresh_fake(G, D, opt_G, opt_D, torch.rand(8, 1, 28, 28), lambda n: torch.randn(n, 64))
        assert doc.checks.constants == {} and doc.checks.mixed == {} and doc.checks.pending_grad is None
        logged = [torch.autograd.grad(D(torch.rand(2, 1, 28, 28).requires_grad_()).sum(), D.net[0].weight)[0]]
        # a gradient with respect to weights is followed too (a gradient-norm penalty is made from one), but
        # counts as a penalty only where, reduced to a number, it is added to a loss
        assert len(doc.checks.constants) == 1 and doc.checks.mixed == {}
        x = torch.rand(2, 1, 28, 28, requires_grad=True)
        grad, = torch.autograd.grad(D(x).sum(), x)
        norm = grad.norm()
        assert len(doc.checks.constants) == 3      # the weight gradient, the input gradient and its norm
        del grad, norm, logged
        assert len(doc.checks.constants) == 0      # forgotten as soon as they are freed


# --- torch.compile: the doctor steps aside while it traces, and still names what changed -------------------------
def test_a_version_error_through_a_compiled_module_names_the_parameter_the_step_and_the_compiled_call(capsys):
    """A compiled module's backward is one node whose saved tensors autograd does not show. The doctor finds the
    one parameter with the error's shape and version, the step that changed it, and the line that called the
    compiled module; torch's warning about global hooks (the doctor's own) is not shown."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    D = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opt_D = optim.SGD(D.parameters(), lr=0.1)
    compiled_D = torch.compile(D, backend="aot_eager")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError, match="modified by an inplace operation") as raised:
            with doctor(D=D, opt_D=opt_D):
                out = compiled_D(torch.randn(16, 4))  # compiled-call
                loss_D, loss_G = out.pow(2).mean(), -out.mean()
                opt_D.zero_grad()
                loss_D.backward(retain_graph=True)
                opt_D.step()  # compiled-step
                loss_G.backward()
    torch._dynamo.reset()
    d = raised.value.diagnosis
    assert d.facts["tensor"] == "D.2.weight [1, 8]", d.text()
    assert d.facts["modified by"].startswith(f"opt_D.step() at line {line_of('compiled-step')}"), d.text()
    assert d.facts["saved by"].startswith("CompiledFunctionBackward (compiled forward in compiled_D) at line "
                                          f"{line_of('compiled-call')}"), d.text()
    assert not [w for w in caught if "global hooks" in str(w.message)]


def test_an_error_raised_while_torch_compile_traces_is_diagnosed_without_an_error_of_the_doctor_s_own():
    """Dynamo traces with fake tensors: the doctor records nothing then, and the leaf error eager code would show
    comes out (wrapped by dynamo) with the leaf rule's diagnosis and no note of a failure of its own."""
    torch._dynamo.reset()
    model = nn.Linear(3, 1)

    @torch.compile(backend="aot_eager")
    def step(x):
        model.weight.add_(1)
        return model(x).sum()
    with pytest.raises(Exception, match="leaf Variable that requires grad") as raised:
        with doctor(model=model) as doc:
            step(torch.randn(2, 3)).backward()
    torch._dynamo.reset()
    assert raised.value.diagnosis.kind == "leaf_inplace"
    assert not doc.notes, doc.notes


class _CachedAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.cache_k = torch.zeros(2, 4)                 # kept across calls: not a parameter, not a buffer

    def forward(self, x):
        k = self.proj(x)
        out = (k * self.cache_k).sum()  # inside-the-module
        self.cache_k[0] = k.detach()[0]  # cache-write
        return out


def test_a_tensor_a_submodule_keeps_is_named_by_its_owner_and_saved_by_names_the_line_inside_the_module():
    """The cache of model.layers.1, not "a tensor [2, 4]"; the line in the module's forward that saved it, and
    the student's line that called the model."""
    model = nn.Sequential()
    model.layers = nn.ModuleList([_CachedAttention(), _CachedAttention()])
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as raised:
        with doctor(model=model):
            loss = sum(layer(torch.randn(2, 4)) for layer in model.layers)  # model-call
            loss.backward()
    d = raised.value.diagnosis
    assert d.facts["tensor"].split(" [")[0] in ("`model.layers.0.cache_k`", "`model.layers.1.cache_k`"), d.text()
    assert f"at line {line_of('inside-the-module')} " in d.facts["saved by"], d.text()
    assert f"called from line {line_of('model-call')} " in d.facts["saved by"], d.text()
    assert d.facts["modified by"].startswith("__setitem__ in model.layers.") and \
        f"line {line_of('cache-write')} " in d.facts["modified by"], d.text()


@pytest.mark.parametrize("how", ["frozen", "values"])
def test_a_loss_without_a_graph_says_why(how):
    """backward() on a loss with no grad_fn: every parameter frozen, or a loss rebuilt from numbers (.item()). The
    checkpoint form is tests/doctor/doctor_cases/34."""
    net = nn.Linear(3, 1)
    if how == "frozen":
        net.requires_grad_(False)
    with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn") as raised:
        with doctor(net=net):
            out = net(torch.randn(4, 3))
            loss = torch.tensor(out.pow(2).mean().item()) if how == "values" else out.pow(2).mean()
            loss.backward()
    d = raised.value.diagnosis
    assert d.kind == "no_graph"
    assert ("every parameter the doctor knows of is frozen" if how == "frozen" else ".item()") in d.summary, d.text()
    assert d.summary.startswith("`loss` has no graph"), d.text()


def test_a_write_a_library_call_makes_into_its_argument_is_named_and_an_earlier_step_is_not_blamed():
    """nn.Embedding(max_norm=...) renormalises its weight in place inside F.embedding, a write the call makes
    into a tensor it is given (PyTorch's Embedding docs warn about it). An optimizer step over that weight ran before
    the forward that saved it, so the step changed nothing that forward saved: the renormalisation is named."""
    torch.manual_seed(0)
    embedding = nn.Embedding(10, 3, max_norm=1.0)
    W = torch.randn(2, 3, requires_grad=True)
    opt = optim.SGD([*embedding.parameters(), W], lr=0.1)
    embedding.weight.grad = torch.ones_like(embedding.weight)
    with pytest.raises(RuntimeError, match="modified by an inplace operation") as raised:
        with doctor(embedding=embedding, W=W, opt=opt):
            opt.step()
            a = embedding.weight @ W.t()
            b = embedding(torch.tensor([1, 2])) @ W.t()  # renorm
            (a.unsqueeze(0) + b.unsqueeze(1)).sigmoid().prod().backward()
    d = raised.value.diagnosis
    assert d.facts["tensor"] == "embedding.weight [10, 3]", d.text()
    assert d.facts["modified by"].startswith("embedding (writing in place into a tensor it was given) in embedding "
                                             f"at line {line_of('renorm')} "), d.text()


def test_a_loss_from_plain_tensors_with_no_module_is_not_called_frozen():
    """No parameter at all under the doctor: the loss is not said to come from frozen parameters."""
    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="does not require grad") as raised:
        with doctor():
            loss = (x * 2).sum()
            loss.backward()
    assert "frozen" not in raised.value.diagnosis.summary, raised.value.diagnosis.text()


def test_parameters_another_optimizer_trains_or_no_forward_uses_are_not_warned_about():
    """InfoGAN's shape: D's optimizer holds D's heads, which only the info loss reaches, through its own optimizer;
    and SGAN's: an embedding G owns but never calls. Neither is a training bug; a head cut off by detach still is."""
    torch.manual_seed(0)
    body, adv, aux = nn.Linear(4, 8), nn.Linear(8, 1), nn.Linear(8, 2)
    unused = nn.Embedding(3, 4)
    G = nn.ModuleDict({"net": nn.Linear(4, 4), "label_emb": unused})
    opt_D = optim.Adam([*body.parameters(), *adv.parameters(), *aux.parameters()])
    opt_info = optim.Adam([*G["net"].parameters(), *aux.parameters(), *body.parameters()])
    opt_G = optim.Adam(G.parameters())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(body=body, adv=adv, aux=aux, G=G, opt_D=opt_D, opt_info=opt_info, opt_G=opt_G):
            for _ in range(2):
                x_fake = G["net"](torch.randn(5, 4))
                opt_G.zero_grad()
                adv(body(x_fake)).mean().backward()
                opt_G.step()                             # label_emb: no .grad, never called
                opt_D.zero_grad()
                adv(body(x_fake.detach())).mean().backward()
                opt_D.step()                             # aux: no .grad, the info optimizer's
                opt_info.zero_grad()
                aux(body(G["net"](torch.randn(5, 4)))).pow(2).mean().backward()
                opt_info.step()
            opt_D.zero_grad()
            h = body(x_fake.detach())
            (adv(h).detach().mean() + h.mean()).backward()   # adv, D's alone, cut off from the loss
            opt_D.step()  # cut-off
    messages = [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]
    assert [m for m in messages if "have no .grad" in m] == [next(m for m in messages if "have no .grad" in m)]
    assert "adv.weight" in next(m for m in messages if "have no .grad" in m)
    assert all("label_emb" not in m and "aux." not in m for m in messages), messages


def test_the_doctor_never_names_a_tensor_through_itself():
    """`with doctor() as doc:` puts the doctor in the namespace it reads names first; its records hold the modules
    running when an error is raised inside a forward. A model that lives in another namespace (a script's globals,
    here exec's) must still be named as the student named it, not through the doctor (`doc.stack[0].1.w`)."""
    source = ("import torch\nfrom torch import nn\n"
              "class Scaled(nn.Module):\n"
              "    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.ones(2))\n"
              "    def forward(self, x):\n        self.w.mul_(2)\n        return x * self.w\n"
              "model = nn.Sequential(nn.Linear(2, 2), Scaled())\n"
              "model(torch.ones(1, 2))\n")
    with pytest.raises(RuntimeError, match="leaf Variable") as raised:
        with doctor() as doc:
            exec(compile(source, "script.py", "exec"), {"__name__": "script"})
    text = raised.value.diagnosis.text()
    assert "model.1.w" in text and "doc." not in text, text
    assert doc.notes == []


# --- writes the doctor cannot see: it says why, as far as the evidence tells ----------------------------------------
def test_a_write_from_another_thread_is_said_to_be_unseen_and_why():
    """The message names the threads beside the doctor's, those started inside the block first: three idle threads
    that ran before it (as a test run's or a kernel's own do) do not push the writer out of the three it names."""
    import threading
    written, done = threading.Event(), threading.Event()
    idle = [threading.Thread(target=done.wait, name=f"idle-{k}") for k in range(3)]
    for thread in idle:
        thread.start()
    workers = []

    def block():
        x = torch.ones(2, 3, requires_grad=True)
        y = torch.exp(x)
        workers.append(threading.Thread(target=lambda: (y.add_(1), written.set(), done.wait()), name="refresher"))
        workers[0].start()
        written.wait()
        y.sum().backward()
    try:
        error, dx = diagnose(block)       # the worker still runs while the doctor diagnoses
    finally:
        done.set()
        for thread in workers + idle:
            thread.join()
    assert dx.kind == "version" and dx.summary.startswith("`y` changed in place")     # a node's own output, named
    said = dx.facts["modified by"]
    assert "did not see" in said and "other threads run beside the one that entered the doctor (" in said
    assert said.split("doctor (")[1].startswith("refresher")


def test_a_graph_made_before_the_block_is_said_to_be_why_the_write_was_not_seen():
    x = torch.ones(2, 3, requires_grad=True)
    y = torch.exp(x)
    y.add_(1)

    def block():
        y.sum().backward()
    error, dx = diagnose(block)
    assert "the forward that saved the tensor ran before the doctor began watching" in dx.facts["modified by"]


def test_a_parameter_written_by_an_op_gets_the_fixes_of_order_and_freezing_not_clone():
    student, teacher = nn.Linear(3, 2), nn.Linear(3, 2)

    def block():
        x = torch.ones(4, 3, requires_grad=True)     # (a weight is saved for the gradient of its input)
        loss = (student(x) - teacher(x)).pow(2).sum()
        teacher.load_state_dict(student.state_dict())
        loss.backward()
    error, dx = diagnose(block, student=student, teacher=teacher)
    assert dx.facts["tensor"].startswith("teacher.weight") and dx.facts["modified by"].startswith("copy_ at line")
    fixes = " ".join(fix for fix, _ in dx.fixes)
    assert "after the backward" in fixes and "requires_grad_(False)" in fixes and "clone()" not in fixes


def test_an_optimizer_s_state_a_graph_saved_is_named_and_its_step_is_the_modifier():
    torch.manual_seed(0)
    net = nn.Linear(4, 1)
    opt = optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(8, 4)).pow(2).mean().backward()
    opt.step()

    def block():
        opt.zero_grad()
        precond = opt.state[net.weight]["exp_avg_sq"]
        loss = net(torch.randn(8, 4)).pow(2).mean() + (net.weight * precond).sum()   # mul saves the state
        loss.backward(retain_graph=True)
        opt.step()                                                                   # state-step
        loss.backward()
    error, dx = diagnose(block, net=net, opt=opt)
    assert dx.facts["tensor"] == "`opt.state[net.weight].exp_avg_sq` [1, 4]"
    assert dx.facts["modified by"].startswith(f"opt.step() at line {line_of('state-step')} ")
    assert [fix for fix, _ in dx.fixes][0].startswith("read a copy of the optimizer's state")


def test_a_leaf_written_inside_a_custom_functions_backward_is_placed_there():
    class Recompute(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.exp()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            x = x.detach().requires_grad_()
            with torch.enable_grad():
                x.mul_(2)  # written-in-backward
                y = x.exp()
            return torch.autograd.grad(y, x, g)[0]

    a = torch.randn(3, requires_grad=True)
    error, dx = diagnose(lambda: Recompute.apply(a * 1).sum().backward(), a=a)
    assert dx.kind == "leaf_inplace" and dx.summary.startswith("mul_ inside the backward of Recompute")
    assert dx.facts["where"].line == line_of("written-in-backward")
    assert "checkpoint" not in dx.text() and "out of place" in dx.text()


@pytest.mark.parametrize("step", [True, False])
def test_retain_graph_is_a_fix_for_two_losses_only_when_no_step_changed_the_shared_weights(step):
    """With D's step between the two backwards, retain_graph=True gives the version error (checked here), so it is
    named only as the wrong fix; without the step it is a fix, and it works."""
    def run(retain=False):
        torch.manual_seed(0)
        D = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
        opt = optim.SGD(D.parameters(), lr=0.1)
        pred = D(torch.randn(4, 3))
        pred.mean().backward(retain_graph=retain)
        if step:
            opt.step()  # step-between
        (pred ** 2).mean().backward()
        return D, opt
    error, dx = diagnose(run)
    fixes = [fix for fix, _ in dx.fixes]
    assert dx.kind == "freed" and ("stepped between" in dx.facts) == step
    assert any("retain_graph=True" in fix for fix in fixes) != step, dx.text()
    if step:
        assert dx.facts["stepped between"] == (f"opt.step() at line {line_of('step-between')} (`opt.step()  # step-between`), "
                                               "over weights of D that this graph saved")
        assert fixes[0].startswith("recompute")
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            run(retain=True)
    else:
        run(retain=True)


def test_the_write_into_a_saved_output_is_named_not_a_later_one_of_the_same_shape():
    """A helper that writes in place, called on the output tanh saved and then on plain data of the same shape:
    both end at version 1; the write into what tanh made is the one named."""
    w = torch.randn(3, requires_grad=True)

    def center(batch):
        batch -= 1.0  # center-line

    def block():
        y = torch.tanh(w * 2)
        xc = torch.zeros(3)
        center(y)
        center(xc)
        y.sum().backward()
    error, dx = diagnose(block, w=w)
    assert dx.kind == "version" and dx.facts["tensor"] == "`y` [3]", dx.text()
    assert dx.facts["modified by"].startswith(f"sub_ at line {line_of('center-line')}")


def test_the_write_into_what_the_saving_node_took_in_is_named_not_another_of_the_same_version():
    """A block called twice on one input writes into it (`seqs *= mask`), and into its own output (`out *= mask`),
    which also reaches version 2: the write into the LayerNorm's saved input is the one named."""
    ln1, ln2, lin = nn.LayerNorm(4), nn.LayerNorm(4), nn.Linear(4, 4)

    def block(seqs, mask, ln):
        seqs *= mask  # input-write
        out = lin(ln(seqs)) + 0
        out += 1
        out *= mask  # output-write
        return out

    def run():
        mask = (torch.rand(3, 4) > 0.3).float()
        x = lin(torch.randn(3, 4)) * 1.0
        mu, logvar = block(x, mask, ln1), block(x, mask, ln2)
        (mu.sum() + logvar.sum()).backward()
    error, dx = diagnose(run, ln1=ln1, ln2=ln2, lin=lin)
    assert dx.facts["modified by"].startswith(f"mul_ at line {line_of('input-write')}"), dx.text()


def warned_in_two_passes(step):
    """The doctor's warnings on two passes of step(G, D, opt_G, opt_D) over a small G and D."""
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 2))
    D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
            for _ in range(2):
                step(G, D, opt_G, opt_D)
    return [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]


def test_d_stepping_on_g_s_leftover_gradient_is_warned_when_one_line_steps_both_in_a_loop():
    """Lightning's old loop over optimizers: one `loss.backward()` and one `optimizer.step()` line for G and D, and
    zero_grad after the step: D's step adds the G loss's gradient (already stepped by opt_G) to its own."""
    def step(G, D, opt_G, opt_D):
        for k, optimizer in enumerate([opt_G, opt_D]):
            fake = G(torch.randn(8, 4))
            loss = D(fake).mean() if k == 0 else D(torch.randn(8, 2)).mean() - D(fake.detach()).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    said = warned_in_two_passes(step)
    assert any("opt_D.step() adds up gradients from two losses" in s for s in said), said


def test_d_s_loss_in_two_backwards_is_told_to_clear_once_before_the_first_of_them():
    """The DCGAN tutorial's D step (a backward on the real batch, one on the fake) with D's zero_grad missing: the
    fix names the first of D's two backwards, where clearing before the second would lose the real batch's."""
    def step(G, D, opt_G, opt_D):
        fake = G(torch.randn(8, 4))
        D(torch.randn(8, 2)).mean().neg().backward()  # first-D-backward
        D(fake.detach()).mean().backward()
        opt_D.step()
        opt_G.zero_grad()
        D(fake).mean().neg().backward()
        opt_G.step()
    said = warned_in_two_passes(step)
    two = [s for s in said if "opt_D.step() adds up gradients from two losses" in s]
    assert two and f"before the first backward of its own loss (the one at line {line_of('first-D-backward')}" \
        in two[0], said


def test_one_loss_meant_for_an_encoder_and_a_decoder_is_not_called_one_net_stepping_on_the_others():
    """Two losses that both train an encoder and a decoder, each net stepped once on their sum (no GAN): no warning;
    the same order with a D and a G named so is warned (a D stepping on what G's loss left)."""
    def run(names):
        torch.manual_seed(0)
        nets = {names[0]: nn.Linear(4, 4), names[1]: nn.Linear(4, 1)}
        opts = {f"opt_{n}": optim.Adam(m.parameters(), lr=1e-3) for n, m in nets.items()}
        first, second = (opts[f"opt_{n}"] for n in names)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with doctor(**nets, **opts):
                for _ in range(2):
                    first.zero_grad()
                    second.zero_grad()
                    out = nets[names[1]](nets[names[0]](torch.randn(3, 4)))
                    out.pow(2).mean().backward(retain_graph=True)
                    (out - 1).abs().mean().backward()
                    first.step()
                    second.step()
        return [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]
    assert not [s for s in run(("encoder", "decoder")) if "adds up gradients" in s]
    assert any("opt_D.step() adds up gradients from two losses" in s for s in run(("G", "D")))


def test_a_discriminator_whose_optimizer_lists_a_shared_trunk_first_is_still_seen_as_one():
    """InfoGAN: D's optimizer holds the shared trunk FE first, then D's head; G's loss through FE and D, stepped by
    both optimizers, is warned whatever the order of the groups."""
    torch.manual_seed(0)
    G, FE, D = nn.Linear(2, 4), nn.Linear(4, 4), nn.Linear(4, 1)
    opt_D = optim.Adam([{"params": FE.parameters()}, {"params": D.parameters()}], lr=1e-3)
    opt_G = optim.Adam(G.parameters(), lr=1e-3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(G=G, FE=FE, D=D, opt_D=opt_D, opt_G=opt_G):
            for _ in range(2):
                opt_D.zero_grad()
                opt_G.zero_grad()
                D(FE(G(torch.randn(3, 2)))).mean().backward()
                opt_G.step()
                opt_D.step()
    said = [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]
    assert any("both step on the gradients" in s for s in said), said


def test_every_stale_saved_tensor_of_one_pattern_is_named_not_only_the_one_the_backward_met_first():
    """Three relu outputs, each written in place after relu saved it (a graph net's row updates): the diagnosis
    names the last, and lists the other two with the lines that saved and wrote them (cloning only the first named
    would meet the next one)."""
    torch.manual_seed(0)
    lins = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
    x, idx, h = torch.randn(5, 4), torch.tensor([0, 2]), torch.randn(2, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as raised, doctor(lins=lins):
            y = torch.relu(lins[0](x))
            y[idx] = y[idx] + h                                          # write 1
            y = torch.relu(lins[1](y))
            y[idx] = y[idx] + h                                          # write 2
            y = torch.relu(lins[2](y))
            y[idx] = y[idx] + h                                          # write 3
            y.sum().backward()
    d = raised.value.diagnosis
    assert "# write 3" in d.facts["modified by"], d.text()
    also = d.facts["also stale"]
    assert also.count("modified by __setitem__") == 2 and "# write 1" in also and "# write 2" in also, also


def test_more_than_four_other_stale_tensors_are_counted_not_dropped():
    """Six layers' weights stale after one step: four others are named, and the rest are counted."""
    torch.manual_seed(0)
    net = nn.Sequential(*[m for _ in range(7) for m in (nn.Linear(4, 4), nn.Tanh())])
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as raised, doctor(net=net):
            out = net(torch.randn(3, 4))
            out.mean().backward(retain_graph=True)
            opt.step()
            (out ** 2).mean().backward()
    also = raised.value.diagnosis.facts["also stale"]
    assert also.count(".weight.T") == 4 and also.endswith("; and 1 more"), also


def test_a_step_on_several_earlier_backwards_counts_passes_not_steps_and_names_each_line():
    """Two backwards a critic step (real half, fake half), no zero_grad: at the second step .grad holds two earlier
    passes of one earlier step; the warning says passes, and names both lines in the file's order."""
    torch.manual_seed(0)
    D = nn.Linear(4, 1)
    opt_D = optim.SGD(D.parameters(), lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(D=D, opt_D=opt_D):
            for _ in range(2):
                D(torch.randn(8, 4)).mean().backward()      # real half
                (-D(torch.randn(8, 4)).mean()).backward()   # fake half
                opt_D.step()
    said = [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]
    assert len(said) == 1 and "what 2 earlier backward passes gave it" in said[0], said
    assert said[0].index("# real half") < said[0].index("# fake half") and "earlier steps gave" not in said[0]


def test_a_net_is_named_by_its_own_optimizer_where_a_third_one_holds_both_nets(capsys):
    """InfoGAN's info optimizer over G's and D's parameters: G is still `gan.G`, not the object both nets are in."""
    class InfoGAN:
        def __init__(self):
            self.G, self.D = nn.Linear(2, 8), nn.Linear(8, 3)
            self.opt_G = optim.Adam(self.G.parameters(), 1e-3)
            self.opt_D = optim.Adam(self.D.parameters(), 1e-3)
            self.opt_info = optim.Adam(itertools.chain(self.G.parameters(), self.D.parameters()), 1e-3)
    torch.manual_seed(0)
    gan = InfoGAN()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with doctor(gan=gan):
            for _ in range(2):
                gan.opt_D.zero_grad()
                (F.softplus(-gan.D(torch.randn(4, 8))).mean() + F.softplus(gan.D(gan.G(torch.randn(4, 2)))).mean()
                 ).backward()
                gan.opt_D.step()
                gan.opt_G.zero_grad()
                F.softplus(-gan.D(gan.G(torch.randn(4, 2)))).mean().backward()
                gan.opt_G.step()
    err = capsys.readouterr().err
    assert "into gan.G, whose gradients were cleared" in err, err


def test_modules_made_inside_a_forward_are_told_as_that_net_and_each_loss_s_reading_line_is_named():
    """pix2pix's step with the detach taken off a torch.cat of the fake: the shared part is net_g's forward (not
    one `ReLU#k` per throwaway nn.ReLU() its blocks make), and the lines where each loss reads it are facts."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return nn.ReLU(True)(x + self.lin(x))         # a fresh module each call
    torch.manual_seed(0)
    net_g, net_d = nn.Sequential(nn.Linear(8, 8), Block(), Block()), nn.Linear(16, 1)
    opt_g, opt_d = optim.Adam(net_g.parameters()), optim.Adam(net_d.parameters())
    real_a, real_b = torch.randn(4, 8), torch.randn(4, 8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as raised, doctor(net_g=net_g, net_d=net_d):
            fake_b = net_g(real_a)
            opt_d.zero_grad()
            fake_ab = torch.cat((real_a, fake_b), 1)  # first read
            loss_d = net_d(fake_ab).mean() - net_d(torch.cat((real_a, real_b), 1)).mean()
            loss_d.backward()
            opt_d.step()
            opt_g.zero_grad()
            (-net_d(torch.cat((real_a, fake_b), 1)).mean()).backward()  # second read
    d = raised.value.diagnosis
    assert "the forward of net_g from" in d.facts["shared part"] and "ReLU" not in d.facts["shared part"], d.text()
    assert "# first read" in d.facts["first loss reads it at"], d.text()
    assert "# second read" in d.facts["second loss reads it at"], d.text()


def _amp_steps(unscale_first, enabled=True):
    """Two AMP steps (a GradScaler on the CPU) with a clip: after scaler.unscale_(opt), as PyTorch's recipe has
    it, or on the gradients the scale still multiplies. Returns w after the steps."""
    w = nn.Parameter(torch.ones(3))
    opt = optim.SGD([w], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", enabled=enabled)
    for _ in range(2):
        opt.zero_grad()
        scaler.scale((w * 2).sum()).backward()
        if unscale_first:
            scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_([w], 1.0)
        scaler.step(opt)
        scaler.update()
    return w.detach()


def test_a_clip_of_gradients_the_grad_scaler_still_multiplies_is_warned_and_the_recipe_is_not():
    originals = torch.amp.GradScaler.scale, torch.nn.utils.clip_grad_norm_
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor():
            scaled = _amp_steps(unscale_first=False)
    said = [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]
    assert len(said) == 1 and "clip_grad_norm_ clipped gradients that GradScaler's scale (65536) still" in said[0]
    assert "scaler.unscale_(opt) right before the clip" in said[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor():
            right = _amp_steps(unscale_first=True)
            unscaled_off = _amp_steps(unscale_first=False, enabled=False)     # a disabled scaler scales nothing
    assert not [w for w in caught if issubclass(w.category, DoctorWarning)]
    assert (1 - scaled).abs().max() < 1e-4 < (1 - right).abs().max()      # what the warning says: the step shrank
    assert torch.equal(unscaled_off, _amp_steps(unscale_first=False, enabled=False))
    assert (torch.amp.GradScaler.scale, torch.nn.utils.clip_grad_norm_) == originals     # the originals are back


def test_two_losses_that_are_slices_of_one_tensor_are_not_named_as_what_carries_it():
    """Both losses are slices of a tensor made inside a function (gone with its frame): the losses themselves are
    not offered as tensors to detach (a loss cannot be detached in the other, and a detached loss has no graph)."""
    w = torch.ones(3, requires_grad=True)

    def losses(x):
        h = (x * w).exp()
        return {"a": h[0], "b": h[1]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as raised, doctor():
            pair = losses(torch.ones(3))
            pair["a"].backward()
            pair["b"].backward()
    d = raised.value.diagnosis
    assert not any("pair" in fix for fix, _lesson in d.fixes), d.text()
    assert "reaches the second loss through" not in d.facts["shared part"], d.text()
    assert "h = (x * w).exp()" in d.facts["shared part"], d.text()


def test_a_parameter_kept_in_a_plain_variable_is_named_and_its_step_is_the_write():
    """A bare nn.Parameter `v` an optimizer holds (no module), saved as v.t() by a gradient taken with
    create_graph=True, then stepped: named `v.T`, changed by opt.step(), not by a write the doctor could not see."""
    torch.manual_seed(0)
    x, w, v = torch.randn(5, 3), nn.Parameter(torch.randn(3, 2)), nn.Parameter(torch.randn(2, 1))
    opt = optim.SGD([v], lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as raised, doctor():
            (g,) = torch.autograd.grad(((x @ w).tanh() @ v).pow(2).mean(), w, create_graph=True)
            v.grad = torch.ones_like(v)
            opt.step()
            g.pow(2).sum().backward()
    d = raised.value.diagnosis
    assert d.facts["tensor"] == "v.T [1, 2] (a transposed view)", d.text()
    assert str(d.facts["modified by"]).startswith("opt.step() at line"), d.text()


def test_a_missing_gradient_is_still_warned_after_zero_grad_and_a_backward_that_misses_a_net():
    """zero_grad() sets every .grad to None (no gradient set by hand): a backward that misses one of the
    optimizer's nets is still warned."""
    torch.manual_seed(0)
    a, b = nn.Linear(3, 1), nn.Linear(3, 1)
    opt = optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(a=a, b=b, opt=opt):
            for _ in range(2):
                opt.zero_grad()
                a(torch.randn(4, 3)).mean().backward()
                b(torch.randn(4, 3))
                opt.step()
    said = [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]
    assert any("2 of its 4 parameters have no .grad" in s for s in said), said


def test_the_wrong_optimizer_stepped_after_a_backward_is_named_in_the_warning_and_the_error():
    """opt_G.step() where opt_D.step() was meant: the warning says who holds what that backward reached, and the
    version error it leads to names the slip first; the same order with opt_D stepping too is not called one."""
    torch.manual_seed(0)
    G, D = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), nn.Sequential(nn.Linear(4, 1))
    opt_G, opt_D = optim.Adam(G.parameters(), 1e-3), optim.Adam(D.parameters(), 1e-3)
    bce = nn.BCEWithLogitsLoss()

    def block(slip):
        for _ in range(2):
            fake = G(torch.randn(16, 8))
            opt_D.zero_grad()
            loss_D = bce(D(torch.randn(16, 4)), torch.ones(16, 1)) + bce(D(fake.detach()), torch.zeros(16, 1))
            loss_D.backward()  # D BACKWARD
            opt_G.step()
            if not slip:
                opt_D.step()
            opt_G.zero_grad()
            bce(D(fake), torch.ones(16, 1)).backward()
            opt_G.step()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RuntimeError) as raised:
            with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
                block(slip=True)
    first = next(str(w.message) for w in caught if "have no .grad" in str(w.message))
    assert "all of them held by opt_D" in first and "opt_D.step()" in first.split("fix:")[1], first
    d = raised.value.diagnosis
    assert d.kind == "version" and f"line {line_of('D BACKWARD')}" in d.facts["stepped after"], d.text()
    assert d.fixes[0][0].startswith(f"step opt_D after the backward at line {line_of('D BACKWARD')}"), d.text()
    _, clean = diagnose(lambda: block(slip=False), G=G, D=D, opt_G=opt_G, opt_D=opt_D)
    assert "stepped after" not in clean.facts and not clean.fixes[0][0].startswith("step opt_D"), clean.text()


def test_a_spectral_norm_discriminator_stepping_on_g_s_loss_is_warned_like_any_other():
    """Spectral norm's D takes weight_orig / sigma into each conv, not the parameter itself: the backward of G's
    loss still reaches G behind D, so D stepping on that loss is warned about as without it."""
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
    D = nn.Sequential(nn.utils.spectral_norm(nn.Linear(4, 8, bias=False)), nn.LeakyReLU(0.2),
                      nn.utils.spectral_norm(nn.Linear(8, 1, bias=False)), nn.Sigmoid())
    opt_G, opt_D = optim.Adam(G.parameters()), optim.Adam(D.parameters())
    bce = nn.BCELoss()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(G=G, D=D, opt_G=opt_G, opt_D=opt_D):
            for _ in range(2):
                opt_G.zero_grad()
                opt_D.zero_grad()
                fake = G(torch.randn(6, 4))
                loss_D = bce(D(torch.randn(6, 4)), torch.ones(6, 1)) + bce(D(fake.detach()), torch.zeros(6, 1))
                loss_G = bce(D(fake), torch.ones(6, 1))
                loss_D.backward()
                loss_G.backward()
                opt_D.step()
                opt_G.step()
    text = "\n".join(str(w.message) for w in caught if issubclass(w.category, DoctorWarning))
    assert "opt_D.step() and opt_G.step() both step on the gradients of the backward at line" in text, text


class _ResBlock(nn.Module):
    """VQ-VAE-2's residual block: its first layer an in-place ReLU on the block's own input."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.ReLU(inplace=True), nn.Linear(4, 4))

    def forward(self, input):
        out = self.conv(input)
        out += input  # SKIP READ
        return out


def test_a_module_that_changes_the_input_its_caller_reads_again_is_warned_with_the_reading_line():
    torch.manual_seed(0)
    stem, block = nn.Linear(4, 4), _ResBlock()
    opt = optim.SGD([*stem.parameters(), *block.parameters()], lr=0.1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with doctor(stem=stem, block=block, opt=opt):
            for _ in range(2):
                opt.zero_grad()
                block(stem(torch.randn(3, 4))).pow(2).mean().backward()
                opt.step()
    said = [str(w.message) for w in caught if issubclass(w.category, DoctorWarning)]
    assert len(said) == 1 and said[0].startswith("autograd doctor: block.conv wrote in place into the input its "
                                                 "caller gave it (relu(inplace=True)"), said
    assert f"reads that input again at line {line_of('SKIP READ')}" in said[0] and "inplace=True" in said[0], said

"""Lesson 07's exercises: bring your own bug to the doctor (check_doctor_bug), and seed 000's step fixed with
the doctor's help (check_seed000_step)."""
import functools
import io
from contextlib import nullcontext, redirect_stderr

import torch
import torch.nn.functional as F
from torch import optim

from gan_lessons.exercises.feedback import stub_left
from gan_lessons.exercises.feedback import (AUTOGRAD_HINTS, compare_steps, known_mistake, matching, raised,
                                            recorded_steps, same_steps, unanswered, verdict)
from gan_lessons.lesson import headline, not_solved


# --- lesson 07: bring your own bug to the doctor -------------------------------------------------------------
DOCTOR_KINDS = {"leaf_inplace": "an in-place op on a leaf that requires grad (lesson 01)",
                "freed": "a backward through a freed graph (lesson 02)",
                "version": "a saved tensor changed in place (lesson 03)"}


def check_doctor_bug(buggy_loop, expected=None, quiet=False) -> bool:
    """Lesson 07. buggy_loop() is a short training loop with one of the lessons' errors in it. It runs under the
    doctor; the answer is right when it raises an error the doctor diagnoses (and, if `expected` is given, of
    that kind: "leaf_inplace", "freed" or "version"). The doctor's own report is printed unless quiet=True."""
    from gan_lessons.doctor import doctor
    name = "your bug"
    if unanswered(name, buggy_loop, "your buggy loop"):
        return False
    if expected is ...:
        not_solved(name, f"the diagnosis kind you expect ({', '.join(repr(k) for k in DOCTOR_KINDS)})",
                   where="expected = ...")
        return False
    if expected is not None and expected not in DOCTOR_KINDS:
        return verdict(name, [f"expected = {expected!r} is not a diagnosis kind the doctor gives for an error; "
                               f"pick one of {', '.join(repr(k) for k in DOCTOR_KINDS)}"], "")
    watch = doctor()
    stderr = io.StringIO()
    try:
        with redirect_stderr(stderr) if quiet else nullcontext():
            with watch:
                buggy_loop()
    except Exception as error:
        if stub_left(name, error, "your loop"):
            return False
        diagnosis = getattr(error, "diagnosis", None)
        if diagnosis is None:
            return verdict(name, [raised("your loop", error, []) + " The doctor diagnoses only the lessons' "
                                   "autograd errors: " + "; ".join(DOCTOR_KINDS.values())], "")
        if expected is not None and diagnosis.kind != expected:
            what = DOCTOR_KINDS.get(diagnosis.kind, diagnosis.summary)      # a kind beyond the three: its summary
            return verdict(name, [f"the doctor diagnosed {diagnosis.kind!r} ({what}), not "
                                   f"{expected!r} as you expected: read its report, and either change the bug "
                                   f"or your expectation"], "")
        return verdict(name, [], f"{type(error).__name__}, diagnosed by the doctor as {diagnosis.kind!r}: "
                                  f"{diagnosis.summary}")
    warned = [d.summary for d in watch.diagnoses]
    extra = f" (the doctor only warned: {headline(warned[0])}; that bug is silent)" if warned else ""
    return verdict(name, [f"your loop ran without an error, so there is nothing to diagnose{extra}. Hint: put in one "
                           f"of {'; '.join(DOCTOR_KINDS.values())}"], "")


# --- lesson 07: seed 000's step, fixed with the doctor's help ------------------------------------------------
def reference_seed000_step(g, d, g_optimizer, d_optimizer, x_real, z, d_scale=1.0, zero_d=True, zero_g=True,
                           g_first=False):
    """Seed 000's step, fixed: raw logits into the *_with_logits loss, D's fake term detached, D first, then G
    through the stepped D, one forward of g. d_scale=0.5 is the same step with D's loss the mean of its two terms
    (lesson 05's convention), which the checker accepts too. zero_d=False, zero_g=False and g_first=True are
    known wrong steps (a zero_grad left out; G's step before D's), which the checker names."""
    bce = F.binary_cross_entropy_with_logits
    real_label, fake_label = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)

    def g_step():
        g_loss = bce(d(gz), real_label)
        if zero_g:
            g_optimizer.zero_grad()
        g_loss.backward()
        g_optimizer.step()

    if g_first:
        g_step()
    d_loss = d_scale * (bce(d(x_real), real_label) + bce(d(gz.detach()), fake_label))
    if zero_d:
        d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    if not g_first:
        g_step()


SEED000_MISTAKES = [(wrong, hint) for wrong, hint in (
                        ({"zero_d": False}, "d's gradients at the second call are those of both calls added up: "
                                            "call d_optimizer.zero_grad() before d_loss.backward()"),
                        ({"zero_g": False}, "g's gradients at the second call are those of both calls added up: "
                                            "call g_optimizer.zero_grad() before g_loss.backward()"),
                        ({"g_first": True}, "G steps first, through D from before its step: seed 000's plan is D "
                                            "first, then G's loss through the D that has just stepped"))]
# What the doctor's report (its kind and words) means in this step, which the checker adds as a hint.
SEED000_DIAGNOSES = [
    ("freed", "first backward freed it", "D's loss went back through `gz` into g (its fake term is not detached), "
     "and its backward freed g's graph, which G's loss still needs: give D's fake term `gz.detach()`"),
    ("version", "d_optimizer.step()", "G's loss goes back through a forward of d from before d_optimizer.step(), "
     "which changed the weights that forward saved: after D's step, compute G's loss from a fresh `d(gz)`"),
    ("suspicious", "sigmoid is fed into", "binary_cross_entropy_with_logits applies the sigmoid itself: a sigmoid "
     "before it applies it twice; pass d's raw logits"),
    ("suspicious", "on into g", "D's fake term is not detached, so D's backward ran on through `gz` into g: give "
     "D's fake term `gz.detach()`"),
    ("suspicious", "g_optimizer.step() adds up gradients from two losses", "g's .grad still held what D's backward "
     "left there: call g_optimizer.zero_grad() right before g_loss.backward()"),
]


def _named(kind, text) -> str:
    """The hint for what the doctor said (its kind, and words in its text), or ""."""
    return next((f". Hint: {hint}" for k, words, hint in SEED000_DIAGNOSES if k == kind and words in text), "")


def _run_seed000(step, calls, watch=None):
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(0)
    g, d = Generator(), Discriminator()
    g_optimizer, d_optimizer = optim.Adam(g.parameters(), lr=1e-3), optim.Adam(d.parameters(), lr=1e-3)
    batches = [(torch.rand(8, 1, 28, 28) * 2 - 1, torch.randn(8, g.z_dim)) for _ in range(calls)]
    names = {p: f"g.{n}" for n, p in g.named_parameters()}
    names.update({p: f"d.{n}" for n, p in d.named_parameters()})
    with recorded_steps({"d_optimizer": d_optimizer, "g_optimizer": g_optimizer}, names) as records:
        for x_real, z in batches:
            if watch is None:
                step(g, d, g_optimizer, d_optimizer, x_real, z)
            else:
                with watch(g=g, d=d, g_optimizer=g_optimizer, d_optimizer=d_optimizer) as doc:
                    step(g, d, g_optimizer, d_optimizer, x_real, z)
                return doc.diagnoses
    return records


def _g_forwards(step) -> int:
    """How many forwards of g one call of step runs."""
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(0)
    g, d = Generator(), Discriminator()
    calls = []
    hook = g.register_forward_hook(lambda *_: calls.append(1))
    try:
        step(g, d, optim.Adam(g.parameters()), optim.Adam(d.parameters()), torch.rand(8, 1, 28, 28) * 2 - 1,
             torch.randn(8, g.z_dim))
    finally:
        hook.remove()
    return len(calls)


def check_seed000_step(fixed_step, calls=2) -> bool:
    """Lesson 07. fixed_step(g, d, g_optimizer, d_optimizer, x_real, z): seed 000's step (D first, then G, one
    forward of g) without its bugs. It runs once under the doctor, which must find nothing to raise or warn
    about, then `calls` times on seed 000's models, comparing every gradient at each optimizer step with the
    right ones."""
    import warnings

    from gan_lessons.doctor import doctor
    name = "fixed_step"
    if unanswered(name, fixed_step, "your fixed_step"):
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = _run_seed000(fixed_step, 1, watch=doctor)
    except Exception as error:
        if stub_left(name, error, "fixed_step"):
            return False
        diagnosis = getattr(error, "diagnosis", None)
        if diagnosis is None:
            return verdict(name, [raised("fixed_step", error, AUTOGRAD_HINTS)], "")
        said = " ".join([diagnosis.summary, diagnosis.facts.get("modified by", "")])
        return verdict(name, [f"fixed_step raised {type(error).__name__}, and the doctor says: "
                               f"{headline(diagnosis.summary)}{_named(diagnosis.kind, said)}"], "")
    warned = dict.fromkeys(f"the doctor still warns: {headline(d.summary)}{_named(d.kind, d.summary)}" for d in found
                           if d.kind == "suspicious")
    mine = _run_seed000(fixed_step, calls)
    run = functools.partial(_run_seed000, calls=calls)
    records = {scale: run(functools.partial(reference_seed000_step, d_scale=scale)) for scale in (1.0, 0.5)}
    # D's loss summed or averaged: the scale whose steps all match, else the one whose first D step does
    scale = next((s for s, r in records.items() if matching(mine, r, atol=1e-5)), None) or next(
        (s for s, r in records.items() if same_steps(mine["d_optimizer"][:1], r["d_optimizer"][:1], atol=1e-5)), 1.0)
    reference = records[scale]
    differ = compare_steps(mine, reference, "pass D raw logits, detach the fake in D's fake term, and give G's loss "
                           "D's output on the fake batch after D's step", atol=1e-5, limit=1 if warned else 3)
    mistakes = [(functools.partial(reference_seed000_step, d_scale=scale, **wrong), hint)
                for wrong, hint in SEED000_MISTAKES]
    mistake = known_mistake(mine, mistakes, run, atol=1e-5) if differ and not warned else None
    problems = list(warned) + ([mistake] if mistake else differ)
    forwards = _g_forwards(fixed_step)
    if not problems and forwards != 1:
        problems.append(f"g ran {forwards} forwards in one call; the step asks for one: make the fake batch once, "
                        f"`gz = g(z)`, and use `gz.detach()` in D's fake term and `gz` in G's loss")
    return verdict(name, problems, "the doctor finds nothing, and every parameter of g and d gets the right "
                                    "gradient at each step")

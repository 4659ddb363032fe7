"""Lesson 07's exercises: bring your own bug to the doctor (check_doctor_bug), and seed 000's step fixed with
the doctor's help (check_seed000_step)."""
import functools
import io
from contextlib import nullcontext, redirect_stderr

import torch
import torch.nn.functional as F
from torch import optim

from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, raised
from gan_lessons.exercises.steps import (
    Backwards,
    compare_steps,
    known_mistake,
    left_as_given,
    matching,
    parameter_names,
    recorded_steps,
    same_steps,
)
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_, _, language, speaking
from gan_lessons.lesson import headline, not_solved

# --- lesson 07: bring your own bug to the doctor -------------------------------------------------------------
DOCTOR_KINDS = {"leaf_inplace": N_("an in-place op on a leaf that requires grad (lesson 01)"),
                "freed": N_("a backward through a freed graph (lesson 02)"),
                "version": N_("a saved tensor changed in place (lesson 03)")}      # translated with _() where shown


def _kinds() -> str:
    """The three kinds the doctor diagnoses, described, in one line."""
    # TRANSLATORS: the separator between the items of a list written on one line
    return _("; ").join(_(kind) for kind in DOCTOR_KINDS.values())


def doctor_bug_checks(buggy_loop, expected=None, quiet=False) -> Found:
    """Lesson 07. buggy_loop() is a short training loop with one of the lessons' errors in it. It runs under the
    doctor; the answer is right when it raises an error the doctor diagnoses (and, if `expected` is given, of
    that kind: "leaf_inplace", "freed" or "version"). The doctor's own report is printed unless quiet=True."""
    from gan_lessons.doctor import doctor
    if expected is ...:
        not_solved(_("your bug"), _("the diagnosis kind you expect ({kinds})").format(
            kinds=', '.join(repr(k) for k in DOCTOR_KINDS)), where="expected = ...")
        return None
    if isinstance(expected, str):     # "Freed", " version ": the kind is what counts, as in check_diagnosis
        expected = expected.strip().lower()
    if expected is not None and (not isinstance(expected, str) or expected not in DOCTOR_KINDS):
        return [_("expected = {expected} is not a diagnosis kind the doctor gives for an error; pick one of "
                  "{kinds}").format(expected=repr(expected), kinds=', '.join(repr(k) for k in DOCTOR_KINDS))], {}
    watch = doctor()
    stderr = io.StringIO()
    try:
        with redirect_stderr(stderr) if quiet else nullcontext():
            with watch:
                buggy_loop()
    except Exception as error:
        if isinstance(error, NotImplementedError):
            raise Raised(_("your loop"), error) from error
        diagnosis = getattr(error, "diagnosis", None)
        if diagnosis is None:
            return [_("{problem} The doctor diagnoses only the lessons' autograd errors: {kinds}").format(
                problem=raised(_("your loop"), error, []), kinds=_kinds())], {}
        if expected is not None and diagnosis.kind != expected:
            # a kind beyond the three: its summary
            if diagnosis.kind not in DOCTOR_KINDS:
                return [_("the doctor diagnosed {kind} ({what}), not {expected} as you expected, and {kind} is not "
                          "one of the kinds this exercise asks for ({kinds}): read its report, and change the "
                          "bug").format(kind=repr(diagnosis.kind), what=diagnosis.summary, expected=repr(expected),
                                        kinds=', '.join(repr(k) for k in DOCTOR_KINDS))], {}
            return [_("the doctor diagnosed {kind} ({what}), not {expected} as you expected: read its report, and "
                      "either change the bug or your expectation").format(kind=repr(diagnosis.kind),
                                                                             what=_(DOCTOR_KINDS[diagnosis.kind]),
                                                                             expected=repr(expected))], {}
        return [], {"error": type(error).__name__, "kind": repr(diagnosis.kind), "summary": diagnosis.summary}
    warned = [d.summary for d in watch.diagnoses if d.kind != "information"]
    noted = [d.summary for d in watch.diagnoses if d.kind == "information"]
    if warned:
        return [_("your loop ran without an error, so there is nothing to diagnose (the doctor only warned: "
                  "{warning}; that bug is silent). Hint: put in one of {kinds}").format(
            warning=headline(warned[0]), kinds=_kinds())], {}
    if noted:
        return [_("your loop ran without an error, so there is nothing to diagnose (the doctor only noted wasted "
                  "work: {note}). Hint: put in one of {kinds}").format(note=headline(noted[0]), kinds=_kinds())], {}
    return [_("your loop ran without an error, so there is nothing to diagnose. Hint: put in one of {kinds}").format(
        kinds=_kinds())], {}


# --- lesson 07: seed 000's step, fixed with the doctor's help ------------------------------------------------
def reference_seed000_step(g, d, g_optimizer, d_optimizer, x_real, z):
    """Seed 000's step, fixed: raw logits into the *_with_logits loss, D's fake term detached, D first, then G
    through the stepped D, one forward of g. (The lesson's solution block is this code: tools/build_notebook.py
    checks it.)"""
    bce = F.binary_cross_entropy_with_logits         # takes raw logits: no sigmoid before it
    real_label, fake_label = torch.ones(len(x_real)), torch.zeros(len(z))
    gz = g(z)                                          # the one forward of g
    d_loss = bce(d(x_real), real_label) + bce(d(gz.detach()), fake_label)   # D's backward stops at gz
    d_optimizer.zero_grad()
    d_loss.backward()
    d_optimizer.step()
    g_loss = bce(d(gz), real_label)                    # a fresh forward of the d that has just stepped
    g_optimizer.zero_grad()
    g_loss.backward()
    g_optimizer.step()


# D's loss the mean of its two terms (lesson 05's convention), which the checker accepts too
D_LOSS_HALVED = {"bce(d(x_real), real_label) + bce(d(gz.detach()), fake_label)":
                 "0.5 * (bce(d(x_real), real_label) + bce(d(gz.detach()), fake_label))"}
G_STEP = ["g_loss = bce(d(gz), real_label)", "g_optimizer.zero_grad()", "g_loss.backward()", "g_optimizer.step()"]
D_NOT_EMPTIED = N_("d's gradient at d_optimizer.step() still holds the earlier .grad: backward adds into .grad, and "
                   "nothing emptied d's before d_loss.backward()")
G_NOT_EMPTIED = N_("g's gradient at g_optimizer.step() still holds the earlier .grad: backward adds into .grad, and "
                   "nothing emptied g's before g_loss.backward()")
SEED000_MISTAKES: list[tuple[dict, str]] = [
    ({"drop": "d_optimizer.zero_grad()"}, D_NOT_EMPTIED),
    ({"move": ("d_optimizer.zero_grad()", "at the end")}, D_NOT_EMPTIED),
    ({"drop": "g_optimizer.zero_grad()"}, G_NOT_EMPTIED),
    ({"move": ("g_optimizer.zero_grad()", "at the end")}, G_NOT_EMPTIED),
    ({"replace": {"bce(d(gz), real_label)": "-bce(d(gz), fake_label)"}},
     N_("g's loss is the saturating one, minus D's loss on the fakes (G minimises log(1 - D(G(z)))), where seed "
        "000's G loss scores the fakes against the real label (G maximises log D(G(z)))")),
    ({"move": (G_STEP, "d_loss = bce(d(x_real), real_label) + bce(d(gz.detach()), fake_label)")},
     N_("G steps first, through D from before its step: seed 000's plan is D first, then G's loss through the D "
        "that has just stepped"))]
# What the doctor's report (its kind and words) means in this step, which the checker adds as a hint. The words are
# matched against the doctor's English report.
SEED000_DIAGNOSES = [
    ("freed", "first backward freed it", N_("D's loss went back through `gz` into g (its fake term is not detached), "
                                            "and its backward freed g's graph, which G's loss still needs")),
    ("version", "d_optimizer.step()", N_("G's loss goes back through a forward of d from before d_optimizer.step(), "
                                         "which changed the weights that forward saved")),
    ("suspicious", "sigmoid is fed into", N_("binary_cross_entropy_with_logits applies the sigmoid itself, and a "
                                             "sigmoid before it applied it twice")),
    ("information", "went on from d_optimizer's parameters into g", N_("D's fake term is not detached, so D's "
                                                                       "backward ran on through `gz` into g, for "
                                                                       "gradients g_optimizer.zero_grad() throws "
                                                                       "away")),
    ("suspicious", "trains both nets", N_("d_optimizer and g_optimizer both stepped on the gradients of one backward: "
                                          "one of the two nets trained on the other's loss")),
    ("suspicious", "g_optimizer.step() adds up gradients from two losses", N_("g's .grad still held what D's "
                                                                              "backward left there when G's loss "
                                                                              "added its own")),
]


def _named(kind, text):
    """The hint for what the doctor said (its kind, and words in its text), translated, or None."""
    return next((_(hint) for k, words, hint in SEED000_DIAGNOSES if k == kind and words in text), None)


def _doctor_says(template, hinted, summary, kind, text, **values) -> str:
    """`template` filled with the doctor's summary (its first clause), or `hinted` with the hint that fits as well."""
    hint = _named(kind, text)
    if hint is None:
        return template.format(summary=headline(summary), **values)
    return hinted.format(summary=headline(summary), hint=hint, **values)


def _seed000_problem(calls):
    """Seed 000's g and d, an Adam for each, every .grad holding an earlier gradient (0.01), and a batch (x_real, z)
    for each call. Adam's eps is 1e-6, not 1e-8:
    its first step moves every weight by about lr whatever the size of its gradient, so a gradient entry of 1e-9
    (zero, written another way: softplus for the BCE, which differs by 1e-7) would turn into a whole step of either
    sign; with eps 1e-6 it moves by almost nothing, and step 2 compares the same weights."""
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(0)
    g, d = Generator(), Discriminator()
    g_optimizer = optim.Adam(g.parameters(), lr=1e-3, eps=1e-6)
    d_optimizer = optim.Adam(d.parameters(), lr=1e-3, eps=1e-6)
    batches = [(torch.rand(8, 1, 28, 28) * 2 - 1, torch.randn(8, g.z_dim)) for _ in range(calls)]
    for p in (*g.parameters(), *d.parameters()):
        p.grad = torch.full_like(p, 0.01)              # what an earlier step's backward left there
    return g, d, g_optimizer, d_optimizer, batches


def _run_seed000(step, calls, watch=None):
    g, d, g_optimizer, d_optimizer, batches = _seed000_problem(calls)
    names = parameter_names(g=g, d=d)
    with recorded_steps({"d_optimizer": d_optimizer, "g_optimizer": g_optimizer}, names) as records:
        for x_real, z in batches:
            if watch is None:
                step(g, d, g_optimizer, d_optimizer, x_real, z)
            else:
                with watch(g=g, d=d, g_optimizer=g_optimizer, d_optimizer=d_optimizer) as doc:
                    step(g, d, g_optimizer, d_optimizer, x_real, z)
                return doc.diagnoses
    return records


def _g_forwards(step) -> tuple[int, list]:
    """How many forwards of g one call of step runs, and what it changed in what it was given (left_as_given)."""
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(0)
    g, d = Generator(), Discriminator()
    x_real, z = torch.rand(8, 1, 28, 28) * 2 - 1, torch.randn(8, g.z_dim)
    calls = []
    hook = g.register_forward_hook(lambda *_: calls.append(1))
    try:
        with left_as_given("fixed_step", {"g": g, "d": d}, {"x_real": x_real, "z": z}) as side_effects:
            step(g, d, optim.Adam(g.parameters()), optim.Adam(d.parameters()), x_real, z)
    finally:
        hook.remove()
    return len(calls), side_effects


def seed000_checks(fixed_step, calls=2) -> Found:
    """Lesson 07. fixed_step(g, d, g_optimizer, d_optimizer, x_real, z): seed 000's step (D first, then G, one
    forward of g) without its bugs. It runs once under the doctor, which must find nothing to raise or warn
    about, then `calls` times on seed 000's models, comparing every gradient at each optimizer step with the
    right ones."""
    import warnings

    from gan_lessons.doctor import doctor
    def under_doctor():
        """(what the doctor found, None) or (None, the error fixed_step raised), from one run."""
        try:
            with warnings.catch_warnings(), redirect_stderr(io.StringIO()):     # read from its records
                warnings.simplefilter("ignore")
                return _run_seed000(fixed_step, 1, watch=doctor), None
        except Exception as error:
            return None, error

    found, error = under_doctor()
    # the hints match the doctor's English words: in another language, the same run again, in English
    if language() == "en":
        found_en, error_en = found, error
    else:
        with speaking("en"):
            found_en, error_en = under_doctor()
    if error is not None:
        diagnosis = getattr(error, "diagnosis", None)
        if diagnosis is None:
            raise Raised("fixed_step", error) from error
        english = getattr(error_en, "diagnosis", None) or diagnosis
        said = " ".join([english.summary, english.facts.get("modified by", "")])
        return [_doctor_says(_("fixed_step raised {error}, and the doctor says: {summary}"),
                             _("fixed_step raised {error}, and the doctor says: {summary}. Hint: {hint}"),
                             diagnosis.summary, diagnosis.kind, said, error=type(error).__name__)]
    said_kinds = {"suspicious": (_("the doctor still warns: {summary}"),
                                 _("the doctor still warns: {summary}. Hint: {hint}")),
                  "information": (_("the doctor still notes wasted work: {summary}"),
                                  _("the doctor still notes wasted work: {summary}. Hint: {hint}"))}
    english = [d.summary for d in (found_en or []) if d.kind in said_kinds]
    suspicious = [d for d in found if d.kind in said_kinds]
    if len(english) != len(suspicious):
        english = [d.summary for d in suspicious]
    warned = dict.fromkeys(_doctor_says(*said_kinds[d.kind], d.summary, d.kind, said)
                           for d, said in zip(suspicious, english))
    try:                                    # one call ran under the doctor; a later one may still raise
        mine = _run_seed000(fixed_step, calls)
        forwards, side_effects = _g_forwards(fixed_step)
    except Exception as failure:  # reported as feedback
        raise Raised("fixed_step", failure) from failure
    if side_effects:                        # told alone: a changed batch changes every gradient after it
        return list(warned) + side_effects
    run = functools.partial(_run_seed000, calls=calls)
    forms = {1.0: {}, 0.5: D_LOSS_HALVED}
    records = {scale: run(variant(reference_seed000_step, replace=form)) for scale, form in forms.items()}
    # D's loss summed or averaged: the scale whose steps all match, else the one whose first D step does
    scale = next((s for s, r in records.items() if matching(mine, r)), None) or next(
        (s for s, r in records.items() if same_steps(mine["d_optimizer"][:1], r["d_optimizer"][:1])), 1.0)
    reference = records[scale]
    differ = compare_steps(mine, reference, _("compared with the fixed step, the first optimizer step that differs "
                                              "is the one named above"))
    mistakes = [(variant(reference_seed000_step, **{**edit, "replace": {**forms[scale], **edit.get("replace", {})}}),
                 hint) for edit, hint in SEED000_MISTAKES]
    mistake = known_mistake(mine, mistakes, run) if differ and not warned else None
    problems = list(warned) + ([_(mistake)] if mistake else differ)
    if not problems and forwards != 1:
        problems.append(_("g ran {forwards} forwards in one call; the step asks for one").format(
            forwards=forwards))
    if not problems:
        with Backwards() as backwards:
            _run_seed000(fixed_step, calls)
        if backwards.needless_retains():
            problems.append(_("the gradients are right, but {count} backward() call(s) in {calls} calls of your step "
                              "kept their graph (retain_graph=True) though no later backward went through any of it: "
                              "every saved tensor of that graph stayed alive for nothing").format(
                count=backwards.needless_retains(), calls=calls))
    return problems


def _seed000_calls(calls=2):
    g, d, g_optimizer, d_optimizer, batches = _seed000_problem(calls)
    return [(g, d, g_optimizer, d_optimizer, x_real, z) for x_real, z in batches], [g, d]


SEED000_STEP = Exercise("07", "fixed_step", reference_seed000_step, seed000_checks, _seed000_calls,
                        hints=AUTOGRAD_HINTS, what=N_("your fixed_step"), forbids=("retain_graph=True",), success=N_(
                            "the doctor finds nothing, every parameter of g and d gets the right gradient at each "
                            "step, and no graph is kept for nothing"))
DOCTOR_BUG = Exercise("07", "buggy_loop", None, doctor_bug_checks, None, label=N_("your bug"),
                      what=N_("your buggy loop"), success=N_("{error}, diagnosed by the doctor as {kind}: {summary}"))
check_seed000_step = SEED000_STEP.check
check_doctor_bug = DOCTOR_BUG.check

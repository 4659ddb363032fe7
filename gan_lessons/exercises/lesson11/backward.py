"""Lesson 11, step 2: backward, and freeing what it used; checked on programs run on torch and on the student's
engine."""
import re

import torch

from gan_lessons.engine import Value
from gan_lessons.exercises.exercise import Exercise, Found
from gan_lessons.exercises.lesson11.cases import (
    counts,
    first_of,
    generic,
    programs,
    run,
    run_all,
    said_of,
    shown_program,
)
from gan_lessons.i18n import N_, _
from gan_lessons.lesson import rounded

TWO_USES = "a = leaf([3], requires_grad=True)\ny = a.exp()\nloss = (y + y).sum()\nloss.backward()"
NOTHING_SAVED = "a = leaf([3], requires_grad=True)\nloss = (a + 1.0).sum()\nloss.backward()"
SHARED = "a = leaf([3], requires_grad=True)\nb = leaf([3], requires_grad=True)\nloss = (a + b).sum()\nloss.backward()"

# TRANSLATORS: the name of lesson 11's step 2, as its feedback lines show it ("✓ freeing: ...")
FREEING_NAME = N_("freeing")


def _one_backward_problem(engine):
    """Probes run with one backward call each, where torch raises nothing: a node that saved nothing taken for a
    freed one, a node run once per use (no topological order). The line that says which, or None."""
    if engine is None:
        return None
    if run(NOTHING_SAVED, engine).kind == "second time":
        return _("your backward raised \"Trying to backward through the graph a second time\" within the first and "
                 "only backward call of {program}, whose nodes saved nothing: a node that had saved nothing was "
                 "taken for a freed one").format(program=shown_program(NOTHING_SAVED))
    got = run(TWO_USES, engine)
    if got.kind == "second time" and got.call == 1:
        return _("your backward raised \"Trying to backward through the graph a second time\" within the first and "
                 "only backward call of {program}, where y is used twice: within one backward, what a node saved "
                 "was gone before that node's backward ran").format(program=shown_program(TWO_USES))
    return None


def _shared_gradient(engine):
    """`(a + b).sum()` with two leaves, backward twice: a + b sends one tensor to both operands, so a leaf's .grad
    that keeps that tensor and is then added to in place changes the other leaf's too. The line that says so."""
    if engine is None:
        return None
    program = SHARED + "\nloss.backward()"
    want, got = run(program, torch), run(program, engine)
    if got.kind is None and not torch.allclose(got.grads["a"], want.grads["a"]):
        a, b = got.grads["a"], got.grads["b"]
        replaced = torch.allclose(a, want.grads["a"] / 2)          # the second backward replaced .grad: said below
        if a.data_ptr() == b.data_ptr() and not replaced:
            return _("after two backward calls on {program}, a.grad is {mine} where torch's is {theirs}, and a.grad "
                     "and b.grad are one tensor: the gradient a sum sends to both operands is one tensor, a leaf kept "
                     "it as its .grad, and adding the next backward's gradient to it in place changed both "
                     "leaves").format(program=shown_program(program), mine=rounded(a),
                                                                    theirs=rounded(want.grads["a"]))
    return None


def freeing_problems(differences, engine=None):
    problems = [p for p in (_shared_gradient(engine),) if p]
    if problems:                # said: the gradients it makes differ, and no other reading of them is needed
        differences = [d for d in differences if not (d["torch"].kind is None and d["engine"].kind is None)]
    twice = _one_backward_problem(engine)
    if twice:
        problems.append(twice)
        differences = [d for d in differences if not (d["engine"].kind == "second time" and d["torch"].kind is None)]
    other = first_of(differences, lambda d: d["engine"].kind == "other")
    if other:
        if other["torch"].kind == "second time":
            problems.append(_("your engine raised {yours} on {program}, where the saved values are gone and torch "
                              "raises \"Trying to backward through the graph a second time ...\"").format(yours=said_of(other['engine']), program=shown_program(other['program'])))
        else:
            problems.append(_("your engine raised {yours} on {program}").format(yours=said_of(other['engine']),
                                                                                program=shown_program(other['program'])))
    ran = first_of(differences, lambda d: d["torch"].kind == "second time" and d["engine"].kind is None)
    if ran:
        problems.append(_("a second backward ran without an error on {program}, where torch raises \"Trying to "
                          "backward through the graph a second time\"").format(
            program=shown_program(ran['program'])))
    retained = first_of(differences, lambda d: d["kind"].endswith("retained") and d["engine"].kind == "second time"
                      and d["engine"].call == 2)
    if retained:
        problems.append(_("retain_graph=True did not keep the saved values: the second backward raised on "
                          "{program}").format(
            program=shown_program(retained['program'])))
    empty = first_of(differences, lambda d: d["torch"].kind is None and d["engine"].kind == "second time"
                   and not d["kind"].endswith("retained"))
    if empty:
        problems.append(_("a second backward through nodes that saved nothing raised on {program}: torch runs it "
                          "(an addition or a sum keeps no values, so it has nothing to miss)").format(
            program=shown_program(empty['program'])))
    wording = first_of(differences, lambda d: d["torch"].kind == "second time" and d["engine"].kind not in
                     ("second time", None, "other"))
    if wording:
        problems.append(_("on {program} your engine raised {yours}; torch says \"Trying to backward through the "
                          "graph a second time ...\"").format(program=shown_program(wording['program']),
                                                              yours=said_of(wording['engine'])))
    grads = [d for d in differences if d["torch"].kind is None and d["engine"].kind is None and not d["grads agree"]]
    twice = [d for d in grads if "twice" in d["kind"] or "losses" in d["kind"]]
    once = [d for d in grads if d not in twice]
    extra = [d for d in grads if d["engine"].grads.keys() - d["torch"].grads.keys()]
    if extra:                   # leaves that require no grad, holding one: that difference is said, once
        problems.append(_("after a backward of {program}, a leaf that requires no grad holds a .grad ({names}): "
                          "torch keeps a gradient in the leaves that require grad only").format(
            program=shown_program(extra[0]["program"]),
            names=", ".join(sorted(extra[0]["engine"].grads.keys() - extra[0]["torch"].grads.keys()))))
        once = [d for d in once if d not in extra]
        twice = [d for d in twice if d not in extra]
    if once:
        shared = [d for d in once if _uses_twice(d["program"])]
        d = once[0]
        norms = [sum(g.norm().item() ** 2 for g in d[side].grads.values()) ** 0.5 for side in ("engine", "torch")]
        if len(shared) == len(once) and norms[0] < norms[1]:
            problems.append(_("a value used more than once got the gradient of only some of its uses, on "
                              "{program}").format(
                program=shown_program(d['program'])))
        elif len(shared) == len(once):
            problems.append(_("on {program}, where a value is used more than once, the leaves' gradients have norm "
                              "{mine:.3g}, torch's {torch:.3g}").format(
                program=shown_program(d['program']), mine=norms[0], torch=norms[1]))
        else:
            problems.append(_("gradients differ from torch's on {count} expression(s), e.g. {program}").format(
                count=len(once), program=shown_program(once[0]['program'])))
    if twice and not once:
        problems.append(_twice_problem(twice[0], engine))
    return problems


def _twice_problem(d, engine) -> str:
    """What a program of two backward calls shows, where every program of one backward agrees with torch."""
    halves = all(torch.allclose(d["engine"].grads[n], g / 2, rtol=1e-4, atol=1e-5) for n, g in d["torch"].grads.items())
    if halves:
        return _("after two backward calls on {program} the leaves' gradients differ from torch's: each backward "
                 "replaced .grad instead of adding to it (torch accumulates into a leaf's .grad)").format(
            program=shown_program(d['program']))
    if engine is not None and _first_backward_differs(d["program"], engine):
        return _("on {program} the leaves' gradients differ from torch's after the first backward call already, "
                 "where a value is used more than once").format(program=shown_program(d['program']))
    return _("after two backward calls on {program} the leaves' gradients differ from torch's: gradients of "
             "intermediate values carried over from the first call").format(program=shown_program(d['program']))


def _first_backward_differs(program, engine) -> bool:
    """Whether the program, cut after its first backward call, already gives other leaf gradients than torch's."""
    lines = program.splitlines()
    first = next((i for i, line in enumerate(lines) if ".backward(" in line), None)
    if first is None:
        return False
    cut = "\n".join(lines[:first + 1])
    want, got = run(cut, torch), run(cut, engine)
    return want.kind is None and got.kind is None and any(
        name not in got.grads or not torch.allclose(got.grads[name], g, rtol=1e-4, atol=1e-5)
        for name, g in want.grads.items())


def _uses_twice(program):
    words = re.findall(r"\b(?:[a-d]|y\d+)\b", "\n".join(x.split("=", 1)[1] for x in program.splitlines()
                                                         if "=" in x and "leaf(" not in x))
    return len(words) != len(set(words))


def kept_grads(engine) -> str | None:
    """After one backward of `(a * b + b).exp().sum()` (a requires grad, b does not: a sum hands its gradient to
    both), the values other than a that hold a .grad, in words, where torch leaves a gradient in a leaf that
    requires grad only; None when none does (or when the engine cannot run it: the programs say why)."""
    try:
        a = engine(torch.tensor([0.5, -1.0, 2.0]), requires_grad=True)
        b = engine(torch.tensor([1.0, 2.0, 3.0]))
        product = a * b
        total = product + b
        y = total.exp()
        loss = y.sum()
        loss.backward()
    except Exception:  # an engine that fails here fails the programs too, which say how
        return None
    holding = [name for name, v in (("b", b), ("a * b", product), ("a * b + b", total), ("(a * b + b).exp()", y),
                                    ("the loss", loss)) if getattr(v, "grad", None) is not None]
    if not holding:
        return None
    return _("after a backward of `(a * b + b).exp().sum()`, with a requiring grad and b not, a .grad is held by "
             "{values}, where torch keeps a gradient in a leaf that requires grad only").format(values=", ".join(holding))


def freeing_checks(engine) -> Found:
    """Lesson 11, step 2. engine.backward(retain_graph=False) against torch on the same programs: gradients on 24
    random expressions (`+`, `*`, `.exp()`, `@`), and "Trying to backward through the graph a second time" raised
    exactly where torch raises it (backward twice, two losses sharing nodes) and not otherwise (retain_graph=True,
    nodes that saved nothing)."""
    differences = run_all(_(FREEING_NAME), engine, 2)
    if differences is None:
        return None
    problems = freeing_problems(differences, engine) or [generic(d) for d in differences[:3]]
    kept = kept_grads(engine)
    if kept and not problems:
        problems = [kept]
    found = counts(2)
    return problems, {"count": len(programs(2)), "random": found['gradient'], "second_time": found['second time']}


FREEING = Exercise("11", "Value", Value, freeing_checks, None, interface=("no_grad",),
                   label=FREEING_NAME, what=N_("your Value class"),
                   success=N_("on {count} programs your backward gives torch's gradients ({random} random expressions "
                              "and every program that runs), and refuses a second backward exactly where torch does "
                              "({second_time})"))
check_freeing = FREEING.check

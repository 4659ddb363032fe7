"""Lesson 11, steps 2 to 4: backward and freeing, version counters, the leaf rule; each checked on programs run on
torch and on the student's engine."""
import re

import torch

from gan_lessons.exercises.feedback import unanswered, verdict
from gan_lessons.i18n import N_, _
from gan_lessons.exercises.lesson11.engine import LEAF_IN_PLACE
from gan_lessons.exercises.lesson11.cases import (CATEGORIES, _first, _said, _shown, _stub, version_parts, compare,
                                                   programs, run)


def _run_all(name, engine, step):
    try:
        return compare(engine, step)
    except NotImplementedError as error:
        _stub(name, error, step)
        return None


def _generic(d):
    if d["grads agree"]:
        return _("on {program} torch gives {theirs}; your engine gives {yours}").format(
            program=_shown(d['program']), theirs=_said(d['torch']), yours=_said(d['engine']))
    return _("on {program} torch gives {theirs} and other gradients; your engine gives {yours}").format(
        program=_shown(d['program']), theirs=_said(d['torch']), yours=_said(d['engine']))


def _freeing_problems(differences):
    problems = []
    other = _first(differences, lambda d: d["engine"][0] == "other")
    if other:
        if other["torch"][0] == "second time":
            problems.append(_("your engine raised {yours} on {program}: the saved values are gone there; raise "
                              "torch's RuntimeError (\"Trying to backward through the graph a second time ...\") "
                              "instead").format(yours=_said(other['engine']), program=_shown(other['program'])))
        else:
            problems.append(_("your engine raised {yours} on {program}").format(yours=_said(other['engine']),
                                                                                program=_shown(other['program'])))
    ran = _first(differences, lambda d: d["torch"][0] == "second time" and d["engine"][0] is None)
    if ran:
        problems.append(_("saved values were not freed: a second backward ran on {program}, where torch raises "
                          "\"Trying to backward through the graph a second time\". After a node's backward, free "
                          "what it saved (unless retain_graph=True), and refuse a node whose saved values are "
                          "gone").format(program=_shown(ran['program'])))
    retained = _first(differences, lambda d: d["kind"].endswith("retained") and d["engine"][0] == "second time")
    if retained:
        problems.append(_("retain_graph=True did not keep the saved values: the second backward raised on "
                          "{program}; free them only when retain_graph is False").format(
            program=_shown(retained['program'])))
    empty = _first(differences, lambda d: d["torch"][0] is None and d["engine"][0] == "second time"
                   and not d["kind"].endswith("retained"))
    if empty:
        problems.append(_("a second backward through nodes that saved nothing raised on {program}: torch runs it "
                          "(an addition or a sum keeps no values, so it has nothing to miss); mark as freed only a "
                          "node that had saved something").format(program=_shown(empty['program'])))
    wording = _first(differences, lambda d: d["torch"][0] == "second time" and d["engine"][0] not in
                     ("second time", None, "other"))
    if wording:
        problems.append(_("on {program} your engine raised {yours}; torch says \"Trying to backward through the "
                          "graph a second time ...\"").format(program=_shown(wording['program']),
                                                              yours=_said(wording['engine'])))
    grads = [d for d in differences if d["torch"][0] is None and d["engine"][0] is None and not d["grads agree"]]
    twice = [d for d in grads if "twice" in d["kind"] or "losses" in d["kind"]]
    once = [d for d in grads if d not in twice]
    if once:
        shared = [d for d in once if _uses_twice(d["program"])]
        if len(shared) == len(once):
            problems.append(_("a value used more than once got the gradient of only some of its uses, on "
                              "{program}: add up the gradients that reach a value from every use, and run its "
                              "backward only once all of them have arrived (topological order)").format(
                program=_shown(once[0]['program'])))
        else:
            problems.append(_("gradients differ from torch's on {count} expression(s), e.g. {program}").format(
                count=len(once), program=_shown(once[0]['program'])))
    if twice and not once:
        d = twice[0]
        halves = all(torch.allclose(d["engine"][2][n], g / 2, rtol=1e-4, atol=1e-5) for n, g in d["torch"][2].items())
        if halves:
            problems.append(_("after two backward calls on {program} the leaves' gradients differ from torch's: each "
                              "backward replaced .grad instead of adding to it (torch accumulates into a leaf's "
                              ".grad)").format(program=_shown(d['program'])))
        else:
            problems.append(_("after two backward calls on {program} the leaves' gradients differ from torch's: "
                              "gradients of intermediate values carried over from the first call (keep them per "
                              "backward call: torch keeps .grad only on leaves)").format(program=_shown(d['program'])))
    return problems


def _uses_twice(program):
    words = re.findall(r"\b(?:[a-d]|y\d+)\b", "\n".join(x.split("=", 1)[1] for x in program.splitlines()
                                                         if "=" in x and "leaf(" not in x))
    return len(words) != len(set(words))


def check_freeing(engine) -> bool:
    """Lesson 11, step 2. engine.backward(retain_graph=False) against torch on the same programs: gradients on 24
    random expressions (`+`, `*`, `.exp()`, `@`), and "Trying to backward through the graph a second time" raised
    exactly where torch raises it (backward twice, two losses sharing nodes) and not otherwise (retain_graph=True,
    nodes that saved nothing)."""
    # TRANSLATORS: the name of lesson 11's step 2, as its feedback lines show it ("✓ freeing: ...")
    name = _("freeing")
    if unanswered(name, engine, N_("your Value class")):
        return False
    differences = _run_all(name, engine, 2)
    if differences is None:
        return False
    problems = _freeing_problems(differences) or [_generic(d) for d in differences[:3]]
    counts = _counts(2)
    return verdict(name, problems, _("on {count} programs your backward gives torch's gradients ({random} random "
                                     "expressions and every program that runs), and refuses a second backward "
                                     "exactly where torch does ({second_time})").format(
        count=len(programs(2)), random=counts['gradient'], second_time=counts['second time']))


def _counts(step):
    kinds = [run(p, torch)[0] for _, p in programs(step)]
    return {"gradient": CATEGORIES["gradient"][1], **{k: kinds.count(k) for k in ("second time", "version", "leaf")}}


def _probe_bump(engine):
    v = engine(torch.ones(2))
    v.add_(1.0)
    v.mul_(2.0)
    return v._version


def _version_problems(engine, differences):
    problems = []
    silent = [d for d in differences if d["torch"][0] == "version" and d["engine"][0] is None]
    if silent:
        bumps = _probe_bump(engine)
        if bumps != 2:
            problems.append(_("the version counter did not count in-place changes: after add_ and mul_ a value is "
                              "at version {version}, in torch at 2. `_inplace` must bump `_version` by one each "
                              "time").format(version=bumps))
        else:
            problems.append(_("an in-place change of a saved value went unnoticed on {program}: torch raises "
                              "{theirs}. Record the version in `save` and compare it in `unpack`").format(
                program=_shown(silent[0]['program']), theirs=_said(silent[0]['torch'])))
    early = _first(differences, lambda d: d["torch"][0] is None and d["engine"][0] == "version"
                   and "before" in d["kind"])
    if early:
        problems.append(_("version not recorded at save time: on {program} the value was changed before the "
                          "forward (as nn.Linear's init changes its weight) and saved at version 1, yet your engine "
                          "called it stale. Compare with the version the value had when it was saved (kept beside it: "
                          "the second item of its `_saved` entry), not with 0 or another").format(
            program=_shown(early['program'])))
    unsaved = _first(differences, lambda d: d["torch"][0] is None and d["engine"][0] == "version"
                     and "before" not in d["kind"])
    if unsaved:
        problems.append(_("raised the version error where no backward needs the changed value, on {program}: check "
                          "only what a node saved, when its backward unpacks it").format(
            program=_shown(unsaved['program'])))
    parts = _first(differences, lambda d: d["torch"][0] == d["engine"][0] == "version" and not d["parts agree"])
    if parts:
        mine = version_parts(parts["engine"][1])
        if mine:
            problems.append(_("the version error does not carry what torch's does on {program}: torch names {theirs} "
                              "(the saved value's type and shape, the version now, the version expected), yours "
                              "{yours}. Say it as torch does: \"... modified by an inplace operation: "
                              "[torch.FloatTensor [3, 3]], is at version 1; expected version 0 instead.\"").format(
                program=_shown(parts['program']), theirs=version_parts(parts['torch'][1]), yours=mine))
        else:
            problems.append(_("the version error does not carry what torch's does on {program}: torch names {theirs} "
                              "(the saved value's type and shape, the version now, the version expected), yours says "
                              "\"{message}\". Say it as torch does: \"... modified by an inplace operation: "
                              "[torch.FloatTensor [3, 3]], is at version 1; expected version 0 instead.\"").format(
                program=_shown(parts['program']), theirs=version_parts(parts['torch'][1]),
                message=parts['engine'][1][:150]))
    wording = _first(differences, lambda d: d["torch"][0] == "version" and d["engine"][0] not in ("version", None))
    if wording:
        problems.append(_("on {program} your engine raised {yours}; torch raises its version error there").format(
            program=_shown(wording['program']), yours=_said(wording['engine'])))
    return problems


def check_versions(engine) -> bool:
    """Lesson 11, step 3. Version counters: every program of step 2 again, and programs that change a value in place
    (under no_grad where it requires grad) before the forward, after it, after the backward, or back to its old
    values. The version error must come exactly where torch raises its own, naming the same shape and versions."""
    # TRANSLATORS: the name of lesson 11's step 3, as its feedback lines show it ("✓ versions: ...")
    name = _("versions")
    if unanswered(name, engine, N_("your Value class")):
        return False
    differences = _run_all(name, engine, 3)
    if differences is None:
        return False
    problems = _version_problems(engine, differences)
    problems += _freeing_problems([d for d in differences if CATEGORIES[d["kind"]][0] == 2])
    problems = problems or [_generic(d) for d in differences[:3]]
    counts = _counts(3)
    return verdict(name, problems, _("on {count} programs your engine raises the version error exactly where torch "
                                     "does ({version}), with torch's shape and versions, and otherwise gives torch's "
                                     "gradients").format(count=len(programs(3)), version=counts['version']))


def check_leaf_rule(engine) -> bool:
    """Lesson 11, step 4. `_inplace` refuses a leaf that requires grad, outside no_grad, with torch's message; allows
    everything else (under no_grad, constants) and still counts versions. Every program of steps 2 and 3 again, and
    programs that change a leaf in place in grad mode: before the forward, after it, after the backward."""
    # TRANSLATORS: the name of lesson 11's step 4, as its feedback lines show it ("✓ leaf rule: ...")
    name = _("leaf rule")
    if unanswered(name, engine, N_("your Value class")):
        return False
    differences = _run_all(name, engine, 4)
    if differences is None:
        return False
    problems = []
    accepted = _first(differences, lambda d: d["torch"][0] == "leaf" and d["engine"][0] not in ("leaf", "other"))
    wording = _first(differences, lambda d: d["torch"][0] == "leaf" and d["engine"][0] == "other")
    if wording:
        problems.append(_("on {program} your engine raised {yours}; torch refuses that change with \"{message}\" "
                          "(`{constant}`)").format(program=_shown(wording['program']), yours=_said(wording['engine']),
                                                   message=LEAF_IN_PLACE, constant="lesson11.LEAF_IN_PLACE"))
    if accepted:
        problems.append(_("in-place change of a leaf accepted: on {program} torch raises \"{message}\" and your "
                          "engine gave {yours}. A leaf that requires grad may change in place only under "
                          "no_grad").format(program=_shown(accepted['program']), message=LEAF_IN_PLACE,
                                            yours=_said(accepted['engine'])))
    refused = [d for d in differences if d["torch"][0] != "leaf" and d["engine"][0] == "leaf"]
    under_no_grad = _first(refused, lambda d: "with no_grad" in d["program"])
    if under_no_grad:
        problems.append(_("refused an in-place change under no_grad, on {program}: that is how an optimizer updates "
                          "a parameter; check the no_grad switch (`grad_enabled`)").format(
            program=_shown(under_no_grad['program'])))
    constant = _first(refused, lambda d: d not in [under_no_grad])
    if constant and not under_no_grad:
        problems.append(_("refused an in-place change of a value that requires no grad, on {program}: only a leaf "
                          "that requires grad is protected").format(program=_shown(constant['program'])))
    rest = [d for d in differences if d["torch"][0] != "leaf" and d["engine"][0] != "leaf"]
    problems += _version_problems(engine, [d for d in rest if CATEGORIES[d["kind"]][0] <= 3])
    problems += _freeing_problems([d for d in rest if CATEGORIES[d["kind"]][0] == 2])
    problems = problems or [_generic(d) for d in differences[:3]]
    counts = _counts(4)
    return verdict(name, problems, _("on {count} programs your engine refuses an in-place change of a leaf exactly "
                                     "where torch does ({leaf}), and raises its other two errors exactly where torch "
                                     "does ({second_time} and {version})").format(
        count=len(programs(4)), leaf=counts['leaf'], second_time=counts['second time'], version=counts['version']))

"""Lesson 12, steps 3 and 4 of the engine: version counters, and the leaf rule; checked on programs run on torch and on the
student's engine."""

import torch

from gan_lessons.engine import LEAF_IN_PLACE, Value
from gan_lessons.exercises.exercise import Exercise, Found
from gan_lessons.exercises.lesson11.backward import freeing_problems
from gan_lessons.exercises.lesson11.cases import (
    CATEGORIES,
    counts,
    first_of,
    generic,
    programs,
    run_all,
    said_of,
    shown_program,
    version_parts,
)
from gan_lessons.i18n import N_, _

# TRANSLATORS: the name of lesson 12's step 3, as its feedback lines show it ("✓ versions: ...")
VERSIONS_NAME = N_("versions")

# TRANSLATORS: the name of lesson 12's step 4, as its feedback lines show it ("✓ leaf rule: ...")
LEAF_RULE_NAME = N_("leaf rule")


def _probe_bump(engine):
    """The versions after add_ and mul_ of a constant, and of a leaf that requires grad under no_grad (torch: 2 and
    2); the first that is not 2, with where it was, or None."""
    constant = engine(torch.ones(2))
    constant.add_(1.0)
    constant.mul_(2.0)
    leaf = engine(torch.ones(2), requires_grad=True)
    with engine.no_grad():
        leaf.add_(1.0)
        leaf.mul_(2.0)
    for value, where in ((constant, _("on a value that requires no grad")),
                         (leaf, _("under no_grad, on a leaf that requires grad"))):
        if value._version != 2:
            return value._version, where
    return None


def _version_problems(engine, differences):
    problems = []
    again = first_of(differences, lambda d: d["kind"] == "stale, caught, then again" and d["engine"].kind is None)
    if again:
        problems.append(_("after the version error, a second backward() through the same stale graph raised "
                          "nothing, on {program}: torch raises {theirs} there").format(
            program=shown_program(again['program']), theirs=said_of(again['torch'])))
    silent = [d for d in differences if d["torch"].kind == "version" and d["engine"].kind is None and d is not again]
    if silent:
        bumps = _probe_bump(engine)
        if bumps:
            problems.append(_("the version counter did not count in-place changes: after add_ and mul_ {where}, the "
                              "value is at version {version}, in torch at 2").format(version=bumps[0],
                                                                                     where=bumps[1]))
        else:
            problems.append(_("an in-place change of a saved value went unnoticed on {program}: torch raises "
                              "{theirs}").format(program=shown_program(silent[0]['program']),
                                                 theirs=said_of(silent[0]['torch'])))
    early = first_of(differences, lambda d: d["torch"].kind is None and d["engine"].kind == "version"
                   and "before" in d["kind"])
    if early:
        problems.append(_("a value changed before its forward was called stale: on {program} the value was changed "
                          "before the forward (as nn.Linear's init changes its weight) and saved at version 1, yet "
                          "your engine called it stale").format(
            program=shown_program(early['program'])))
    unsaved = first_of(differences, lambda d: d["torch"].kind is None and d["engine"].kind == "version"
                     and "before" not in d["kind"])
    if unsaved:
        problems.append(_("raised the version error where no backward needs the changed value, on "
                          "{program}").format(
            program=shown_program(unsaved['program'])))
    parts = first_of(differences, lambda d: d["torch"].kind == d["engine"].kind == "version" and not d["parts agree"])
    if parts:
        mine = version_parts(parts["engine"].message)
        if mine:
            problems.append(_("the version error does not carry what torch's does on {program}: torch names "
                              "{theirs} (the saved value's type and shape, the version now, the version expected), "
                              "yours {yours}").format(
                program=shown_program(parts['program']), theirs=version_parts(parts['torch'].message), yours=mine))
        else:
            problems.append(_("the version error does not carry what torch's does on {program}: torch names "
                              "{theirs} (the saved value's type and shape, the version now, the version expected), "
                              "yours says \"{message}\"").format(
                program=shown_program(parts['program']), theirs=version_parts(parts['torch'].message),
                message=parts['engine'].message if len(parts['engine'].message) <= 300 else
                parts['engine'].message[:300] + "..."))
    wording = first_of(differences, lambda d: d["torch"].kind == "version" and d["engine"].kind not in ("version", None))
    if wording:
        problems.append(_("on {program} your engine raised {yours}; torch raises its version error there").format(
            program=shown_program(wording['program']), yours=said_of(wording['engine'])))
    return problems


def versions_checks(engine) -> Found:
    """Lesson 12, step 3. Version counters: every program of step 2 again, and programs that change a value in place
    (under no_grad where it requires grad) before the forward, after it, after the backward, or back to its old
    values. The version error must come exactly where torch raises its own, naming the same shape and versions."""
    differences = run_all(_(VERSIONS_NAME), engine, 3)
    if differences is None:
        return None
    problems = _version_problems(engine, differences)
    problems += freeing_problems([d for d in differences if CATEGORIES[d["kind"]][0] == 2], engine)
    problems = problems or [generic(d) for d in differences[:3]]
    return problems, {"count": len(programs(3)), "version": counts(3)['version']}


def leaf_rule_checks(engine) -> Found:
    """Lesson 12, step 4. `_inplace` refuses a leaf that requires grad, outside no_grad, with torch's message; allows
    everything else (under no_grad, constants) and still counts versions. Every program of steps 2 and 3 again, and
    programs that change a leaf in place in grad mode: before the forward, after it, after the backward."""
    differences = run_all(_(LEAF_RULE_NAME), engine, 4)
    if differences is None:
        return None
    problems = []
    accepted = first_of(differences, lambda d: d["torch"].kind == "leaf" and d["engine"].kind not in ("leaf", "other"))
    wording = first_of(differences, lambda d: d["torch"].kind == "leaf" and d["engine"].kind == "other")
    if wording:
        problems.append(_("on {program} your engine raised {yours}; torch refuses that change with \"{message}\" "
                          "(`{constant}`)").format(program=shown_program(wording['program']), yours=said_of(wording['engine']),
                                                   message=LEAF_IN_PLACE, constant="lesson11.LEAF_IN_PLACE"))
    if accepted:
        problems.append(_("in-place change of a leaf accepted: on {program} torch raises \"{message}\" and your "
                          "engine gave {yours}").format(program=shown_program(accepted['program']), message=LEAF_IN_PLACE,
                                            yours=said_of(accepted['engine'])))
    refused = [d for d in differences if d["torch"].kind != "leaf" and d["engine"].kind == "leaf"]
    under_no_grad = first_of(refused, lambda d: "with no_grad" in d["program"])
    if under_no_grad:
        problems.append(_("refused an in-place change under no_grad, on {program}: that is how an optimizer updates "
                          "a parameter").format(
            program=shown_program(under_no_grad['program'])))
    made = first_of(refused, lambda d: d["kind"].startswith("non-leaf"))
    if made:
        problems.append(_("refused an in-place change of a value an operation made (not a leaf), in grad mode, on "
                          "{program}: torch allows it").format(program=shown_program(made['program'])))
    constant = first_of(refused, lambda d: d not in [under_no_grad, made])
    if constant and not under_no_grad and not made:
        problems.append(_("refused an in-place change of a value that requires no grad, on {program}: torch allows "
                          "it").format(program=shown_program(constant['program'])))
    changed = first_of(differences, lambda d: d["kind"] == "leaf refused, then used")
    if changed and not accepted and changed["engine"].kind != "other":      # "other": the error type says it
        problems.append(_("a refused in-place change of a leaf still left its mark: on {program} torch leaves the "
                          "leaf's value and version as they were and gives {theirs}; your engine gives {yours}").format(
            program=shown_program(changed['program']), theirs=said_of(changed['torch']) if changed["grads agree"]
            else _("other gradients"), yours=said_of(changed['engine'])))
    rest = [d for d in differences if d["torch"].kind != "leaf" and d["engine"].kind != "leaf"
            and d is not changed]
    problems += _version_problems(engine, [d for d in rest if CATEGORIES[d["kind"]][0] <= 3])
    problems += freeing_problems([d for d in rest if CATEGORIES[d["kind"]][0] == 2], engine)
    problems = problems or [generic(d) for d in differences[:3]]
    found = counts(4)
    return problems, {"count": len(programs(4)), "leaf": found['leaf'], "second_time": found['second time'],
                      "version": found['version']}


VERSIONS = Exercise("12", "Value", Value, versions_checks, None, interface=("no_grad",),
                    label=VERSIONS_NAME, what=N_("your Value class"),
                    success=N_("on {count} programs your engine raises the version error exactly where torch does "
                               "({version}), with torch's shape and versions, and otherwise gives torch's gradients"))
LEAF_RULE = Exercise("12", "Value", Value, leaf_rule_checks, None, interface=("no_grad",),
                     label=LEAF_RULE_NAME, what=N_("your Value class"),
                     success=N_("on {count} programs your engine refuses an in-place change of a leaf exactly where "
                                "torch does ({leaf}), and raises its other two errors exactly where torch does "
                                "({second_time} and {version})"))
check_versions = VERSIONS.check
check_leaf_rule = LEAF_RULE.check

"""Lesson 14's exercise: D's step with its gradient accumulated over micro-batches under DistributedDataParallel,
averaged over the processes once a step (check_ddp_accumulation). The checker runs the student's function in two
processes (processes.run), records the gradient D steps on in each, and compares it with what one process steps on
with the whole global batch; a communication hook counts the buckets DDP sends."""
import contextlib
import inspect

import torch
import torch.nn.functional as F

from gan_lessons import ddp_lesson, processes
from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, ONE_BACKWARD
from gan_lessons.exercises.steps import Steps, compare_steps
from gan_lessons.i18n import N_, _

CALLS = 2
ACCUM = 4          # micro-batches per step: wrapping only the first in no_sync() is right at 2 and not at 4
STALE = 0.01        # what D's .grad holds before each call, as a G step's backward through D leaves there

HINTS = [
    ("is not defined", N_("the worker processes run your function alone, without this notebook's other cells: a "
                          "name from another cell is not there (torch, F, nn and contextlib are)")),
    ("An attempt has been made to start a new process", N_(
        "a process started for the check imported the calling script again from its top, and that import started "
        "the check once more")),
] + AUTOGRAD_HINTS


def _records(grads):
    """One process's gradients, one per call, as the grading engine's records of opt_D's steps."""
    return Steps({"opt_D": [{"D": g} for g in grads]}, [(k, "opt_D") for k in range(len(grads))])


def _run(function):
    """(what each process returned, None) or (None, the error one raised)."""
    source = inspect.getsource(function)
    try:
        return processes.run(ddp_lesson.accumulate, step=function.__name__, source=source, accum=ACCUM,
                             calls=CALLS, stale=STALE), None
    except Exception as error:  # reported by the checker
        return None, error


def ddp_accumulation_checks(d_step) -> Found:
    """Lesson 14. d_step(ddp, opt_D, x_real, x_fake, accum): D's hinge loss over `accum` micro-batches with D wrapped
    in DDP, one opt_D.step(); right when, in both processes and at every call, D steps on the gradient one process
    steps on with the whole global batch (D's .grad holding STALE when each call begins), and DDP sends each bucket
    once a step."""
    try:
        inspect.getsource(d_step)
    except (OSError, TypeError):
        return [_("its source cannot be read, and the two processes need it: define d_step with def in a cell of this "
                  "notebook")], {}
    runs, error = _run(d_step)
    if error is not None:
        raise Raised("d_step", error)
    reference = _records(ddp_lesson.one_process_reference(len(runs), accum=ACCUM, calls=CALLS))
    mine = [_records(r["grads"]) for r in runs]
    if len(mine[0]["opt_D"]) == CALLS and len(mine[1]["opt_D"]) == CALLS and not all(
            torch.equal(a, b) for a, b in zip(runs[0]["grads"], runs[1]["grads"])):
        if any(runs[0]["sent"]):
            return [_("the two processes stepped on different gradients, though DDP sent buckets during the step: "
                      "gradients added into .grad after that averaging stayed each process's own")], {}
        return [_("the two processes stepped on different gradients: DDP never averaged them over the processes")], {}
    problems = compare_steps(mine[0], reference, _("one process with the whole global batch steps on the mean of "
                                                   "the hinge loss over it"))
    last = _records(ddp_lesson.one_process_reference(len(runs), accum=ACCUM, calls=CALLS, last_only=True))
    held = _records([reference["opt_D"][0]["D"] + STALE])      # the first call (later ones start from other weights)
    if problems and not compare_steps(mine[0], last):
        problems = [_("D stepped on its last micro-batch's gradient alone: .grad was emptied between the "
                      "micro-batches' backwards, so the earlier ones were lost")]
    elif problems and not compare_steps(_records(runs[0]["grads"][:1]), held):
        problems = [_("D stepped on the call's gradient plus the {stale} its .grad held when the call began (as a G "
                      "step's backward through D leaves there)").format(stale=STALE)]
    if problems and 0 < min(runs[0]["backwards"]) < ACCUM:
        problems.append(_("and {count} backward(s) reached D in a call, where each of the accum={accum} "
                          "micro-batches has one of its own").format(count=min(runs[0]["backwards"]), accum=ACCUM))
    if not problems and min(runs[0]["backwards"]) < ACCUM:
        problems = [_(ONE_BACKWARD).format(count=min(runs[0]["backwards"]), accum=ACCUM)]
    if not problems and max(runs[0]["samples"]) > 2 * runs[0]["batch"]:
        problems = [_("the gradients are right, but D ran on {count} samples in one call, where x_real and x_fake "
                      "hold {size} each: {extra} went through D more than once, and the micro-batches no longer "
                      "save the memory they exist to save").format(
            count=max(runs[0]["samples"]), size=runs[0]["batch"], extra=max(runs[0]["samples"]) - 2 * runs[0]["batch"])]
    if not problems and max(runs[0]["around"]) > 0:
        problems = [_("{count} of D's forwards in a call ran through ddp.module, around DDP, where every "
                      "micro-batch's forward goes through ddp").format(count=max(runs[0]["around"]))]
    if not problems and not all(runs[0]["sent"]):
        problems = [_("the gradients are right, but DDP sent no bucket during a step: the averaging over the "
                      "processes was not DDP's, where DDP's own, at the last backward, is the one to keep")]
    elif not problems and any(sent != 1 for sent in runs[0]["sent"]):
        problems = [_("the gradients are right, but DDP sent each bucket {sent} times a step: {sent} of the step's "
                      "backwards averaged .grad over the processes, where only the sum of all {accum} micro-batches "
                      "needs averaging, once").format(sent=max(runs[0]["sent"]), accum=ACCUM)]
        if max(runs[0]["split"]):
            problems = [_("{problem}. {count} backward(s) ran inside a no_sync block after their forward ran outside it: "
                          "DDP decides at the forward whether the backward averages").format(
                problem=problems[0], count=max(runs[0]["split"]))]
    return problems, {"calls": CALLS}


def reference_d_step(ddp, opt_D, x_real, x_fake, accum):
    """The lesson's answer: D's hinge loss over accum micro-batches, averaged over the processes once, at the last
    backward."""
    opt_D.zero_grad()
    pairs = list(zip(x_real.chunk(accum), x_fake.chunk(accum)))
    for k, (real, fake) in enumerate(pairs):
        last = k == len(pairs) - 1
        with contextlib.nullcontext() if last else ddp.no_sync():
            loss_D = (F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum
            loss_D.backward()
    opt_D.step()


def in_two_processes(d_step) -> list:
    """What d_step does under DDP, whatever its checker says: in each of the two processes, the gradient D stepped
    on at each call and the buckets DDP sent."""
    runs, error = _run(d_step)
    if error is not None:
        raise error
    return [[*run["grads"], *run["sent"]] for run in runs]


def _no_calls() -> tuple[list, list]:
    return [], []


DDP_D_STEP = Exercise("14", "d_step", reference_d_step, ddp_accumulation_checks, _no_calls, scenario=in_two_processes,
                      hints=HINTS, what=N_("your d_step"), success=N_(
                          "in both processes and at each of {calls} calls D steps on the gradient one process steps "
                          "on with the whole global batch, and DDP sends each bucket once a step"))
check_ddp_accumulation = DDP_D_STEP.check

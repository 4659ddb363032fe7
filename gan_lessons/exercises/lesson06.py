"""Lesson 06's exercise: a checkpoint a run resumes from exactly (check_resume)."""
import copy
import operator

import torch
from torch import nn, optim

from gan_lessons.exercises.exercise import Exercise, Found, attempt
from gan_lessons.exercises.feedback import ELLIPSIS_HINT
from gan_lessons.i18n import N_, _
from gan_lessons.lesson import headline


def _resume_run(seed):
    """A small GAN, with a BatchNorm in G: a checkpoint of the parameters alone would lose its running statistics
    (buffers, which eval mode and the samples use)."""
    torch.manual_seed(seed)
    G = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
    opt_G = optim.Adam(G.parameters(), lr=1e-2, betas=(0.5, 0.999))
    opt_D = optim.Adam(D.parameters(), lr=1e-2, betas=(0.5, 0.999))
    return G, D, opt_G, opt_D


def _resume_steps(G, D, opt_G, opt_D, start, stop):
    """Steps start, ..., stop - 1 of the run; the real batch depends on the step, as an epoch's order does."""
    from gan_lessons.strategies import d_first_fresh_fake
    for step in range(start, stop):
        x_real = torch.tensor([2.0, -1.0]) + 0.3 * (torch.arange(16.0) + step).reshape(8, 2).sin()
        d_first_fresh_fake(G, D, opt_G, opt_D, x_real, lambda n: torch.randn(n, 4))


def _tensors(state):
    """Every tensor in a nested state dict, flattened to (path, tensor)."""
    if isinstance(state, torch.Tensor):
        return [("", state)]
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, (list, tuple)) else []
    return [(f"{k}.{p}".rstrip("."), t) for k, v in items for p, t in _tensors(v)]


def _same(a, b) -> bool:
    ta, tb = _tensors(a), _tensors(b)
    return len(ta) == len(tb) and all(pa == pb and torch.equal(x, y) for (pa, x), (pb, y) in zip(ta, tb))


def _equal(a, b) -> bool:
    """Whether two nested states hold the same keys, tensors (bit for bit) and plain values."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and \
            torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _saving_problem(saved, rng, go_on):
    """What is wrong with what save_state returned, seen before the round trip: a `...` left in it, random numbers
    drawn, or tensors that still follow the run once it goes on (`go_on` runs its next steps); else None."""
    if ... in (saved.values() if isinstance(saved, dict) else [saved]):
        return _("{hint} (save_state returned a `...`)").format(hint=_(ELLIPSIS_HINT))
    if not torch.equal(torch.get_rng_state(), rng):
        return _("save_state changed torch's random state (it drew random numbers, or seeded): saving must leave "
                 "the run exactly as it was")
    try:
        frozen = copy.deepcopy(saved)
    except Exception:               # not plain data: torch.save or torch.load below says so
        frozen = saved
    go_on()                         # the run goes on after the save
    moved = [path for (path, now), (_, then) in zip(_tensors(saved), _tensors(frozen)) if not torch.equal(now, then)]
    if moved:
        kinds = [kind for kind, here in ((_("the weights"), any(".state." not in p for p in moved)),
                                         (_("Adam's moments"), any(".state." in p for p in moved))) if here]
        return _("your checkpoint changed after save_state returned, while the run went on ({first}, {count} "
                 "tensor(s) in all): state_dict() hands out the live tensors, not copies, and the next steps change "
                 "them in place ({what})").format(first=moved[0], count=len(moved), what=_(", ").join(kinds))
    return None


def _round_trip(saved):
    """(what torch.load(weights_only=True) gives back of the saved state, None), or (None, the problem)."""
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "last.pt"
        try:
            torch.save(saved, path)
            return torch.load(path, weights_only=True), None
        except Exception as error:
            return None, _("torch.save, then torch.load(weights_only=True), refuses what save_state returned "
                           "({error}): it holds something other than state_dict()s, tensors, numbers and dicts of "
                           "them").format(error=headline(str(error)))


def _step_returned(resumed_at, steps):
    """(the step load_state returned, as a number range() takes (an int, or a tensor holding one), or None; what is
    wrong with it, or None)."""
    try:
        start = operator.index(0 if resumed_at is None else resumed_at)      # nothing returned: a loop from 0
    except (TypeError, ValueError, RuntimeError):
        shown = repr(resumed_at)
        return None, _("load_state returned {value}, a {kind}, where the run that resumes needs the number of the step "
                       "it stopped after ({steps})").format(value=shown if len(shown) <= 40 else shown[:37] + "...",
                                                            kind=type(resumed_at).__name__, steps=steps)
    if start == steps:
        return start, None
    if start == 0:
        return None if resumed_at is None else start, _("load_state returned {value}, but the run stopped after {steps} steps: the resumed run "
                        "starts again at step 0, replays the first batches and trains {steps} steps too many").format(
            value=repr(resumed_at), steps=steps)
    return start, _("load_state returned {value}, but the run stopped after {steps} steps: the resumed run starts at "
                    "step {value} and {what}").format(
        value=start, steps=steps, what=_("skips {count} step(s)").format(count=start - steps) if start > steps
        else _("trains {count} step(s) twice").format(count=steps - start))


def resume_checks(save_state, load_state, steps=3) -> Found:
    """Lesson 06. save_state(G, D, opt_G, opt_D, step) returns a checkpoint of the run after `step` steps, as plain
    data that stays as it is while the run goes on; load_state(state, G, D, opt_G, opt_D) puts it back into fresh
    objects and returns the step to go on from. The checker saves after `steps` steps, trains the original run on
    (the checkpoint must not follow it), sends the state through torch.save and torch.load(weights_only=True), as
    the trainer's checkpoints go, loads it into objects with other weights and another random state and resumes:
    the resumed run must end with the weights, bit for bit, of a run of 2 * steps steps that never stopped."""
    G, D, opt_G, opt_D = _resume_run(0)
    _resume_steps(G, D, opt_G, opt_D, 0, 2 * steps)
    straight = [p.detach().clone() for p in (*G.parameters(), *D.parameters())]

    G, D, opt_G, opt_D = _resume_run(0)
    _resume_steps(G, D, opt_G, opt_D, 0, steps)
    truth = copy.deepcopy({"G": G.state_dict(), "D": D.state_dict(), "opt_G": opt_G.state_dict(),
                           "opt_D": opt_D.state_dict(), "rng": torch.get_rng_state()})
    saved = attempt("save_state", save_state, G, D, opt_G, opt_D, steps, hints=[])
    problem = _saving_problem(saved, truth["rng"], lambda: _resume_steps(G, D, opt_G, opt_D, steps, 2 * steps))
    if problem is not None:
        return [problem], {}
    state, problem = _round_trip(saved)
    if problem is not None:
        return [problem], {}
    given = copy.deepcopy(state)
    G, D, opt_G, opt_D = _resume_run(1)            # other initial weights, another random state
    trained = []                                   # G's forwards in train mode during load_state: they move the
    handle = G.register_forward_pre_hook(lambda module, args: trained.append(1) if module.training else None)
    try:                                           # running statistics after they were loaded
        resumed_at = attempt("load_state", load_state, state, G, D, opt_G, opt_D, hints=[(
            "Missing key", N_("a state_dict went into an object other than the one it came from"))])
    finally:
        handle.remove()
    problems = [] if _equal(state, given) else [
        _("after load_state, the checkpoint it was given holds other entries or values than before: a state kept in "
          "memory (the best so far) would load differently the next time")]
    parameters = {name: dict(net.named_parameters()) for name, net in (("G", G), ("D", D))}
    if not all(_same(parameters[name], {k: truth[name][k] for k in parameters[name]}) for name in ("G", "D")):
        problems.append(_("after load_state, G's or D's weights are not the saved ones"))
    elif not (_same(G.state_dict(), truth["G"]) and _same(D.state_dict(), truth["D"])):
        problems.append(_("after load_state, G's weights are the saved ones but its BatchNorm's running statistics "
                          "are not: load_state ran {count} forward(s) of G in training mode, and each moves "
                          "them").format(count=len(trained)) if trained else
                        _("after load_state, G's weights are the saved ones but its BatchNorm's running statistics "
                          "are not: those buffers, which eval mode and the samples use, did not come back"))
    for opt_name, opt in (("opt_G", opt_G), ("opt_D", opt_D)):
        if not _same(opt.state_dict()["state"], truth[opt_name]["state"]):
            problems.append(_("after load_state, {optimizer} has lost Adam's moments (exp_avg, exp_avg_sq) and its "
                              "step count, the optimizer's state: without them Adam's next steps differ").format(
                optimizer=opt_name))
    if not torch.equal(torch.get_rng_state(), truth["rng"]):
        problems.append(_("after load_state, torch's random state is not the saved one, so the resumed run draws a "
                          "different z"))
    start, problem = _step_returned(resumed_at, steps)
    problems += [problem] if problem else []
    if any(not m.training for m in G.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)):
        problems.append(_("after load_state, G's BatchNorm is in eval mode, where the run that never stopped trains "
                          "in training mode: the resumed steps would normalise with its running statistics"))
    if not problems:
        _resume_steps(G, D, opt_G, opt_D, start, 2 * steps)
        resumed = [p.detach() for p in (*G.parameters(), *D.parameters())]
        if not all(torch.equal(a, b) for a, b in zip(straight, resumed)):
            problems.append(_("the resumed run ends with other weights than the run that never stopped"))
    if not problems:                  # the step comes from the checkpoint, not from this one run's numbers
        problems = _saved_earlier(save_state, load_state, steps - 1)
    return problems, {"steps": steps}


def _saved_earlier(save_state, load_state, early):
    """A run saved after `early` steps, loaded: a line when load_state does not return `early`."""
    G, D, opt_G, opt_D = _resume_run(0)
    _resume_steps(G, D, opt_G, opt_D, 0, early)
    state, _problem = _round_trip(save_state(G, D, opt_G, opt_D, early))
    again = load_state(state, *_resume_run(1))
    try:
        same = int(again) == early
    except (TypeError, ValueError, RuntimeError):
        same = False
    return [] if same else [_("a run saved after {early} steps resumes from step {value}: load_state's step does "
                              "not follow the checkpoint's").format(early=early, value=repr(again))]


def reference_save_state(G, D, opt_G, opt_D, step):
    """The lesson's answer: the run after `step` steps, as plain data that stays as it is while the run goes on."""
    import copy
    state = {"G": G.state_dict(), "D": D.state_dict(),                   # the weights
             "opt_G": opt_G.state_dict(), "opt_D": opt_D.state_dict(),   # Adam's moments and step counts
             "rng": torch.get_rng_state(),                               # decides the next z
             "step": step}                                               # decides the next batch
    return copy.deepcopy(state)    # state_dict() hands out the live tensors, which the next steps change


def reference_load_state(state, G, D, opt_G, opt_D):
    """The lesson's answer: the checkpoint put back into fresh objects; the step to go on from."""
    G.load_state_dict(state["G"])
    D.load_state_dict(state["D"])
    opt_G.load_state_dict(state["opt_G"])
    opt_D.load_state_dict(state["opt_D"])
    torch.set_rng_state(state["rng"])
    return state["step"]


def resumed_run(save_state, load_state, steps=3) -> list:
    """What a checkpoint does, whatever its checker says: a run saved after `steps` steps goes on `steps` more, the
    checkpoint goes through torch.save and torch.load(weights_only=True) into objects with other weights and another
    random state, and the run resumes from the step load_state returns up to 2 * steps. The step it resumed from and
    the weights it ends with."""
    G, D, opt_G, opt_D = _resume_run(0)
    _resume_steps(G, D, opt_G, opt_D, 0, steps)
    saved = save_state(G, D, opt_G, opt_D, steps)
    _resume_steps(G, D, opt_G, opt_D, steps, 2 * steps)      # the run goes on after the save
    state, problem = _round_trip(saved)
    if problem is not None:
        raise TypeError(problem)
    G, D, opt_G, opt_D = _resume_run(1)
    start = int(load_state(state, G, D, opt_G, opt_D))
    _resume_steps(G, D, opt_G, opt_D, start, 2 * steps)
    return [start, *[p.detach().clone() for p in (*G.parameters(), *D.parameters())]]


def _no_calls() -> tuple[list, list]:
    return [], []


RESUMED = N_("a run stopped after {steps} steps, saved, loaded into fresh objects and continued ends with the same "
             "weights, bit for bit, as one that never stopped")
SAVE_STATE = Exercise("06", "save_state", reference_save_state, resume_checks, _no_calls, success=RESUMED,
                      label=N_("checkpoint"), answers=("save_state", "load_state"),
                      around=lambda save_state: (save_state, reference_load_state),
                      scenario=lambda save_state: resumed_run(save_state, reference_load_state))
LOAD_STATE = Exercise("06", "load_state", reference_load_state, resume_checks, _no_calls, success=RESUMED,
                      label=N_("checkpoint"), answers=("save_state", "load_state"),
                      around=lambda load_state: (reference_save_state, load_state),
                      scenario=lambda load_state: resumed_run(reference_save_state, load_state))
check_resume = SAVE_STATE.check

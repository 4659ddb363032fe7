"""Programs for the engine's checkers (lessons 11 and 12): a few lines of Python over `leaf(shape, requires_grad=...)`,
`no_grad()` and the operations both engines share, run on torch or on an engine (run), drawn at random per category
(programs), and compared (compare); and what every step's checker shares to say what it found."""
import random
import re
from dataclasses import dataclass

import torch

from gan_lessons.engine import LEAF_IN_PLACE, Value
from gan_lessons.exercises.feedback import stub_left
from gan_lessons.i18n import _


@dataclass
class Outcome:
    """What a program did on one backend: `kind` is None (no error), "second time", "version" or "leaf" for the three
    errors (each a RuntimeError, as torch raises them), or "other"; `message` the error's text; `grads` each leaf
    that requires grad, or holds a .grad though it does not, -> its .grad (zeros for None); `call` the backward call
    under way when the error came (1 for the first; 0 before any)."""
    kind: str
    message: str
    grads: dict
    call: int = 0


def _numbered(program):
    """The program with `_call = k` before its k-th backward call, so that an error says which call raised it."""
    lines, k = [], 0
    for line in program.splitlines():
        if ".backward(" in line:
            k += 1
            lines.append(line[:len(line) - len(line.lstrip())] + f"_call = {k}")
        lines.append(line)
    return "\n".join(lines)


def run(program, backend):
    """Run a program's text on `torch` or on an engine class: its Outcome. An engine's NotImplementedError
    (nbgrader's stub) passes through."""
    generator = torch.Generator().manual_seed(11)
    leaves = {}

    def leaf(shape, requires_grad=False):
        data = torch.randn(shape, generator=generator) * 0.5
        made = data.requires_grad_(requires_grad) if backend is torch else backend(data, requires_grad=requires_grad)
        leaves[len(leaves)] = made
        return made
    namespace = {"leaf": leaf, "no_grad": torch.no_grad if backend is torch else backend.no_grad, "_call": 0}
    kind, message = None, ""
    try:
        exec(_numbered(program), namespace)       # the checker's own programs
    except NotImplementedError:
        raise
    except Exception as error:  # reported, compared with torch's
        message = f"{type(error).__name__}: {error}"
        kind = ("other" if not isinstance(error, RuntimeError) else     # torch raises the three as RuntimeError
                "second time" if "backward through the graph a second time" in message else
                "version" if "modified by an inplace operation" in message else
                "leaf" if LEAF_IN_PLACE in message else "other")
    grads = {}
    for name, value in namespace.items():
        if not any(value is v for v in leaves.values()) or not (value.requires_grad or value.grad is not None):
            continue
        grad = value.grad           # a leaf that requires no grad has none: one that holds a .grad is told apart
        try:
            grads[name] = torch.zeros(value.data.shape) if grad is None else torch.as_tensor(grad).detach().float()
        except (TypeError, RuntimeError, ValueError):
            if kind is None:
                kind, message = "other", _("{name}.grad holds a {kind}, not a tensor").format(
                    name=name, kind=type(grad).__name__)
    return Outcome(kind, message, grads, namespace["_call"] if kind else 0)


VERSION_PARTS = re.compile(r"\[(torch\.[\w.]+ \[[\d, ]*\])\].*?is at version (\d+); expected version (\d+)")


def version_parts(message):
    m = VERSION_PARTS.search(message)
    return m.groups() if m else None


def _random_forward(rng, ops=("+", "*", "exp", "@", "number")):
    """The lines of a random expression and its loss, and each name's (shape, requires grad). An operand may be a
    plain number (y = a * 2.0, y = 0.5 * a, y = a + 1.5), as the lessons' own cells write."""
    lines, info = [], {}
    for name in "abcd"[:rng.randint(2, 4)]:
        shape, requires = rng.choice([(3, 3), (3, 3), (3,)]), name == "a" or rng.random() < 0.5
        lines.append(f"{name} = leaf({list(shape)}, requires_grad={requires})")
        info[name] = (shape, requires)
    last, exps = "a", 0
    for k in range(1, rng.randint(2, 5) + 1):
        op, other = rng.choice(ops), rng.choice(list(info))
        if op == "exp" and exps < 2:
            exps += 1
            lines.append(f"y{k} = {last}.exp()")
            info[f"y{k}"] = info[last]
        elif op == "number":
            lines.append(rng.choice([f"y{k} = {last} * 2.0", f"y{k} = 0.5 * {last}", f"y{k} = {last} + 1.5"]))
            info[f"y{k}"] = info[last]
        elif op == "@" and info[last][0] == info[other][0] == (3, 3):
            lines.append(f"y{k} = {last} @ {other}")
            info[f"y{k}"] = ((3, 3), info[last][1] or info[other][1])
        else:
            op = op if op in "+*" else "*"
            first, second = (last, other) if rng.random() < 0.5 else (other, last)
            lines.append(f"y{k} = {first} {op} {second}")
            info[f"y{k}"] = (max(info[first][0], info[second][0], key=len), info[first][1] or info[second][1])
        last = f"y{k}"
    lines.append(f"loss = {last}.sum()")
    return lines, info, last


def _saved_names(lines):
    """The names whose values some node of the reference engine saved, after running the lines."""
    namespace = {}
    run_lines = "\n".join(lines)
    generator = torch.Generator().manual_seed(11)
    namespace["leaf"] = lambda shape, requires_grad=False: Value(torch.randn(shape, generator=generator) * 0.5,
                                                                  requires_grad)
    namespace["no_grad"] = Value.no_grad
    exec(run_lines, namespace)
    values = {n: v for n, v in namespace.items() if isinstance(v, Value)}
    saved = {id(s) for v in values.values() for s, _ in (v._saved or {}).values()}
    return [n for n, v in values.items() if id(v) in saved and n != "loss"]


def _change(name, info, how="add_(0.5)"):
    """The lines that change a value in place: under no_grad when it requires grad (grad mode would be an error or,
    on torch, a rewritten history)."""
    if info[name][1]:
        return ["with no_grad():", f"    {name}.{how}"]
    return [f"{name}.{how}"]


def _build(kind, rng):
    """One program of a category, or None when this draw does not fit it (the caller draws again)."""
    if kind == "twice, nothing saved":
        lines, info, last = _random_forward(rng, ops=("+",))
    else:
        lines, info, last = _random_forward(rng)
    saved = _saved_names(lines)
    leaves_rg = [n for n in "abcd" if n in info and info[n][1]]
    constants = [n for n in "abcd" if n in info and not info[n][1]]
    unsaved = [n for n in info if n not in saved]
    if kind == "gradient":
        return lines + ["loss.backward()"]
    if kind in ("twice", "twice, nothing saved"):
        return lines + ["loss.backward()", "loss.backward()"] if kind != "twice" or saved else None
    if kind == "twice, retained":              # a root that saves (its operands): retain_graph=True keeps it too
        return lines + ["loss = loss * loss", "loss.backward(retain_graph=True)", "loss.backward()"]
    if kind == "twice, the second retained":   # retain_graph=True on the second call brings nothing back
        return lines + ["loss = loss * loss", "loss.backward()", "loss.backward(retain_graph=True)"]
    if kind in ("two losses", "two losses, retained"):
        if last == "y1":
            return None
        retain = "retain_graph=True" if kind.endswith("retained") else ""
        return lines + ["loss1 = y1.sum()", f"loss1.backward({retain})", "loss.backward()"]
    if CATEGORIES[kind][0] == 3:
        return _build_changed(kind, rng, lines, info, saved, unsaved)
    return _build_in_place(kind, rng, lines, info, leaves_rg, constants)


def _build_changed(kind, rng, lines, info, saved, unsaved):
    """A program of step 3: a tensor changed in place around the forward and the backward."""
    if kind == "stale":
        return lines + _change(rng.choice(saved), info) + ["loss.backward()"] if saved else None
    if kind == "changed back":
        if not saved:
            return None
        name = rng.choice(saved)            # doubled, then halved: exactly the old values again (powers of two)
        return lines + _change(name, info, "mul_(2.0)") + _change(name, info, "mul_(0.5)") + ["loss.backward()"]
    if kind == "changed to the same values":  # a change is a change, whatever the values come out as
        return lines + _change(rng.choice(saved), info, rng.choice(["add_(0.0)", "mul_(1.0)"])) + \
            ["loss.backward()"] if saved else None
    if kind == "unsaved change":
        return lines + _change(rng.choice(unsaved), info, "mul_(2.0)") + ["loss.backward()"] if unsaved else None
    if kind == "changed after backward":
        return lines + ["loss.backward()"] + _change(rng.choice(saved), info) if saved else None
    if kind == "stale, caught, then again":      # the version error caught, and the same graph backwarded again
        return lines + _change(rng.choice(saved), info) + ["try:", "    loss.backward()", "except RuntimeError:",
                                                           "    pass", "loss.backward()"] if saved else None
    if kind == "retained, then changed":
        return (lines + ["loss.backward(retain_graph=True)"] + _change(rng.choice(saved), info)
                + ["loss.backward()"]) if saved else None
    if kind in ("changed before the forward", "changed before and after"):
        first_saved = [n for n in saved if n in "abcd"]
        if not first_saved:
            return None
        name = rng.choice(first_saved)
        at = lines.index(next(x for x in lines if x.startswith(f"{name} = leaf"))) + 1
        before = lines[:at] + _change(name, info, "mul_(0.5)") + lines[at:]   # an init, as nn.Linear's
        after = _change(name, info) if kind.endswith("after") else []
        return before + after + ["loss.backward()"]
    raise ValueError(kind)


def _build_in_place(kind, rng, lines, info, leaves_rg, constants):
    """A program of step 4: a leaf, a non-leaf or a constant changed in place."""
    if kind == "leaf in place":
        return lines + [f"{rng.choice(leaves_rg)}.add_(0.5)", "loss.backward()"]
    if kind == "leaf in place, before the forward":
        return lines[:1] + ["a.mul_(0.5)"] + lines[1:] + ["loss.backward()"]
    if kind == "leaf in place after backward":
        return lines + ["loss.backward()", f"{rng.choice(leaves_rg)}.add_(0.5)"]
    if kind in ("non-leaf in place", "non-leaf in place after backward"):
        made = [n for n in info if n.startswith("y") and info[n][1]]
        if not made:
            return None
        change = [f"{rng.choice(made)}.{rng.choice(['add_(0.5)', 'mul_(2.0)'])}"]
        return lines + (change + ["loss.backward()"] if kind == "non-leaf in place" else ["loss.backward()"] + change)
    if kind == "constant in place":
        return lines + [f"{rng.choice(constants)}.mul_(2.0)", "loss.backward()"] if constants else None
    if kind == "leaf refused, then used":         # the refusal caught: the leaf must be as it was, value and version
        name = rng.choice(leaves_rg)
        return lines + [f"kept = ({name} * {name}).sum()", "try:", f"    {name}.add_(0.5)", "except RuntimeError:",
                        "    pass", "loss = loss + kept", "loss.backward()"]
    raise ValueError(kind)


CATEGORIES = {   # category: (step, how many programs)
    "gradient": (2, 24), "twice": (2, 4), "twice, retained": (2, 4), "twice, the second retained": (2, 3),
    "twice, nothing saved": (2, 3),
    "two losses": (2, 5), "two losses, retained": (2, 3),
    "stale": (3, 6), "changed back": (3, 2), "changed to the same values": (3, 2), "unsaved change": (3, 5),
    "changed after backward": (3, 3), "stale, caught, then again": (3, 3),
    "retained, then changed": (3, 3), "changed before the forward": (3, 4), "changed before and after": (3, 3),
    "leaf in place": (4, 4), "leaf in place, before the forward": (4, 2), "leaf in place after backward": (4, 2),
    "constant in place": (4, 3), "non-leaf in place": (4, 4), "non-leaf in place after backward": (4, 2),
    "leaf refused, then used": (4, 3),
}
_PROGRAMS: dict = {}


def programs(step, seed="lesson 11", times=1):
    """The programs up to a step: a list of (category, program text), the same on every run. The checkers' are drawn
    with the default seed; another seed (and `times` as many of each category) draws programs they never run."""
    key = (step, seed, times)
    if key not in _PROGRAMS:
        out = []
        for kind, (first_step, count) in CATEGORIES.items():
            if first_step > step:
                continue
            rng = random.Random(f"{seed}, {kind}")
            made = []
            while len(made) < count * times:
                lines = _build(kind, rng)
                if lines is not None:
                    made.append((kind, "\n".join(lines)))
            out += made
        _PROGRAMS[key] = out
    return _PROGRAMS[key]


def compare(engine, step, seed="lesson 11", times=1):
    """Run every program up to `step` (programs(step, seed, times)) on torch and on the engine: one record per program
    where they differ."""
    differences = []
    for kind, program in programs(step, seed, times):
        want, got = run(program, torch), run(program, engine)
        grads_agree = want.kind is not None or got.grads.keys() <= want.grads.keys() and all(
            name in got.grads and got.grads[name].shape == g.shape and torch.allclose(got.grads[name], g, rtol=1e-4, atol=1e-5)
            for name, g in want.grads.items())
        parts_agree = want.kind != "version" or got.kind != "version" or \
            version_parts(want.message) == version_parts(got.message)
        if want.kind != got.kind or not grads_agree or not parts_agree:
            differences.append({"kind": kind, "program": program, "torch": want, "engine": got,
                                "grads agree": grads_agree, "parts agree": parts_agree})
    return differences


def shown_program(program):
    program = program.replace("with no_grad():\n    ", "with no_grad(): ").replace("try:\n    ", "try: ")
    return "`" + "; ".join(program.replace("\nexcept RuntimeError:\n    pass", " except RuntimeError: pass")
                           .splitlines()) + "`"


def said_of(outcome):
    if outcome.kind is None:
        return _("no error")
    said = outcome.message.split(" Hint:")[0]
    return _("{error} (from backward call {call})").format(error=said, call=outcome.call) if outcome.call else said


def first_of(differences, test):
    return next((d for d in differences if test(d)), None)


# --- the nbgrader stub of a step, or of an earlier one ------------------------------------------------------------
STEP_OF = {"save": 1, "__mul__": 1, "exp": 1, "__matmul__": 1, "backward": 2, "unpack": 3, "_inplace": 3,
           "tanh": 6}


def is_stub(name, error, step):
    """Whether the error is a stub's NotImplementedError; if so, says which step is still to write."""
    if not isinstance(error, NotImplementedError):
        return False
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    function = tb.tb_frame.f_code.co_name
    where = STEP_OF.get(function, step)
    if function == "_inplace" and step == 4:  # written in step 3, written again in step 4
        where = step
    if where == step:
        return stub_left(name, error, f"`{function}`")
    print(_("? {name}: not solved yet: `{function}` (step {step}) still raises NotImplementedError. Solve step "
            "{step} first, then run this cell again.").format(name=name, function=function, step=where))
    return True



def run_all(name, engine, step):
    """compare(engine, step), or None when a stub is still there (said)."""
    try:
        return compare(engine, step)
    except NotImplementedError as error:
        is_stub(name, error, step)
        return None


def generic(d):
    """One line for a difference no hint names: what torch gives, what the engine gives."""
    if d["grads agree"]:
        return _("on {program} torch gives {theirs}; your engine gives {yours}").format(
            program=shown_program(d['program']), theirs=said_of(d['torch']), yours=said_of(d['engine']))
    return _("on {program} torch gives {theirs} and other gradients; your engine gives {yours}").format(
        program=shown_program(d['program']), theirs=said_of(d['torch']), yours=said_of(d['engine']))


def counts(step):
    """How many programs up to `step` give each of torch's errors, and how many random expressions there are."""
    kinds = [run(p, torch).kind for _, p in programs(step)]
    return {"gradient": CATEGORIES["gradient"][1], **{k: kinds.count(k) for k in ("second time", "version", "leaf")}}

"""Lesson 11, step 1: what each operation saves, checked on one-operation expressions against torch's nodes."""
from contextlib import contextmanager

import torch

from gan_lessons.engine import Value
from gan_lessons.exercises.exercise import Exercise, Found
from gan_lessons.exercises.lesson11.cases import is_stub
from gan_lessons.i18n import N_, _
from gan_lessons.lesson import headline

UNARY = ("exp", "tanh")                   # operations whose backward reads their own output
BINARY = {"mul": ("_saved_self", "_saved_other"), "matmul": ("_saved_self", "_saved_mat2")}   # torch's names for a, b

# TRANSLATORS: the name of lesson 11's step 1, as its feedback lines show it ("✓ saving: ...")
SAVING_NAME = N_("saving")


def _one_op_cases(ops=("mul", "exp", "matmul")):
    """(op, shape of a, shape of b, a requires grad, b requires grad, b is a, under no_grad, seed): one-operation
    expressions, every requires_grad combination, broadcasting, `a * a`, under no_grad."""
    cases = []
    for seed in range(2):
        if "mul" in ops:
            for shapes in [((3, 3), (3, 3)), ((3, 3), (3,)), ((3,), (3, 3)), ((2, 3), ())]:
                for rg in [(True, False), (False, True), (True, True)]:
                    cases.append(("mul", *shapes, *rg, False, False, seed))
            cases += [("mul", (3,), (3,), True, True, True, False, seed), ("mul", (3,), (3,), False, False, False,
                      False, seed), ("mul", (3, 3), (3,), True, True, False, True, seed)]
        if "matmul" in ops:
            cases += [("matmul", (2, 3), (3, 4), *rg, False, False, seed) for rg in
                      [(True, False), (False, True), (True, True), (False, False)]]
            cases += [("matmul", (3, 3), (3, 3), True, True, True, False, seed),
                      ("matmul", (2, 3), (3, 4), True, True, False, True, seed)]
        for op in [op for op in UNARY if op in ops]:
            cases += [(op, s, None, True, False, False, False, seed) for s in [(3, 3), (3,), ()]]
            cases += [(op, (3,), None, False, False, False, False, seed), (op, (3,), None, True, False, False, True,
                      seed)]
    return cases


def _apply(op, a, b):
    return a * b if op == "mul" else a @ b if op == "matmul" else getattr(a, op)()


def _roles(entries, a, b, out):
    roles = []
    for entry in entries:
        value = entry[0] if isinstance(entry, (tuple, list)) else entry
        roles.append("a" if value is a else "b" if value is b else "out" if value is out else
                     "a tensor, not a Value" if isinstance(value, torch.Tensor) else "a copy")
    return roles


def _torch_one_op(case):
    op, sa, sb, ra, rb, same, no_grad, seed = case
    generator = torch.Generator().manual_seed(seed)
    a = (torch.randn(sa, generator=generator) * 0.5).requires_grad_(ra)
    b = a if same else (None if op in UNARY else (torch.randn(sb, generator=generator) * 0.5).requires_grad_(rb))
    with torch.set_grad_enabled(not no_grad):
        out = _apply(op, a, b)
    named = {}                            # torch's name for each value its node saved -> "a", "b" or "out"
    if out.grad_fn is not None:
        names = BINARY.get(op, ["_saved_result"])
        for name, role in zip(names, ["a", "b"] if op in BINARY else ["out"]):
            if getattr(out.grad_fn, name) is not None:
                named[name.removeprefix("_saved_")] = "a" if same else role
    grad = torch.randn(out.shape, generator=generator)
    inputs = [t for t in ([a] if same or op in UNARY else [a, b]) if t.requires_grad]
    grads = dict(zip([id(t) for t in inputs], torch.autograd.grad(out, inputs, grad))) if out.requires_grad else {}
    return {"data": out.detach(), "requires_grad": out.requires_grad, "roles": sorted(named.values()),
            "names": named, "grad": grad,
            "grads": [None if id(t) not in grads else grads[id(t)] for t in ([a, b] if op in BINARY else [a])]}


def _describe(case):
    op, sa, sb, ra, rb, same, no_grad, _seed = case

    def shape(s):
        return list(s) if s else _("[] (a 0-dim value)")
    sign = "*" if op == "mul" else "@"
    if op in UNARY:
        text = _("`y = a.{op}()` with a of shape {shape}, requires_grad={requires_grad}").format(
            op=op, shape=shape(sa), requires_grad=ra)
    elif same:
        text = _("`y = a {sign} a`, a requiring grad").format(sign=sign)
    else:
        text = _("`y = a {sign} b` with a {shape_a} requires_grad={requires_grad_a}, b {shape_b} "
                 "requires_grad={requires_grad_b}").format(sign=sign, shape_a=shape(sa), requires_grad_a=ra,
                                                           shape_b=shape(sb), requires_grad_b=rb)
    return _("{expression}, under no_grad").format(expression=text) if no_grad else text


def _saving_problem(case, engine, want):
    op, sa, sb, ra, rb, same, no_grad, seed = case
    generator = torch.Generator().manual_seed(seed)
    a = engine(torch.randn(sa, generator=generator) * 0.5, requires_grad=ra)
    b = a if same else (None if op in UNARY else engine(torch.randn(sb, generator=generator) * 0.5,
                                                        requires_grad=rb))
    a._version = 2                        # as if changed in place before: save must keep the version it finds
    if b is not None and b is not a:
        b._version = 1
    context = engine.no_grad() if no_grad else _nothing()
    with context:
        out = _apply(op, a, b)
    what = _describe(case)
    if not isinstance(out, engine) or not torch.allclose(out.data, want["data"]):
        return _("{op} computed the wrong value on {what}").format(op=op, what=what)
    if out.requires_grad != want["requires_grad"]:
        return _("on {what}, the output's requires_grad is {mine}; torch's is {torch}").format(
            what=what, mine=out.requires_grad, torch=want['requires_grad'])
    roles = sorted(_roles((out._saved or {}).values(), a, b, out))
    if roles != want["roles"]:
        return _name_saving_mistake(op, what, roles, want["roles"], ra, rb)
    named = dict(zip((out._saved or {}).keys(), _roles((out._saved or {}).values(), a, b, out)))
    if named != want["names"]:
        def listed(pairs):
            return ", ".join(f"{name}={role}" for name, role in sorted(pairs.items()))
        return _("{op} saved {mine} on {what}, where torch's node saves {right}").format(
            op=op, mine=listed(named), what=what, right=listed(want["names"]))
    unversioned = _unversioned((out._saved or {}).values())
    if unversioned:
        return _("save kept {kept} on {what}, where the value was at version {version} when it was saved: the "
                 "version it had then is not what was kept beside it").format(kept=unversioned[0], what=what,
                                                                              version=unversioned[1])
    if not out.requires_grad:
        return None
    return _backward_problem(op, out, a, b, same, what, want)


def _backward_problem(op, out, a, b, same, what, want):
    """What is wrong with the node's parents and with what its backward returns, given the output's gradient."""
    parents = [a, b] if op in BINARY else [a]
    if len(out.parents) != len(parents) or any(p is not q for p, q in zip(out.parents, parents)):
        return _("on {what}, the output's parents are not the operands, in order ({operands})").format(
            what=what, operands='a, b' if op in BINARY else 'a')
    saved = {n: (e[0] if isinstance(e, (tuple, list)) else e).data for n, e in out._saved.items()}
    try:
        grads = out._backward(want["grad"].clone(), saved)
    except NotImplementedError:
        raise
    except Exception as error:  # reported
        message = str(error)
        if any(w in message for w in ("cannot be multiplied", "size of tensor", "must match the size", "shape")):
            return _("{op}'s backward raised {kind}: {error} on {what}: the shapes in one of its products do not fit "
                     "(grad has shape {shape})").format(
                op=op, kind=type(error).__name__, error=headline(message), what=what, shape=list(want["grad"].shape))
        return _("{op}'s backward raised {kind}: {error} on {what}").format(
            op=op, kind=type(error).__name__, error=headline(message), what=what)
    if not isinstance(grads, (tuple, list)):
        return _("{op}'s backward returned {kind} on {what}, not one gradient per parent in a tuple or list: a "
                 "backward that pairs the node's parents with what it returns would pair them with the rows of that "
                 "{kind}").format(op=op, kind=type(grads).__name__, what=what)
    grads = list(grads)
    if len(grads) != len(parents):
        return _("{op}'s backward returned {count} gradient(s) on {what}, where the node has {parents} "
                 "parent(s)").format(op=op, count=len(grads), what=what, parents=len(parents))
    if same:                              # a * a: a's gradient is what both slots return, added
        if any(g is None for g in grads):
            return _("mul's backward returned None for one operand on {what}, where both are a, which requires "
                     "grad").format(what=what)
        grads, parents = [torch.as_tensor(grads[0]) + torch.as_tensor(grads[1])], [a]
    for name, mine, right, p in zip("ab", grads, want["grads"], parents):
        if right is None and mine is not None:
            return _("{op}'s backward returned a gradient for {name} on {what}, where {name} needs none and torch's "
                     "node returns None").format(op=op, name=name, what=what)
        if right is None:
            continue
        if mine is None:
            return _("{op}'s backward returned None for {name} on {what}, which requires grad").format(
                op=op, name=name, what=what)
        mine = torch.as_tensor(mine)
        if mine.shape != right.shape:
            return _("{op}'s gradient for {name} has shape {shape} on {what}, but {name} has shape "
                     "{operand_shape}").format(op=op, name=name, shape=list(mine.shape), what=what,
                                               operand_shape=list(p.data.shape))
        if not torch.allclose(mine.float(), right, rtol=1e-4, atol=1e-6):
            return _("{op}'s gradient for {name} differs from torch's on {what}").format(op=op, name=name, what=what)
    return None


def _unversioned(entries):
    """The first saved entry that does not carry its value's version: (what it kept, the version), or None. A pair
    is a tuple or a list: both unpack as (value, version)."""
    for entry in entries:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2 and hasattr(entry[0], "_version")):
            return (_("a value alone, with no version") if hasattr(entry, "_version") else repr(entry)[:40],
                    getattr(entry, "_version", "?"))
        value, version = entry
        if version != value._version:
            return _("version {kept} for a value at version {version}").format(kept=version,
                                                                                version=value._version), value._version
    return None


def _name_saving_mistake(op, what, roles, right, ra, rb):
    if any(r in ("a copy", "a tensor, not a Value") for r in roles):
        return _("{op} saved a copy or a bare tensor on {what}, not the value itself: a copy has a version counter "
                 "of its own, so an in-place change of the original would go unnoticed").format(op=op, what=what)
    if op in UNARY:
        if "a" in roles and "out" not in roles:
            return _("{op} saved its input instead of its output on {what}").format(op=op, what=what)
        if not right:
            return _("{op} saved {roles} on {what}, where nothing needs a gradient and torch saves nothing").format(
                op=op, roles=roles, what=what)
        if "a" in roles:
            return _("{op} saved its input as well as its output on {what}; torch saves the output "
                     "alone").format(op=op, what=what)
        return _("{op} saved nothing on {what}; torch saves the output").format(op=op, what=what)
    if not right:
        return _("{op} saved {roles} on {what}, where no gradient is needed (no graph) and torch saves "
                 "nothing").format(op=op, roles=roles, what=what)
    if not roles:
        return _("{op} saved nothing on {what}; torch saves {right}").format(op=op, what=what, right=right)
    learner, other = ("a", "b") if ra else ("b", "a")
    if ra != rb and len(set(roles)) == 1 and roles[0] == learner:
        return _("{op} saved its own operand instead of the other on {what}: only {learner} requires grad, and "
                 "torch saves {other}").format(op=op, what=what, learner=learner, other=other)
    if ra != rb and set(roles) == {"a", "b"}:
        return _("{op} saved both operands on {what}, where only {learner} requires grad; torch saves {other} "
                 "alone").format(op=op, what=what, learner=learner, other=other)
    return _("{op} saved {roles} on {what}; torch saves {right}").format(op=op, roles=roles, what=what, right=right)


@contextmanager
def _nothing():
    yield


def one_op_problems(name, engine, ops, step):
    """What differs from torch on the one-operation expressions of `ops`: a list of problems, or None when a stub
    is still there (said)."""
    problems = []
    for case in _one_op_cases(ops):
        try:
            problem = _saving_problem(case, engine, _torch_one_op(case))
        except NotImplementedError as error:
            is_stub(name, error, step)
            return None
        except Exception as error:  # reported
            problem = _("{op} raised {kind}: {error} on {what}").format(op=case[0], kind=type(error).__name__,
                                                                         error=headline(str(error)), what=_describe(case))
        if problem and problem not in problems:
            problems.append(problem)
    if len(problems) > 3:
        problems = problems[:3] + [_("... and {count} more expression(s) like these").format(count=len(problems) - 3)]
    return problems


def saving_checks(engine) -> Found:
    """Lesson 11, step 1. `save` and the engine's `*`, `.exp()` and `@` on 50 one-operation expressions (shapes that
    broadcast, every requires_grad combination, `a * a`, under no_grad), against torch: the output, what it saved (by
    identity and under torch's name, against MulBackward0's `_saved_self`/`_saved_other`, ExpBackward0's
    `_saved_result` and MmBackward0's `_saved_self`/`_saved_mat2`), the version kept beside each saved value, and the gradients its backward returns
    from what it saved."""
    problems = one_op_problems(_(SAVING_NAME), engine, ("mul", "exp", "matmul"), 1)
    if problems is None:
        return None
    number = _number_problem(engine)
    return ([*problems, number] if number else problems), {"count": len(_one_op_cases())}


def _number_problem(engine):
    """A plain number as `*`'s other operand (`a * 2.0`, `0.5 * a`), as the lesson's own cells write it: the value
    torch gives, or what went wrong."""
    x = torch.tensor([0.5, -1.0, 2.0])
    for text, make in (("a * 2.0", lambda a: a * 2.0), ("0.5 * a", lambda a: 0.5 * a)):
        a = engine(x.clone(), requires_grad=True)
        try:
            out = make(a)
        except Exception as error:  # reported
            return _("`{expression}` (a plain number as the other operand, as the lesson's cells write) raised "
                     "{kind}: {error}").format(expression=text, kind=type(error).__name__, error=headline(str(error)))
        if not isinstance(out, engine) or not torch.allclose(out.data, make(x)):
            return _("`{expression}` computed the wrong value").format(expression=text)
    return None


SAVING = Exercise("11", "Value", Value, saving_checks, None, interface=("no_grad",),
                  label=SAVING_NAME,
                  what=N_("your Value class"), success=N_(
                      "on {count} one-operation expressions, `*`, `.exp()` and `@` save what torch's MulBackward0, "
                      "ExpBackward0 and MmBackward0 save, each with its version, and give torch's gradients"))
check_saving = SAVING.check


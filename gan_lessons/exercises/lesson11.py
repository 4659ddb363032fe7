"""Lesson 11's exercises: a tiny reverse-mode engine of the student's own, built in four steps, each checked against
torch on the same programs (check_saving, check_freeing, check_versions, check_leaf_rule).

`Value` below is the reference engine, micrograd style: the lesson's answers, and what a lesson cell runs on when
the student's engine is not finished yet (engine_or_reference). A program is a few lines of Python over `leaf(shape,
requires_grad=...)`, `no_grad()` and the operations both engines share (`+`, `*`, `@`, `.exp()`, `.sum()`, `.add_`,
`.mul_`, `.backward(retain_graph=...)`); run() executes one on torch or on an engine, and the checkers compare what
happens: the error raised (kind, and for the version error the shape and versions), else every leaf's gradient."""
import random
import re
from contextlib import contextmanager

import torch

from gan_lessons.exercises.feedback import stub_left, unanswered, verdict
from gan_lessons.i18n import N_, _

# The engine's own errors (SECOND_TIME, LEAF_IN_PLACE, version_error) are PyTorch's words, compared with torch's
# messages: they stay in English. The feedback around them is translated.

SECOND_TIME = ("Trying to backward through the graph a second time (or directly access saved tensors after they have "
               "already been freed). Saved intermediate values of the graph are freed when you call .backward() or "
               "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a second time or "
               "if you need to access saved tensors after calling backward.")
LEAF_IN_PLACE = "a leaf Variable that requires grad is being used in an in-place operation."


def version_error(value, version):
    """PyTorch's wording of the version error, for a saved value now at another version than `version`."""
    return (f"one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[{value.data.type()} {list(value.data.shape)}], is at version {value._version}; "
            f"expected version {version} instead.")


class Value:
    """A tensor of the reference engine. `data` is a plain torch tensor (it never requires grad): the autograd is ours."""
    grad_enabled = True                   # the engine's no_grad switch

    def __init__(self, data, requires_grad=False, parents=()):
        self.data = torch.as_tensor(data, dtype=torch.float32).clone()
        self.requires_grad = requires_grad
        self.parents = parents            # the Values this one was computed from; none for a leaf
        self._backward = None             # (grad, saved tensors by name) -> one gradient per parent, or None
        self._saved = {}                  # what _backward needs: name -> (Value, its version when saved)
        self._version = 0                 # bumped by every in-place change
        self.grad = None                  # a leaf's gradient, added up by backward

    def __repr__(self):
        return f"Value({self.data.tolist()}, requires_grad={self.requires_grad})"

    @property
    def is_leaf(self):
        return not self.parents

    @classmethod
    @contextmanager
    def no_grad(cls):
        """Within the block, operations build no graph (and in-place changes of leaves are allowed)."""
        before, cls.grad_enabled = cls.grad_enabled, False
        try:
            yield
        finally:
            cls.grad_enabled = before

    def _value(self, x):
        return x if isinstance(x, Value) else type(self)(x)

    def _result(self, data, parents):
        """An operation's output: it requires grad when an input does (and grad is on), and only then has parents."""
        requires_grad = self.grad_enabled and any(p.requires_grad for p in parents)
        return type(self)(data, requires_grad, parents if requires_grad else ())

    # --- operations: each saves what its backward needs, and only that -------------------------------------------
    def __add__(self, other):             # saves nothing: the gradient of a sum needs no values
        other = self._value(other)
        out = self._result(self.data + other.data, (self, other))
        out._backward = lambda grad, saved: (grad.sum_to_size(self.data.shape), grad.sum_to_size(other.data.shape))
        return out

    def sum(self):
        out = self._result(self.data.sum(), (self,))
        out._backward = lambda grad, saved: (grad * torch.ones_like(self.data),)
        return out

    def __mul__(self, other):             # step 1
        other = self._value(other)
        out = self._result(self.data * other.data, (self, other))
        if self.requires_grad:
            out.save("other", other)      # self's gradient is grad * other: keep the other operand
        if other.requires_grad:
            out.save("self", self)

        def backward(grad, saved):
            return ((grad * saved["other"]).sum_to_size(self.data.shape) if "other" in saved else None,
                    (grad * saved["self"]).sum_to_size(other.data.shape) if "self" in saved else None)
        out._backward = backward
        return out

    def exp(self):                        # step 1
        out = self._result(self.data.exp(), (self,))
        out.save("result", out)           # exp's derivative is exp itself: keep the output, not the input
        out._backward = lambda grad, saved: (grad * saved["result"],)
        return out

    def __matmul__(self, other):          # given in the lesson after step 1: saved like mul
        out = self._result(self.data @ other.data, (self, other))
        if self.requires_grad:
            out.save("mat2", other)
        if other.requires_grad:
            out.save("self", self)

        def backward(grad, saved):
            return (grad @ saved["mat2"].T if "mat2" in saved else None,
                    saved["self"].T @ grad if "self" in saved else None)
        out._backward = backward
        return out

    # --- backward, freeing what it used (step 2) ------------------------------------------------------------------
    def backward(self, retain_graph=False):
        order, seen = [], set()

        def visit(v):                     # depth first: each value after every value it was computed from
            if v not in seen:
                seen.add(v)
                for p in v.parents:
                    visit(p)
                order.append(v)
        visit(self)
        grads = {self: torch.ones_like(self.data)}
        for v in reversed(order):         # from the output back: a node runs once all its gradient has arrived
            grad = grads.pop(v, None)
            if grad is None:              # a value that needs no gradient
                continue
            if v.is_leaf:
                v.grad = grad if v.grad is None else v.grad + grad
                continue
            if v._saved is None:
                raise RuntimeError(SECOND_TIME)
            for p, g in zip(v.parents, v._backward(grad, v.unpack())):
                if p.requires_grad:
                    grads[p] = grads[p] + g if p in grads else g
            if v._saved and not retain_graph:
                v._saved = None           # freed; a node that saved nothing has nothing to miss next time

    # --- versions: save is given in the lesson, unpack is step 3 --------------------------------------------------
    def save(self, name, value):
        """Keep `value` for this node's backward, with the version it has now (nothing on a Value without a graph)."""
        if self.requires_grad:
            self._saved[name] = (value, value._version)

    def unpack(self):
        """The saved tensors by name, each checked: it must still be at the version it was saved at."""
        tensors = {}
        for name, (value, version) in self._saved.items():
            if value._version != version:
                raise RuntimeError(version_error(value, version))
            tensors[name] = value.data
        return tensors

    # --- in-place changes: counted (given in the lesson), and a leaf that requires grad refused (step 4) --------
    def _inplace(self, op, other):
        if self.is_leaf and self.requires_grad and self.grad_enabled:
            raise RuntimeError(LEAF_IN_PLACE)
        op(self.data, self._value(other).data)
        self._version += 1
        return self

    def add_(self, other):
        return self._inplace(torch.Tensor.add_, other)

    def mul_(self, other):
        return self._inplace(torch.Tensor.mul_, other)


def engine_or_reference(engine, *solved):
    """The student's engine when every step it needs is solved, else the reference engine; says which."""
    if engine is not ... and solved and all(solved):
        print(_("running on your engine"))
        return engine
    print(_("running on the reference engine (gan_lessons.exercises.lesson11.Value): finish the steps above for "
            "yours"))
    return Value


# --- programs, run on torch or on an engine -----------------------------------------------------------------------
def run(program, backend):
    """Run a program's text on `torch` or on an engine class. Returns (kind, message, gradients): kind is None, or
    "second time", "version", "leaf" for the three errors, or "other"; gradients maps each leaf that requires grad
    to its .grad (zeros for None). An engine's NotImplementedError (nbgrader's stub) passes through."""
    generator = torch.Generator().manual_seed(11)
    leaves = {}

    def leaf(shape, requires_grad=False):
        data = torch.randn(shape, generator=generator) * 0.5
        made = data.requires_grad_(requires_grad) if backend is torch else backend(data, requires_grad=requires_grad)
        leaves[len(leaves)] = made
        return made
    namespace = {"leaf": leaf, "no_grad": torch.no_grad if backend is torch else backend.no_grad}
    kind, message = None, ""
    try:
        exec(program, namespace)                  # the checker's own programs
    except NotImplementedError:
        raise
    except Exception as error:  # reported, compared with torch's
        message = f"{type(error).__name__}: {error}"
        kind = ("second time" if "backward through the graph a second time" in message else
                "version" if "modified by an inplace operation" in message else
                "leaf" if LEAF_IN_PLACE in message else "other")
    grads = {}
    for name, value in namespace.items():
        if any(value is v for v in leaves.values()) and value.requires_grad:
            grad = value.grad
            grads[name] = torch.zeros(value.data.shape) if grad is None else torch.as_tensor(grad).detach().float()
    return kind, message, grads


VERSION_PARTS = re.compile(r"\[(torch\.\w+ \[[\d, ]*\])\].*?is at version (\d+); expected version (\d+)")


def _version_parts(message):
    m = VERSION_PARTS.search(message)
    return m.groups() if m else None


def _random_forward(rng, ops=("+", "*", "exp", "@")):
    """The lines of a random expression and its loss, and each name's (shape, requires grad)."""
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
    if kind == "twice, retained":
        return lines + ["loss.backward(retain_graph=True)", "loss.backward()"]
    if kind in ("two losses", "two losses, retained"):
        if last == "y1":
            return None
        retain = "retain_graph=True" if kind.endswith("retained") else ""
        return lines + ["loss1 = y1.sum()", f"loss1.backward({retain})", "loss.backward()"]
    if kind == "stale":
        return lines + _change(rng.choice(saved), info) + ["loss.backward()"] if saved else None
    if kind == "changed back":
        if not saved:
            return None
        name = rng.choice(saved)
        return lines + _change(name, info) + _change(name, info, "add_(-0.5)") + ["loss.backward()"]
    if kind == "unsaved change":
        return lines + _change(rng.choice(unsaved), info, "mul_(2.0)") + ["loss.backward()"] if unsaved else None
    if kind == "changed after backward":
        return lines + ["loss.backward()"] + _change(rng.choice(saved), info) if saved else None
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
    if kind == "leaf in place":
        return lines + [f"{rng.choice(leaves_rg)}.add_(0.5)", "loss.backward()"]
    if kind == "leaf in place, before the forward":
        return lines[:1] + ["a.mul_(0.5)"] + lines[1:] + ["loss.backward()"]
    if kind == "leaf in place after backward":
        return lines + ["loss.backward()", f"{rng.choice(leaves_rg)}.add_(0.5)"]
    if kind == "constant in place":
        return lines + [f"{rng.choice(constants)}.mul_(2.0)", "loss.backward()"] if constants else None
    raise ValueError(kind)


CATEGORIES = {   # category: (step, how many programs)
    "gradient": (2, 24), "twice": (2, 4), "twice, retained": (2, 4), "twice, nothing saved": (2, 3),
    "two losses": (2, 5), "two losses, retained": (2, 3),
    "stale": (3, 6), "changed back": (3, 2), "unsaved change": (3, 5), "changed after backward": (3, 3),
    "retained, then changed": (3, 3), "changed before the forward": (3, 4), "changed before and after": (3, 3),
    "leaf in place": (4, 4), "leaf in place, before the forward": (4, 2), "leaf in place after backward": (4, 2),
    "constant in place": (4, 3),
}
_PROGRAMS = {}


def programs(step):
    """The checker's programs up to a step: a list of (category, program text), the same on every run."""
    if step not in _PROGRAMS:
        out = []
        for kind, (first_step, count) in CATEGORIES.items():
            if first_step > step:
                continue
            rng = random.Random(f"lesson 11, {kind}")
            made = []
            while len(made) < count:
                lines = _build(kind, rng)
                if lines is not None:
                    made.append((kind, "\n".join(lines)))
            out += made
        _PROGRAMS[step] = out
    return _PROGRAMS[step]


def compare(engine, step):
    """Run every program up to `step` on torch and on the engine: one record per program where they differ."""
    differences = []
    for kind, program in programs(step):
        want, got = run(program, torch), run(program, engine)
        grads_agree = want[0] is not None or all(
            name in got[2] and got[2][name].shape == g.shape and torch.allclose(got[2][name], g, rtol=1e-4, atol=1e-5)
            for name, g in want[2].items())
        parts_agree = want[0] != "version" or got[0] != "version" or \
            _version_parts(want[1]) == _version_parts(got[1])
        if want[0] != got[0] or not grads_agree or not parts_agree:
            differences.append({"kind": kind, "program": program, "torch": want, "engine": got,
                                "grads agree": grads_agree, "parts agree": parts_agree})
    return differences


def _shown(program):
    return "`" + "; ".join(program.replace("with no_grad():\n    ", "with no_grad(): ").splitlines()) + "`"


def _said(outcome):
    return _("no error") if outcome[0] is None else outcome[1].split(" Hint:")[0]


def _first(differences, test):
    return next((d for d in differences if test(d)), None)


# --- the nbgrader stub of a step, or of an earlier one ------------------------------------------------------------
STEP_OF = {"__mul__": 1, "exp": 1, "backward": 2, "unpack": 3}


def _stub(name, error, step):
    """Whether the error is a stub's NotImplementedError; if so, says which step is still to write."""
    if not isinstance(error, NotImplementedError):
        return False
    tb = error.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    function = tb.tb_frame.f_code.co_name
    where = STEP_OF.get(function, step)
    if where == step:
        return stub_left(name, error, f"`{function}`")
    print(_("? {name}: not solved yet: `{function}` (step {step}) still raises NotImplementedError. Solve step "
            "{step} first, then run this cell again.").format(name=name, function=function, step=where))
    return True


# --- step 1: saving --------------------------------------------------------------------------------------------------
def _one_op_cases():
    """(op, shape of a, shape of b, a requires grad, b requires grad, b is a, under no_grad): 40 one-op expressions."""
    cases = []
    for seed in range(2):
        for shapes in [((3, 3), (3, 3)), ((3, 3), (3,)), ((3,), (3, 3)), ((2, 3), ())]:
            for rg in [(True, False), (False, True), (True, True)]:
                cases.append(("mul", *shapes, *rg, False, False, seed))
        cases += [("mul", (3,), (3,), True, True, True, False, seed), ("mul", (3,), (3,), False, False, False, False,
                  seed), ("mul", (3, 3), (3,), True, True, False, True, seed)]
        cases += [("exp", s, None, True, False, False, False, seed) for s in [(3, 3), (3,), ()]]
        cases += [("exp", (3,), None, False, False, False, False, seed), ("exp", (3,), None, True, False, False, True,
                  seed)]
    return cases


def _roles(entries, a, b, out):
    roles = []
    for entry in entries:
        value = entry[0] if isinstance(entry, tuple) else entry
        roles.append("a" if value is a else "b" if value is b else "out" if value is out else
                     "a tensor, not a Value" if isinstance(value, torch.Tensor) else "a copy")
    return roles


def _torch_one_op(case):
    op, sa, sb, ra, rb, same, no_grad, seed = case
    generator = torch.Generator().manual_seed(seed)
    a = (torch.randn(sa, generator=generator) * 0.5).requires_grad_(ra)
    b = a if same else (None if op == "exp" else (torch.randn(sb, generator=generator) * 0.5).requires_grad_(rb))
    with torch.set_grad_enabled(not no_grad):
        out = a * b if op == "mul" else a.exp()
    roles = []
    if out.grad_fn is not None:
        names = ["_saved_self", "_saved_other"] if op == "mul" else ["_saved_result"]
        for name, role in zip(names, ["a", "b"] if op == "mul" else ["out"]):
            if getattr(out.grad_fn, name) is not None:
                roles.append("a" if same else role)
    grad = torch.randn(out.shape, generator=generator)
    inputs = [t for t in ([a] if same or op == "exp" else [a, b]) if t.requires_grad]
    grads = dict(zip([id(t) for t in inputs], torch.autograd.grad(out, inputs, grad))) if out.requires_grad else {}
    return {"data": out.detach(), "requires_grad": out.requires_grad, "roles": sorted(roles), "grad": grad,
            "grads": [None if id(t) not in grads else grads[id(t)] for t in ([a, b] if op == "mul" else [a])]}


def _describe(case):
    op, sa, sb, ra, rb, same, no_grad, _seed = case

    def shape(s):
        return list(s) if s else _("[] (a 0-dim value)")
    if op == "exp":
        text = _("`y = a.exp()` with a of shape {shape}, requires_grad={requires_grad}").format(
            shape=shape(sa), requires_grad=ra)
    elif same:
        text = _("`y = a * a`, a requiring grad")
    else:
        text = _("`y = a * b` with a {shape_a} requires_grad={requires_grad_a}, b {shape_b} "
                 "requires_grad={requires_grad_b}").format(shape_a=shape(sa), requires_grad_a=ra, shape_b=shape(sb),
                                                           requires_grad_b=rb)
    return _("{expression}, under no_grad").format(expression=text) if no_grad else text


def _saving_problem(case, engine, want):
    op, sa, sb, ra, rb, same, no_grad, seed = case
    generator = torch.Generator().manual_seed(seed)
    a = engine(torch.randn(sa, generator=generator) * 0.5, requires_grad=ra)
    b = a if same else (None if op == "exp" else engine(torch.randn(sb, generator=generator) * 0.5,
                                                        requires_grad=rb))
    context = engine.no_grad() if no_grad else _nothing()
    with context:
        out = a * b if op == "mul" else a.exp()
    what = _describe(case)
    if not isinstance(out, engine) or not torch.allclose(out.data, want["data"]):
        return _("{op} computed the wrong value on {what}").format(op=op, what=what)
    if out.requires_grad != want["requires_grad"]:
        return _("on {what}, the output's requires_grad is {mine}; torch's is {torch}").format(
            what=what, mine=out.requires_grad, torch=want['requires_grad'])
    roles = sorted(_roles((out._saved or {}).values(), a, b, out))
    if roles != want["roles"]:
        return _name_saving_mistake(op, what, roles, want["roles"], ra, rb)
    if not out.requires_grad:
        return None
    parents = [a, b] if op == "mul" else [a]
    if len(out.parents) != len(parents) or any(p is not q for p, q in zip(out.parents, parents)):
        return _("on {what}, the output's parents are not the operands, in order ({operands})").format(
            what=what, operands='a, b' if op == 'mul' else 'a')
    saved = {n: (e[0] if isinstance(e, tuple) else e).data for n, e in out._saved.items()}
    try:
        grads = out._backward(want["grad"].clone(), saved)
    except NotImplementedError:
        raise
    except Exception as error:  # reported
        return _("{op}'s backward raised {kind}: {error} on {what}: it must read what it needs from `saved` (the "
                 "names it saved), and only what it saved").format(op=op, kind=type(error).__name__, error=error,
                                                                   what=what)
    grads = list(grads) if isinstance(grads, (tuple, list)) else [grads]
    if len(grads) != len(parents):
        return _("{op}'s backward returned {count} gradient(s) on {what}: one per parent, in order").format(
            op=op, count=len(grads), what=what)
    if same:                              # a * a: a's gradient is what both slots return, added
        if any(g is None for g in grads):
            return _("mul's backward returned None for one operand on {what}, where both are a, which requires "
                     "grad").format(what=what)
        grads, parents = [torch.as_tensor(grads[0]) + torch.as_tensor(grads[1])], [a]
    for name, mine, right, p in zip("ab", grads, want["grads"], parents):
        if right is None:
            continue
        if mine is None:
            return _("{op}'s backward returned None for {name} on {what}, which requires grad").format(
                op=op, name=name, what=what)
        mine = torch.as_tensor(mine)
        if mine.shape != right.shape:
            return _("{op}'s gradient for {name} has shape {shape} on {what}, but {name} has shape {operand_shape}: "
                     "sum a broadcast gradient back to the operand's shape (`.sum_to_size(...)`, as __add__ "
                     "does)").format(op=op, name=name, shape=list(mine.shape), what=what,
                                     operand_shape=list(p.data.shape))
        if not torch.allclose(mine.float(), right, rtol=1e-4, atol=1e-6):
            other = 'b' if name == 'a' else 'a'
            formula = _("grad * exp(a), which is grad * the output") if op == "exp" else \
                _("grad * {other} (twice: a is both operands)").format(other=other) if same else f"grad * {other}"
            return _("{op}'s gradient for {name} differs from torch's on {what}: it is {formula}").format(
                op=op, name=name, what=what, formula=formula)
    return None


def _name_saving_mistake(op, what, roles, right, ra, rb):
    if any(r in ("a copy", "a tensor, not a Value") for r in roles):
        return _("{op} saved a copy or a bare tensor on {what}: save the Value itself (`out.save(name, value)`); a "
                 "copy has a version counter of its own, so an in-place change of the original would go "
                 "unnoticed").format(op=op, what=what)
    if op == "exp":
        if "a" in roles and "out" not in roles:
            return _("exp saved its input instead of its output on {what}: exp's derivative is exp(a), its own "
                     "result, so keep the output (`out`) and not a").format(what=what)
        if not right:
            return _("exp saved {roles} on {what}, where nothing needs a gradient: save nothing there").format(
                roles=roles, what=what)
        if "a" in roles:
            return _("exp saved its input as well as its output on {what}: the output is all its backward "
                     "needs").format(what=what)
        return _("exp saved nothing on {what}: its backward needs the output; keep it with `out.save(...)`").format(
            what=what)
    if not right:
        return _("mul saved {roles} on {what}, where no gradient is needed (no graph): save nothing there").format(
            roles=roles, what=what)
    if not roles:
        return _("mul saved nothing on {what}: its backward needs the other operand; keep it with `out.save(...)` "
                 "and read it from `saved`").format(what=what)
    learner, other = ("a", "b") if ra else ("b", "a")
    if ra != rb and len(set(roles)) == 1 and roles[0] == learner:
        return _("mul saved its own operand instead of the other on {what}: {learner}'s gradient is grad * "
                 "{other}, so keep {other}").format(what=what, learner=learner, other=other)
    if ra != rb and set(roles) == {"a", "b"}:
        return _("mul saved both operands on {what}: only {learner} needs a gradient, and its gradient needs only "
                 "{other}; save an operand only when the other one requires grad").format(what=what, learner=learner,
                                                                                       other=other)
    return _("mul saved {roles} on {what}; torch saves {right}").format(roles=roles, what=what, right=right)


@contextmanager
def _nothing():
    yield


def check_saving(engine) -> bool:
    """Lesson 11, step 1. The engine's `*` and `.exp()` on 40 one-operation expressions (shapes that broadcast, every
    requires_grad combination, `a * a`, under no_grad), against torch: the output, what it saved (by identity, against
    MulBackward0's `_saved_self`/`_saved_other` and ExpBackward0's `_saved_result`), and the gradients its backward
    returns from what it saved."""
    # TRANSLATORS: the name of lesson 11's step 1, as its feedback lines show it ("✓ saving: ...")
    name = _("saving")
    if unanswered(name, engine, N_("your Value class")):
        return False
    problems = []
    for case in _one_op_cases():
        try:
            problem = _saving_problem(case, engine, _torch_one_op(case))
        except NotImplementedError as error:
            _stub(name, error, 1)
            return False
        except Exception as error:  # reported
            problem = _("{op} raised {kind}: {error} on {what}").format(op=case[0], kind=type(error).__name__,
                                                                         error=error, what=_describe(case))
        if problem and problem not in problems:
            problems.append(problem)
    if len(problems) > 3:
        problems = problems[:3] + [_("... and {count} more expression(s) like these").format(count=len(problems) - 3)]
    return verdict(name, problems, _("on {count} one-operation expressions, `*` and `.exp()` save what torch's "
                                     "MulBackward0 and ExpBackward0 save, and give torch's gradients").format(
        count=len(_one_op_cases())))


# --- steps 2 to 4: programs -------------------------------------------------------------------------------------------
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
        mine = _version_parts(parts["engine"][1])
        if mine:
            problems.append(_("the version error does not carry what torch's does on {program}: torch names {theirs} "
                              "(the saved value's type and shape, the version now, the version expected), yours "
                              "{yours}. Say it as torch does: \"... modified by an inplace operation: "
                              "[torch.FloatTensor [3, 3]], is at version 1; expected version 0 instead.\"").format(
                program=_shown(parts['program']), theirs=_version_parts(parts['torch'][1]), yours=mine))
        else:
            problems.append(_("the version error does not carry what torch's does on {program}: torch names {theirs} "
                              "(the saved value's type and shape, the version now, the version expected), yours says "
                              "\"{message}\". Say it as torch does: \"... modified by an inplace operation: "
                              "[torch.FloatTensor [3, 3]], is at version 1; expected version 0 instead.\"").format(
                program=_shown(parts['program']), theirs=_version_parts(parts['torch'][1]),
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

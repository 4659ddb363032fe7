"""The engine's build steps (lessons 11 and 12) tested by mutation, as tests/lessons/mutants.py tests the other
builds: each method of the reference engine, and each function the two lessons ask for, is edited one place at a
time, and each mutant is classified by what the engine then does, never by what its checker says:

- beside torch, on programs the checkers never run (drawn with another seed, three times as many of each kind): the
  error each raises (and, for the version error, the shape and the versions it names) and every leaf's gradient;
- what each node keeps, on one-operation expressions of other shapes: the operands torch's node keeps, and the
  version each had when it was kept;
- numerical_grad on other functions, against their exact gradients, with x given back unchanged; fit on another
  problem, its losses against the same loop on torch.

Each step's checker must reject every mutant that does something else and accept every one that does the same.
Besides the edits of mutants.py, the engine's code gets its own: a comparison turned round, a condition negated,
`and` for `or` and the other way, True for False, a transpose or a `reversed` or a `sum_to_size` left out, one saved
name for another, a whole number one more."""
import ast
import contextlib
import copy
import inspect
import io
import textwrap
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from mutants import Mutant, Replace, compiled, mutants

from gan_lessons import exercises
from gan_lessons.engine import Core, Value
from gan_lessons.exercises import lesson11
from gan_lessons.exercises.lesson11 import cases, numerics, training

TRUTH_SEED, TIMES = "another draw", 3
TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def _quietly(function, *args):
    with contextlib.redirect_stdout(io.StringIO()) as said, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = function(*args)
    return result, said.getvalue()


# --- the edits the engine's code gets besides mutants.py's ---------------------------------------------------------
FLIPPED = {ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn,
           ast.NotIn: ast.In, ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt}
UNWRAPPED = ("reversed", "sum_to_size", "clone")


def _engine_edits(definition):
    """(what, node index in ast.walk order, replacement maker)."""
    strings = sorted({n.value for n in ast.walk(definition) if isinstance(n, ast.Constant) and
                      isinstance(n.value, str) and n.value in ("self", "other", "result", "mat2")})
    edits = []
    for i, node in enumerate(ast.walk(definition)):
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in FLIPPED:
            edits.append((f"turned round: {ast.unparse(node)}", i,
                          lambda n: ast.Compare(n.left, [FLIPPED[type(n.ops[0])]()], n.comparators)))
        if isinstance(node, (ast.If, ast.IfExp)):
            edits.append((f"negated: {ast.unparse(node.test)}", i, lambda n: _with_test(
                n, ast.UnaryOp(ast.Not(), n.test))))
        if isinstance(node, ast.BoolOp):
            edits.append((f"{'or' if isinstance(node.op, ast.And) else 'and'} for "
                          f"{'and' if isinstance(node.op, ast.And) else 'or'}: {ast.unparse(node)}", i,
                          lambda n: ast.BoolOp(ast.Or() if isinstance(n.op, ast.And) else ast.And(), n.values)))
            for k in range(len(node.values)):
                edits.append((f"left out of {ast.unparse(node)}: {ast.unparse(node.values[k])}", i,
                              lambda n, k=k: ast.BoolOp(n.op, n.values[:k] + n.values[k + 1:])
                              if len(n.values) > 2 else n.values[1 - k]))
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            edits.append((f"{not node.value} for {node.value}", i, lambda n: ast.Constant(not n.value)))
        if isinstance(node, ast.Constant) and type(node.value) is int:
            edits.append((f"{node.value + 1} for {node.value}", i, lambda n: ast.Constant(n.value + 1)))
        if isinstance(node, ast.Constant) and node.value in strings:
            for other in strings:
                if other != node.value:
                    edits.append((f"\"{other}\" for \"{node.value}\"", i, lambda n, o=other: ast.Constant(o)))
        if isinstance(node, ast.Attribute) and node.attr == "T":
            edits.append((f"no transpose: {ast.unparse(node)}", i, lambda n: n.value))
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else None
            if name in UNWRAPPED:
                edits.append((f"no {name}: {ast.unparse(node)}", i,
                              lambda n: n.args[0] if isinstance(n.func, ast.Name) else n.func.value))
    return edits


def _with_test(node, test):
    return ast.If(test, node.body, node.orelse) if isinstance(node, ast.If) else ast.IfExp(test, node.body, node.orelse)


def engine_mutants(reference: Callable) -> list[Mutant]:
    """mutants.py's mutants of `reference` and the engine's own edits, each once, in a fixed order."""
    found = list(mutants(reference))
    seen = {m.source for m in found}
    tree = ast.parse(textwrap.dedent(inspect.getsource(reference)))
    seen.add(ast.unparse(tree))
    for what, index, make in _engine_edits(tree.body[0]):
        mutated = copy.deepcopy(tree)
        Replace(index, make).run(mutated.body[0])
        text = ast.unparse(ast.fix_missing_locations(mutated))
        if text not in seen:
            seen.add(text)
            found.append(Mutant(what, text))
    return found


# --- what an engine does: the truth a checker is judged by ---------------------------------------------------------
def differs_on_programs(engine, step) -> bool:
    """Whether the engine does something else than torch on programs up to `step` that no checker runs."""
    return bool(cases.compare(engine, step, TRUTH_SEED, TIMES))


ONE_OP = {"mul": ("_saved_self", "_saved_other"), "matmul": ("_saved_self", "_saved_mat2"),
          "exp": ("_saved_result",), "tanh": ("_saved_result",)}


def _one_op_cases(op):
    if op in ("exp", "tanh"):
        return [(op, shape, None, ra, False, bump) for shape in [(2, 5), (4,)] for ra in (True, False)
                for bump in (0, 3)]
    shapes = [((2, 5), (2, 5)), ((5,), (2, 5)), ((2, 5), ())] if op == "mul" else [((4, 2), (2, 3)), ((2, 2), (2, 2))]
    return [(op, sa, sb, ra, rb, bump) for sa, sb in shapes for ra, rb in [(True, False), (False, True), (True, True)]
            for bump in (0, 3)] + [(op, shapes[-1][0], "same", True, True, 1)]


def _apply(op, a, b):
    return a * b if op == "mul" else a @ b if op == "matmul" else getattr(a, op)()


def keeps_otherwise(engine, ops) -> bool:
    """Whether, on one-operation expressions of other shapes than the checkers', some node of the engine keeps other
    operands than torch's node, or another version than each had when it was kept, or gives other gradients."""
    generator = torch.Generator().manual_seed(23)
    for op, sa, sb, ra, rb, bump in [case for name in ops for case in _one_op_cases(name)]:
        data_a = torch.randn(sa, generator=generator) * 0.5
        data_b = None if sb is None or sb == "same" else torch.randn(sb, generator=generator) * 0.5
        grad = None
        try:
            a = engine(data_a, requires_grad=ra)
            b = a if sb == "same" else None if data_b is None else engine(data_b, requires_grad=rb)
            with engine.no_grad():
                for _k in range(bump):
                    a.mul_(1.0)
            out = _apply(op, a, b)
            roles = sorted(("a" if v is a else "b" if v is b else "out" if v is out else "?", version)
                           for v, version in (out._saved or {}).values())
            ta = data_a.clone().requires_grad_(ra)
            tb = ta if sb == "same" else None if data_b is None else data_b.clone().requires_grad_(rb)
            tout = _apply(op, ta, tb)
            want = sorted((role, bump if role == "a" else 0)
                          for name, role in zip(ONE_OP[op], ("a", "b") if op in ("mul", "matmul") else ("out",))
                          if tout.grad_fn is not None and getattr(tout.grad_fn, name) is not None
                          for role in ["a" if sb == "same" else role])
            if roles != want or not torch.allclose(out.data, tout.detach(), **TOLERANCE):
                return True
            if tout.requires_grad:
                grad = torch.randn(tout.shape, generator=generator)
                (tout * grad).sum().backward()
                (out * engine(grad)).sum().backward()
                for mine, theirs in ((a, ta), (b, tb)):
                    if theirs is not None and theirs.requires_grad and (
                            mine.grad is None or not torch.allclose(torch.as_tensor(mine.grad), theirs.grad,
                                                                    **TOLERANCE)):
                        return True
            elif out.requires_grad:
                return True
        except NotImplementedError:
            raise
        except Exception:  # an error where torch gives a value
            return True
    return False


def _functions():
    """Smooth functions of tensors of three shapes the checker does not use, in float64, with exact gradients."""
    generator = torch.Generator().manual_seed(31)
    w = torch.randn(3, 2, generator=generator, dtype=torch.float64)
    made = [(lambda t: (t.sin() * t).sum(), torch.randn(4, generator=generator, dtype=torch.float64)),
            (lambda t: (t @ w).exp().sum(), torch.randn(2, 3, generator=generator, dtype=torch.float64) * 0.5),
            (lambda t: t ** 3 + t, torch.tensor(-0.4, dtype=torch.float64))]
    out = []
    for g, x in made:
        t = x.clone().requires_grad_(True)
        exact, = torch.autograd.grad(g(t), t)
        out.append((lambda data, g=g: g(torch.as_tensor(data, dtype=torch.float64)).item(), x, exact))
    return out


def numerical_grad_differs(numerical_grad) -> bool:
    for f, x, exact in _functions():
        given = x.clone()
        try:
            got = numerical_grad(f, given)
        except NotImplementedError:
            raise
        except Exception:  # an error where a gradient was due
            return True
        if not torch.equal(given, x) or not isinstance(got, torch.Tensor) or got.shape != x.shape or \
                not torch.allclose(got, exact, rtol=1e-5, atol=1e-5):
            return True
    return False


def fit_differs(engine, fit) -> bool:
    problem = lesson11.training_problem(seed=3)
    want = lesson11.torch_fit(problem, 12, 0.2)
    params = [engine(p, requires_grad=True) for p in problem.params]
    try:
        got = fit(params, engine(problem.x), engine(problem.y), 12, 0.2)
    except NotImplementedError:
        raise
    except Exception:  # an error where a loop was due
        return True
    return not (isinstance(got, list) and len(got) == len(want) and all(type(v) is float for v in got) and
                all(abs(g - w) <= 1e-4 * abs(w) + 1e-6 for g, w in zip(got, want)))


# --- the steps -----------------------------------------------------------------------------------------------------
def _engine_with(name, function):
    return type("Value", (Value,), {name: function, "grad_enabled": True})


def _on_engine_with_tanh(tanh, judge):
    """judge(engine, fit): the engine with this tanh, and the reference loop on that engine."""
    engine = _engine_with("tanh", tanh)
    return judge(engine, training.finished_fit_on(engine))


REFERENCE_FIT = training.finished_fit
REFERENCE_NUMERICAL_GRAD = numerics.finished_numerical_grad


@dataclass(frozen=True)
class Step:
    """One build step of the engine: the lesson, the checker's name, the reference function a mutant edits, how a
    mutant is given to the checker (check), and whether it does something else (differs)."""
    lesson: str
    name: str
    reference: Callable
    check: Callable[[Callable], bool]
    differs: Callable[[Callable], bool]


def _method_step(lesson, checker, method, scope, ops=()):
    name = method.__name__
    return Step(lesson, f"{checker.__name__}: {name}", method, lambda f: checker(_engine_with(name, f)),
                lambda f: differs_on_programs(_engine_with(name, f), scope) or
                (bool(ops) and keeps_otherwise(_engine_with(name, f), ops)))


STEPS = [
    *[_method_step("11", exercises.check_saving, method, 2, ("mul", "exp", "matmul"))
      for method in (Core.save, Core.__mul__, Core.exp, Core.__matmul__)],
    _method_step("11", exercises.check_freeing, Core.backward, 2),
    _method_step("12", exercises.check_versions, Value.unpack, 3),
    _method_step("12", exercises.check_leaf_rule, Value._inplace, 4),
    Step("12", "check_numerical_grad: numerical_grad", REFERENCE_NUMERICAL_GRAD, exercises.check_numerical_grad,
         numerical_grad_differs),
    Step("12", "check_training: tanh", Value.tanh,
         lambda f: _on_engine_with_tanh(f, exercises.check_training),
         lambda f: keeps_otherwise(_engine_with("tanh", f), ("tanh",)) or _on_engine_with_tanh(f, fit_differs)),
    Step("12", "check_training: fit", REFERENCE_FIT, lambda f: exercises.check_training(Value, f),
         lambda f: fit_differs(Value, f)),
]


def judged(step: Step, mutant: Mutant) -> dict:
    """What the mutant does, and what the step's checker says of it."""
    function = compiled(step.reference, mutant)
    try:
        does = "differs" if _quietly(step.differs, function)[0] else "same"
    except NotImplementedError:
        does = "differs"
    try:
        accepted, said = _quietly(step.check, function)
        accepted = bool(accepted)
    except Exception as error:  # a checker that raises is a checker's bug: recorded as such
        accepted, said = None, f"the checker raised {type(error).__name__}: {error}"
    return {"what": mutant.what, "does": does, "accepted": accepted, "said": said.strip().splitlines()[:2]}

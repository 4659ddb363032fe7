"""Mutants of a reference answer, made mechanically, for testing a grader by cases whose truth is known by
construction: each mutant is run on the exercise's problem and classified by what it does (exercise.outcome: the
same values as the reference, within tolerance, or not, or an error), and the grader must reject every mutant that
does something else and accept every one that does the same.

The edits, each at one place of the reference: a statement deleted; two neighbouring statements swapped; an
optimizer step, a zero_grad or a backward moved to the start or the end of its block; a `.detach()` taken away, or
added to a network's input; a statement put under `torch.no_grad()`, or a `torch.no_grad()` block run with a graph
that each network's output then detaches; `retain_graph=True` added to a backward, or a
backward's or autograd.grad's keywords taken away; `mean` for `sum` and the other way; a division or a
multiplication left out; one optimizer (or network) for another; an autocast or a scaler's scale() left out."""
import ast
import copy
import inspect
import linecache
import random
import textwrap
from dataclasses import dataclass
from typing import Callable

MOVED = ("step", "zero_grad", "backward")


@dataclass(frozen=True)
class Mutant:
    what: str
    source: str


def _bodies(tree):
    """Every statement list in the function (its body and each nested block's), as (node, field)."""
    found = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list) and body and all(isinstance(s, ast.stmt) for s in body):
                found.append((node, field))
    return found


def _calls_method(statement, names) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in names
               for n in ast.walk(statement))


def _is_docstring(statement) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) and \
        isinstance(statement.value.value, str)


def _statement_edits(definition):
    """(what, edit) pairs; edit(tree copy) changes the copy in place. Paths address nodes in a deepcopy."""
    edits = []
    for index, (node, field) in enumerate(_bodies(definition)):
        body = getattr(node, field)
        for k, statement in enumerate(body):
            if _is_docstring(statement):
                continue
            text = ast.unparse(statement).splitlines()[0]
            edits.append((f"deleted: {text}", ("delete", index, k)))
            if k + 1 < len(body) and not _is_docstring(body[k + 1]):
                edits.append((f"swapped: {text} / {ast.unparse(body[k + 1]).splitlines()[0]}", ("swap", index, k)))
            if _calls_method(statement, MOVED) and len(body) > 1:
                if k > 0:
                    edits.append((f"moved to its block's start: {text}", ("first", index, k)))
                if k < len(body) - 1:
                    edits.append((f"moved to its block's end: {text}", ("last", index, k)))
            if isinstance(statement, (ast.Assign, ast.Expr)) and not isinstance(statement, ast.With):
                edits.append((f"under torch.no_grad(): {text}", ("no_grad", index, k)))
    return edits


def _apply_statement_edit(definition, edit):
    kind, index, k = edit
    node, field = _bodies(definition)[index]
    body = getattr(node, field)
    if kind == "delete":
        del body[k]
        if not body or all(_is_docstring(s) for s in body):
            body.append(ast.Pass())
    elif kind == "swap":
        body[k], body[k + 1] = body[k + 1], body[k]
    elif kind == "first":
        body.insert(1 if _is_docstring(body[0]) else 0, body.pop(k))
    elif kind == "last":
        body.append(body.pop(k))
    elif kind == "no_grad":
        body[k] = ast.With(items=[ast.withitem(context_expr=ast.parse("torch.no_grad()", mode="eval").body)],
                           body=[body[k]])


def _expression_edits(definition, arguments):
    """(what, node index in ast.walk order, replacement maker) for edits of one expression."""
    edits = []
    nets = _networks(arguments)
    optimizers = [a for a in arguments if "opt" in a.lower()]
    for i, node in enumerate(ast.walk(definition)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            if attr == "detach" and not node.args:
                edits.append((f"no .detach(): {ast.unparse(node)}", i, lambda n: n.func.value))
            if attr in ("mean", "sum"):
                other = "sum" if attr == "mean" else "mean"
                edits.append((f"{other} for {attr}: {ast.unparse(node)}", i,
                              lambda n, other=other: ast.Call(ast.Attribute(n.func.value, other, ast.Load()),
                                                              n.args, n.keywords)))
            if attr == "backward":
                edits.append((f"retain_graph=True: {ast.unparse(node)}", i,
                              lambda n: ast.Call(n.func, n.args, [*[k for k in n.keywords if k.arg != "retain_graph"],
                                                                  ast.keyword("retain_graph", ast.Constant(True))])))
            if attr in ("backward", "grad") and node.keywords:
                edits.append((f"no keywords: {ast.unparse(node)}", i, lambda n: ast.Call(n.func, n.args, [])))
            if attr == "scale" and len(node.args) == 1:
                edits.append((f"not scaled: {ast.unparse(node)}", i, lambda n: n.args[0]))
        if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords and (
                isinstance(node.func, ast.Name) and node.func.id in nets or
                isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and
                node.func.value.id in nets and node.func.attr not in ("parameters", "zero_grad", "step")):
            edits.append((f"input detached: {ast.unparse(node)}", i,
                          lambda n: ast.Call(n.func, [ast.Call(ast.Attribute(n.args[0], "detach", ast.Load()), [], [])],
                                             [])))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Div, ast.Mult)):
            edits.append((f"left out: {ast.unparse(node)}", i, lambda n: n.left))
        if isinstance(node, ast.Name) and node.id in optimizers:
            for other in optimizers:
                if other != node.id:
                    edits.append((f"{other} for {node.id}", i, lambda n, other=other: ast.Name(other, n.ctx)))
    return edits


class Replace(ast.NodeTransformer):
    """Replaces the node at `index` (in ast.walk order) with make(node)."""

    def __init__(self, index, make):
        self.index, self.make = index, make

    def run(self, tree):
        self.target = list(ast.walk(tree))[self.index]
        return self.visit(tree)

    def generic_visit(self, node):
        if node is self.target:
            return self.make(node)
        return super().generic_visit(node)


def _unwrap_with(definition):
    """(what, path) for each `with torch.autocast(...)` or `with torch.no_grad()` block, to run its body bare."""
    return [(f"no {ast.unparse(n.items[0].context_expr)}", i) for i, n in enumerate(ast.walk(definition))
            if isinstance(n, ast.With) and len(n.items) == 1 and
            any(word in ast.unparse(n.items[0].context_expr) for word in ("autocast", "no_grad", "set_grad_enabled"))]


class _Unwrap(ast.NodeTransformer):
    def __init__(self, target):
        self.target = target

    def generic_visit(self, node):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list):
                new = []
                for s in body:
                    new += s.body if s is self.target else [s]
                setattr(node, field, new)
        return super().generic_visit(node)


class _DetachCalls(ast.NodeTransformer):
    """Puts `.detach()` after every outermost call of one of `nets` (a network's forward)."""

    def __init__(self, nets):
        self.nets = nets

    def visit_Call(self, node):
        if isinstance(node.func, ast.Name) and node.func.id in self.nets:
            return ast.Call(ast.Attribute(node, "detach", ast.Load()), [], [])
        return self.generic_visit(node)


def _networks(arguments):
    return {a for a in arguments if not a.lower().startswith(("opt", "d_opt", "g_opt"))}


def mutants(reference: Callable) -> list[Mutant]:
    """Every mutant of `reference`, each a function's source with one edit, in a fixed order."""
    source = textwrap.dedent(inspect.getsource(reference))
    tree = ast.parse(source)
    definition = tree.body[0]
    assert isinstance(definition, ast.FunctionDef)
    arguments = [a.arg for a in definition.args.args]
    found, seen = [], {ast.unparse(tree)}

    def keep(what, mutated):
        text = ast.unparse(ast.fix_missing_locations(mutated))
        if text not in seen:
            seen.add(text)
            found.append(Mutant(what, text))

    for what, edit in _statement_edits(definition):
        mutated = copy.deepcopy(tree)
        _apply_statement_edit(mutated.body[0], edit)
        keep(what, mutated)
    for what, index, make in _expression_edits(definition, arguments):
        mutated = copy.deepcopy(tree)
        keep(what, Replace(index, make).run(mutated.body[0]) and mutated)
    for what, index in _unwrap_with(definition):
        mutated = copy.deepcopy(tree)
        target = list(ast.walk(mutated.body[0]))[index]
        _Unwrap(target).visit(mutated.body[0])
        keep(what, mutated)
        if "no_grad" in what:               # the same values, made with a graph that is then cut off
            mutated = copy.deepcopy(tree)
            target = list(ast.walk(mutated.body[0]))[index]
            for statement in target.body:
                _DetachCalls(_networks(arguments)).visit(statement)
            _Unwrap(target).visit(mutated.body[0])
            keep(f"graph made, then detached: {ast.unparse(target.body[0]).splitlines()[0]}", mutated)
    return found


def compiled(reference: Callable, mutant: Mutant) -> Callable:
    """The mutant as a function, defined in the reference's module (its names resolve as the reference's do), its
    source readable by inspect.getsource (lesson 14's checker sends it to two processes)."""
    namespace: dict = {}
    filename = f"<mutant of {reference.__name__}: {mutant.what}>"
    linecache.cache[filename] = (len(mutant.source), None, mutant.source.splitlines(True), filename)  # getsource
    exec(compile(mutant.source, filename, "exec"), reference.__globals__, namespace)
    return namespace[reference.__name__]


def sample(items: list, count: int, seed: int) -> list:
    """A fixed-seed sample of `count` items (all of them when there are fewer)."""
    return items if len(items) <= count else random.Random(seed).sample(items, count)

"""Known answers as small edits of a reference: a statement left out, a statement moved, an expression written
another way. A checker declares its known wrong answers (and other right ones) this way, so the reference is the
one source of their code, and a mistake reads as what the student did differently:

    variant(reference_seed000_step, drop="d_optimizer.zero_grad()")          # a zero_grad left out
    variant(reference_amp_step, move=("opt_D.zero_grad()", "into the loop"))  # emptied before each micro-batch

Each edit names code by its source as `ast.unparse` writes it (spacing and comments do not matter) and must match
exactly one place in the reference, so a reference edited later without its variants fails at import, not silently."""
import ast
import inspect
import textwrap
from typing import Callable, Iterable


def _statements(tree) -> list:
    """Every statement list in the tree, as (parent list) entries: [(body, index, statement)]."""
    found = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if isinstance(body, list):
                found += [(body, k, s) for k, s in enumerate(body) if isinstance(s, ast.stmt)]
    return found


def _one(tree, source: str, function: str):
    """The one statement whose source is `source`: (its list, its index, the statement)."""
    wanted = ast.unparse(ast.parse(source))
    hits = [(body, k, s) for body, k, s in _statements(tree) if ast.unparse(s) == wanted]
    if len(hits) != 1:
        raise ValueError(f"{function}: {len(hits)} statements are `{wanted}`; a variant needs exactly one")
    return hits[0]


class _Replace(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new, self.count = ast.unparse(ast.parse(old, mode="eval")), ast.parse(new, mode="eval").body, 0

    def generic_visit(self, node):
        if isinstance(node, ast.expr) and ast.unparse(node) == self.old:
            self.count += 1
            return self.new
        return super().generic_visit(node)


def variant(function: Callable, *, drop: str | Iterable[str] = (), replace: dict | None = None,
            move: tuple | None = None) -> Callable:
    """`function` with its code edited, in this order: the statements in `drop` left out; `move=(statements,
    where)` takes a statement (or a list of them) out and puts it back, in order, either right before another
    statement (`where` that statement's source), with `where="into the loop"` at the start of the loop that
    follows the last one taken, with "before the loop" right before the function's first loop, with "at the start"
    first in the function (after its docstring), with "at the end" last (before a final return); each expression `old` in `replace` written as `new`. Edits name the reference's
    code as it is. Defined in `function`'s module, under its name."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    definition = tree.body[0]
    assert isinstance(definition, ast.FunctionDef), function
    definition.decorator_list = []
    name = definition.name
    for source in [drop] if isinstance(drop, str) else drop:
        body, k, _statement = _one(definition, source, name)
        del body[k]
        if not body:
            body.append(ast.Pass())
    if move:
        sources, where = move
        taken = []
        for source in [sources] if isinstance(sources, str) else sources:
            body, k, statement = _one(definition, source, name)
            del body[k]
            taken.append(statement)
            if not body:
                body.append(ast.Pass())
        if where == "into the loop":
            loop = next((s for s in body[k:] if isinstance(s, (ast.For, ast.While))), None)
            if loop is None:
                raise ValueError(f"{name}: no loop follows `{sources}`")
            loop.body[:0] = taken
        elif where in ("before the loop", "at the start", "at the end"):
            top = definition.body
            first = 1 if ast.get_docstring(definition) is not None else 0
            if where == "at the end":
                first = len(top) - isinstance(top[-1], ast.Return)
            elif where == "before the loop":
                loops = [j for j, s in enumerate(top) if isinstance(s, (ast.For, ast.While))]
                if not loops:
                    raise ValueError(f"{name}: no loop in the function's body")
                first = loops[0]
            top[first:first] = taken
        else:
            target, j, _ = _one(definition, where, name)
            target[j:j] = taken
    for old, new in (replace or {}).items():
        edit = _Replace(old, new)
        edit.visit(definition)
        if edit.count != 1:
            raise ValueError(f"{name}: `{old}` is found {edit.count} times; a variant needs exactly one")
    namespace: dict = {}
    exec(compile(ast.fix_missing_locations(tree), f"<a variant of {name}>", "exec"), function.__globals__, namespace)
    return namespace[name]

"""Where a list kept a tensor past its loop pass. The container is a fact of the live objects: the namer found the
old tensor as an element of a list, deque or dict someone still holds (`past[0]`, `critic.history[1]`,
`mem.items[0]`). Adding to a container is not a torch call, so no record has its line; it is read from the source
of the files the records point to, for that container only: the lines that append to it, extend it, insert into
it, store into it or rebuild it with a new element (`past.append(logits)`, `self.history += [h]`,
`cache[k] = y`, `self.prev = self.prev[-2:] + [h]`)."""
import ast
import linecache
import re
import types
from dataclasses import dataclass

from gan_lessons.doctor.report import Where

_ADDS = {"append", "extend", "insert", "appendleft", "extendleft", "add", "put", "setdefault", "update"}
_ONE = {"append", "insert", "appendleft", "add", "put"}     # the calls whose last argument is the one value added
_ELEMENT = re.compile(r"^(?P<container>[A-Za-z_][\w.]*?)((\[[^\]]*\])+)$")


def container_of(name: str):
    """`past[0]` -> `past`; `critic.history[1]` -> `critic.history`; a plain variable -> None."""
    match = _ELEMENT.match(name)
    return match.group("container") if match else None


def owner_file(container: str, spaces) -> str | None:
    """The source file of the class whose object holds the container (`mem.items`: the file of `type(mem)`'s
    methods, where they may add to it); None for a plain variable or an object with no Python methods."""
    if "." not in container:
        return None
    first, *attributes = container.split(".")
    obj = next((space[first] for space in spaces if first in space), None)
    for a in attributes[:-1]:
        obj = getattr(obj, a, None)
    methods = [f for cls in type(obj).__mro__ for f in vars(cls).values() if isinstance(f, types.FunctionType)]
    return methods[0].__code__.co_filename if obj is not None and methods else None


def _names(node, container: str) -> bool:
    """Does this expression stand for the container? Its last attribute decides (`self.history` and
    `critic.history` alike, since a method reaches its object through `self`); a bare name, for a plain variable."""
    last = container.rsplit(".", 1)[-1]
    if "." in container:
        return isinstance(node, ast.Attribute) and node.attr == last
    return isinstance(node, ast.Name) and node.id == last or isinstance(node, ast.Attribute) and node.attr == last


def _additions(tree, container):
    """(statement's line, the added value's node or None) for each addition to the container."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ADDS \
                and _names(node.func.value, container) and node.args:
            yield node.lineno, node.args[-1] if node.func.attr in _ONE else None   # (extend: many; no .detach())
        elif isinstance(node, ast.AugAssign) and _names(node.target, container):
            yield node.lineno, None
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and _names(t.value, container)
                                                  and not isinstance(t.slice, ast.Slice) for t in node.targets):
            yield node.lineno, node.value
        elif isinstance(node, ast.Assign) and any(_names(t, container) for t in node.targets) \
                and any(_names(n, container) for n in ast.walk(node.value)):   # rebuilt: `mem = mem[-3:] + [h]`
            shown = [e for n in ast.walk(node.value) if isinstance(n, (ast.List, ast.Tuple)) for e in n.elts]
            yield node.lineno, shown[0] if len(shown) == 1 else None


@dataclass
class Addition:
    """A line that adds to the container, and that line with the added value detached (when one value on that
    line is added: `past.append(logits.detach())`), else None."""
    where: Where
    detached: str | None


def added_at(container: str, files) -> list:
    """The lines of these source files that add to the container (Additions, in the order of the files)."""
    found = []
    for file in dict.fromkeys(f for f in files if f):
        lines = linecache.getlines(file)
        if not lines:
            continue
        try:
            tree = ast.parse("".join(lines))
        except (SyntaxError, ValueError):
            continue
        for line, value in sorted(_additions(tree, container), key=lambda a: a[0]):
            text, detached = lines[line - 1].rstrip("\n"), None
            if value is not None and value.lineno == value.end_lineno == line:
                part = text[value.col_offset:value.end_col_offset]
                part = f"{part}.detach()" if simple(part) else f"({part}).detach()"
                detached = (text[:value.col_offset] + part + text[value.end_col_offset:]).strip()
            found.append(Addition(Where(file, line, text.strip()), detached))
    return found

def simple(expression: str) -> bool:
    """Can `.detach()` follow this expression as it is (a name, attribute, subscript or call), without brackets?"""
    try:
        node = ast.parse(expression, mode="eval").body
    except SyntaxError:
        return False
    return isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call))

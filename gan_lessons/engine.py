"""A tiny reverse-mode engine, the one lessons 11 and 12 have the student build (micrograd's idea, on tensors, with
PyTorch's bookkeeping): each operation saves what its backward needs, with the version it saw; backward frees it;
in-place changes bump a version; a leaf that requires grad refuses them. This is the reference (the lessons'
answers, which their checkers in exercises.lesson11 compare with), what a lesson cell runs on while the student's own
engine is not finished (engine_or_reference, without its text), and PyTorch's words for the three errors it
raises."""
import types
from contextlib import contextmanager

import torch

from gan_lessons.i18n import _

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


class Core:
    """A tensor of the reference engine as lesson 11 leaves it (its two steps written, versions neither counted nor
    checked yet). `data` is a plain torch tensor (it never requires grad): the autograd is ours."""
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
        return x if isinstance(x, (Core, type(self))) else type(self)(x)

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

    # plumbing: written with the operations above, they save what those save
    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def __neg__(self):
        return self * -1.0

    def __sub__(self, other):
        return self + (-self._value(other))

    def __pow__(self, n):                 # a whole power, as products: x ** 2 is x * x
        if not (isinstance(n, int) and n >= 1):
            return NotImplemented
        out = self
        for _k in range(n - 1):
            out = out * self
        return out

    def __mul__(self, other):             # step 1
        other = self._value(other)
        out = self._result(self.data * other.data, (self, other))
        if self.requires_grad:
            out.save("other", other)          # self's gradient is grad * other
        if other.requires_grad:
            out.save("self", self)

        def backward(grad, saved):
            return ((grad * saved["other"]).sum_to_size(self.data.shape) if "other" in saved else None,
                    (grad * saved["self"]).sum_to_size(other.data.shape) if "self" in saved else None)
        out._backward = backward
        return out

    def exp(self):                        # step 1
        out = self._result(self.data.exp(), (self,))
        out.save("result", out)               # exp's derivative is exp itself: its own output

        def backward(grad, saved):
            return (grad * saved["result"],)
        out._backward = backward
        return out

    def __matmul__(self, other):          # step 1
        out = self._result(self.data @ other.data, (self, other))
        if self.requires_grad:
            out.save("mat2", other)           # self's gradient is grad @ other.T
        if other.requires_grad:
            out.save("self", self)            # other's is self.T @ grad

        def backward(grad, saved):
            return (grad @ saved["mat2"].T if "mat2" in saved else None,
                    saved["self"].T @ grad if "self" in saved else None)
        out._backward = backward
        return out

    # --- backward, freeing what it used (step 2) ------------------------------------------------------------------
    def backward(self, retain_graph=False):
        order, seen = [], set()

        def visit(v):                         # depth first: each value after every value it was computed from
            if v not in seen:
                seen.add(v)
                for p in v.parents:
                    visit(p)
                order.append(v)
        visit(self)
        grads = {self: torch.ones_like(self.data)}
        for v in reversed(order):             # from the output back
            grad = grads.pop(v, None)
            if grad is None:                  # a value that needs no gradient
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
                v._saved = None               # freed; a node that saved nothing has nothing to miss

    # --- versions: save is step 1, unpack step 3 -------------------------------------------------------------------
    def save(self, name, value):
        """Keep `value` for this node's backward, with the version it has now (nothing on a Value without a graph)."""
        if self.requires_grad:                # no graph, nothing to keep
            self._saved[name] = (value, value._version)

    def unpack(self):                     # lesson 12 writes the check
        return {name: value.data for name, (value, _) in self._saved.items()}

    def _inplace(self, op, other):        # lesson 12 counts the change and writes the leaf rule
        op(self.data, self._value(other).data)
        return self

    def add_(self, other):
        return self._inplace(torch.Tensor.add_, other)

    def mul_(self, other):
        return self._inplace(torch.Tensor.mul_, other)


class Counted(Core):
    """Lesson 12's step 3 on lesson 11's engine: each in-place change counted, and each saved value checked, when
    backward unpacks it, against the version it was saved at."""
    def unpack(self):
        tensors = {}
        for name, (value, version) in self._saved.items():
            if value._version != version:
                raise RuntimeError(f"one of the variables needed for gradient computation has been modified by an "
                                   f"inplace operation: [{value.data.type()} {list(value.data.shape)}], is at version "
                                   f"{value._version}; expected version {version} instead.")
            tensors[name] = value.data
        return tensors

    def _inplace(self, op, other):
        op(self.data, self._value(other).data)
        self._version += 1
        return self


class Value(Counted):
    """The reference engine, finished: lesson 12's step 4 (the leaf rule) and `tanh`, on step 3's engine."""
    def tanh(self):                       # the training section
        out = self._result(self.data.tanh(), (self,))
        out.save("result", out)               # 1 - tanh**2 reads only the output

        def backward(grad, saved):
            return (grad * (1 - saved["result"] ** 2),)
        out._backward = backward
        return out

    # --- in-place changes of a leaf that requires grad refused (step 4) -----------------------------------------
    def _inplace(self, op, other):
        if self.is_leaf and self.requires_grad and self.grad_enabled:
            raise RuntimeError(LEAF_IN_PLACE)
        op(self.data, self._value(other).data)
        self._version += 1
        return self


def engine_after_lesson_11():
    """A fresh engine class as lesson 11 leaves it, for lesson 12 to go on with: `save`, `*`, `exp`, `@` and
    `backward` written, `unpack` and `_inplace` still the placeholders that check and count nothing, and no `tanh`.
    A new class on each call, so the methods a lesson attaches to it change no other."""
    return type("Value", (Core,), {"grad_enabled": True, "__module__": "__main__"})


UNREAD = "<a finished engine: its code, not its text>"


def _code_without_text(code: types.CodeType) -> types.CodeType:
    consts = tuple(_code_without_text(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return code.replace(co_filename=UNREAD, co_consts=consts)


def without_text(function, **names):
    """`function` as it runs, but with its code (and the code of the functions it makes) filed under a name that is
    no file, so that inspect.getsource finds no text for it: a finished engine or function that a lesson cell runs
    on while the student's is not finished does not show the answers. `names`: globals it reads as other objects
    (a finished loop's `Value` as the finished engine it runs on)."""
    copy = types.FunctionType(_code_without_text(function.__code__), {**function.__globals__, **names},
                              function.__name__, function.__defaults__, function.__closure__)
    copy.__kwdefaults__, copy.__qualname__ = function.__kwdefaults__, function.__qualname__
    return copy


def _finished_engine():
    """The reference engine, rebuilt as one class of no module, whose methods are `without_text`."""
    methods: dict = {}
    for klass in reversed(Value.__mro__[:-1]):
        for name, member in vars(klass).items():
            if name not in ("__dict__", "__weakref__", "__module__", "__qualname__", "__doc__"):
                methods[name] = without_text(member) if isinstance(member, types.FunctionType) else member
    return type("Value", (), {**methods, "__module__": UNREAD, "__doc__": "A finished engine."})


FINISHED = _finished_engine()


def engine_or_reference(engine, *solved):
    """The student's engine when every step it needs is solved, else a finished one (FINISHED, which shows no
    source); says which."""
    if engine is not ... and solved and all(solved):
        print(_("running on your engine"))
        return engine
    print(_("running on a finished engine, not yours: finish the steps above to run on yours"))
    return FINISHED


def mine_or_finished(mine, solved, finished, what):
    """The student's `what` (a function) when its step is solved, else the finished one, without its text and
    running on the finished engine (the one engine_or_reference gives while a step is not solved); says which."""
    if mine is not ... and solved:
        print(_("using your {what}").format(what=what))
        return mine
    print(_("using a finished {what}, not yours: finish its step above to use yours").format(what=what))
    return without_text(finished, Value=FINISHED)

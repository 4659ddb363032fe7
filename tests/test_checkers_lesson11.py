"""Lesson 11's checkers (check_saving, check_freeing, check_versions, check_leaf_rule), each on the reference engine,
on right answers written differently, on wrong answers a student writes (each answered with a hint that names the
mistake), and on nbgrader's stub. An answer is the reference engine with one step's methods replaced."""
import collections
import types

import pytest
import torch

from gan_lessons import exercises
from gan_lessons.exercises import lesson11
from gan_lessons.exercises.lesson11 import LEAF_IN_PLACE, SECOND_TIME, Value

CHECKS = {1: exercises.check_saving, 2: exercises.check_freeing, 3: exercises.check_versions,
          4: exercises.check_leaf_rule}


def run(capsys, step, engine):
    ok = CHECKS[step](engine)
    return ok, capsys.readouterr().out


def engine(**methods):
    """The reference engine with some methods replaced (a subclass: its operations make Values of the same kind)."""
    return type("Value", (Value,), methods)


# --- the programs themselves ----------------------------------------------------------------------------------------
def test_the_reference_engine_agrees_with_torch_on_every_program():
    assert lesson11.compare(Value, 4) == []


def test_the_programs_cover_each_error_and_each_harmless_case():
    outcomes = collections.Counter(lesson11.run(p, torch)[0] for _, p in lesson11.programs(4))
    assert outcomes["other"] == 0
    assert outcomes["second time"] >= 5 and outcomes["version"] >= 10 and outcomes["leaf"] >= 5
    assert outcomes[None] >= 40                             # gradients compared: 24 plain expressions and more
    kinds = collections.Counter(k for k, p in lesson11.programs(4) if lesson11.run(p, torch)[0] is None)
    assert kinds["gradient"] >= 20 and kinds["unsaved change"] and kinds["changed after backward"] \
        and kinds["changed before the forward"] and kinds["twice, retained"] and kinds["twice, nothing saved"]


def test_the_programs_are_the_same_on_every_run():
    assert lesson11.programs(4) == [(k, p) for k, p in lesson11.programs(4)]
    lesson11.cases._PROGRAMS.clear()
    first = lesson11.programs(4)
    lesson11.cases._PROGRAMS.clear()
    assert lesson11.programs(4) == first


@pytest.mark.parametrize("step", [1, 2, 3, 4])
def test_the_reference_passes_every_step(capsys, step):
    ok, out = run(capsys, step, Value)
    assert ok is True and out.startswith("✓"), out


@pytest.mark.parametrize("step", [1, 2, 3, 4])
def test_an_ellipsis_is_not_solved_yet(capsys, step):
    ok, out = run(capsys, step, ...)
    assert ok is False and out.startswith("?") and "not solved yet" in out


def stub(name):
    """nbgrader's stub as the student copy has it, in a method called `name`."""
    def method(self, *args, **kwargs):
        # YOUR CODE HERE
        raise NotImplementedError()
    return types.FunctionType(method.__code__.replace(co_name=name), globals(), name)


@pytest.mark.parametrize("step, name", [(1, "__mul__"), (1, "exp"), (2, "backward"), (3, "unpack"), (4, "_inplace")])
def test_the_stub_of_the_step_is_not_solved_yet(capsys, step, name):
    ok, out = run(capsys, step, engine(**{name: stub(name)}))
    assert ok is False and out.startswith("?") and "not solved yet" in out and "NotImplementedError" in out
    assert f"`{name}`" in out and "step" not in out.split("not solved yet")[1][:12]


def test_a_stub_of_an_earlier_step_is_named(capsys):
    ok, out = run(capsys, 3, engine(__mul__=stub("__mul__")))
    assert ok is False and "`__mul__` (step 1) still raises NotImplementedError" in out


# --- step 1: saving ---------------------------------------------------------------------------------------------------
def mul_named_otherwise(self, other):
    """Saved under names of its own, gradients reduced by hand over broadcast dimensions."""
    other = self._value(other)
    out = self._result(torch.mul(self.data, other.data), (self, other))
    if self.requires_grad:
        out.save("for_self", other)
    if other.requires_grad:
        out.save("for_other", self)

    def reduce(g, shape):
        while g.dim() > len(shape):
            g = g.sum(0)
        ones = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
        return g.sum(ones, keepdim=True) if ones else g

    def backward(grad, saved):
        return (reduce(grad * saved["for_self"], self.data.shape) if "for_self" in saved else None,
                reduce(grad * saved["for_other"], other.data.shape) if "for_other" in saved else None)
    out._backward = backward
    return out


def exp_via_get(self):
    out = self._result(torch.exp(self.data), (self,))
    out.save("y", out)

    def backward(grad, saved):
        return [saved.get("y") * grad]
    out._backward = backward
    return out


def mul_own_operand(self, other):                 # keeps the operand whose gradient it computes
    other = self._value(other)
    out = self._result(self.data * other.data, (self, other))
    if self.requires_grad:
        out.save("self", self)
    if other.requires_grad:
        out.save("other", other)
    out._backward = lambda grad, saved: (
        (grad * other.data).sum_to_size(self.data.shape), (grad * self.data).sum_to_size(other.data.shape))
    return out


def mul_both(self, other):                        # keeps both, always
    other = self._value(other)
    out = self._result(self.data * other.data, (self, other))
    out.save("self", self)
    out.save("other", other)
    out._backward = lambda grad, saved: ((grad * saved["other"]).sum_to_size(self.data.shape),
                                         (grad * saved["self"]).sum_to_size(other.data.shape))
    return out


def mul_closure(self, other):                     # reads the operands from the closure, saves nothing
    other = self._value(other)
    out = self._result(self.data * other.data, (self, other))
    out._backward = lambda grad, saved: ((grad * other.data).sum_to_size(self.data.shape),
                                         (grad * self.data).sum_to_size(other.data.shape))
    return out


def mul_no_reduce(self, other):                   # forgets to sum a broadcast gradient back
    other = self._value(other)
    out = self._result(self.data * other.data, (self, other))
    if self.requires_grad:
        out.save("other", other)
    if other.requires_grad:
        out.save("self", self)
    out._backward = lambda grad, saved: (grad * saved["other"] if "other" in saved else None,
                                         grad * saved["self"] if "self" in saved else None)
    return out


def mul_copies(self, other):                      # saves a copy: its version counter is its own
    other = self._value(other)
    out = self._result(self.data * other.data, (self, other))
    if self.requires_grad:
        out.save("other", type(self)(other.data))
    if other.requires_grad:
        out.save("self", type(self)(self.data))
    out._backward = Value.__mul__(Value(1.0, True), Value(1.0, True))._backward
    return out


def exp_input(self):                              # keeps the input, computes exp again in backward
    out = self._result(self.data.exp(), (self,))
    out.save("self", self)
    out._backward = lambda grad, saved: (grad * saved["self"].exp(),)
    return out


def exp_wrong_gradient(self):                     # the output kept, the derivative taken as 1
    out = self._result(self.data.exp(), (self,))
    out.save("result", out)
    out._backward = lambda grad, saved: (grad,)
    return out


@pytest.mark.parametrize("methods", [{"__mul__": mul_named_otherwise}, {"exp": exp_via_get},
                                     {"__mul__": mul_named_otherwise, "exp": exp_via_get}],
                         ids=["mul with own names", "exp via get", "both"])
def test_saving_right_answers_written_differently(capsys, methods):
    ok, out = run(capsys, 1, engine(**methods))
    assert ok is True and out.startswith("✓"), out


@pytest.mark.parametrize("methods, words", [
    ({"__mul__": mul_own_operand}, "mul saved its own operand instead of the other"),
    ({"__mul__": mul_both}, "mul saved both operands"),
    ({"__mul__": mul_closure}, "mul saved nothing"),
    ({"__mul__": mul_no_reduce}, "sum a broadcast gradient back to the operand's shape"),
    ({"__mul__": mul_copies}, "saved a copy or a bare tensor"),
    ({"exp": exp_input}, "exp saved its input instead of its output"),
    ({"exp": exp_wrong_gradient}, "exp's gradient for a differs from torch's"),
], ids=["own operand", "both", "closure", "no reduce", "copies", "exp input", "exp gradient"])
def test_saving_wrong_answers_are_named(capsys, methods, words):
    ok, out = run(capsys, 1, engine(**methods))
    assert ok is False and out.startswith("✗") and words in out, out


# --- step 2: backward and freeing -------------------------------------------------------------------------------------
def backward_kahn(self, retain_graph=False):
    """Kahn's algorithm: count each value's uses, run a node when every use has sent its gradient."""
    uses, stack, seen = collections.Counter(), [self], {id(self)}
    while stack:
        v = stack.pop()
        for p in v.parents:
            uses[id(p)] += 1
            if id(p) not in seen:
                seen.add(id(p))
                stack.append(p)
    grads, ready = {id(self): torch.ones_like(self.data)}, [self]
    while ready:
        v = ready.pop()
        grad = grads.pop(id(v))
        if not v.parents:
            if v.requires_grad:
                v.grad = grad + (0 if v.grad is None else v.grad)
            continue
        if v._saved is None:
            raise RuntimeError(SECOND_TIME)
        results = v._backward(grad, v.unpack())
        if v._saved:
            v._saved = v._saved if retain_graph else None
        for p, g in zip(v.parents, results):
            if p.requires_grad:
                grads[id(p)] = g if id(p) not in grads else grads[id(p)] + g
            uses[id(p)] -= 1
            if uses[id(p)] == 0 and p.requires_grad:
                ready.append(p)


def backward_iterative(self, retain_graph=False):
    """An explicit stack for the topological order; freeing in a second pass."""
    order, seen, stack = [], set(), [(self, False)]
    while stack:
        v, done = stack.pop()
        if done:
            order.append(v)
        elif v not in seen:
            seen.add(v)
            stack.append((v, True))
            stack += [(p, False) for p in v.parents if p.requires_grad]
    grads = {self: torch.ones_like(self.data)}
    for v in reversed(order):
        grad = grads.pop(v)
        if v.is_leaf:
            v.grad = grad if v.grad is None else v.grad + grad
        elif v._saved is None:
            raise RuntimeError(SECOND_TIME)
        else:
            for p, g in zip(v.parents, v._backward(grad, v.unpack())):
                if g is not None and p.requires_grad:
                    grads[p] = grads.get(p, 0) + g
    if not retain_graph:
        for v in order:
            if v._saved:
                v._saved = None


def _topological(root):
    order, seen = [], set()

    def visit(v):
        if v not in seen:
            seen.add(v)
            for p in v.parents:
                visit(p)
            order.append(v)
    visit(root)
    return order


def backward_no_free(self, retain_graph=False):     # micrograd's: nothing freed, nothing refused
    grads = {self: torch.ones_like(self.data)}
    for v in reversed(_topological(self)):
        grad = grads.pop(v, None)
        if grad is None:
            continue
        if v.is_leaf:
            v.grad = grad if v.grad is None else v.grad + grad
            continue
        for p, g in zip(v.parents, v._backward(grad, v.unpack())):
            if p.requires_grad:
                grads[p] = grads[p] + g if p in grads else g


def make_backward(free_always=False, free_empty=False, refuse=True, overwrite_use=False, overwrite_leaf=False):
    """The reference backward with one thing changed."""
    def backward(self, retain_graph=False):
        grads = {self: torch.ones_like(self.data)}
        for v in reversed(_topological(self)):
            grad = grads.pop(v, None)
            if grad is None:
                continue
            if v.is_leaf:
                v.grad = grad if v.grad is None or overwrite_leaf else v.grad + grad
                continue
            if v._saved is None and refuse:
                raise RuntimeError(SECOND_TIME)
            for p, g in zip(v.parents, v._backward(grad, v.unpack())):
                if p.requires_grad:
                    grads[p] = grads[p] + g if p in grads and not overwrite_use else g
            if (v._saved or free_empty) and (free_always or not retain_graph):
                v._saved = None
    return backward


def backward_micrograd_grads(self, retain_graph=False):   # every value keeps .grad, never reset
    for v in reversed(_topological(self)):
        if v is self:
            v.grad = torch.ones_like(v.data) + (0 if v.grad is None else v.grad)
        if v.grad is None or v.is_leaf:
            continue
        if v._saved is None:
            raise RuntimeError(SECOND_TIME)
        for p, g in zip(v.parents, v._backward(v.grad, v.unpack())):
            if p.requires_grad:
                p.grad = g if p.grad is None else p.grad + g
        if v._saved and not retain_graph:
            v._saved = None


@pytest.mark.parametrize("backward", [backward_kahn, backward_iterative], ids=["kahn", "iterative"])
def test_freeing_right_answers_written_differently(capsys, backward):
    ok, out = run(capsys, 2, engine(backward=backward))
    assert ok is True and out.startswith("✓"), out


@pytest.mark.parametrize("backward, words", [
    (backward_no_free, "saved values were not freed: a second backward ran"),
    (make_backward(free_always=True), "retain_graph=True did not keep the saved values"),
    (make_backward(free_empty=True), "a second backward through nodes that saved nothing raised"),
    (make_backward(refuse=False), "raise torch's RuntimeError"),
    (make_backward(overwrite_use=True), "a value used more than once got the gradient of only some of its uses"),
    (make_backward(overwrite_leaf=True), "replaced .grad instead of adding to it"),
    (backward_micrograd_grads, "gradients of intermediate values carried over"),
], ids=["no free", "free always", "free empty", "no refusal", "overwrite", "leaf overwrite", "micrograd grads"])
def test_freeing_wrong_answers_are_named(capsys, backward, words):
    ok, out = run(capsys, 2, engine(backward=backward))
    assert ok is False and out.startswith("✗") and words in out, out


# --- step 3: versions (the lesson gives `save`, which keeps (value, version), and `_inplace`, which counts) ------------
def unpack_other_words(self):
    def checked(value, version):
        if value._version > version or value._version < version:
            raise RuntimeError("one of the variables needed for gradient computation has been modified by an "
                               "inplace operation: [%s %s], is at version %d; expected version %d instead."
                               % (value.data.type(), list(value.data.size()), value._version, version))
        return value.data
    return {name: checked(*entry) for name, entry in self._saved.items()}


def unpack_stale_first(self):
    """Looks for a stale value first, then hands everything out."""
    stale = [(v, saved_at) for v, saved_at in self._saved.values() if v._version != saved_at]
    if stale:
        raise RuntimeError(lesson11.version_error(*stale[0]))
    return {name: entry[0].data for name, entry in self._saved.items()}


def unpack_against_zero(self):                      # compares with 0, the version every value starts at
    tensors = {}
    for name, (value, _) in self._saved.items():
        if value._version != 0:
            raise RuntimeError(lesson11.version_error(value, 0))
        tensors[name] = value.data
    return tensors


def unpack_unchecked(self):                         # versions kept but never compared
    return {name: value.data for name, (value, _) in self._saved.items()}


def unpack_parents_too(self):                       # checks every parent, saved or not
    saved_at = {id(v): at for v, at in self._saved.values()}
    for p in self.parents:
        if p._version != saved_at.get(id(p), 0):
            raise RuntimeError(lesson11.version_error(p, saved_at.get(id(p), 0)))
    return {name: value.data for name, (value, _) in self._saved.items()}


def unpack_without_versions(self):                  # the error, without the shape and versions
    for value, version in self._saved.values():
        if value._version != version:
            raise RuntimeError("one of the variables needed for gradient computation has been modified by an "
                               "inplace operation")
    return {name: value.data for name, (value, _) in self._saved.items()}


@pytest.mark.parametrize("unpack", [unpack_other_words, unpack_stale_first], ids=["other words", "stale first"])
def test_versions_right_answers_written_differently(capsys, unpack):
    ok, out = run(capsys, 3, engine(unpack=unpack))
    assert ok is True and out.startswith("✓"), out


@pytest.mark.parametrize("unpack, words", [
    (unpack_against_zero, "version not recorded at save time"),
    (unpack_unchecked, "an in-place change of a saved value went unnoticed"),
    (unpack_parents_too, "raised the version error where no backward needs the changed value"),
    (unpack_without_versions, "the version error does not carry what torch's does"),
], ids=["against 0", "unchecked", "parents too", "no versions in the message"])
def test_versions_wrong_answers_are_named(capsys, unpack, words):
    ok, out = run(capsys, 3, engine(unpack=unpack))
    assert ok is False and out.startswith("✗") and words in out, out


# --- step 4: the leaf rule --------------------------------------------------------------------------------------------
def inplace_other_order(self, op, other):
    if self.requires_grad and not self.parents and type(self).grad_enabled:
        raise RuntimeError(LEAF_IN_PLACE)
    self._version += 1
    op(self.data, torch.as_tensor(other.data if isinstance(other, Value) else other, dtype=torch.float32))
    return self


def inplace_grad_mode_first(self, op, other):
    refuse = self.grad_enabled and self.is_leaf and self.requires_grad
    if refuse:
        raise RuntimeError(LEAF_IN_PLACE)
    return Value._inplace(self, op, other)


def inplace_accepts_leaves(self, op, other):        # step 3's, unchanged
    op(self.data, self._value(other).data)
    self._version += 1
    return self


def inplace_refuses_under_no_grad(self, op, other):   # forgets the no_grad switch
    if self.is_leaf and self.requires_grad:
        raise RuntimeError(LEAF_IN_PLACE)
    return inplace_accepts_leaves(self, op, other)


def inplace_refuses_constants(self, op, other):     # every leaf, also those that require no grad
    if self.is_leaf and self.grad_enabled:
        raise RuntimeError(LEAF_IN_PLACE)
    return inplace_accepts_leaves(self, op, other)


def inplace_refuses_no_bump(self, op, other):       # the check added, the count lost
    if self.is_leaf and self.requires_grad and self.grad_enabled:
        raise RuntimeError(LEAF_IN_PLACE)
    op(self.data, self._value(other).data)
    return self


def inplace_own_words(self, op, other):             # refuses, in words of its own
    if self.is_leaf and self.requires_grad and self.grad_enabled:
        raise RuntimeError("cannot change a parameter in place")
    return inplace_accepts_leaves(self, op, other)


@pytest.mark.parametrize("inplace", [inplace_other_order, inplace_grad_mode_first], ids=["other order", "flag first"])
def test_leaf_rule_right_answers_written_differently(capsys, inplace):
    ok, out = run(capsys, 4, engine(_inplace=inplace))
    assert ok is True and out.startswith("✓"), out


@pytest.mark.parametrize("inplace, words", [
    (inplace_accepts_leaves, "in-place change of a leaf accepted"),
    (inplace_refuses_under_no_grad, "refused an in-place change under no_grad"),
    (inplace_refuses_constants, "refused an in-place change of a value that requires no grad"),
    (inplace_refuses_no_bump, "the version counter did not count in-place changes"),
    (inplace_own_words, "refuses that change with"),
], ids=["accepted", "under no_grad", "constants", "no bump", "own words"])
def test_leaf_rule_wrong_answers_are_named(capsys, inplace, words):
    ok, out = run(capsys, 4, engine(_inplace=inplace))
    assert ok is False and out.startswith("✗") and words in out, out


# --- the helper the lesson's cells use ---------------------------------------------------------------------------------
def test_engine_or_reference(capsys):
    mine = engine()
    assert exercises.engine_or_reference(mine, True, True) is mine
    assert exercises.engine_or_reference(mine, True, False) is Value
    assert exercises.engine_or_reference(..., True) is Value
    out = capsys.readouterr().out
    assert "running on your engine" in out and "reference engine" in out

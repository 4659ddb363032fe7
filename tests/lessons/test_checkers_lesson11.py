"""Lesson 11's checkers (check_saving, check_freeing, check_versions, check_leaf_rule, check_numerical_grad,
check_training), each on the reference answer, on right answers written differently, on wrong answers a student
writes (each answered with a line that names the mistake), and on nbgrader's stub. An engine answer is the reference
engine with one step's methods replaced."""
import collections
import types

import pytest
import torch

from gan_lessons import exercises
from gan_lessons.exercises import lesson11
from gan_lessons.exercises.lesson11 import LEAF_IN_PLACE, SECOND_TIME, Value
from gan_lessons.exercises.variants import variant

CHECKS = {1: exercises.check_saving, 2: exercises.check_freeing, 3: exercises.check_versions,
          4: exercises.check_leaf_rule}
SOURCES = {"en": "notebooks/src/11_your_own_autograd.py", "zh": "notebooks/zh/src/11_your_own_autograd.py"}


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
    outcomes = collections.Counter(lesson11.run(p, torch).kind for _, p in lesson11.programs(4))
    assert outcomes["other"] == 0
    assert outcomes["second time"] >= 5 and outcomes["version"] >= 10 and outcomes["leaf"] >= 5
    assert outcomes[None] >= 40                             # gradients compared: 24 plain expressions and more
    kinds = collections.Counter(k for k, p in lesson11.programs(4) if lesson11.run(p, torch).kind is None)
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


@pytest.mark.parametrize("step, name", [(1, "save"), (1, "__mul__"), (1, "exp"), (1, "__matmul__"), (2, "backward"),
                                        (3, "unpack"), (3, "_inplace"), (4, "_inplace")])
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


def mul_zeros_for_none(self, other):                # zeros where the statement asks for None
    other = self._value(other)
    out = self._result(torch.mul(self.data, other.data), (self, other))
    if self.requires_grad:
        out.save("other", other)
    if other.requires_grad:
        out.save("self", self)

    def backward(grad, saved):
        return ((grad * saved["other"]).sum_to_size(self.data.shape) if "other" in saved
                else torch.zeros_like(self.data),
                (grad * saved["self"]).sum_to_size(other.data.shape) if "self" in saved
                else torch.zeros_like(other.data))
    out._backward = backward
    return out


def exp_via_get(self):
    out = self._result(torch.exp(self.data), (self,))
    out.save("y", out)

    def backward(grad, saved):
        return [saved.get("y") * grad]
    out._backward = backward
    return out


# torch's names, each on the other operand (the gradients still right)
mul_names_swapped = variant(Value.__mul__, replace={
    'out.save("other", other)': 'out.save("self", other)', 'out.save("self", self)': 'out.save("other", self)',
    '(grad * saved["other"]).sum_to_size(self.data.shape) if "other" in saved else None':
        '(grad * saved["self"]).sum_to_size(self.data.shape) if "self" in saved else None',
    '(grad * saved["self"]).sum_to_size(other.data.shape) if "self" in saved else None':
        '(grad * saved["other"]).sum_to_size(other.data.shape) if "other" in saved else None'})
# sum_to_size(*shape): a TypeError for a 0-dim operand
mul_unpacked_shape = variant(Value.__mul__, replace={
    '(grad * saved["other"]).sum_to_size(self.data.shape)': '(grad * saved["other"]).sum_to_size(*self.data.shape)',
    '(grad * saved["self"]).sum_to_size(other.data.shape)': '(grad * saved["self"]).sum_to_size(*other.data.shape)'})


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


def save_as_list(self, name, value):
    """A [value, version] pair: it unpacks as the tuple does."""
    if self.requires_grad:
        self._saved[name] = [value, value._version]


@pytest.mark.parametrize("methods", [{"save": save_as_list}], ids=["pairs as lists"])
def test_saving_right_answers_written_differently(capsys, methods):
    ok, out = run(capsys, 1, engine(**methods))
    assert ok is True and out.startswith("✓"), out


@pytest.mark.parametrize("methods, words", [
    ({"__mul__": mul_own_operand}, "mul saved its own operand instead of the other"),
    ({"__mul__": mul_both}, "mul saved both operands"),
    ({"__mul__": mul_closure}, "mul saved nothing"),
    ({"__mul__": mul_no_reduce}, "mul's gradient for b has shape [3, 3]"),
    ({"__mul__": mul_copies}, "saved a copy or a bare tensor"),
    ({"__mul__": mul_zeros_for_none}, "where b needs none and torch's node returns None"),
    ({"exp": exp_input}, "exp saved its input instead of its output"),
    ({"exp": exp_wrong_gradient}, "exp's gradient for a differs from torch's"),
    ({"__mul__": mul_named_otherwise}, "mul saved for_self=b on `y = a * b`"),       # the statement asks torch's
    ({"exp": exp_via_get}, "exp saved y=out on `y = a.exp()`"),                     # names: self, other, result,
    ({"__mul__": mul_names_swapped}, "where torch's node saves other=b"),           # mat2
    ({"__mul__": mul_unpacked_shape}, "mul's backward raised TypeError"),
], ids=["own operand", "both", "closure", "no reduce", "copies", "zeros for None", "exp input", "exp gradient",
        "mul's own names", "exp's own name", "mul's names swapped", "a backward that raises"])
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


def make_backward(free_always=False, free_empty=False, refuse=True, overwrite_use=False, overwrite_leaf=False,
                  error=RuntimeError, every_leaf=False, refuse_unless_retained=False):
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
            if v._saved is None and refuse and not (refuse_unless_retained and retain_graph):
                raise error(SECOND_TIME)
            for p, g in zip(v.parents, v._backward(grad, v.unpack())):
                if g is not None and (p.requires_grad or every_leaf):
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
    (backward_no_free, "a second backward ran without an error on"),
    (make_backward(free_always=True), "retain_graph=True did not keep the saved values"),
    (make_backward(free_empty=True), "a second backward through nodes that saved nothing raised"),
    (make_backward(refuse=False), "where the saved values are gone and torch raises"),
    (make_backward(overwrite_use=True), "a value used more than once got the gradient of only some of its uses"),
    (make_backward(overwrite_leaf=True), "replaced .grad instead of adding to it"),
    (backward_micrograd_grads, "gradients of intermediate values carried over"),
    (make_backward(error=ValueError), "your engine raised ValueError: Trying to backward through the graph a second"),
    (make_backward(every_leaf=True), "a leaf that requires no grad holds a .grad"),
    (make_backward(refuse_unless_retained=True), "loss.backward(); loss.backward(retain_graph=True)`, where the saved "
                                                 "values are gone and torch raises"),
], ids=["no free", "free always", "free empty", "no refusal", "overwrite", "leaf overwrite", "micrograd grads",
        "another error type", "a .grad for every leaf", "no refusal when retaining"])
def test_freeing_wrong_answers_are_named(capsys, backward, words):
    ok, out = run(capsys, 2, engine(backward=backward))
    assert ok is False and out.startswith("✗") and words in out, out


def test_a_grad_on_leaves_that_require_none_is_said_once_not_also_as_carried_over_gradients(capsys):
    ok, out = run(capsys, 2, engine(backward=make_backward(every_leaf=True)))
    assert ok is False and out.count("✗") == 1 and "carried over" not in out, out


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


def unpack_refreshed_on_error(self):                 # the stale entry saved again at its new version, then raised
    for name, (value, version) in self._saved.items():
        if value._version != version:
            self._saved[name] = (value, value._version)
            raise RuntimeError(lesson11.version_error(value, version))
    return {name: value.data for name, (value, _) in self._saved.items()}


@pytest.mark.parametrize("unpack", [unpack_other_words, unpack_stale_first], ids=["other words", "stale first"])
def test_versions_right_answers_written_differently(capsys, unpack):
    ok, out = run(capsys, 3, engine(unpack=unpack))
    assert ok is True and out.startswith("✓"), out


@pytest.mark.parametrize("unpack, words", [
    (unpack_against_zero, "a value changed before its forward was called stale"),
    (unpack_unchecked, "an in-place change of a saved value went unnoticed"),
    (unpack_parents_too, "raised the version error where no backward needs the changed value"),
    (unpack_without_versions, "the version error does not carry what torch's does"),
    (unpack_refreshed_on_error, "after the version error, a second backward() through the same stale graph raised "
                                "nothing"),
], ids=["against 0", "unchecked", "parents too", "no versions in the message", "refreshed on error"])
def test_versions_wrong_answers_are_named(capsys, unpack, words):
    ok, out = run(capsys, 3, engine(unpack=unpack))
    assert ok is False and out.startswith("✗") and words in out, out


def test_an_unpack_that_hands_back_values_gets_a_line_not_a_traceback(capsys):
    """unpack returning the Values, not their tensors: the backward fails inside the program, and the checker says
    so in its feedback instead of raising."""
    def unpack_values(self):
        return {name: value for name, (value, _) in self._saved.items()}
    ok, out = run(capsys, 3, engine(unpack=unpack_values))
    assert ok is False and out.startswith("✗ versions:") and "your engine raised" in out, out


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
    finished = exercises.engine_or_reference(mine, True, False)
    assert exercises.engine_or_reference(..., True) is finished and finished is not mine
    out = capsys.readouterr().out
    assert "running on your engine" in out and "running on a finished engine, not yours" in out
    assert "lesson11" not in out and "Value" not in out      # the fallback does not point at the answers


def test_the_finished_engine_and_functions_run_as_the_reference_and_show_no_source(capsys):
    """What a lesson cell runs on while the student's step is not solved: the reference's behaviour (the same
    outcome as the reference on every program), and no text of its answers for inspect.getsource to show, not even
    of a backward it makes."""
    import inspect
    finished = exercises.engine_or_reference(..., False)
    assert lesson11.compare(finished, 4) == []
    numerical_grad = lesson11.numerical_grad_or_finished(..., False)
    fit = lesson11.fit_or_finished(..., False)
    assert exercises.check_numerical_grad(numerical_grad) and exercises.check_training(finished, fit)
    out = finished(torch.ones(2), requires_grad=True).tanh()
    for shown in [finished, out._backward, numerical_grad, fit, *[getattr(finished, name) for name in
                  ("save", "__mul__", "exp", "__matmul__", "tanh", "backward", "unpack", "_inplace")]]:
        with pytest.raises((OSError, TypeError)):
            inspect.getsource(shown)
    assert inspect.getsource(Value.unpack)          # the package's own reference is still there to read and test


# --- step 1, again: save keeps the version; `@` --------------------------------------------------------------------
def save_value_only(self, name, value):             # no version beside the value
    if self.requires_grad:
        self._saved[name] = value


def save_version_zero(self, name, value):           # the version every value starts at, not the one it has
    if self.requires_grad:
        self._saved[name] = (value, 0)


def save_list_entry(self, name, value):             # written another way: the same pair, built differently
    if not self.requires_grad:
        return
    entry = tuple([value, int(value._version)])
    self._saved.update({name: entry})


def matmul_own_operand(self, other):                # keeps the operand whose gradient it computes
    out = self._result(self.data @ other.data, (self, other))
    if self.requires_grad:
        out.save("self", self)
    if other.requires_grad:
        out.save("mat2", other)
    out._backward = lambda grad, saved: (grad @ other.data.T, self.data.T @ grad)
    return out


def matmul_untransposed(self, other):               # b's gradient with the product the wrong way round
    out = self._result(self.data @ other.data, (self, other))
    if self.requires_grad:
        out.save("mat2", other)
    if other.requires_grad:
        out.save("self", self)
    out._backward = lambda grad, saved: (grad @ saved["mat2"].T if "mat2" in saved else None,
                                         grad.T @ saved["self"] if "self" in saved else None)
    return out


def matmul_other_names(self, other):                # its own names, not torch's; torch.matmul, .mT
    out = self._result(torch.matmul(self.data, other.data), (self, other))
    if other.requires_grad:
        out.save("left", self)
    if self.requires_grad:
        out.save("right", other)
    out._backward = lambda grad, saved: (torch.matmul(grad, saved["right"].mT) if "right" in saved else None,
                                         torch.matmul(saved["left"].mT, grad) if "left" in saved else None)
    return out


def exp_bare_gradient(self):                       # its one gradient returned alone, not in a tuple
    out = self._result(self.data.exp(), (self,))
    out.save("result", out)
    out._backward = lambda grad, saved: grad * saved["result"]
    return out


@pytest.mark.parametrize("methods", [{"save": save_list_entry}], ids=["save as a list"])
def test_saving_more_right_answers(capsys, methods):
    ok, out = run(capsys, 1, engine(**methods))
    assert ok is True and out.startswith("✓"), out


@pytest.mark.parametrize("methods, words", [
    ({"save": save_value_only}, "save kept a value alone, with no version"),
    ({"save": save_version_zero}, "save kept version 0 for a value at version 2"),
    ({"__matmul__": matmul_own_operand}, "matmul saved its own operand instead of the other"),
    ({"__matmul__": matmul_untransposed}, "matmul's gradient for b has shape [4, 3]"),
    ({"__matmul__": matmul_other_names}, "where torch's node saves mat2=b"),
    ({"exp": exp_bare_gradient}, "exp's backward returned Tensor"),
], ids=["value only", "version 0", "matmul own operand", "matmul untransposed", "matmul's own names",
        "exp's gradient not in a tuple"])
def test_saving_more_wrong_answers_are_named(capsys, methods, words):
    ok, out = run(capsys, 1, engine(**methods))
    assert ok is False and out.startswith("✗") and words in out, out


# --- step 2, again: which call raised; no topological order --------------------------------------------------------------
def backward_recursive(self, retain_graph=False, grad=None):
    """The classic slip: recursion from the output, each parent visited once per use, no topological order."""
    grad = torch.ones_like(self.data) if grad is None else grad
    if self.is_leaf:
        self.grad = grad if self.grad is None else self.grad + grad
        return
    if self._saved is None:
        raise RuntimeError(SECOND_TIME)
    grads = self._backward(grad, self.unpack())
    if self._saved and not retain_graph:
        self._saved = None
    for p, g in zip(self.parents, grads):
        if p.requires_grad:
            p.backward(retain_graph, g)


def test_the_call_that_raised_is_recorded():
    program = "a = leaf([3], requires_grad=True)\nloss = (a * a).sum()\nloss.backward()\nloss.backward()"
    assert lesson11.run(program, torch).call == 2 and lesson11.run(program, Value).call == 2
    assert lesson11.run(program.replace("loss.backward()\nloss.backward()", "loss.backward()"), torch).call == 0


def test_freeing_a_third_right_answer(capsys):
    ok, out = run(capsys, 2, Value)
    assert ok is True


def test_freeing_without_topological_order_is_named(capsys):
    ok, out = run(capsys, 2, engine(backward=backward_recursive))
    assert ok is False and "within the first and only backward call" in out and "used twice" in out, out
    assert "retain_graph=True did not keep" not in out      # not blamed on retain_graph


# --- step 3, again: the bump is the student's too ----------------------------------------------------------------------
def inplace_no_count(self, op, other):              # the placeholder, left as it was
    op(self.data, self._value(other).data)
    return self


def inplace_counts_by_assignment(self, op, other):  # written another way
    self.data = op(self.data.clone(), torch.as_tensor(getattr(other, "data", other), dtype=torch.float32))
    self._version = self._version + 1
    return self


def test_versions_with_a_count_written_differently(capsys):
    ok, out = run(capsys, 3, engine(_inplace=inplace_counts_by_assignment))
    assert ok is True, out


def test_a_missing_bump_is_named_in_inplace(capsys):
    ok, out = run(capsys, 3, engine(_inplace=inplace_no_count))
    assert ok is False and "the version counter did not count in-place changes" in out, out
    assert "`_inplace`" not in out and "must bump" not in out, out               # the mistake, not the code


# --- step 4, again: a value an operation made is no leaf --------------------------------------------------------------
def inplace_forgets_is_leaf(self, op, other):
    if self.requires_grad and self.grad_enabled:
        raise RuntimeError(LEAF_IN_PLACE)
    return inplace_accepts_leaves(self, op, other)


def inplace_by_parents(self, op, other):            # a third right answer: no parents means a leaf
    if type(self).grad_enabled and self.requires_grad and len(self.parents) == 0:
        raise RuntimeError(LEAF_IN_PLACE)
    return inplace_counts_by_assignment(self, op, other)


def test_the_programs_change_values_an_operation_made():
    kinds = collections.Counter(k for k, _ in lesson11.programs(4))
    assert kinds["non-leaf in place"] >= 3 and kinds["non-leaf in place after backward"] >= 2


def test_leaf_rule_third_right_answer(capsys):
    ok, out = run(capsys, 4, engine(_inplace=inplace_by_parents))
    assert ok is True, out


def test_leaf_rule_refusing_values_an_operation_made_is_named(capsys):
    ok, out = run(capsys, 4, engine(_inplace=inplace_forgets_is_leaf))
    assert ok is False and "refused an in-place change of a value an operation made (not a leaf)" in out, out


# --- step 5: finite differences -------------------------------------------------------------------------------------------
def ng_in_place(f, x, eps=1e-3):
    grad = torch.zeros_like(x)
    flat, out = x.view(-1), grad.view(-1)
    for i in range(flat.numel()):
        old = flat[i].item()
        flat[i] = old + eps
        up = f(x)
        flat[i] = old - eps
        down = f(x)
        flat[i] = old
        out[i] = (up - down) / (2 * eps)
    return grad


def ng_eye(f, x, eps=1e-3):
    steps = torch.eye(x.numel(), dtype=x.dtype) * eps
    return torch.tensor([(f(x + e.reshape(x.shape)) - f(x - e.reshape(x.shape))) / (2 * eps) for e in steps],
                        dtype=x.dtype).reshape(x.shape)


def ng_indices(f, x, eps=1e-3):
    import itertools
    g = torch.empty_like(x)
    for idx in itertools.product(*[range(n) for n in x.shape]):
        up, down = x.clone(), x.clone()
        up[idx] += eps
        down[idx] -= eps
        g[idx] = (f(up) - f(down)) / (2 * eps)
    return g


def ng_one_sided(f, x, eps=1e-3):
    g, base = torch.zeros(x.numel(), dtype=x.dtype), f(x)
    for i in range(x.numel()):
        y = x.clone().reshape(-1)
        y[i] += eps
        g[i] = (f(y.reshape(x.shape)) - base) / eps
    return g.reshape(x.shape)


def ng_by_eps(f, x, eps=1e-3):
    return ng_in_place(f, x, eps) * 2


def ng_at_once(f, x, eps=1e-3):
    return torch.full_like(x, (f(x + eps) - f(x - eps)) / (2 * eps))


def ng_not_restored(f, x, eps=1e-3):
    grad, flat = torch.zeros_like(x), x.view(-1)
    for i in range(flat.numel()):
        old = flat[i].item()
        flat[i] = old + eps
        up = f(x)
        flat[i] = old - eps
        grad.view(-1)[i] = (up - f(x)) / (2 * eps)
    return grad


def ng_flat(f, x, eps=1e-3):
    return ng_in_place(f, x, eps).reshape(-1)


def ng_numpy(f, x, eps=1e-3):                       # the right numbers, as a NumPy array
    return ng_in_place(f, x, eps).numpy()


def ng_stub(f, x, eps=1e-3):
    # YOUR CODE HERE
    raise NotImplementedError()


@pytest.mark.parametrize("answer", [ng_in_place, ng_eye, ng_indices], ids=["in place", "eye", "indices"])
def test_numerical_grad_right_answers(capsys, answer):
    assert exercises.check_numerical_grad(answer) is True, capsys.readouterr().out


@pytest.mark.parametrize("answer, words", [
    (ng_one_sided, "one-sided difference (f(x + eps) - f(x)) / eps"),
    (ng_by_eps, "twice the gradient"),
    (ng_at_once, "every entry of your answer is the same number"),
    (ng_not_restored, "did not put them back"),
    (ng_flat, "should have x's shape, [3, 4]"),
    (ng_numpy, "your function returned ndarray, not a tensor"),
    (ng_stub, "not solved yet"),
    (..., "not solved yet"),
], ids=["one-sided", "by eps", "at once", "not restored", "flat", "numpy", "stub", "ellipsis"])
def test_numerical_grad_wrong_answers_are_named(capsys, answer, words):
    ok = exercises.check_numerical_grad(answer)
    out = capsys.readouterr().out
    assert ok is False and words in out, out
    assert "(f(x + eps) - f(x - eps)) / (2" not in out       # the fix is not printed


def ng_first_axis(f, x, eps=1e-3):
    """Moves x[i] for i in range(len(x)): whole rows of a matrix, and len() of a 0-dim tensor raises."""
    grad = torch.zeros_like(x)
    for i in range(len(x)):
        old = x[i].clone()
        x[i] = old + eps
        up = f(x)
        x[i] = old - eps
        down = f(x)
        x[i] = old
        grad[i] = (up - down) / (2 * eps)
    return grad


def test_a_function_that_raises_is_not_counted_like_one_that_is_off(capsys):
    """Wrong on the matrix and raising on the 0-dim tensor: both are said, neither as "like" the other."""
    ok = exercises.check_numerical_grad(ng_first_axis)
    out = capsys.readouterr().out
    assert ok is False and "away from the exact gradient" in out and "raised TypeError" in out, out
    assert "more function(s) like it" not in out, out


# --- the last build: training on the engine -----------------------------------------------------------------------------
def fit(params, x, y, steps, lr):
    W1, b1, W2, b2 = params
    losses = []
    for _step in range(steps):
        pred = (x @ W1 + b1).tanh() @ W2 + b2
        loss = ((pred - y) * (pred - y)).sum() * (1 / 64)
        loss.backward()
        with Value.no_grad():
            for p in params:
                p.add_(p.grad * -lr)
                p.grad = None
        losses.append(loss.data.item())
    return losses


def fit_reset_first(params, x, y, steps, lr):
    losses = []
    for _step in range(steps):
        for p in params:
            p.grad = None
        err = (x @ params[0] + params[1]).tanh() @ params[2] + params[3] + y * -1
        loss = (err * err).sum() * (1.0 / len(x.data))
        loss.backward()
        with Value.no_grad():
            for p in params:
                p.add_(-lr * p.grad)
        losses.append(float(loss.data))
    return losses


def fit_other_form(params, x, y, steps, lr):
    """A loop over (step, loss) that keeps the loss Values, not numbers (a later cell formats them as numbers); the
    update as mul_ then add_ back."""
    kept = []
    for _step in range(steps):
        h = (x @ params[0] + params[1]).tanh()
        loss = (((h @ params[2] + params[3]) - y) * ((h @ params[2] + params[3]) - y)).sum() * (1 / 64)
        loss.backward()
        with Value.no_grad():
            for p in params:
                update = p.grad * lr
                p.add_(-update)
                p.grad = None
        kept.append(loss)
    return kept


def _fit_with(update, reset=True, forward_once=False):
    def fit(params, x, y, steps, lr):
        losses, loss = [], None
        for _step in range(steps):
            if loss is None or not forward_once:
                pred = (x @ params[0] + params[1]).tanh() @ params[2] + params[3]
                loss = ((pred - y) * (pred - y)).sum() * (1 / 64)
            loss.backward()
            params = update(params, lr) or params
            if reset:
                for p in params:
                    p.grad = None
            losses.append(loss.data.item())
        return losses
    return fit


def _descend(params, lr):
    with Value.no_grad():
        for p in params:
            p.add_(p.grad * -lr)


def _grad_mode(params, lr):
    for p in params:
        p.add_(p.grad * -lr)


def _ascend(params, lr):
    with Value.no_grad():
        for p in params:
            p.add_(p.grad * lr)


def _rebind(params, lr):
    with Value.no_grad():
        return [p + p.grad * -lr for p in params]


def _fixed_lr(params, lr):
    _descend(params, 0.1)


def fit_on_copies(params, x, y, steps, lr):
    """The right losses, but each step makes new Values and rebinds the list: the caller's parameters never move."""
    params, losses = list(params), []
    for _step in range(steps):
        pred = (x @ params[0] + params[1]).tanh() @ params[2] + params[3]
        loss = ((pred - y) * (pred - y)).sum() * (1 / 64)
        loss.backward()
        params = [Value(p.data - lr * p.grad.data if isinstance(p.grad, Value) else p.data - lr * p.grad,
                        requires_grad=True) for p in params]
        losses.append(loss.data.item())
    return losses


class TanhKeepsInput(Value):
    def tanh(self):
        out = self._result(self.data.tanh(), (self,))
        out.save("self", self)
        out._backward = lambda grad, saved: (grad * (1 - saved["self"].tanh() ** 2),)
        return out


@pytest.mark.parametrize("answer", [fit, fit_reset_first], ids=["reference", "reset first"])
def test_training_right_answers(capsys, answer):
    assert exercises.check_training(Value, answer) is True, capsys.readouterr().out


@pytest.mark.parametrize("eng, answer, words", [
    (Value, _fit_with(_descend, reset=False), "no step resets the gradients"),
    (Value, _fit_with(_grad_mode), "raised the leaf error"),
    (Value, _fit_with(_ascend), "along the gradient, not against it"),
    (Value, _fit_with(_rebind), "A parameter had no gradient at the update"),
    (Value, fit_other_form, "your losses are Value, not numbers"),
    (Value, _fit_with(_descend, forward_once=True), "Trying to backward through the graph a second time"),
    (Value, _fit_with(_fixed_lr), "with steps=8, lr=0.3 your loss at step 2"),
    (TanhKeepsInput, fit, "tanh saved its input instead of its output"),
    (Value, fit_on_copies, "the parameters passed in are where they started"),
    (Value, ..., "not solved yet"),
], ids=["no reset", "grad mode", "ascent", "rebind", "Values kept", "forward once", "fixed lr", "tanh input",
        "copies moved", "ellipsis"])
def test_training_wrong_answers_are_named(capsys, eng, answer, words):
    ok = exercises.check_training(eng, answer)
    out = capsys.readouterr().out
    assert ok is False and words in out, out


def test_a_tanh_stub_is_not_solved_yet(capsys):
    ok = exercises.check_training(engine(tanh=stub("tanh")), fit)
    out = capsys.readouterr().out
    assert ok is False and "not solved yet" in out and "`tanh`" in out, out


# --- the drawing ------------------------------------------------------------------------------------------------------------
def test_the_drawing_marks_what_each_node_saved():
    a, b = Value(torch.ones(3), requires_grad=True), Value(torch.full((3,), 2.0))
    loss = ((a * b).exp() * b).sum()
    loss.backward(retain_graph=True)
    with Value.no_grad():
        b.add_(1)
    states = collections.Counter(s.state for s in lesson11.draw_engine({"loss": loss}, a=a, b=b).saved)
    assert states == {"stale": 2, "alive": 1}
    loss2 = (a * b).exp().sum()
    loss2.backward()
    drawn = lesson11.draw_engine({"loss": loss2}, a=a, b=b)
    assert [s.state for s in drawn.saved] == ["freed", "freed"] and "exp" in drawn.text and "mul" in drawn.text


# --- the student copy gives the container, not the answers ----------------------------------------------------------------
@pytest.mark.parametrize("folder", ["notebooks/student", "notebooks/zh/student"])
def test_the_student_copies_record_no_version_and_bump_nothing(folder):
    """No cell of the two student copies keeps a version beside a saved value, counts an in-place change, or calls
    `save`: the student writes all three. The only operations given (`+`, `sum` and what is written with them) save
    nothing; lesson 12 starts from an engine whose `unpack` and `_inplace` check and count nothing."""
    import nbformat
    copies = [f"{folder}/11_your_own_autograd.ipynb", f"{folder}/12_your_engine_versions_and_training.ipynb"]
    stubs = []
    for copy in copies:
        code = "\n".join(c.source for c in nbformat.read(copy, as_version=4).cells if c.cell_type == "code")
        assert "value._version" not in code and "_version +=" not in code and "_version = self._version" not in code
        assert ".save(" not in code
        stubs.append(code.count("raise NotImplementedError()"))
    assert stubs[0] >= 5 and stubs[1] >= 5, stubs   # save, *, exp, @, backward; _inplace twice, unpack, tanh, fit, ...


def test_lesson_12_starts_from_an_engine_that_holds_none_of_its_answers():
    """The class lesson 12 goes on with: lesson 11's steps written, its own not (no check, no count, no tanh), and
    nothing of the finished engine among its bases."""
    import inspect
    engine = lesson11.engine_after_lesson_11()
    assert Value not in engine.__mro__ and not hasattr(engine, "tanh")
    a = engine(torch.ones(3), requires_grad=True)
    y = a.exp()
    with engine.no_grad():
        y.mul_(2)
    assert y._version == 0 and torch.equal(y.unpack()["result"], torch.full((3,), 2 * torch.e))
    a.add_(1)                                     # no leaf rule yet
    source = "\n".join(inspect.getsource(c) for c in engine.__mro__ if c.__module__.startswith("gan_lessons"))
    assert "version_error" not in source and "LEAF_IN_PLACE" not in source and "_version += 1" not in source
    assert engine is not lesson11.engine_after_lesson_11()     # a fresh class each time


# --- slips a student met trying the lesson -----------------------------------------------------------------------------
def backward_aliasing_grads(self, retain_graph=False):
    """A leaf keeps the gradient tensor it is handed, and the next backward adds to it in place."""
    grads = {self: torch.ones_like(self.data)}
    for v in reversed(_topological(self)):
        grad = grads.pop(v, None)
        if grad is None:
            continue
        if v.is_leaf:
            if v.grad is None:
                v.grad = grad
            else:
                v.grad += grad
            continue
        if v._saved is None:
            raise RuntimeError(SECOND_TIME)
        for p, g in zip(v.parents, v._backward(grad, v.unpack())):
            if p.requires_grad:
                grads[p] = grads[p] + g if p in grads else g
        if v._saved and not retain_graph:
            v._saved = None


def backward_empty_is_freed(self, retain_graph=False):
    """Takes a node that saved nothing ({}) for a freed one (None)."""
    grads = {self: torch.ones_like(self.data)}
    for v in reversed(_topological(self)):
        grad = grads.pop(v, None)
        if grad is None:
            continue
        if v.is_leaf:
            v.grad = grad if v.grad is None else v.grad + grad
            continue
        if not v._saved:
            raise RuntimeError(SECOND_TIME)
        for p, g in zip(v.parents, v._backward(grad, v.unpack())):
            if p.requires_grad:
                grads[p] = grads[p] + g if p in grads else g
        if not retain_graph:
            v._saved = None


def matmul_no_transpose(self, other):
    out = self._result(self.data @ other.data, (self, other))
    if self.requires_grad:
        out.save("mat2", other)
    if other.requires_grad:
        out.save("self", self)
    out._backward = lambda grad, saved: (grad @ saved["mat2"] if "mat2" in saved else None,
                                         saved["self"] @ grad if "self" in saved else None)
    return out


def ng_put_back_by_arithmetic(f, x, eps=1e-3):
    """Right: x comes back within a rounding of where it was."""
    grad, flat = torch.zeros_like(x), x.view(-1)
    for i in range(flat.numel()):
        flat[i] += eps
        up = f(x)
        flat[i] -= 2 * eps
        down = f(x)
        flat[i] += eps
        grad.view(-1)[i] = (up - down) / (2 * eps)
    return grad


def test_a_gradient_shared_by_two_leaves_is_named(capsys):
    ok, out = run(capsys, 2, engine(backward=backward_aliasing_grads))
    assert ok is False and "a.grad and b.grad are one tensor" in out, out


def test_a_node_that_saved_nothing_is_not_a_freed_one(capsys):
    ok, out = run(capsys, 2, engine(backward=backward_empty_is_freed))
    assert ok is False and "a node that had saved nothing was taken for a freed one" in out, out
    assert "topological" not in out


def test_a_matmul_gradient_of_the_wrong_shape_is_named(capsys):
    ok, out = run(capsys, 1, engine(__matmul__=matmul_no_transpose))
    assert ok is False and "the shapes in one of its products do not fit" in out, out


def test_x_put_back_by_arithmetic_is_back(capsys):
    assert exercises.check_numerical_grad(ng_put_back_by_arithmetic) is True, capsys.readouterr().out


def test_whole_powers_are_products():
    a = Value(torch.tensor([1.0, 2.0]), requires_grad=True)
    (a ** 3).sum().backward()
    assert torch.allclose(a.grad, 3 * a.data ** 2)


# --- wrong engines a student writes, each named by its mistake, never by the code that fixes it ---------------------
class ValueComparedByValue(Value):
    """The version check made by comparing values: a change undone (add_(0.5), then add_(-0.5)) goes unnoticed,
    where torch raises."""
    def save(self, name, value):
        if self.requires_grad:
            self._saved[name] = (value, value._version, value.data.clone())

    def unpack(self):
        tensors = {}
        for name, (value, version, copy) in self._saved.items():
            if not torch.equal(value.data, copy):
                raise RuntimeError(lesson11.version_error(value, version))
            tensors[name] = value.data
        return tensors


class ChangeThenRefuse(Value):
    """The leaf rule checked after the change: the refused leaf is changed all the same."""
    def _inplace(self, op, other):
        op(self.data, self._value(other).data)
        if self.is_leaf and self.requires_grad and self.grad_enabled:
            raise RuntimeError(LEAF_IN_PLACE)
        self._version += 1
        return self


class BumpThenRefuse(Value):
    """The version bumped before the leaf rule: the refused leaf's version moves."""
    def _inplace(self, op, other):
        self._version += 1
        if self.is_leaf and self.requires_grad and self.grad_enabled:
            raise RuntimeError(LEAF_IN_PLACE)
        op(self.data, self._value(other).data)
        return self


class NoBumpUnderNoGrad(Value):
    """Counts in-place changes only in grad mode: an optimizer's update under no_grad goes uncounted."""
    def _inplace(self, op, other):
        if self.is_leaf and self.requires_grad and self.grad_enabled:
            raise RuntimeError(LEAF_IN_PLACE)
        op(self.data, self._value(other).data)
        if self.grad_enabled:
            self._version += 1
        return self


# Words that state the rule or the code that fixes it, which no message may print for these engines.
RULE_WORDS = ("`_inplace`", "`_version`", "`save`", "`unpack`", "`_saved`", "grad_enabled", "must bump", "Record the "
              "version", "Compare with the version", "may change in place only", "topological order", "Run each node",
              "loss.data.item()", "change the parameter itself", "Give each leaf")


@pytest.mark.parametrize("engine_, step, words", [
    (ValueComparedByValue, 3, "an in-place change of a saved value went unnoticed"),
    (ChangeThenRefuse, 4, "a refused in-place change of a leaf still left its mark"),
    (BumpThenRefuse, 4, "a refused in-place change of a leaf still left its mark"),
    (NoBumpUnderNoGrad, 3, "under no_grad, on a leaf that requires grad, the value is at version 0"),
], ids=["values compared", "change then refuse", "bump then refuse", "no bump under no_grad"])
def test_a_wrong_engine_is_named_by_its_mistake(capsys, engine_, step, words):
    ok, out = run(capsys, step, engine_)
    assert ok is False and words in out, out
    assert not [w for w in RULE_WORDS if w in out], out


def test_no_rejection_of_a_wrong_engine_states_the_rule(capsys):
    """Every wrong engine and loop this file names: its feedback names what happened, not the code to write."""
    said = []
    for engine_, step in ((ValueComparedByValue, 3), (ChangeThenRefuse, 4), (BumpThenRefuse, 4),
                          (NoBumpUnderNoGrad, 3), (engine(_inplace=inplace_no_count), 3),
                          (engine(backward=backward_recursive), 2), (engine(__mul__=mul_no_reduce), 1)):
        run(capsys, step, engine_)
        said.append(capsys.readouterr().out)
    for answer in (fit_other_form, _fit_with(_rebind), _fit_with(_descend, reset=False)):
        exercises.check_training(Value, answer)
        said.append(capsys.readouterr().out)
    stated = [(w, text) for text in said for w in RULE_WORDS if w in text]
    assert not stated, stated


def test_a_backward_that_leaves_a_grad_in_every_value_is_named(capsys):
    """micrograd's backward gives every value a .grad; torch keeps one in a leaf that requires grad only, and the
    lesson asks for torch's behaviour."""
    def backward_grad_everywhere(self, retain_graph=False):
        Value.backward(self, retain_graph)
        self.grad = torch.ones_like(self.data)              # the output keeps its seed, as micrograd's does
    ok, out = run(capsys, 2, engine(backward=backward_grad_everywhere))
    assert ok is False and "a .grad is held by the loss" in out and "leaf that requires grad only" in out, out


def test_a_version_that_counts_only_changed_values_is_named(capsys):
    """`add_(0.0)` changes nothing and is still a change: torch's version moves, and its error comes."""
    def inplace_if_values_change(self, op, other):
        before = self.data.clone()
        op(self.data, self._value(other).data)
        if not torch.equal(before, self.data):
            self._version += 1
        return self
    ok, out = run(capsys, 3, engine(_inplace=inplace_if_values_change))
    assert ok is False and "went unnoticed" in out and ("add_(0.0)" in out or "mul_(1.0)" in out), out


def test_a_numerical_grad_that_ignores_its_eps_is_named(capsys):
    from gan_lessons.exercises.lesson11.numerics import finished_numerical_grad

    def numerical_grad_fixed_eps(f, x, eps=1e-3):
        return finished_numerical_grad(f, x, 1e-3)
    ok = exercises.check_numerical_grad(numerical_grad_fixed_eps)
    out = capsys.readouterr().out
    assert ok is False and "is the one for eps = 0.001" in out, out


@pytest.mark.parametrize("check", [exercises.check_saving, exercises.check_freeing, exercises.check_versions,
                                   exercises.check_leaf_rule], ids=lambda c: c.__name__)
def test_an_engine_check_given_something_else_says_what_it_was_given(capsys, check):
    """A function, or a class that is no engine: one line, never a traceback from inside the programs."""
    class NotAnEngine:
        pass
    for given, words in ((len, "was given a builtin_function_or_method"),
                         (NotAnEngine, "was given the class NotAnEngine, which has no no_grad")):
        assert check(given) is False
        out = capsys.readouterr().out.strip().splitlines()
        assert len(out) == 1 and out[0].startswith("✗") and words in out[0], out


class _RootFreed(Value):
    """A backward that frees the root's saved values whatever retain_graph says."""

    def backward(self, retain_graph=False):
        super().backward(retain_graph)
        if self._saved:
            self._saved = None


def test_a_root_freed_despite_retain_graph_is_seen(capsys):
    assert exercises.check_freeing(_RootFreed) is False
    out = capsys.readouterr().out
    assert "retain_graph=True did not keep the saved values" in out and "loss = loss * loss" in out, out


# a number operand never wrapped: `a * 2.0` reaches `other.data` on a float
mul_number_not_wrapped = variant(Value.__mul__, drop="other = self._value(other)")


def test_an_engine_whose_mul_does_not_take_a_number_is_rejected(capsys):
    assert any(" * 2.0" in p or "0.5 * " in p for _, p in lesson11.programs(4))     # the programs have number operands
    for step in (1, 2):
        ok, out = run(capsys, step, engine(__mul__=mul_number_not_wrapped))
        assert ok is False and "AttributeError" in out, out


@pytest.mark.parametrize("source, pattern, step", [
    ("notebooks/src/11_your_own_autograd.py", r"The checker runs (\d+) programs", 2),
    ("notebooks/zh/src/11_your_own_autograd.py", r"运行 (\d+) 个程序", 2),
    ("notebooks/src/12_your_engine_versions_and_training.py", r"runs (\d+) programs: step 2's again, and", 3),
    ("notebooks/zh/src/12_your_engine_versions_and_training.py", r"检查程序运行 (\d+) 个程序：第 2 步的那些，再", 3),
    ("notebooks/src/12_your_engine_versions_and_training.py", r"runs (\d+) programs: step 2's and step 3's", 4),
    ("notebooks/zh/src/12_your_engine_versions_and_training.py", r"检查程序运行 (\d+) 个程序：第 2 步和第 3 步", 4),
])
def test_the_lessons_say_how_many_programs_each_checker_runs(source, pattern, step):
    import re
    from pathlib import Path

    from gan_lessons.exercises.lesson11.cases import programs
    text = (Path(__file__).resolve().parents[2] / source).read_text(encoding="utf-8")
    said = re.findall(pattern, re.sub(r"\n# ", " ", text))
    assert said == [str(len(programs(step)))], (source, said, len(programs(step)))

"""The view errors, diagnosed (part of the diagnoser, errors.Diagnoser): an in-place write into a view autograd
forbids writing, raised at the write itself, in the forward. Three kinds, told apart by the error's own words:

- the wrapper a module's full backward hook puts around its inputs and outputs ("Output 0 of BackwardHookFunction
  is a view"): an in-place activation in a model whose modules carry full backward hooks (K-FAC-style optimizers,
  Grad-CAM, BackPACK); named: the module that wrote, the module whose hook made the wrapper, and the hook;
- one of several views a single op returned (unbind, split, chunk): named: the view, the line that made it;
- a view a custom autograd.Function returned (or its input returned as is), or one made under no_grad and written
  with gradients on: named: the view, the Function, the line that made it."""
import inspect
import linecache
import re

import torch
from torch.nn.modules import module as nn_module

from gan_lessons.doctor.frames import DOCTOR_DIR, TORCH_DIR, traceback_frames
from gan_lessons.doctor.report import Diagnosis, Where
from gan_lessons.i18n import N_, _

# the torch functions that return several views of one tensor (autograd forbids writing into any of them)
_MULTI = {"chunk", "split", "unbind", "tensor_split", "split_with_sizes", "hsplit", "vsplit", "dsplit", "unsafe_chunk",
          "unsafe_split"}
_OUTPUT_OF = re.compile(r"Output (\d+) of (\w+) is a view and is being modified inplace")


def _full_hooks(module):
    """The full backward hooks that wrap `module`'s inputs and outputs: its own, or every module's (global)."""
    own = list(module._backward_hooks.values()) + list(module._backward_pre_hooks.values()) \
        if module._is_full_backward_hook or module._backward_pre_hooks else []
    every = list(nn_module._global_backward_hooks.values()) + list(nn_module._global_backward_pre_hooks.values()) \
        if nn_module._global_is_full_backward_hook or nn_module._global_backward_pre_hooks else []
    return own + every


def _defined_at(function):
    """Where a hook was written: a Where for the student's code, None for a library's."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None or code.co_filename.startswith((TORCH_DIR, DOCTOR_DIR)):
        return None
    first = code.co_firstlineno
    return Where(code.co_filename, first, linecache.getline(code.co_filename, first).strip())


class ViewErrors:
    """The view errors' diagnosis, from the journal, the namer's names and the student's failing line (the
    diagnoser's `failing_call`)."""

    def __init__(self, journal, namer, failing_call):
        self.journal, self.namer, self.failing_call = journal, namer, failing_call

    def diagnose(self, error):
        message = str(error)
        frames = [tb.tb_frame for tb in traceback_frames(error.__traceback__)]
        where = self.failing_call(error)[0]
        match = _OUTPUT_OF.search(message)
        function = match.group(2) if match else None
        view = self._written_view(frames, function, int(match.group(1)) if match else None)
        writer = next((f.f_locals["self"] for f in reversed(frames) if f.f_code.co_name == "forward"
                       and isinstance(f.f_locals.get("self"), torch.nn.Module)), None)
        facts = {"where": str(where)} if where is not None else {}
        if function and function.startswith("BackwardHookFunction"):
            return self._hook_view(view, writer, facts)
        through = None
        if "returns multiple views" in message:     # written through a view of one of them (a[:, 0].mul_): the
            piece = self._split_piece(frames, view)             # piece itself, by the op the recorder saw make it
            through, view = (view, piece) if piece is not None else (None, view)
        label = self.namer.label(view) if view is not None else _("the tensor written")
        if through is not None and (name := self.namer.label(through)).startswith("`"):
            label = _("{view} (a view of {piece})").format(view=name, piece=label)
        info = self.journal.nodes.get(view.grad_fn) if view is not None else None
        if info is not None and info.where is not None:
            facts["made by"] = _("{op} at {where}").format(op=info.op, where=info.place())
        if "returns multiple views" in message and (param := self._parameter_written(frames, view)) is not None:
            return Diagnosis("view_inplace", _("{label}, a piece of {param} that a single op returned ({op}), is "
                                               "written in place while autograd records: {param} is a leaf that "
                                               "requires grad").format(label=label, param=param,
                                                                       op=info.op if info else function), facts,
                             [(N_("write it under torch.no_grad(), as nn.init does: written out of place, or into a "
                                  "clone, the values would never reach the parameter"), "01")])
        if "returns multiple views" in message:
            return Diagnosis("view_inplace", _("{label} is one of the views a single op returned ({op}), and autograd "
                                               "forbids writing into those in place").format(
                                 label=label, op=info.op if info else function), facts,
                             [(N_("write out of place (h = h + x, not h += x or h.add_(x))"), "03"),
                              (N_("or clone() the view before writing into it"), "03")])
        if "custom Function" in message:
            custom = function or (type(view._base.grad_fn).__name__ if view is not None and view._base is not None
                                  and view._base.grad_fn is not None else None)
            custom = custom[:-len("Backward")] if custom and custom.endswith("Backward") else custom
            return Diagnosis("view_inplace", (_("{label} is what the custom autograd.Function {function} returned: "
                                                "its input as is, or a view of it; a write in place would go around "
                                                "that Function's backward, so autograd forbids it") if custom else
                                              _("{label} is a view a custom autograd.Function returned (its input as "
                                                "is, or a view of it); a write in place would go around that "
                                                "Function's backward, so autograd forbids it")).format(
                                 label=label, function=custom), facts,
                             [(N_("return a new tensor from the Function's forward (out.clone(), not its input or a "
                                  "view)"), None),
                              (N_("or write out of place after it (y = y + x, not y += x)"), "03")])
        return Diagnosis("view_inplace", _("{label} is a view made under torch.no_grad() and written in place with "
                                           "gradients on").format(label=label), facts,
                         [(N_("make the view and the write both inside torch.no_grad() (the write is then not "
                              "recorded), or both outside it"), "04"),
                          (N_("or clone() the view before writing into it"), "03")])

    def _parameter_written(self, frames, view):
        """The name of the leaf that requires grad (a parameter) whose storage the written view shares, or None: a
        piece of it written in place, as an init does outside torch.no_grad()."""
        failed = self.journal.failed
        ptr = view.untyped_storage().data_ptr() if view is not None else (
            failed.storages[0] if failed and failed.storages else None)
        if ptr is None:
            return None
        named = next((n for t, n in self.namer.params.items() if t.untyped_storage().data_ptr() == ptr), None)
        if named is not None:
            return named
        for frame in reversed(frames):           # a module being built: its parameters by their names in `self`
            owner = frame.f_locals.get("self")
            if isinstance(owner, torch.nn.Module):
                for n, t in owner.named_parameters():
                    if t.requires_grad and t.untyped_storage().data_ptr() == ptr:
                        return f"self.{n}"
        return None

    def _split_piece(self, frames, view):
        """One of the pieces a multi-output op (chunk, split, unbind) returned that shares the written tensor's
        storage, held by a variable of the failing frames (innermost first); None if the written view is one."""
        failed = self.journal.failed
        if view is not None:
            if getattr(self.journal.nodes.get(view.grad_fn), "op", None) in _MULTI:
                return None
            ptr = view.untyped_storage().data_ptr()
        else:                         # a temporary (a[:, 0]): the storage the failing call was given
            ptr = failed.storages[0] if failed and failed.storages else None
        if ptr is None:
            return None
        pieces = [value for frame in reversed(frames) for value in frame.f_locals.values()
                  if isinstance(value, torch.Tensor) and value._is_view()
                  and value.untyped_storage().data_ptr() == ptr
                  and getattr(self.journal.nodes.get(value.grad_fn), "op", None) in _MULTI]
        start = view.storage_offset() if view is not None else None       # the piece whose elements hold the view's
        return next((p for p in pieces if start is not None and _spans(p, start)), pieces[0] if pieces else None)

    def _written_view(self, frames, function, output):
        """The view being written: a tensor in the failing frames (innermost first), output `output` of
        `function`'s node when the error names them; of several, the first that shares the storage the failing call
        was given (`H = w.reshape(...)` is no candidate for a write into `t.reshape(-1)`)."""
        found = [value for frame in reversed(frames) for value in frame.f_locals.values()
                 if isinstance(value, torch.Tensor) and value._is_view() and (function is None or (
                     type(value.grad_fn).__name__.startswith(function) and value.output_nr == output))]
        failed = self.journal.failed
        if failed and failed.storages:
            return next((v for v in found if v.untyped_storage().data_ptr() == failed.storages[0]),
                        found[0] if found else None)
        return found[0] if found else None

    def _hook_view(self, view, writer, facts):
        """A module's full backward hook wrapped the tensor an in-place op then wrote into."""
        hooked, place = writer, N_("its input")
        if writer is None or not _full_hooks(writer):
            hooked_ones = [m for m in self.namer.names().modules if _full_hooks(m)]
            hooked = hooked_ones[0] if len(hooked_ones) == 1 else None
            place = N_("the output of {module}")
        hooks = _full_hooks(hooked) if hooked is not None else []
        name, hooked_name = self.namer.module_name(writer), self.namer.module_name(hooked)
        if hooks:
            at = _defined_at(hooks[0])
            hook = getattr(hooks[0], "__qualname__", type(hooks[0]).__name__)
            facts["hook"] = (_("{hook}, defined at {where}").format(hook=hook, where=at) if at is not None else hook)
        where_written = _(place).format(module=hooked_name) if hooked_name else _("a hooked module's tensor")
        summary = (_("{module} ({kind}) writes in place into {place}, which a full backward hook on {hooked} wrapped: "
                     "the hook's wrapper must pass the tensor on unchanged, so autograd forbids the write").format(
                       module=name, kind=_inplace_kind(writer), place=where_written, hooked=hooked_name)
                   if writer is not None else
                   _("an in-place op writes into {place}, which a full backward hook on {hooked} wrapped: the hook's "
                     "wrapper must pass the tensor on unchanged, so autograd forbids the write").format(
                       place=where_written, hooked=hooked_name or _("a module")))
        return Diagnosis("view_inplace", summary, facts,
                         [(N_("make the layer out of place (nn.ReLU(), inplace=False) in a model whose modules carry "
                              "full backward hooks"), "03"),
                          (N_("or take the gradients with a tensor hook instead: a forward hook that calls "
                              "output.register_hook(...) on the module's output"), None)])


def _spans(tensor, offset) -> bool:
    """Whether the storage element at `offset` is one of `tensor`'s (its strides taken largest first, as a piece of
    chunk or split has them: a column of a matrix spans the rows' range but holds one element of each)."""
    rest = offset - tensor.storage_offset()
    for n, k in sorted(zip(tensor.shape, tensor.stride()), key=lambda nk: -nk[1]):
        if k > 0 and rest >= 0:
            rest -= min(rest // k, n - 1) * k
    return rest == 0


def _inplace_kind(module):
    flag = getattr(module, "inplace", None)
    return f"{type(module).__name__}(inplace=True)" if flag else type(module).__name__


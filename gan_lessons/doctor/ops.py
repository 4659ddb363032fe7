"""What one torch call does, as the recorder reads it: whether it writes in place and into what, whether it sets
requires_grad, and the version and node of a tensor where torch refuses them."""
import torch

# attribute reads and writes that cannot matter to a diagnosis: passed straight through (zero_grad alone reads and
# sets .grad of every parameter; module calls read grad_fn)
QUIET_GETS = frozenset({"grad_fn", "version_of", "is_leaf", "requires_grad", "shape", "dtype", "device", "_base",
                         "retains_grad", "is_cuda", "layout", "ndim", "names"})
QUIET_CALLS = frozenset({"_record_function_enter_new", "_record_function_exit._RecordFunction", "dim", "size",
                          "numel", "is_floating_point", "is_complex", "data_ptr", "untyped_storage", "stride",
                          "get_device", "__len__", "__format__", "__repr__", "__hash__", "__bool__"})
_INPLACE_DUNDERS = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__setitem__", "__ior__", "__iand__"}


def _dynamo_compiling() -> bool:
    from torch import _dynamo
    return _dynamo.is_compiling()


# is torch.compile tracing right now? Looked up once, for it runs at every torch call in the block
# (torch.compiler.is_compiling from torch 2.3; torch._dynamo's before)
compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None) or _dynamo_compiling


def is_inplace(name, kwargs) -> bool:
    """x.add_(...), x += ..., x[i] = ..., and the functional forms F.relu(x, inplace=True) (which nn.ReLU(inplace=True),
    LeakyReLU, Dropout and the other inplace= modules call). Not requires_grad_, which changes a flag, not values."""
    return name in _INPLACE_DUNDERS or (name.endswith("_") and not name.startswith("__") and name != "requires_grad_") \
        or kwargs.get("inplace") is True


def written_by(name, args, kwargs):
    """The tensors an op writes into, with the op as a diagnosis shows it: [x] for x.add_(...) and the inplace= forms;
    every tensor of the first list for a foreach op (torch._foreach_lerp_(ema_params, params, 0.1), an EMA's update
    written the fast way); [buf] for an out= call (F.normalize(..., out=buf), a hand-written spectral norm's power
    iteration); else ([], None)."""
    first = args[0] if args else None
    if is_inplace(name, kwargs):
        if isinstance(first, torch.Tensor):
            return [first], f"{name}(inplace=True)" if kwargs.get("inplace") is True else name
        if name.startswith("_foreach_") and isinstance(first, (list, tuple)):
            return [t for t in first if isinstance(t, torch.Tensor)], name
    out = kwargs.get("out")
    return ([out], f"{name}(out=...)") if isinstance(out, torch.Tensor) else ([], None)


def frozen_flag(func, name, args, kwargs):
    """False for p.requires_grad = False and p.requires_grad_(False), True for the same with True, else None."""
    if name == "__set__" and getattr(getattr(func, "__self__", None), "__name__", "") == "requires_grad":
        return bool(args[1]) if len(args) > 1 else None
    if name == "requires_grad_":
        return bool(args[1] if len(args) > 1 else kwargs.get("requires_grad", True))
    return None


def version_of(t):
    """t._version, or None for a tensor that keeps none (made under inference_mode)."""
    try:
        return t._version
    except RuntimeError:
        return None


def grad_fn_of(t):
    """t.grad_fn, or None where torch refuses to give it: a view made under no_grad whose base then changed in
    place (nn.Embedding(padding_idx=...) makes one while it initialises)."""
    try:
        return getattr(t, "grad_fn", None)
    except RuntimeError:
        return None

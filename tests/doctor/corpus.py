"""A generated fault corpus for the autograd doctor: small training programs written the way people write them
(a module with a buffer, helpers in a second file standing for a library, custom autograd Functions, forward hooks,
code at the top level, in a step function or in a trainer's method, inference_mode and no_grad regions), each with
one fault of a catalogue kind injected at a random site, and the truth known by construction: the kind, the tensor
(its owner and name), the line that saved it and the line that changed or freed it. The same program without the
fault must draw nothing from the doctor.

    program = generate(seed, faulty=True)
    outcome = run(program, folder)          # in this process, under doctor()
    verdict = judge(program, outcome)       # named / missed / false alarm, with what was wrong

Names, sizes, nesting and placement are drawn from the seed; the generator does not know the doctor's code."""
import contextlib
import io
import random
import sys
import textwrap
import warnings
from dataclasses import dataclass, field
from pathlib import Path

# torch.compile backends the step_between programs may compile with (the benchmark sets them; compiling takes seconds)
COMPILE: tuple = ()

KINDS = ("foreach_write", "step_between", "inplace_output", "buffer_in_forward", "function_backward_write", "ema_write", "freed",
         "carried_state", "leaf_inplace", "inference_saved", "unused_input", "nonleaf_flag", "numpy_grad",
         "function_gradient", "no_graph", "hook_output_inplace", "reused_before_loop", "checkpoint_inplace", "loss_before_loop", "untrained_source",
         "peer_target", "forward_skipped", "cache_served")
# the catalogue kind each fault raises
RAISES = {"foreach_write": "version", "step_between": "version", "inplace_output": "version", "buffer_in_forward": "version",
          "function_backward_write": "version", "ema_write": "version", "freed": "freed", "carried_state": "freed",
          "leaf_inplace": "leaf_inplace", "inference_saved": "inference_saved", "unused_input": "unused_input",
          "nonleaf_flag": "nonleaf_flag", "out_grad": "out_grad", "numpy_grad": "numpy_grad", "function_gradient": "function_gradient",
          "no_graph": "no_graph", "hook_output_inplace": "version", "reused_before_loop": "freed",
          "checkpoint_inplace": "leaf_inplace", "loss_before_loop": "freed", "untrained_source": "freed",
          "peer_target": "freed", "forward_skipped": "freed", "cache_served": "freed"}
CONTEXTS = ("top level", "step function", "trainer method")

_MODELS = ["net", "critic", "encoder", "policy", "disc", "gen", "backbone", "head", "model", "student", "scorer",
           "actor", "decoder", "f"]
_LAYERS = ["fc", "proj", "lin", "out", "hidden", "layer", "dense", "mlp", "w", "to_logits"]
_VARS = ["h", "feat", "act", "hidden", "logits", "y", "emb", "a", "score", "gate", "probs", "u"]
_OPTS = [("SGD", "lr=0.01"), ("Adam", "lr=1e-3"), ("SGD", "lr=0.1, momentum=0.9"), ("AdamW", "lr=1e-3"),
         ("RMSprop", "lr=1e-3")]
_SAVING = [("torch.sigmoid", "SigmoidBackward"), ("torch.exp", "ExpBackward"), ("torch.tanh", "TanhBackward")]
_WRITES = ["{v}.mul_(2)", "{v}.add_(1)", "{v} += 0.5", "{v} *= 0.9", "{v}[0] = 0", "{v}.clamp_(max=0.99)",
           "{v}.div_(2)", "{v}[:, 0].mul_(0.5)", "{v}.view(-1)[0] = 1.0", "torch.mul({v}, 2, out={v})",
           "torch.nn.functional.relu({v}, inplace=True)", "{v}.T.add_(1)", "{v}.unsqueeze(0).sub_(0.1)",
           "{v}.masked_fill_({v} > 0.5, 0.5)", "{v}.copy_({v}.detach() * 0.5)"]


# statements that change nothing autograd sees: logging, bookkeeping, a comment
_NOISE = ["pass", "# keep the batch small while debugging", "seen = 0", "_ = torch.zeros(1)",
          "log_every = 10", "flag = i % 2 == 0 if 'i' in dir() else False", "torch.manual_seed(0) if False else None",
          "stats = {}", "assert True"]


@dataclass
class Src:
    """Source lines, with marks for the lines the truth points at."""
    lines: list = field(default_factory=list)
    marks: dict = field(default_factory=dict)

    rng: object = None            # where given: harmless statements are drawn between the lines

    def add(self, text, indent=0, mark=None):
        for part in textwrap.dedent(text).strip("\n").splitlines():
            self.lines.append("    " * indent + part)
        if mark:
            self.marks[mark] = len(self.lines)
        if self.rng is not None and indent > 0 and self.rng.random() < 0.25 and not text.rstrip().endswith(":") \
                and not text.lstrip().startswith(("return", "@")):
            self.lines.append("    " * indent + self.rng.choice(_NOISE))

    def text(self):
        return "\n".join(self.lines) + "\n"


@dataclass
class Program:
    seed: int
    kind: str
    context: str
    faulty: bool
    main: str                     # the script's source
    helper: str | None            # the second file's source (a library), or None
    helper_name: str | None
    truth: dict                   # kind: the catalogue kind; tensor: [accepted names] or None; lines: {what:
                                  # (file, line)} ("main" or "helper")


def _name(rng, pool, taken):
    while True:
        base = rng.choice(pool)
        name = base if rng.random() < 0.5 else f"{base}_{rng.choice(['a', 'b', '1', '2', 'main', 'aux', 'x'])}"
        if name not in taken:
            taken.add(name)
            return name


def generate(seed: int, faulty: bool = True, kind: str | None = None) -> Program:
    rng = random.Random(seed)
    kind = kind or rng.choice(KINDS)
    context = rng.choice(CONTEXTS)
    taken = {"torch", "nn", "x", "loss", "opt", "i", "self", "lib", "range", "F"}
    w = dict(model=_name(rng, _MODELS, taken), cls=rng.choice(["Net", "Block", "Critic", "Tower", "Module", "Body"])
             + str(rng.randint(0, 99)), l1=_name(rng, _LAYERS, taken), l2=_name(rng, _LAYERS, taken),
             var=_name(rng, _VARS, taken), opt=rng.choice(["opt", "optimizer", "optim_net", "o"]),
             d_in=rng.choice([3, 4, 6, 8]), hid=rng.choice([5, 7, 16, 12]), d_out=rng.choice([1, 2, 3]),
             batch=rng.choice([2, 4, 5, 8]), iters=rng.choice([1, 2, 3]), buf=_name(rng, ["scale", "stat", "gain",
                                                                                          "mask", "running"], taken),
             lib=f"helpers_{seed}_{'f' if faulty else 'c'}", step=rng.choice(["train_step", "step", "update",
                                                                             "one_batch", "fit_batch"]))
    w["optcls"], w["optargs"] = rng.choice(_OPTS)
    w["context"] = context
    w["act"] = rng.choice(["torch.tanh", "torch.relu", "torch.nn.functional.gelu", "torch.sigmoid"])
    builder = _BUILDERS[kind]
    main, helper, truth = builder(rng, w, faulty)
    context = truth.pop("context", context) + (f", {w['wrap']}" if w.get("wrap", "plain") != "plain" else "")
    return Program(seed, kind, context, faulty, main, helper, w["lib"] if helper else None,
                   {"kind": truth.pop("kind", RAISES[kind]), **truth})


# --- the pieces every program shares ---

def _module(src, w, extra_init="", forward=None):
    src.add(f"""
        class {w['cls']}(nn.Module):
            def __init__(self):
                super().__init__()
                self.{w['l1']} = nn.Linear({w['d_in']}, {w['hid']})
                self.{w['l2']} = nn.Linear({w['hid']}, {w['d_out']})""")
    if extra_init:
        src.add(extra_init, 2)
    src.add("", 0)
    src.add("def forward(self, x):", 1)
    if forward is None:
        src.add(f"h = {w['act']}(self.{w['l1']}(x))", 2)
        src.add(f"return self.{w['l2']}(h)", 2)
    else:
        forward(src)
    src.add("")


def _header(src, helper=None):
    src.add("import torch\nfrom torch import nn")
    if helper:
        src.add(f"import {helper} as lib")
    src.add("")
    src.add("torch.manual_seed(0)")


def _loop(src, rng, w, body, context):
    """The training loop around `body` (a function of (src, indent) that adds the step's lines), placed at the top
    level, in a step function, or in a trainer's method."""
    if context == "step function":
        src.add(f"def {w['step']}({w['model']}, {w['opt']}):")
        body(src, 1)
        src.add("")
        src.add(f"for i in range({w['iters']}):")
        src.add(f"{w['step']}({w['model']}, {w['opt']})", 1)
    elif context == "trainer method":
        src.add("class Trainer:")
        src.add(f"""
            def __init__(self, {w['model']}, {w['opt']}):
                self.{w['model']}, self.{w['opt']} = {w['model']}, {w['opt']}
            """, 1)
        src.add(f"def {w['step']}(self):", 1)
        src.add(f"{w['model']}, {w['opt']} = self.{w['model']}, self.{w['opt']}", 2)
        body(src, 2)
        src.add("")
        src.add(f"trainer = Trainer({w['model']}, {w['opt']})")
        src.add(f"for i in range({w['iters']}):")
        src.add(f"trainer.{w['step']}()", 1)
    else:
        src.add(f"for i in range({w['iters']}):")
        body(src, 1)


def _script(rng, w):
    """A script's start: the imports, the module's class, the model and its optimizer."""
    src = Src(rng=rng)
    _header(src)
    _module(src, w)
    _model_and_opt(src, w)
    return src


def _model_and_opt(src, w):
    src.add(f"{w['model']} = {w['cls']}()")
    src.add(f"{w['opt']} = torch.optim.{w['optcls']}({w['model']}.parameters(), {w['optargs']})")


def _params(w, layers=None):
    layers = layers or (w["l1"], w["l2"])
    return [f"{w['model']}.{layer}.{p}" for layer in layers for p in ("weight", "bias")]


# --- one builder per fault: (main source, helper source or None, truth) ---

def _foreach_write(rng, w, faulty):
    """A hand-written weight decay or noise step over the parameters as one foreach op, between a forward and its
    backward (in the script or in the second file)."""
    op = rng.choice(["torch._foreach_mul_({ps}, 0.999)", "torch._foreach_add_({ps}, 1e-4)",
                     "torch._foreach_lerp_({ps}, [torch.zeros_like(p) for p in {ps}], 1e-3)"])
    in_helper = rng.random() < 0.5
    lib = None
    src = Src(rng=rng)
    if in_helper:
        lib = Src(rng=rng)
        fn = rng.choice(["decay_", "perturb_", "shrink_"])
        lib.add("import torch\n")
        lib.add(f"@torch.no_grad()\ndef {fn}(params):")
        lib.add("params = list(params)", 1)
        lib.add(op.format(ps="params"), 1, mark="changed")
    _header(src, w["lib"] if in_helper else None)
    _module(src, w)
    _model_and_opt(src, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = {w['model']}(x).pow(2).mean()", k, mark="saved")
        s.add(f"{w['opt']}.zero_grad()", k)
        decay = (f"lib.{fn}({w['model']}.parameters())" if in_helper else
                 op.format(ps=f"list({w['model']}.parameters())"))
        if faulty:
            s.add(decay if in_helper else "with torch.no_grad():", k, mark="changed_main")
            if not in_helper:
                s.add(decay, k + 1, mark="changed_main")
            s.add(f"loss.backward()\n{w['opt']}.step()", k)
        else:
            s.add(f"loss.backward()\n{w['opt']}.step()", k)
            s.add(decay if in_helper else "with torch.no_grad():", k)
            if not in_helper:
                s.add(decay, k + 1)
    _loop(src, rng, w, body, w["context"])
    lines = {"saved": ("main", src.marks["saved"]),
             "changed": ("helper", lib.marks["changed"]) if in_helper else ("main", src.marks["changed_main"])} \
        if faulty else {}
    return src.text(), lib.text() if lib else None, {"tensor": _params(w), "lines": lines}


def _step_between(rng, w, faulty):
    src = _script(rng, w)
    second = rng.choice(["(out - 1).abs().mean()", "out.pow(2).mean()", "(out * 0.5).sum()"])
    wrap = rng.choice(["plain", "plain"] + (["compiled"] if COMPILE else []))
    w["wrap"] = wrap
    call = {"plain": f"{w['model']}(x)",
            "checkpoint": f"torch.utils.checkpoint.checkpoint({w['model']}, x, use_reentrant=False)",
            "compiled": f"compiled_{w['model']}(x)"}[wrap]
    if wrap == "compiled":
        src.add(f"compiled_{w['model']} = torch.compile({w['model']}, backend='{rng.choice(COMPILE)}')")

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"out = {call}", k, mark="saved")
        s.add(f"loss_a = out.mean()\nloss_b = {second}", k)
        s.add(f"{w['opt']}.zero_grad()", k)
        if faulty:
            s.add("loss_a.backward(retain_graph=True)", k)
            s.add(f"{w['opt']}.step()", k, mark="changed")
            s.add("loss_b.backward()", k, mark="failing")
        else:
            s.add("loss_a.backward(retain_graph=True)\nloss_b.backward()", k)
            s.add(f"{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    return src.text(), None, {"tensor": _params(w), "lines": {"saved": ("main", src.marks["saved"]),
                                                             "changed": ("main", src.marks["changed"])}
                              if faulty else {}}


def _inplace_output(rng, w, faulty):
    """An op that saves its output (sigmoid, exp, tanh), then an in-place write on that output: at the top level of
    the step, or in a helper of the second file."""
    op, _ = rng.choice(_SAVING)
    write = rng.choice(_WRITES).format(v=w["var"])
    in_helper = rng.random() < 0.4
    helper = None
    src = Src(rng=rng)
    if in_helper:
        lib = Src(rng=rng)
        fn = rng.choice(["squash_", "normalise_", "sharpen_", "rescale_"])
        lib.add("import torch\n")
        lib.add(f"def {fn}(t):")
        lib.add(rng.choice(_WRITES).format(v="t"), 1, mark="changed")
        lib.add("return t", 1)
        helper = lib
    _header(src, w["lib"] if in_helper else None)
    _module(src, w)
    _model_and_opt(src, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"{w['var']} = {op}({w['model']}(x))", k, mark="saved")
        if faulty:
            s.add(f"lib.{fn}({w['var']})" if in_helper else write, k, mark="changed_main")
        else:
            s.add(f"{w['var']} = {w['var']} * 2", k)
        s.add(f"loss = {w['var']}.sum()", k)
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {}
    if faulty:
        lines = {"saved": ("main", src.marks["saved"]),
                 "changed": ("helper", helper.marks["changed"]) if in_helper else ("main", src.marks["changed_main"])}
    truth = {"tensor": [f"`{w['var']}`", "output of"], "lines": lines}
    written = (helper.lines[helper.marks["changed"] - 1] if in_helper else write)
    if "out=" in written:            # an out= call with a tensor that requires grad: refused before any write
        truth = {"kind": "out_grad", "tensor": None if in_helper else [f"`{w['var']}`"],
                 "lines": {"changed": lines["changed"]} if faulty else {}}
    return src.text(), helper.text() if helper else None, truth


def _buffer_in_forward(rng, w, faulty):
    update = rng.choice(["self.{b}.mul_(0.9)", "self.{b}.add_(0.1)", "self.{b}.copy_(h.detach().mean(0))",
                         "self.{b}.lerp_(h.detach().mean(0), 0.1)"]).format(b=w["buf"])

    def forward(s):
        s.add(f"h = {w['act']}(self.{w['l1']}(x))", 2)
        if not faulty:
            s.add(update, 2)
        s.add(f"h = h * self.{w['buf']}", 2, mark="saved_inside")
        if faulty:
            s.add(update, 2, mark="changed")
        s.add(f"return self.{w['l2']}(h)", 2)
    src = Src(rng=rng)
    _header(src)
    _module(src, w, extra_init=f"self.register_buffer('{w['buf']}', torch.ones({w['hid']}))", forward=forward)
    _model_and_opt(src, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = {w['model']}(x).pow(2).mean()", k, mark="saved")
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"saved": ("main", src.marks["saved_inside"]), "changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [f"{w['model']}.{w['buf']}"], "lines": lines}


def _function_backward_write(rng, w, faulty):
    """Two custom Functions, as a fused-kernel library writes them: the second one's backward writes into the
    tensor the first one saved. In the second file (a library) or in the script."""
    first, second = rng.sample(["Exp", "Scale", "Square", "Gate", "Mish", "Swish", "Fused"], 2)
    in_helper = rng.random() < 0.5
    fns = Src(rng=rng)
    fns.add("import torch\n")
    fns.add(f"class {first}(torch.autograd.Function):")
    fns.add("@staticmethod\ndef forward(ctx, x):", 1)
    fns.add("out = x.exp()", 2, mark="saved")
    fns.add("ctx.save_for_backward(out)\nreturn out", 2)
    fns.add("")
    fns.add("@staticmethod\ndef backward(ctx, g):", 1)
    fns.add("out, = ctx.saved_tensors\nreturn g * out", 2)
    fns.add("")
    fns.add(f"class {second}(torch.autograd.Function):")
    fns.add("@staticmethod\ndef forward(ctx, a):", 1)
    fns.add("ctx.save_for_backward(a)\nreturn a * a", 2)
    fns.add("")
    fns.add("@staticmethod\ndef backward(ctx, g):", 1)
    fns.add("a, = ctx.saved_tensors", 2)
    if faulty:
        fns.add("a.mul_(2 * g)", 2, mark="changed")
        fns.add("return a", 2)
    else:
        fns.add("return 2 * a * g", 2)
    fns.add("")
    src = Src(rng=rng)
    if in_helper:
        _header(src, w["lib"])
        prefix = "lib."
    else:
        _header(src)
        base = len(src.lines)
        for line in fns.lines[1:]:
            src.lines.append(line)
        fns.marks = {k: v - 1 + base for k, v in fns.marks.items()}
        prefix = ""
    _module(src, w)
    _model_and_opt(src, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = {prefix}{second}.apply({prefix}{first}.apply({w['model']}(x))).mean()", k, mark="apply")
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    where = "helper" if in_helper else "main"
    lines = {"saved": ("main", src.marks["apply"]), "changed": (where, fns.marks["changed"])} if faulty else {}
    return src.text(), fns.text() if in_helper else None, {"tensor": [f"{first}.forward saved"], "lines": lines}


def _ema_write(rng, w, faulty):
    """A second model, updated from the first by an EMA in the second file (under no_grad, in place), between the
    forward of a loss that went through both and its backward."""
    target = "ema_" + w["model"]
    lib = Src(rng=rng)
    lib.add("import torch\n")
    fn = rng.choice(["ema_update", "update_average", "soft_update", "polyak"])
    lib.add(f"@torch.no_grad()\ndef {fn}(target, source, decay=0.99):")
    lib.add("for p_t, p_s in zip(target.parameters(), source.parameters()):", 1)
    style = rng.choice(["p_t.mul_(decay).add_(p_s, alpha=1 - decay)", "p_t.lerp_(p_s, 1 - decay)",
                        "p_t.copy_(decay * p_t + (1 - decay) * p_s)"])
    lib.add(style, 2, mark="changed")
    src = Src(rng=rng)
    _header(src, w["lib"])
    _module(src, w)
    _model_and_opt(src, w)
    src.add(f"{target} = {w['cls']}()")
    src.add(f"{target}.load_state_dict({w['model']}.state_dict())")

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = ({w['model']}(x) - {target}(x)).pow(2).mean() + {w['model']}(x).mean()", k, mark="saved")
        s.add(f"{w['opt']}.zero_grad()", k)
        if faulty:
            s.add(f"lib.{fn}({target}, {w['model']})", k, mark="call")
            s.add("loss.backward()", k)
            s.add(f"{w['opt']}.step()", k)
        else:
            s.add(f"loss.backward()\n{w['opt']}.step()", k)
            s.add(f"lib.{fn}({target}, {w['model']})", k)
    w["context"] = "top level" if rng.random() < 0.5 else "step function"
    _loop(src, rng, w, body, w["context"])
    lines = {"saved": ("main", src.marks["saved"]), "changed": ("helper", lib.marks["changed"])} if faulty else {}
    return src.text(), lib.text(), {"tensor": [f"{target}.{w['l1']}.weight", f"{target}.{w['l2']}.weight",
                                               f"{target}.{w['l1']}.bias", f"{target}.{w['l2']}.bias"],
                                    "lines": lines}


def _freed(rng, w, faulty):
    src = _script(rng, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"{w['var']} = {w['model']}(x)", k, mark="forward")
        s.add(f"loss_a = {w['var']}.mean()\nloss_b = {w['var']}.pow(2).mean()", k)
        s.add(f"{w['opt']}.zero_grad()", k)
        if faulty:
            s.add("loss_a.backward()", k, mark="changed")
            s.add("loss_b.backward()", k, mark="failing")
        else:
            s.add("(loss_a + loss_b).backward()", k)
        s.add(f"{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"changed": ("main", src.marks["changed"]), "failing": ("main", src.marks["failing"])} if faulty else {}
    return src.text(), None, {"tensor": None, "lines": lines}


def _carried_state(rng, w, faulty):
    """A state carried from one pass to the next without detach (an RNN's hidden state)."""
    src = _script(rng, w)
    state = _name(rng, ["state", "memory", "carry", "prev"], set())
    src.add(f"{state} = torch.zeros({w['batch']}, {w['d_out']})")
    src.add(f"for i in range({max(2, w['iters'])}):")
    src.add(f"x = torch.randn({w['batch']}, {w['d_in']})", 1)
    src.add(f"{state} = torch.tanh({w['model']}(x) + {state}{'' if faulty else '.detach()'})", 1, mark="forward")
    src.add(f"loss = {state}.pow(2).mean()", 1)
    src.add(f"{w['opt']}.zero_grad()", 1)
    src.add("loss.backward()", 1, mark="changed")
    src.add(f"{w['opt']}.step()", 1)
    lines = {"changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": None, "lines": lines}


def _reused_before_loop(rng, w, faulty):
    """A model's output made once, before a loop, and used by every pass's loss (a generator's fake batch reused over
    several G steps): the first pass's backward frees its graph. Its fix is to make it again in each pass; a detach,
    the carried state's fix, would stop the model learning. Fixed: made in each pass."""
    src = _script(rng, w)
    inner = rng.random() < 0.5                # the loop inside a step function, the output made at its start
    k = 1 if inner else 0
    if inner:
        src.add(f"def {w['step']}({w['model']}, {w['opt']}, x):")
    else:
        src.add(f"x = torch.randn({w['batch']}, {w['d_in']})")
    if faulty:
        src.add(f"{w['var']} = {w['model']}(x)", k, mark="forward")
    src.add(f"for i in range({max(2, w['iters'])}):", k)
    if not faulty:
        src.add(f"{w['var']} = {w['model']}(x)", k + 1)
    src.add(f"loss = {w['var']}.pow(2).mean()", k + 1)
    src.add(f"{w['opt']}.zero_grad()", k + 1)
    src.add("loss.backward()", k + 1, mark="changed")
    src.add(f"{w['opt']}.step()", k + 1)
    if inner:
        src.add("")
        src.add(f"{w['step']}({w['model']}, {w['opt']}, torch.randn({w['batch']}, {w['d_in']}))")
    lines = {"changed": ("main", src.marks["changed"]), "forward": ("main", src.marks["forward"])} if faulty else {}
    return src.text(), None, {"tensor": [f"`{w['var']}`"], "lines": lines,
                              "context": "step function" if inner else "top level",
                              "says": ["make it again in each pass"], "says_not": ["detach the carried tensor"]}


def _forward_skipped(rng, w, faulty):
    """A runner whose forward keeps its output on self and returns early on a short batch (the last one of an
    odd-sized data set), and a loop that reads that output after calling it: on the short batch the loss is made
    from the last batch's output, whose graph that batch's backward freed. Fixed: the short batch skipped before
    the step."""
    src = _script(rng, w)
    runner = rng.choice(["Runner", "Wrapper", "Agent", "Pipeline", "System"])
    out = rng.choice(["out", "pred", "fake", "recon", "y_hat"])
    fwd = rng.choice(["forward", "run", "compute", "infer"])
    src.add(f"class {runner}:")
    src.add("def __init__(self, model, batch_size):", 1)
    src.add("self.model, self.batch_size = model, batch_size", 2)
    src.add("")
    src.add(f"def {fwd}(self, x):", 1)
    src.add("if len(x) < self.batch_size:", 2)
    src.add("return", 3)
    src.add(f"self.{out} = self.model(x)", 2, mark="forward")
    src.add("")
    src.add(f"runner = {runner}({w['model']}, {w['batch']})")
    src.add(f"batches = [torch.randn({w['batch']}, {w['d_in']}) for _ in range({max(2, w['iters'])})]")
    src.add(f"batches.append(torch.randn(1, {w['d_in']}))")
    src.add("for x in batches:")
    if not faulty:
        src.add("if len(x) < runner.batch_size:\n    continue", 1)
    src.add(f"runner.{fwd}(x)", 1)
    src.add(f"loss = runner.{out}.pow(2).mean()", 1)
    src.add(f"{w['opt']}.zero_grad()", 1)
    src.add("loss.backward()", 1, mark="changed")
    src.add(f"{w['opt']}.step()", 1)
    lines = {"changed": ("main", src.marks["changed"]), "forward": ("main", src.marks["forward"])} if faulty else {}
    return src.text(), None, {"tensor": [f"`runner.{out}`", f"`self.{out}`"], "lines": lines, "context": "top level",
                              "says": ["ran in an earlier pass but not in this one", "skip the whole step"],
                              "says_not": ["before the loop"]}


def _cache_served(rng, w, faulty):
    """A module keeps what its first call makes from its own weight (the weight normalised) and serves it again
    while training: the second pass's backward goes into the first pass's freed graph. Fixed: made in every
    call."""
    cache = rng.choice(["cache", "w_norm", "_cached", "memo", "normed"])
    wn = rng.choice(["wn", "weight", "w_hat", "kernel"])
    src = Src(rng=rng)
    _header(src)

    def forward(s):
        if faulty:
            s.add(f"if self.training and self.{cache} is not None:", 2)
            s.add(f"{wn} = self.{cache}", 3)
            s.add("else:", 2)
            s.add(f"{wn} = self.{w['l1']}.weight / self.{w['l1']}.weight.norm()", 3)
            s.add(f"self.{cache} = {wn}", 3)
        else:
            s.add(f"{wn} = self.{w['l1']}.weight / self.{w['l1']}.weight.norm()", 2)
        s.add(f"h = {w['act']}(x @ {wn}.t() + self.{w['l1']}.bias)", 2)
        s.add(f"return self.{w['l2']}(h)", 2)
    _module(src, w, extra_init=f"self.{cache} = None", forward=forward)
    _model_and_opt(src, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = {w['model']}(x).pow(2).mean()", k)
        s.add(f"{w['opt']}.zero_grad()", k)
        s.add("loss.backward()", k, mark="changed")
        s.add(f"{w['opt']}.step()", k)
    w["iters"] = max(2, w["iters"])
    _loop(src, rng, w, body, w["context"])
    lines = {"changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [f".{cache}`"], "lines": lines,
                              "says": ["kept a tensor an earlier pass made", "make it anew in every call"],
                              "says_not": ["before the loop"]}


def _loss_before_loop(rng, w, faulty):
    """A loss computed once, before the loop, and a backward and an update in every pass (an optimizer's step, or a
    hand-written one through .data): the first backward frees its graph. Fixed: the loss computed in each pass."""
    src = _script(rng, w)
    by_hand, inner = rng.random() < 0.4, rng.random() < 0.5
    k = 1 if inner else 0
    if inner:
        src.add(f"def {w['step']}({w['model']}, {w['opt']}, x):")
    else:
        src.add(f"x = torch.randn({w['batch']}, {w['d_in']})")
    loss = f"loss = {w['model']}(x).pow(2).mean()"
    if faulty:
        src.add(loss, k)
    src.add(f"for i in range({max(2, w['iters'])}):", k)
    if not faulty:
        src.add(loss, k + 1)
    src.add(f"{w['opt']}.zero_grad()", k + 1)
    src.add("loss.backward()", k + 1, mark="backward")
    if by_hand:
        src.add(f"for p in {w['model']}.parameters():", k + 1)
        src.add("p.data -= 0.01 * p.grad", k + 2)
    else:
        src.add(f"{w['opt']}.step()", k + 1)
    if inner:
        src.add("")
        src.add(f"{w['step']}({w['model']}, {w['opt']}, torch.randn({w['batch']}, {w['d_in']}))")
    lines = {"backward": ("main", src.marks["backward"])} if faulty else {}
    return src.text(), None, {"tensor": [], "lines": lines, "context": "step function" if inner else "top level",
                              "says": ["the loss was made once, before the loop", "compute the loss inside the loop"],
                              "says_not": ["call backward() once per loss"]}


def _untrained_source(rng, w, faulty):
    """Targets made once, before the loop, from a tensor that requires grad and that no optimizer holds (the
    weight that generates synthetic data): the first pass's backward frees their graph. Detach is the fix there,
    not a wrong one. Fixed: the targets made under torch.no_grad()."""
    src = _script(rng, w)
    true = rng.choice(["true_w", "w_true", "teacher_w", "target_w", "gen_w"])
    inner = rng.random() < 0.5
    k = 1 if inner else 0
    src.add(f"{true} = torch.randn({w['d_in']}, {w['d_out']}, requires_grad=True)")
    if inner:
        src.add(f"def {w['step']}({w['model']}, {w['opt']}, x):")
    else:
        src.add(f"x = torch.randn({w['batch']}, {w['d_in']})")
    if faulty:
        src.add(f"{w['var']} = x @ {true}", k, mark="made")
    else:
        src.add("with torch.no_grad():", k)
        src.add(f"{w['var']} = x @ {true}", k + 1)
    src.add(f"for i in range({max(2, w['iters'])}):", k)
    src.add(f"loss = ({w['model']}(x) - {w['var']}).pow(2).mean()", k + 1)
    src.add(f"{w['opt']}.zero_grad()", k + 1)
    src.add("loss.backward()", k + 1, mark="backward")
    src.add(f"{w['opt']}.step()", k + 1)
    if inner:
        src.add("")
        src.add(f"{w['step']}({w['model']}, {w['opt']}, torch.randn({w['batch']}, {w['d_in']}))")
    lines = {"backward": ("main", src.marks["backward"]), "made": ("main", src.marks["made"])} if faulty else {}
    return src.text(), None, {"tensor": [f"`{true}`"], "lines": lines,
                              "context": "step function" if inner else "top level",
                              "says": ["no optimizer trains what it was made from", "torch.no_grad()"],
                              "says_not": ["not: detach() on the reused tensor"]}


def _peer_target(rng, w, faulty):
    """Two nets, one forward each before a loop over the nets; each net's loss pulls its output towards the other's
    (mutual learning, a two-view consistency loss), the other's output not detached: the first net's backward goes
    on into the second and frees the graph the second net's own loss needs. Fixed: the peer detached there."""
    src = Src(rng=rng)
    _header(src)
    src.add("import torch.nn.functional as F")
    models, opts, outs = rng.choice([("models", "opts", "outputs"), ("nets", "optimizers", "preds"),
                                     ("peers", "opts", "logits")])
    src.add(f"{models} = [nn.Sequential(nn.Linear({w['d_in']}, {w['hid']}), nn.Tanh(), "
            f"nn.Linear({w['hid']}, {max(2, w['d_out'])})) for _ in range(2)]")
    src.add(f"{opts} = [torch.optim.{w['optcls']}(m.parameters(), {w['optargs']}) for m in {models}]")
    inner = rng.random() < 0.5
    k = 1 if inner else 0
    if inner:
        src.add(f"def {w['step']}({models}, {opts}, x):")
    else:
        src.add(f"x = torch.randn({w['batch']}, {w['d_in']})")
    src.add(f"{outs} = [m(x) for m in {models}]", k)
    kl = rng.random() < 0.5
    peer = f"{outs}[1 - i]" + ("" if faulty else ".detach()")
    src.add("for i in range(2):", k)
    term = (f"F.kl_div(F.log_softmax({outs}[i], 1), F.softmax({peer}, 1), reduction='batchmean')" if kl
            else f"({outs}[i] - {peer}).pow(2).mean()")
    src.add(f"loss = {outs}[i].pow(2).mean() + {term}", k + 1)
    src.add(f"{opts}[i].zero_grad()", k + 1)
    src.add("loss.backward()", k + 1, mark="backward")
    src.add(f"{opts}[i].step()", k + 1)
    if inner:
        src.add("")
        src.add(f"{w['step']}({models}, {opts}, torch.randn({w['batch']}, {w['d_in']}))")
    lines = {"backward": ("main", src.marks["backward"])} if faulty else {}
    return src.text(), None, {"tensor": [f"`{outs}[1]`"], "lines": lines,
                              "context": "step function" if inner else "top level",
                              "says": ["served that loss as a target", "detach it where it serves as a target"],
                              "says_not": ["  fix: keep a detached copy"]}


def _leaf_inplace(rng, w, faulty):
    src = Src(rng=rng)
    _header(src)
    _module(src, w)
    src.add(f"{w['model']} = {w['cls']}()")
    layer = rng.choice([w["l1"], w["l2"]])
    param = rng.choice(["weight", "bias"])
    update = rng.choice(["{p}.sub_(0.01 * {p}.grad)", "{p}.add_({p}.grad, alpha=-0.1)", "{p} -= 0.01 * {p}.grad"])
    p = f"{w['model']}.{layer}.{param}"
    src.add(f"for i in range({w['iters']}):")
    src.add(f"x = torch.randn({w['batch']}, {w['d_in']})", 1)
    src.add(f"loss = {w['model']}(x).pow(2).mean()", 1)
    src.add(f"{w['model']}.zero_grad()\nloss.backward()", 1)
    if faulty:
        src.add(update.format(p=p), 1, mark="changed")
    else:
        src.add("with torch.no_grad():", 1)
        src.add(update.format(p=p), 2)
    lines = {"changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [p], "lines": lines}


_FIRST_WRITES = [("{v}.relu_()", "{v} = {v}.relu()"), ("{v} += 1", "{v} = {v} + 1"), ("{v}.mul_(0.5)", "{v} = {v} * 0.5"),
                 ("torch.nn.functional.relu({v}, inplace=True)", "{v} = torch.nn.functional.relu({v})"),
                 ("{v}.clamp_(min=0)", "{v} = {v}.clamp(min=0)"), ("torch.sigmoid_({v})", "{v} = torch.sigmoid({v})"),
                 ("{v}[{v} < 0] = 0", "{v} = {v}.masked_fill({v} < 0, 0)")]
_INPLACE_MODULES = ["nn.ReLU(inplace=True)", "nn.LeakyReLU(0.2, inplace=True)", "nn.ReLU6(inplace=True)",
                    "nn.ELU(inplace=True)", "nn.SiLU(inplace=True)", "nn.Hardtanh(inplace=True)"]


def _checkpoint_inplace(rng, w, faulty):
    """Reentrant activation checkpointing of a block whose first op writes into the block's input (a method, or an
    nn.Sequential that starts with an in-place activation): the backward runs the block again on a detached copy of
    the input, a leaf that requires grad, and the write raises there. Without the fault the op is out of place."""
    src = Src(rng=rng)
    _header(src)
    src.add("from torch.utils.checkpoint import checkpoint\n")
    sequential = rng.random() < 0.4
    reentrant = rng.choice(["use_reentrant=True", "use_reentrant=True", ""])
    if sequential:
        act = rng.choice(_INPLACE_MODULES)
        act = act if faulty else act.replace("(inplace=True)", "()").replace(", inplace=True", "")
        extra = f"self.blk = nn.Sequential({act}, nn.Linear({w['hid']}, {w['d_out']}))"

        def forward(s):
            s.add(f"{w['var']} = self.{w['l1']}(x)", 2)
            s.add(f"return checkpoint(self.blk, {w['var']}{', ' + reentrant if reentrant else ''})", 2)
        _module(src, w, extra_init=extra, forward=forward)
        truth = {"says": ["checkpoint", "out of place", f"{w['model']}.blk.0 ({act.split('(')[0][3:]}(inplace=True))"]
                 if faulty else []}
    else:
        write, clean = rng.choice(_FIRST_WRITES)

        def forward(s):
            s.add(f"{w['var']} = self.{w['l1']}(x)", 2)
            s.add(f"return checkpoint(self.block, {w['var']}{', ' + reentrant if reentrant else ''})", 2)
            s.add("")
            s.add("def block(self, v):", 1)
            s.add((write if faulty else clean).format(v="v"), 2, mark="changed")
            s.add(f"return self.{w['l2']}(v)", 2)
        _module(src, w, forward=forward)
        truth = {"says": ["checkpoint", "out of place"] if faulty else []}
    _model_and_opt(src, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']}, requires_grad={rng.choice([True, False])})", k)
        s.add(f"loss = {w['model']}(x).pow(2).mean()", k)
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"changed": ("main", src.marks["changed"])} if faulty and not sequential else {}
    return src.text(), None, {"tensor": [], "lines": lines, **truth,
                              "says_not": ["  fix: wrap the update in", "  fix: use_reentrant"]}


def _inference_saved(rng, w, faulty):
    lib = Src(rng=rng)
    lib.add("import torch\n")
    fn = rng.choice(["make_mask", "prior", "fixed_weights", "noise_table", "lookup"])
    lib.add(f"@torch.{'inference_mode' if faulty else 'no_grad'}()\ndef {fn}(n):")
    lib.add("return torch.rand(n) + 0.5", 1, mark="made")
    src = Src(rng=rng)
    _header(src, w["lib"])
    _module(src, w)
    _model_and_opt(src, w)

    def body(s, k):
        s.add(f"{w['var']} = lib.{fn}({w['d_out']})", k, mark="call")
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = ({w['model']}(x) * {w['var']}).mean()", k, mark="used")
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"made": ("helper", lib.marks["made"]), "used": ("main", src.marks["used"])} if faulty else {}
    return src.text(), lib.text(), {"tensor": [f"`{w['var']}`"], "lines": lines}


def _unused_input(rng, w, faulty):
    src = Src(rng=rng)
    _header(src)
    _module(src, w)
    src.add(f"{w['model']} = {w['cls']}()")
    aux = _name(rng, ["aux", "z", "cond", "extra", "bias_in"], {w["var"]})
    src.add(f"for i in range({w['iters']}):")
    src.add(f"x = torch.randn({w['batch']}, {w['d_in']}, requires_grad=True)", 1)
    src.add(f"{aux} = torch.randn({w['batch']}, {w['d_in']}, requires_grad=True)", 1)
    src.add(f"out = {w['model']}(x + {aux}{'.detach()' if faulty else ''})", 1)
    src.add(f"g_x, g_aux = torch.autograd.grad(out.sum(), [x, {aux}])", 1, mark="call")
    lines = {"call": ("main", src.marks["call"])} if faulty else {}
    return src.text(), None, {"tensor": [f"`{aux}`"], "lines": lines}


def _nonleaf_flag(rng, w, faulty):
    src = _script(rng, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"{w['var']} = {w['model']}(x)", k, mark="made")
        s.add(f"{w['var']}.requires_grad = False" if faulty else f"{w['var']} = {w['var']}.detach()", k,
              mark="changed")
        s.add(f"print(float({w['var']}.mean()))", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [f"`{w['var']}`"], "lines": lines}


def _numpy_grad(rng, w, faulty):
    src = _script(rng, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"{w['var']} = {w['model']}(x)", k)
        s.add(f"values = {w['var']}{'' if faulty else '.detach()'}.numpy()", k, mark="changed")
    _loop(src, rng, w, body, w["context"])
    lines = {"changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [f"`{w['var']}`"], "lines": lines}


def _function_gradient(rng, w, faulty):
    name = rng.choice(["Clip", "Halve", "Straight", "RoundSTE", "Gate"])
    src = Src(rng=rng)
    _header(src)
    src.add(f"""
        class {name}(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 0.5

            @staticmethod
            def backward(ctx, g):""")
    src.add(rng.choice(["return g[:1]", "return g, g", "return g.sum(0)"]) if faulty else "return g * 0.5", 2)
    _module(src, w)
    _model_and_opt(src, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = {name}.apply({w['model']}(x)).sum()", k, mark="apply")
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"apply": ("main", src.marks["apply"])} if faulty else {}
    return src.text(), None, {"tensor": [name], "lines": lines}


def _no_graph(rng, w, faulty):
    src = _script(rng, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        if faulty:
            s.add("with torch.no_grad():", k)
            s.add(f"out = {w['model']}(x)", k + 1, mark="made")
        else:
            s.add(f"out = {w['model']}(x)", k)
        s.add("loss = out.pow(2).mean()", k)
        s.add(f"{w['opt']}.zero_grad()", k)
        s.add("loss.backward()", k, mark="changed")
        s.add(f"{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": None, "lines": lines}


def _hook_output_inplace(rng, w, faulty):
    """A forward hook that rescales a module's output in place, where the op that made the output saved it."""
    hook = rng.choice(["rescale_hook", "clip_output", "tap", "on_forward"])
    write = rng.choice(["output.mul_(0.5)", "output.clamp_(max=1.0)", "output.add_(0.1)"])
    src = Src(rng=rng)
    _header(src)
    _module(src, w, forward=lambda s: (s.add(f"h = {w['act']}(self.{w['l1']}(x))", 2),
                                        s.add(f"return torch.sigmoid(self.{w['l2']}(h))", 2, mark="inside")))
    src.add(f"def {hook}(module, inputs, output):")
    src.add(write if faulty else f"return {write.replace('_(', '(')}", 1, mark="changed")
    src.add("")
    src.add(f"{w['model']} = {w['cls']}()")
    src.add(f"{w['opt']} = torch.optim.{w['optcls']}({w['model']}.parameters(), {w['optargs']})")
    src.add(f"{w['model']}.register_forward_hook({hook})")

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = {w['model']}(x).mean()", k, mark="saved")
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"saved": ("main", src.marks["inside"]), "changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": ["output of"], "lines": lines}


_BUILDERS = {"foreach_write": _foreach_write, "step_between": _step_between, "inplace_output": _inplace_output, "buffer_in_forward": _buffer_in_forward,
             "function_backward_write": _function_backward_write, "ema_write": _ema_write, "freed": _freed,
             "carried_state": _carried_state, "leaf_inplace": _leaf_inplace, "checkpoint_inplace": _checkpoint_inplace,
             "loss_before_loop": _loss_before_loop, "untrained_source": _untrained_source, "peer_target": _peer_target, "inference_saved": _inference_saved,
             "forward_skipped": _forward_skipped, "cache_served": _cache_served,
             "unused_input": _unused_input, "nonleaf_flag": _nonleaf_flag, "numpy_grad": _numpy_grad,
             "function_gradient": _function_gradient, "no_graph": _no_graph,
             "hook_output_inplace": _hook_output_inplace, "reused_before_loop": _reused_before_loop}


# --- running and judging ---

@dataclass
class Outcome:
    error: BaseException | None
    diagnosis: object            # the Diagnosis attached to the error, or None
    said: list                   # every Diagnosis the doctor made (warnings and information lines too)
    notes: list                  # the doctor's notes on its own bookkeeping
    printed: str                 # what the doctor printed
    files: dict                  # "main"/"helper": the file's path


def run(program: Program, folder: Path) -> Outcome:
    """Run the program in this process, as a script under one doctor (names from its globals)."""
    from gan_lessons.doctor import doctor
    folder.mkdir(parents=True, exist_ok=True)
    main = folder / f"train_{program.seed}.py"
    main.write_text(program.main)
    files = {"main": str(main)}
    if program.helper:
        helper = folder / f"{program.helper_name}.py"
        helper.write_text(program.helper)
        files["helper"] = str(helper)
    namespace = {"__name__": "__main__", "__file__": str(main)}
    printed, error = io.StringIO(), None
    sys.path.insert(0, str(folder))
    doc = doctor(namespaces=lambda: [namespace])
    try:
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                with doc:
                    exec(compile(program.main, str(main), "exec"), namespace)
            except Exception as caught:      # what the script raised, with the doctor's diagnosis attached
                error = caught
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop(program.helper_name or "", None)
    return Outcome(error, getattr(error, "diagnosis", None), list(doc.diagnoses), list(doc.notes),
                   printed.getvalue(), files)


@dataclass
class Verdict:
    named: bool                  # a faulty program: its kind, tensor and lines named
    false_alarm: bool            # a fault-free program: the doctor said something (or it raised)
    missing: list                # what the diagnosis lacked


def judge(program: Program, outcome: Outcome) -> Verdict:
    if not program.faulty:
        said = [d for d in outcome.said if d.kind != "information"]
        return Verdict(False, bool(said) or outcome.error is not None,
                       [d.summary for d in said] + ([repr(outcome.error)] if outcome.error else []))
    dx, missing = outcome.diagnosis, []
    if dx is None:
        return Verdict(False, False, [f"no diagnosis ({type(outcome.error).__name__}: {str(outcome.error)[:80]})"
                                      if outcome.error else "no error raised"])
    text = dx.text()
    if dx.kind != program.truth["kind"]:
        missing.append(f"kind {dx.kind}, not {program.truth['kind']}")
    if program.truth["tensor"] and not any(name in text for name in program.truth["tensor"]):
        missing.append(f"tensor {program.truth['tensor'][0]}")
    missing += [f"says nothing of {words!r}" for words in program.truth.get("says", ()) if words not in text]
    missing += [f"says {words!r}" for words in program.truth.get("says_not", ()) if words in text]
    sources = {"main": program.main.splitlines(), "helper": (program.helper or "").splitlines()}
    for what, (where, line) in program.truth["lines"].items():
        code = sources[where][line - 1].strip()
        if f"line {line} (`{code}`)" not in text:
            missing.append(f"{what} line {line} of {where} (`{code}`)")
    return Verdict(not missing, False, missing)

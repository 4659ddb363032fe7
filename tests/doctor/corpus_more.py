"""More generated faults for the autograd doctor, written without reading the doctor's code: mechanisms that
corpus.py's builders do not cover, each the way real training code breaks (a GAN step in the wrong order, a chunk
written in place, a buffer renormalised by a module method, an in-place activation after a saving one in an
nn.Sequential, a memory of activations kept across steps, a step of one optimizer between two losses through a
shared encoder, autograd.grad twice, gradient penalties, a loss rebuilt from .item(), a teacher's target made in
inference_mode and edited, a saliency hook on an input that does not require grad, a preallocated out= buffer and a
metric helper that calls numpy).

    import corpus, corpus_more
    corpus_more.register()
    program = corpus.generate(seed, faulty=True, kind="gan_wrong_order")

Each builder has corpus.py's signature: (rng, w, faulty) -> (main source, helper source or None, truth)."""
import corpus
from corpus import Src, _header, _loop, _model_and_opt, _module, _name

_RESERVED = {"torch", "nn", "F", "np", "x", "loss", "opt", "i", "j", "self", "lib", "range", "trainer", "Trainer",
             "real", "fake", "z", "y", "eps", "out", "grads", "target"}


def _taken(w):
    return _RESERVED | {v for v in w.values() if isinstance(v, str)}


def _loop_with(src, rng, w, body, context, objs):
    """Like corpus._loop, for several models and optimizers: `body(s, k, r)` adds the step's lines; `r(name)` is how
    the step refers to an object (a trainer method may use self.name or unpack the attributes first)."""
    args = ", ".join(objs)
    if context == "step function":
        src.add(f"def {w['step']}({args}):")
        body(src, 1, lambda n: n)
        src.add("")
        src.add(f"for i in range({w['iters']}):")
        src.add(f"{w['step']}({args})", 1)
    elif context == "trainer method":
        unpack = rng.random() < 0.5
        src.add("class Trainer:")
        src.add(f"def __init__(self, {args}):", 1)
        for o in objs:
            src.add(f"self.{o} = {o}", 2)
        src.add("")
        src.add(f"def {w['step']}(self):", 1)
        if unpack:
            src.add(f"{args} = {', '.join('self.' + o for o in objs)}", 2)
        body(src, 2, (lambda n: n) if unpack else (lambda n: f"self.{n}"))
        src.add("")
        src.add(f"trainer = Trainer({args})")
        src.add(f"for i in range({w['iters']}):")
        src.add(f"trainer.{w['step']}()", 1)
    else:
        src.add(f"for i in range({w['iters']}):")
        body(src, 1, lambda n: n)


def _two_layer(src, cls, l1, l2, d_in, hid, d_out, act):
    src.add(f"""
        class {cls}(nn.Module):
            def __init__(self):
                super().__init__()
                self.{l1} = nn.Linear({d_in}, {hid})
                self.{l2} = nn.Linear({hid}, {d_out})

            def forward(self, x):
                return self.{l2}({act}(self.{l1}(x)))
        """)
    src.add("")


# --- version: a tensor saved for backward, changed in place before the backward ---

def _gan_wrong_order(rng, w, faulty):
    """G's loss computed through D, then D's optimizer steps (in place on D's weights), then G's backward."""
    G, D = rng.choice([("G", "D"), ("netG", "netD"), ("gen", "critic"), ("generator", "discriminator"),
                       ("gen", "disc"), ("g_model", "d_model")])
    optG, optD = rng.choice([("optG", "optD"), ("opt_g", "opt_d"), ("g_optim", "d_optim"),
                             ("optimizer_G", "optimizer_D")])
    gcls, dcls = rng.choice([("Generator", "Discriminator"), ("Gen", "Disc"), ("GNet", "DNet"), ("G_", "Critic")])
    taken = _taken(w) | {G, D, optG, optD}
    la, lb = _name(rng, corpus._LAYERS, set(taken)), None
    lb = _name(rng, corpus._LAYERS, set(taken) | {la})
    nz, d, hid = rng.choice([2, 4, 8]), w["d_in"], w["hid"]
    src = Src(rng=rng)
    _header(src)
    src.add("import torch.nn.functional as F")
    src.add("")
    _two_layer(src, gcls, w["l1"], w["l2"], nz, hid, d, w["act"])
    _two_layer(src, dcls, la, lb, d, hid, 1, "F.leaky_relu")
    src.add(f"{G}, {D} = {gcls}(), {dcls}()")
    args = rng.choice(["lr=2e-4, betas=(0.5, 0.999)", "lr=1e-3"])
    cls = rng.choice(["Adam", "Adam", "RMSprop", "SGD"])
    if cls != "Adam":
        args = "lr=1e-3"
    src.add(f"{optG} = torch.optim.{cls}({G}.parameters(), {args})")
    src.add(f"{optD} = torch.optim.{cls}({D}.parameters(), {args})")
    style = rng.choice(["bce", "softplus", "wgan"])

    def losses(r):
        dd = r(D)
        if style == "bce":
            d_loss = (f"F.binary_cross_entropy_with_logits({dd}(real), torch.ones({w['batch']}, 1)) + "
                      f"F.binary_cross_entropy_with_logits({dd}(fake.detach()), torch.zeros({w['batch']}, 1))")
            g_loss = f"F.binary_cross_entropy_with_logits({dd}(fake), torch.ones({w['batch']}, 1))"
        elif style == "softplus":
            d_loss = f"F.softplus(-{dd}(real)).mean() + F.softplus({dd}(fake.detach())).mean()"
            g_loss = f"F.softplus(-{dd}(fake)).mean()"
        else:
            d_loss = f"{dd}(fake.detach()).mean() - {dd}(real).mean()"
            g_loss = f"-{dd}(fake).mean()"
        return d_loss, g_loss

    order = rng.choice(["before_d_backward", "after_d_backward"])

    def body(s, k, r):
        d_loss, g_loss = losses(r)
        s.add(f"real = torch.randn({w['batch']}, {d})", k)
        s.add(f"z = torch.randn({w['batch']}, {nz})", k)
        s.add(f"fake = {r(G)}(z)", k)
        s.add(f"d_loss = {d_loss}", k)
        if faulty and order == "before_d_backward":
            s.add(f"g_loss = {g_loss}", k, mark="saved")
        s.add(f"{r(optD)}.zero_grad()\nd_loss.backward()", k)
        if faulty and order == "after_d_backward":
            s.add(f"g_loss = {g_loss}", k, mark="saved")
        s.add(f"{r(optD)}.step()", k, mark="changed")
        if not faulty:
            s.add(f"g_loss = {g_loss}", k)
        s.add(f"{r(optG)}.zero_grad()", k)
        s.add("g_loss.backward()", k, mark="failing")
        s.add(f"{r(optG)}.step()", k)
    _loop_with(src, rng, w, body, w["context"], [G, D, optG, optD])
    lines = {"saved": ("main", src.marks["saved"]), "changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [f"{D}.{la}.weight", f"{D}.{lb}.weight"], "lines": lines}


def _method_buffer_write(rng, w, faulty):
    """A buffer used in forward (saved by a multiply), renormalised in place by another method of the module (one or
    two calls deep), called from the loop between the forward and the backward."""
    b = w["buf"]
    outer = rng.choice(["renorm_", "normalize_", "refresh", "maintain", "update_stats"])
    inner = rng.choice(["_rescale", "_project", "_renorm_buffer"])
    write = rng.choice([f"self.{b}.div_(self.{b}.norm() + 1e-6)", f"self.{b}.clamp_(0.5, 2.0)",
                        f"self.{b}.mul_(0.99)", f"self.{b}.copy_(torch.ones_like(self.{b}))",
                        f"self.{b}.fill_(1.0)"])
    deep = rng.random() < 0.5
    no_grad = rng.random() < 0.5
    src = Src(rng=rng)
    _header(src)

    def forward(s):
        s.add(f"h = {w['act']}(self.{w['l1']}(x))", 2)
        s.add(f"h = h * self.{b}", 2, mark="saved_inside")
        s.add(f"return self.{w['l2']}(h)", 2)
    _module(src, w, extra_init=f"self.register_buffer('{b}', torch.rand({w['hid']}) + 0.5)", forward=forward)
    # the methods, appended to the class (indented by one level)
    if no_grad:
        src.add("@torch.no_grad()", 1)
    src.add(f"def {outer}(self):", 1)
    if deep:
        src.add(f"self.{inner}()", 2)
        src.add("")
        src.add(f"def {inner}(self):", 1)
    src.add(write, 2, mark="changed")
    src.add("")
    _model_and_opt(src, w)

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = {w['model']}(x).pow(2).mean()", k, mark="forward")
        s.add(f"{w['opt']}.zero_grad()", k)
        if faulty:
            s.add(f"{w['model']}.{outer}()", k, mark="call")
            s.add(f"loss.backward()\n{w['opt']}.step()", k)
        else:
            s.add(f"loss.backward()\n{w['opt']}.step()", k)
            s.add(f"{w['model']}.{outer}()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"saved": ("main", src.marks["saved_inside"]), "changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [f"{w['model']}.{b}"], "lines": lines}


_WRITES_NO_OUT = [t for t in corpus._WRITES if "out=" not in t]


def _nested_helper_write(rng, w, faulty):
    """The output of an op that saves its output, passed to a post-processing function that writes it in place two
    or three calls deep (in the second file or in the script)."""
    op = rng.choice(["torch.sigmoid", "torch.exp", "torch.tanh", "torch.softmax"])
    call_op = (lambda a: f"torch.softmax({a}, dim=1)") if op == "torch.softmax" else (lambda a: f"{op}({a})")
    write = rng.choice(_WRITES_NO_OUT).format(v="t")
    names = rng.sample(["postprocess", "_clip", "_apply", "tidy", "_squash_inplace", "calibrate", "_fix_range"], 3)
    depth = rng.choice([2, 3])
    in_helper = rng.random() < 0.5
    fns = Src(rng=rng)
    for n in range(depth):
        fns.add(f"def {names[n]}(t):")
        if n < depth - 1:
            fns.add(f"t = {names[n + 1]}(t)", 1)
        else:
            fns.add(write if faulty else "t = t * 1.0", 1, mark="changed")
        fns.add("return t", 1)
        fns.add("")
    src = Src(rng=rng)
    if in_helper:
        lib = Src(rng=rng)
        lib.add("import torch\n")
        base = len(lib.lines)
        lib.lines.extend(fns.lines)
        changed = ("helper", fns.marks["changed"] + base)
        _header(src, w["lib"])
        prefix = "lib."
    else:
        lib = None
        _header(src)
        src.add("")
        base = len(src.lines)
        src.lines.extend(fns.lines)
        changed = ("main", fns.marks["changed"] + base)
        prefix = ""
    _module(src, w)
    _model_and_opt(src, w)
    v = w["var"]

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"{v} = {call_op(w['model'] + '(x)')}", k, mark="saved")
        s.add(f"{v} = {prefix}{names[0]}({v})", k)
        s.add(f"loss = {v}.pow(2).mean()", k)
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"saved": ("main", src.marks["saved"]), "changed": changed} if faulty else {}
    return src.text(), lib.text() if lib else None, {"tensor": [f"`{v}`", "output of"], "lines": lines}


_PAIRS = [("nn.Sigmoid()", "nn.ReLU(inplace=True)"), ("nn.Tanh()", "nn.LeakyReLU(0.2, inplace=True)"),
          ("nn.Softmax(dim=1)", "nn.Dropout(p=0.1, inplace=True)"), ("nn.Sigmoid()", "nn.Dropout(0.2, inplace=True)"),
          ("nn.Tanh()", "nn.Hardtanh(inplace=True)"), ("nn.Sigmoid()", "nn.ReLU6(inplace=True)"),
          ("nn.Tanh()", "nn.ReLU(True)")]


def _inplace_act_sequential(rng, w, faulty):
    """An in-place activation (or dropout) right after a layer that saves its output, inside an nn.Sequential: the
    model itself, or a block inside the model's class."""
    saving, inplace = rng.choice(_PAIRS)
    as_block = rng.random() < 0.5
    clean_swap = rng.random() < 0.5
    if faulty:
        layers = [f"nn.Linear({w['d_in']}, {w['hid']})", saving, inplace, f"nn.Linear({w['hid']}, {w['d_out']})"]
        idx = 1
    elif clean_swap:       # the in-place layer right after the Linear: nothing saved its input's output
        layers = [f"nn.Linear({w['d_in']}, {w['hid']})", inplace, saving, f"nn.Linear({w['hid']}, {w['d_out']})"]
        idx = 2
    else:
        layers = [f"nn.Linear({w['d_in']}, {w['hid']})", saving, inplace.replace("inplace=True", "inplace=False")
                  .replace("nn.ReLU(True)", "nn.ReLU()"), f"nn.Linear({w['hid']}, {w['d_out']})"]
        idx = 1
    src = Src(rng=rng)
    _header(src)
    blk = w["l1"]
    if as_block:
        src.add(f"class {w['cls']}(nn.Module):")
        src.add("def __init__(self):", 1)
        src.add("super().__init__()", 2)
        src.lines.append(f"        self.{blk} = nn.Sequential(")
        src.lines.extend("            " + f"{layer}," for layer in layers)
        src.add(")", 2)
        src.add(f"self.{w['l2']} = nn.Linear({w['d_out']}, 1)", 2)
        src.add("")
        src.add("def forward(self, x):", 1)
        src.add(f"h = self.{blk}(x)", 2, mark="inside")
        src.add(f"return self.{w['l2']}(h)", 2)
        src.add("")
        src.add(f"{w['model']} = {w['cls']}()")
        qual = f"{w['model']}.{blk}.{idx}"
    else:
        src.lines.append(f"{w['model']} = nn.Sequential(")
        src.lines.extend("    " + f"{layer}," for layer in layers)
        src.add(")")
        qual = f"{w['model']}.{idx}"
    src.add(f"{w['opt']} = torch.optim.{w['optcls']}({w['model']}.parameters(), {w['optargs']})")

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"loss = {w['model']}(x).pow(2).mean()", k, mark="forward")
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    at = src.marks["inside"] if as_block else src.marks["forward"]
    lines = {"saved": ("main", at), "changed": ("main", at)} if faulty else {}
    return src.text(), None, {"tensor": [qual, "output of"], "lines": lines}


def _shared_encoder_step(rng, w, faulty):
    """Two heads on a shared encoder, two optimizers: the first one (encoder + first head) steps between the first
    loss's backward and the second loss's backward."""
    taken = _taken(w)
    enc = _name(rng, ["encoder", "enc", "trunk", "shared", "body"], taken)
    ha, hb = rng.choice([("head_a", "head_b"), ("cls_head", "reg_head"), ("policy_head", "value_head"),
                         ("recon_head", "aux_head")])
    oa, ob = rng.choice([("opt_a", "opt_b"), ("opt_main", "opt_aux"), ("optim_1", "optim_2"), ("opt_enc", "opt_head")])
    shared = rng.random() < 0.5
    clean_sum = rng.random() < 0.5
    src = Src(rng=rng)
    _header(src)
    src.add("")
    _two_layer(src, w["cls"], w["l1"], w["l2"], w["d_in"], w["hid"], w["hid"], w["act"])
    src.add(f"{enc} = {w['cls']}()")
    src.add(f"{ha}, {hb} = nn.Linear({w['hid']}, {w['d_out']}), nn.Linear({w['hid']}, 1)")
    src.add(f"{oa} = torch.optim.{w['optcls']}(list({enc}.parameters()) + list({ha}.parameters()), {w['optargs']})")
    src.add(f"{ob} = torch.optim.{w['optcls']}({hb}.parameters(), {w['optargs']})")

    def body(s, k, r):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        if shared:
            s.add(f"z = {r(enc)}(x)", k, mark="saved")
            za, zb = "z", "z"
        else:
            s.add(f"z_a = {r(enc)}(x)", k)
            s.add(f"z_b = {r(enc)}(x + 0.1 * torch.randn_like(x))", k, mark="saved")
            za, zb = "z_a", "z_b"
        s.add(f"loss_a = {r(ha)}({za}).pow(2).mean()", k)
        s.add(f"loss_b = ({r(hb)}({zb}) - 1).abs().mean()", k)
        s.add(f"{r(oa)}.zero_grad()\n{r(ob)}.zero_grad()", k)
        retain = "retain_graph=True" if shared else ""
        if faulty:
            s.add(f"loss_a.backward({retain})", k)
            s.add(f"{r(oa)}.step()", k, mark="changed")
            s.add("loss_b.backward()", k, mark="failing")
            s.add(f"{r(ob)}.step()", k)
        else:
            if clean_sum:
                s.add("(loss_a + loss_b).backward()", k)
            else:
                s.add(f"loss_a.backward({retain})\nloss_b.backward()", k)
            s.add(f"{r(oa)}.step()\n{r(ob)}.step()", k)
    _loop_with(src, rng, w, body, w["context"], [enc, ha, hb, oa, ob])
    lines = {"saved": ("main", src.marks["saved"]), "changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [f"{enc}.{w['l2']}.weight"], "lines": lines}


# --- view_inplace: a view from a function returning several views, written in place ---

def _split_view_inplace(rng, w, faulty):
    """h.chunk / torch.split / h.unbind, then one of the pieces written in place: in the step, or in the module's
    forward (an attention-style query scaling)."""
    w["hid"] = rng.choice([6, 8, 12, 16])
    w["d_out"] = rng.choice([2, 4, 6])
    in_forward = rng.random() < 0.5
    a, b = rng.choice([("q", "k"), ("left", "right"), ("mu", "logvar"), ("first", "second"), ("a", "b"),
                       ("scale", "shift")])
    if w["var"] in (a, b):
        a, b = a + "_", b + "_"
    write = rng.choice([f"{a}.mul_(0.5)", f"{a} += 1", f"{a}.clamp_(min=-1)", f"{a}[0] = 0", f"{a}.div_(2.0)",
                        f"{a}[:, 0].mul_(0.5)", f"{a}.sigmoid_()", f"{a}.masked_fill_({a} < 0, 0.0)"])
    clean = rng.choice([f"{a} = {a} * 0.5", f"{a} = {a}.clamp(min=-1)", f"{a} = {a}.clone()"])
    form = rng.choice(["chunk", "torch.chunk", "split", "torch.split", "unbind"])
    if form == "unbind":       # columns: {a} and {b} are 1-d
        write = write.replace(f"{a}[:, 0]", f"{a}[:1]")

    def split(t, n):
        return {"chunk": f"{a}, {b} = {t}.chunk(2, dim=1)", "torch.chunk": f"{a}, {b} = torch.chunk({t}, 2, dim=-1)",
                "split": f"{a}, {b} = {t}.split({n // 2}, dim=-1)",
                "torch.split": f"{a}, {b} = torch.split({t}, {n // 2}, dim=1)",
                "unbind": f"{a}, {b}, *_ = {t}.unbind(1)"}[form]
    src = Src(rng=rng)
    _header(src)
    v = w["var"]
    if in_forward:
        half = w["hid"] // 2

        def forward(s):
            s.add(f"{v} = self.{w['l1']}(x)", 2)
            s.add(split(v, w["hid"]), 2, mark="made")
            s.add(write if faulty else clean, 2, mark="changed")
            if form == "unbind":
                s.add(f"return self.{w['l2']}({w['act']}({a} * {b}).unsqueeze(1).repeat(1, {half}))", 2)
            else:
                s.add(f"return self.{w['l2']}({w['act']}({a} * {b}))", 2)

        src.add(f"""
            class {w['cls']}(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.{w['l1']} = nn.Linear({w['d_in']}, {w['hid']})
                    self.{w['l2']} = nn.Linear({half}, {w['d_out']})
            """)
        src.add("")
        src.add("def forward(self, x):", 1)
        forward(src)
        src.add("")
        _model_and_opt(src, w)

        def body(s, k):
            s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
            s.add(f"loss = {w['model']}(x).pow(2).mean()", k)
            s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    else:
        _module(src, w)
        _model_and_opt(src, w)

        def body(s, k):
            s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
            s.add(f"{v} = {w['model']}(x)", k)
            s.add(split(v, w["d_out"]), k, mark="made")
            s.add(write if faulty else clean, k, mark="changed")
            s.add(f"loss = ({a} * {b}).mean()", k)
            s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"made": ("main", src.marks["made"]), "changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [f"`{a}`"], "lines": lines}


# --- freed: backward through a graph whose saved tensors a previous backward freed ---

def _memory_cache(rng, w, faulty):
    """Activations kept in a list across steps (on the module, or on the trainer / at the top level) and used in
    the next step's loss: the second backward goes into the first step's freed graph."""
    w["iters"] = max(2, w["iters"])
    mem = rng.choice(["memory", "history", "cache", "bank", "past"])
    on_module = rng.random() < 0.5
    cap = rng.random() < 0.5
    kept = "h.detach()" if not faulty else "h"
    src = Src(rng=rng)
    _header(src)
    if on_module:
        def forward(s):
            s.add(f"h = {w['act']}(self.{w['l1']}(x))", 2)
            s.add(f"self.{mem}.append({kept})", 2, mark="kept")
            if cap:
                s.add(f"self.{mem} = self.{mem}[-4:]", 2)
            s.add(f"ctx = torch.stack(self.{mem}).mean(0)", 2)
            s.add(f"return self.{w['l2']}(h + ctx)", 2)
        _module(src, w, extra_init=f"self.{mem} = []", forward=forward)
        _model_and_opt(src, w)

        def body(s, k):
            s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
            s.add(f"loss = {w['model']}(x).pow(2).mean()", k)
            s.add(f"{w['opt']}.zero_grad()", k)
            s.add("loss.backward()", k, mark="changed")
            s.add(f"{w['opt']}.step()", k)
        _loop(src, rng, w, body, w["context"])
    else:
        _module(src, w)
        _model_and_opt(src, w)
        src.add(f"{mem} = []")
        v = w["var"]

        def body(s, k):
            s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
            s.add(f"{v} = {w['model']}(x)", k)
            s.add(f"{mem}.append({v}{'' if faulty else '.detach()'})", k, mark="kept")
            if cap:
                s.add(f"del {mem}[:-4]", k)
            s.add(f"loss = {v}.pow(2).mean() + 0.1 * torch.stack({mem}).mean()", k)
            s.add(f"{w['opt']}.zero_grad()", k)
            s.add("loss.backward()", k, mark="changed")
            s.add(f"{w['opt']}.step()", k)
        _loop(src, rng, w, body, w["context"])
    lines = {"kept": ("main", src.marks["kept"]), "changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": None, "lines": lines}


def _grad_twice(rng, w, faulty):
    """torch.autograd.grad on a loss without retain_graph, then a second grad through the same graph or the loss's
    backward (a gradient-norm monitor, an adaptive loss weight)."""
    style = rng.choice(["same_output", "then_backward", "adaptive_weight"])
    lossf = rng.choice(["out.pow(2).mean()", "(out - 1).abs().mean()", "torch.nn.functional.mse_loss(out, y)"])
    p1, p2 = f"{w['model']}.{w['l2']}.weight", f"{w['model']}.{w['l1']}.weight"
    src = Src(rng=rng)
    _header(src)
    _module(src, w)
    _model_and_opt(src, w)
    retain = "" if faulty else ", retain_graph=True"

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"y = torch.randn({w['batch']}, {w['d_out']})", k)
        s.add(f"out = {w['model']}(x)", k)
        if style == "same_output":
            s.add(f"loss = {lossf}", k)
            if faulty:
                s.add(f"g_last, = torch.autograd.grad(loss, [{p1}])", k, mark="changed")
                s.add(f"g_first, = torch.autograd.grad(loss, [{p2}])", k, mark="failing")
            else:
                s.add(f"g_last, g_first = torch.autograd.grad(loss, [{p1}, {p2}])", k)
            s.add("ratio = g_last.norm() / (g_first.norm() + 1e-8)", k)
        elif style == "then_backward":
            s.add(f"loss = {lossf}", k)
            s.add(f"grads = torch.autograd.grad(loss, list({w['model']}.parameters()){retain})", k, mark="changed")
            s.add("total_norm = torch.stack([g.norm() for g in grads]).norm()", k)
            s.add(f"{w['opt']}.zero_grad()", k)
            s.add("loss.backward()", k, mark="failing")
            s.add(f"{w['opt']}.step()", k)
        else:
            s.add(f"rec_loss = {lossf}", k)
            s.add("adv_loss = -out.mean()", k)
            s.add(f"rec_g, = torch.autograd.grad(rec_loss, {p1}{retain})", k, mark="changed")
            s.add(f"adv_g, = torch.autograd.grad(adv_loss, {p1}, retain_graph=True)", k, mark="failing")
            s.add("weight = (rec_g.norm() / (adv_g.norm() + 1e-4)).clamp(max=1e4).detach()", k)
            s.add("loss = rec_loss + weight * adv_loss", k)
            s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"changed": ("main", src.marks["changed"]), "failing": ("main", src.marks["failing"])} if faulty else {}
    return src.text(), None, {"tensor": None, "lines": lines}


# --- gradient penalties ---

def _gp_common(rng, w, in_helper, fault):
    """A WGAN-GP critic step; `fault` is "grad_input" (x_hat never made to require grad), "nonscalar" (no
    grad_outputs) or None. Returns (src, lib, call mark place, x_hat name, d_hat name)."""
    x_hat = rng.choice(["x_hat", "interp", "mixed", "interpolates", "x_mix"])
    d_hat = rng.choice(["d_hat", "score_hat", "critic_interp", "d_interp"])
    make_req = fault != "grad_input"
    req_style = rng.choice(["inline", "separate"])
    outputs = "" if fault == "nonscalar" else rng.choice([f", grad_outputs=torch.ones_like({d_hat})",
                                                           f", torch.ones_like({d_hat})"])
    fake_src = rng.choice(["fake.detach()", "fake"])

    def gp_lines(s, k, D, real, fake):
        s.add(f"eps = torch.rand({real}.size(0), 1)", k)
        mix = f"eps * {real} + (1 - eps) * {fake}"
        if make_req and req_style == "inline":
            s.add(f"{x_hat} = ({mix}).requires_grad_(True)", k)
        else:
            s.add(f"{x_hat} = {mix}", k)
            if make_req:
                s.add(f"{x_hat}.requires_grad_(True)", k)
        s.add(f"{d_hat} = {D}({x_hat})", k)
        if outputs.startswith(", torch.ones"):
            s.add(f"grads, = torch.autograd.grad({d_hat}, {x_hat}{outputs}, create_graph=True)", k, mark="call")
        else:
            s.add(f"grads, = torch.autograd.grad(outputs={d_hat}, inputs={x_hat}{outputs}, create_graph=True)",
                  k, mark="call")
        s.add("return ((grads.norm(2, dim=1) - 1) ** 2).mean()" if s is not None and k == 1 and in_helper else
              "gp = ((grads.norm(2, dim=1) - 1) ** 2).mean()", k)

    lib = None
    src = Src(rng=rng)
    fn = rng.choice(["gradient_penalty", "compute_gp", "gp_loss", "penalty"])
    if in_helper:
        lib = Src(rng=rng)
        lib.add("import torch\n")
        lib.add(f"def {fn}(critic, real, fake):")
        gp_lines(lib, 1, "critic", "real", "fake")
        _header(src, w["lib"])
    else:
        _header(src)
    _module(src, w)
    _model_and_opt(src, w)
    M = w["model"]

    def body(s, k):
        s.add(f"real = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"fake = torch.randn({w['batch']}, {w['d_in']}) * 0.5", k)
        if in_helper:
            s.add(f"gp = lib.{fn}({M}, real, {fake_src})", k)
        else:
            gp_lines(s, k, M, "real", fake_src)
        s.add(f"loss = {M}(fake.detach()).mean() - {M}(real).mean() + 10.0 * gp", k)
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    call = ("helper", lib.marks["call"]) if in_helper else ("main", src.marks["call"])
    return src, lib, call, x_hat, d_hat


def _gp_input_no_grad(rng, w, faulty):
    w["d_out"] = 1
    in_helper = rng.random() < 0.5
    src, lib, call, x_hat, _ = _gp_common(rng, w, in_helper, "grad_input" if faulty else None)
    return src.text(), lib.text() if lib else None, {"tensor": [f"`{x_hat}`"],
                                                     "lines": {"call": call} if faulty else {}}


def _gp_nonscalar(rng, w, faulty):
    w["d_out"] = 1
    in_helper = rng.random() < 0.5
    src, lib, call, _, d_hat = _gp_common(rng, w, in_helper, "nonscalar" if faulty else None)
    return src.text(), lib.text() if lib else None, {"tensor": [f"`{d_hat}`"],
                                                     "lines": {"call": call} if faulty else {}}


def _unreduced_loss(rng, w, faulty):
    """A per-sample loss (reduction='none', or a weighted per-sample sum) whose mean was forgotten."""
    name = rng.choice(["loss", "per_sample", "losses", "objective", "weighted"])
    crit = rng.choice(["nn.MSELoss(reduction='none')", "nn.L1Loss(reduction='none')",
                       "nn.SmoothL1Loss(reduction='none')"])
    style = rng.choice(["criterion", "weighted", "manual"])
    src = Src(rng=rng)
    _header(src)
    _module(src, w)
    _model_and_opt(src, w)
    if style != "manual":
        src.add(f"criterion = {crit}")

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"y = torch.randn({w['batch']}, {w['d_out']})", k)
        if style == "criterion":
            expr = f"criterion({w['model']}(x), y)"
        elif style == "weighted":
            s.add(f"weights = torch.rand({w['batch']}, 1)", k)
            expr = f"criterion({w['model']}(x), y) * weights"
        else:
            expr = f"({w['model']}(x) - y).pow(2).sum(dim=1)"
        s.add(f"{name} = {expr}" if faulty else f"{name} = ({expr}).mean()", k)
        s.add(f"{w['opt']}.zero_grad()", k)
        s.add(f"{name}.backward()", k, mark="call")
        s.add(f"{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    return src.text(), None, {"tensor": [f"`{name}`"], "lines": {"call": ("main", src.marks["call"])} if faulty else {}}


# --- no_graph: a loss rebuilt from Python numbers ---

def _item_rebuilt(rng, w, faulty):
    style = rng.choice(["item", "accumulate", "list"])
    src = Src(rng=rng)
    _header(src)
    _module(src, w)
    _model_and_opt(src, w)
    M = w["model"]

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        if style == "item":
            s.add(f"loss = {M}(x).pow(2).mean()", k)
            s.add("loss_value = loss.item()", k)
            if faulty:
                s.add(rng.choice(["loss = torch.tensor(loss_value)", "loss = torch.as_tensor(loss_value)",
                                  "loss = torch.tensor([loss_value]).sum()"]), k, mark="made")
        elif style == "accumulate":
            s.add("total = 0.0", k)
            s.add("for j in range(2):", k)
            s.add(f"part = {M}(x[j::2]).pow(2).mean()", k + 1)
            s.add("total += part.item()" if faulty else "total = total + part", k + 1)
            if faulty:
                s.add("loss = torch.tensor(total / 2)", k, mark="made")
            else:
                s.add("loss = total / 2", k)
        else:
            s.add(f"out = {M}(x)", k)
            s.add("loss_a = out.pow(2).mean()\nloss_b = (out - 1).abs().mean()", k)
            if faulty:
                s.add("loss = torch.tensor([loss_a, loss_b]).sum()", k, mark="made")
            else:
                s.add("loss = torch.stack([loss_a, loss_b]).sum()", k)
        s.add(f"{w['opt']}.zero_grad()", k)
        s.add("loss.backward()", k, mark="changed")
        s.add(f"{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"made": ("main", src.marks["made"]), "changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": None, "lines": lines}


# --- inference_inplace: a teacher's target made in inference_mode, edited in place outside it ---

def _inference_target_inplace(rng, w, faulty):
    teacher = _name(rng, ["teacher", "target_net", "ema_net", "ref_model", "frozen"], _taken(w))
    tgt = rng.choice(["target", "soft_target", "t_out", "labels", "pseudo"])
    write = rng.choice([f"{tgt} -= {tgt}.mean(0)", f"{tgt}.clamp_(-1, 1)", f"{tgt}.div_(0.5)",
                        f"{tgt}.mul_(0.9).add_(0.05)", f"{tgt}[:, 0] = 0"])
    mode = "inference_mode" if faulty else "no_grad"
    in_helper = rng.random() < 0.4
    lib = None
    src = Src(rng=rng)
    fn = rng.choice(["make_targets", "teacher_forward", "pseudo_labels"])
    if in_helper:
        lib = Src(rng=rng)
        lib.add("import torch\n")
        lib.add(f"@torch.{mode}()\ndef {fn}(model, x):")
        lib.add("return model(x)", 1, mark="made")
        _header(src, w["lib"])
    else:
        _header(src)
    _module(src, w)
    _model_and_opt(src, w)
    src.add(f"{teacher} = {w['cls']}()")
    src.add(f"{teacher}.load_state_dict({w['model']}.state_dict())")

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        if in_helper:
            s.add(f"{tgt} = lib.{fn}({teacher}, x)", k)
        else:
            s.add(f"with torch.{mode}():", k)
            s.add(f"{tgt} = {teacher}(x)", k + 1, mark="made")
        s.add(write, k, mark="changed")
        s.add(f"loss = ({w['model']}(x) - {tgt}).pow(2).mean()", k)
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    made = ("helper", lib.marks["made"]) if in_helper else ("main", src.marks["made"])
    lines = {"made": made, "changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), lib.text() if lib else None, {"tensor": [f"`{tgt}`"], "lines": lines}


# --- hook_no_grad: a gradient hook on a tensor that does not require grad ---

def _saliency_hook(rng, w, faulty):
    """A saliency map: a hook on the input (never made to require grad), or on features computed under no_grad."""
    inp = rng.choice(["images", "inputs", "batch_x", "sample", "x_in"])
    on_features = rng.random() < 0.5
    feat = w["var"]
    src = Src(rng=rng)
    _header(src)
    _module(src, w)
    src.add(f"{w['model']} = {w['cls']}()")
    src.add("saved = {}")
    src.add("")
    src.add("def keep_grad(g):")
    src.add("saved['grad'] = g", 1)
    src.add("")
    M = w["model"]
    src.add(f"for i in range({w['iters']}):")
    k = 1
    if on_features:
        src.add(f"{inp} = torch.randn({w['batch']}, {w['d_in']})", k)
        if faulty:
            src.add("with torch.no_grad():", k)
            src.add(f"{feat} = {M}.{w['l1']}({inp})", k + 1)
        else:
            src.add(f"{feat} = {M}.{w['l1']}({inp})", k)
        src.add(f"{feat}.register_hook(keep_grad)", k, mark="call")
        src.add(f"objective = {M}.{w['l2']}({w['act']}({feat}))[:, 0].sum()", k)
        name = feat
    else:
        src.add(f"{inp} = torch.randn({w['batch']}, {w['d_in']}{'' if faulty else ', requires_grad=True'})", k)
        src.add(f"{inp}.register_hook(keep_grad)", k, mark="call")
        src.add(f"objective = {M}({inp})[:, 0].sum()", k)
        name = inp
    src.add(f"{M}.zero_grad()\nobjective.backward()", k)
    src.add("saliency = saved['grad'].abs().amax(dim=1)", k)
    w["context"] = "top level"
    return src.text(), None, {"tensor": [f"`{name}`"], "lines": {"call": ("main", src.marks["call"])} if faulty else {},
                              "context": "top level"}


# --- out_grad: a preallocated out= buffer written from tensors that require grad ---

def _preallocated_out(rng, w, faulty):
    buf = _name(rng, ["buf", "workspace", "scratch", "out_buf", "pre"], _taken(w))
    a, b = rng.choice([("left", "right"), ("h1", "h2"), ("p", "q"), ("za", "zb")])
    op = rng.choice(["cat", "stack", "add", "mul"])
    in_module = rng.random() < 0.5
    d = w["d_out"]
    shape = {"cat": f"{w['batch']}, {2 * d}", "stack": f"2, {w['batch']}, {d}", "add": f"{w['batch']}, {d}",
             "mul": f"{w['batch']}, {d}"}[op]
    call = {"cat": "torch.cat([{a}, {b}], dim=1{o})", "stack": "torch.stack([{a}, {b}]{o})",
            "add": "torch.add({a}, {b}{o})", "mul": "torch.mul({a}, {b}{o})"}[op]
    src = Src(rng=rng)
    _header(src)
    if in_module:
        def forward(s):
            s.add(f"{a} = self.{w['l2']}({w['act']}(self.{w['l1']}(x)))", 2)
            s.add(f"{b} = self.{w['l2']}(self.{w['l1']}(x).relu())", 2)
            if faulty:
                s.add(call.format(a=a, b=b, o=f", out=self.{buf}"), 2, mark="changed")
                s.add(f"return self.{buf}", 2)
            else:
                s.add(f"return {call.format(a=a, b=b, o='')}", 2)
        _module(src, w, extra_init=f"self.register_buffer('{buf}', torch.empty({shape}))", forward=forward)
        _model_and_opt(src, w)

        def body(s, k):
            s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
            s.add(f"loss = {w['model']}(x).pow(2).mean()", k)
            s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    else:
        _module(src, w)
        _model_and_opt(src, w)
        src.add(f"{buf} = torch.empty({shape})")

        def body(s, k):
            s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
            s.add(f"{a} = {w['model']}(x)\n{b} = {w['model']}(x.flip(0))", k)
            if faulty:
                s.add(call.format(a=a, b=b, o=f", out={buf}"), k, mark="changed")
            else:
                s.add(f"{buf} = {call.format(a=a, b=b, o='')}", k)
            s.add(f"loss = {buf}.pow(2).mean()", k)
            s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
    _loop(src, rng, w, body, w["context"])
    lines = {"changed": ("main", src.marks["changed"])} if faulty else {}
    return src.text(), None, {"tensor": [f"`{a}`", f"`{b}`"], "lines": lines}


# --- numpy_grad: a metric helper, two calls deep in the second file, calls numpy on a tensor that requires grad ---

def _numpy_metric(rng, w, faulty):
    outer = rng.choice(["log_metrics", "report", "evaluate_batch", "track"])
    inner = rng.choice(["_mae", "_to_array", "_summary", "_np_stats"])
    param = rng.choice(["pred", "preds", "output", "p"])
    conv = rng.choice([f"np.asarray({param})", f"{param}.numpy()", f"np.array({param})", f"{param}.cpu().numpy()"])
    lib = Src(rng=rng)
    lib.add("import numpy as np\nimport torch\n")
    lib.add(f"def {outer}({param}, target):")
    lib.add(f"return {{'mae': {inner}({param}, target)}}", 1)
    lib.add("")
    lib.add(f"def {inner}({param}, target):")
    lib.add(f"arr = {conv}", 1, mark="changed")
    lib.add("return float(np.abs(arr - target.numpy()).mean())", 1)
    src = Src(rng=rng)
    _header(src, w["lib"])
    _module(src, w)
    _model_and_opt(src, w)
    v = w["var"]
    where = rng.choice(["before", "after"])

    def body(s, k):
        s.add(f"x = torch.randn({w['batch']}, {w['d_in']})", k)
        s.add(f"y_true = torch.randn({w['batch']}, {w['d_out']})", k)
        s.add(f"{v} = {w['model']}(x)", k)
        s.add(f"loss = ({v} - y_true).pow(2).mean()", k)
        metric = f"metrics = lib.{outer}({v}{'' if faulty else '.detach()'}, y_true)"
        if where == "before":
            s.add(metric, k, mark="call")
        s.add(f"{w['opt']}.zero_grad()\nloss.backward()\n{w['opt']}.step()", k)
        if where == "after":
            s.add(metric, k, mark="call")
    _loop(src, rng, w, body, w["context"])
    lines = {"changed": ("helper", lib.marks["changed"])} if faulty else {}
    return src.text(), lib.text(), {"tensor": [f"`{v}`", f"`{param}`"], "lines": lines}


BUILDERS = {"gan_wrong_order": (_gan_wrong_order, "version"),
            "method_buffer_write": (_method_buffer_write, "version"),
            "nested_helper_write": (_nested_helper_write, "version"),
            "inplace_act_sequential": (_inplace_act_sequential, "version"),
            "shared_encoder_step": (_shared_encoder_step, "version"),
            "split_view_inplace": (_split_view_inplace, "view_inplace"),
            "memory_cache": (_memory_cache, "freed"),
            "grad_twice": (_grad_twice, "freed"),
            "gp_input_no_grad": (_gp_input_no_grad, "grad_input"),
            "gp_nonscalar": (_gp_nonscalar, "nonscalar"),
            "unreduced_loss": (_unreduced_loss, "nonscalar"),
            "item_rebuilt": (_item_rebuilt, "no_graph"),
            "inference_target_inplace": (_inference_target_inplace, "inference_inplace"),
            "saliency_hook": (_saliency_hook, "hook_no_grad"),
            "preallocated_out": (_preallocated_out, "out_grad"),
            "numpy_metric": (_numpy_metric, "numpy_grad")}
KINDS = tuple(BUILDERS)


def register():
    """Add these builders to corpus's (once)."""
    for kind, (builder, raises) in BUILDERS.items():
        corpus._BUILDERS[kind] = builder
        corpus.RAISES[kind] = raises
    corpus.KINDS = corpus.KINDS + tuple(k for k in BUILDERS if k not in corpus.KINDS)

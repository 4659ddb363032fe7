"""What the doctor reports: a Diagnosis (kind, summary, facts, fixes with the lesson that teaches each, and the
tempting wrong fixes with why each fails), the line of the student's code it points at, the DoctorWarning for
silent bugs, and the fixes themselves, right and wrong. Each wrong fix is one a public thread on the error
reached for; tests/doctor/test_doctor_wrong_fixes.py runs each one and shows it fail as its line says."""
from dataclasses import dataclass, field

from gan_lessons.i18n import N_, _, tidy

LESSONS = {"01": "01_leaf_tensors.ipynb", "02": "02_graph_freeing_and_retain_graph.ipynb",
           "03": "03_inplace_and_versions.ipynb", "04": "04_detach_and_no_grad.ipynb",
           "05": "05_gan_update_strategies.ipynb", "08": "08_gradient_penalties.ipynb",
           "09": "09_freezing_and_batchnorm.ipynb", "10": "10_amp_hooks_and_compile.ipynb", "14": "14_several_gpus.ipynb"}


class DoctorWarning(UserWarning):
    """A pattern that raises nothing but trains the wrong thing."""


@dataclass
class Where:
    """A line of the student's code."""
    file: str
    line: int
    code: str
    call: int = field(default=-1, compare=False)     # the frame's bytecode offset (two calls on one line differ)

    def __str__(self):
        return _("line {line} (`{code}`)").format(line=self.line, code=self.code)


@dataclass
class Diagnosis:
    kind: str                      # "version", "freed", "leaf_inplace", "view_inplace", "no_graph", "nonleaf_grad",
                                   # "suspicious", "information" (wasted work, not a warning); a gradient
                                   # penalty's: "grad_input", "nonscalar", "constant"
    summary: str
    facts: dict = field(default_factory=dict)
    fixes: list = field(default_factory=list)   # (fix, lesson number or None: no lesson teaches it yet)
    wrong: list = field(default_factory=list)   # (a tempting wrong fix and why it fails, lesson number or None)

    def __post_init__(self):      # a lesson may print the summary or a fact alone: typeset as text() is
        self.summary = tidy(self.summary)
        self.facts = {k: tidy(v) if isinstance(v, str) else v for k, v in self.facts.items()}

    def text(self) -> str:
        """What the student reads, in the language in use: the facts' keys and the fixes of the tables below are
        kept in English (code and tests read them) and translated here."""
        lines = [_("autograd doctor: {summary}").format(summary=self.summary)]
        lines += [_(_FACT_LINES[k]).format(value=v) if k in _FACT_LINES else f"  - {k}: {v}"
                  for k, v in self.facts.items()]
        lines += [_(_FIX_LINES[word, bool(n)]).format(fix=_(fix), number=n, notebook=LESSONS.get(n))
                  for word, told in (("fix", self.fixes), ("not", self.wrong)) for fix, n in told]
        return tidy("\n".join(lines))


# One line of a diagnosis per fact, by the fact's key (the key stays English in `facts`).
_FACT_LINES = {"tensor": N_("  - tensor: {value}"), "saved by": N_("  - saved by: {value}"),
               "modified by": N_("  - modified by: {value}"), "versions": N_("  - versions: {value}"),
               "also stale": N_("  - also stale: {value}"), "carried": N_("  - carried: {value}"),
               "carried by": N_("  - carried by: {value}"), "kept by": N_("  - kept by: {value}"),
               "freed by": N_("  - freed by: {value}"),
               "shared part": N_("  - shared part: {value}"), "failing backward": N_("  - failing backward: {value}"),
               "first loss reads it at": N_("  - first loss reads it at: {value}"),
               "second loss reads it at": N_("  - second loss reads it at: {value}"),
               "reset in place at": N_("  - reset in place at: {value}"),
               "first backward": N_("  - first backward: {value}"),
               "second backward": N_("  - second backward: {value}"), "backward": N_("  - backward: {value}"),
               "backward of": N_("  - backward of: {value}"), "module": N_("  - module: {value}"),
               "stepped between": N_("  - stepped between: {value}"),
               "stepped after": N_("  - stepped after: {value}"),
               "made from": N_("  - made from: {value}"), "went on into": N_("  - went on into: {value}"),
               "where": N_("  - where: {value}"), "input": N_("  - input: {value}"), "call": N_("  - call: {value}"),
               "output": N_("  - output: {value}"), "effect": N_("  - effect: {value}"),
               "parameters": N_("  - parameters: {value}"), "frozen at": N_("  - frozen at: {value}"),
               "passes in .grad": N_("  - passes in .grad: {value}"),
               "also stepped at": N_("  - also stepped at: {value}"), "hook": N_("  - hook: {value}"),
               "reached instead": N_("  - reached instead: {value}"),
               "made by": N_("  - made by: {value}"), "made": N_("  - made: {value}"),
               "made at": N_("  - made at: {value}"), "in both losses": N_("  - in both losses: {value}"),
               "used": N_("  - used: {value}"), "changed": N_("  - changed: {value}"),
               "graph": N_("  - graph: {value}"),
               "requires grad": N_("  - requires grad: {value}"), "function": N_("  - function: {value}"),
               "compiled call": N_("  - compiled call: {value}"),
               "a leaf because": N_("  - a leaf because: {value}"),
               "made from values at": N_("  - made from values at: {value}"), "forward": N_("  - forward: {value}")}
# A fix line and a wrong-fix line, with the lesson that teaches it or without.
_FIX_LINES = {("fix", True): N_("  fix: {fix}  (lesson {number}, notebooks/{notebook})"),
              ("fix", False): N_("  fix: {fix}"),
              ("not", True): N_("  not: {fix}  (lesson {number}, notebooks/{notebook})"),
              ("not", False): N_("  not: {fix}")}


STEP_FIXES = [(N_("reorder: run every backward that needs this forward before the optimizer step that changes its "
                   "weights (that step then takes the later loss's gradient too), or run a fresh forward after the "
                   "step"), "05"),
               (N_("if the later loss must not train through this net, cut it off: detach its input (or "
                   "backward(inputs=...) for the parameters it should train, where the backward to them does not "
                   "pass through this net)"), "04")]
# The saved weight is in the graph of a gradient taken with create_graph=True (a meta-gradient through an update):
# where that gradient must stay the one at the weights before the step, the graph is built on copies of them.
THROUGH_COPIES_FIXES = [(N_("if the gradient taken with create_graph=True must stay the one at the weights before the "
                             "step (a meta-gradient through the update), take it through copies of the weights "
                             "(torch.func.functional_call(net, {name: p.clone() for name, p in "
                             "net.named_parameters()}, x)): the step then changes the weights, not what that graph "
                             "saved"), "08")]
# A term both losses are made of (an entropy bonus added to each), reaching the stepped weights: reordered, the step
# would count it twice.
SHARED_TERM_FIXES = [(N_("leave the shared term out of the later loss (or detach it there): it already trained the "
                          "weights through the first loss, and the later loss then has no path into the stepped "
                          "weights"), "04")]
GAN_FIXES = [(N_("in a GAN: detach the fake batch in D's loss, and take G's gradient through D before opt_D.step() "
                  "or from a fresh D forward after it"), "05")]
INPLACE_FIXES = [(N_("clone() the tensor before changing it in place, or make the op out of place (x = x + 1; "
                      "inplace=False)"), "03")]
PARAM_WRITE_FIXES = [(N_("move the write after the backward that needs the weights as they were (an EMA or a copy "
                          "between models belongs after the optimizer's step)"), "05"),
                      (N_("if no loss should train through this model (a teacher, an EMA or target network), run its "
                          "forward under torch.no_grad() or freeze it (requires_grad_(False)): no graph then saves its "
                          "weights"), "04"),
                      (N_("if the write is meant to come before this loss (SAM's step to the perturbed weights, a "
                          "weight-noise step): run a fresh forward after it, so that this loss is computed at the "
                          "weights as they now are, and keep no graph from before it"), "05")]
# A buffer your own code wrote (a hand-made sync of statistics): only moving the write helps; DDP's flags and one
# forward per backward leave your write where it was.
BUFFER_FIXES = [(N_("write the buffer after the backward, not between the forwards and it (a hand-made sync of "
                      "statistics belongs after the step)"), "14")]
# A buffer DDP's own copy wrote (on a torch that counts that copy as a write).
DDP_COPY_FIXES = [(N_("one forward of the wrapped module per backward: D(torch.cat([x_real, x_fake])), split after"),
                    "14"),
                   (N_("DDP(..., forward_sync_buffers=False) (broadcast_buffers=False before torch 2.13), each process "
                       "then keeping statistics of its own; or SyncBatchNorm, on GPUs"), "14")]
STATE_FIXES = [(N_("read a copy of the optimizer's state for the loss (opt.state[p][key].clone()): its step updates "
                     "the state in place, by design"), "03")]
CARRIED_FIXES = [(N_("detach the carried tensor at the start of each pass (h = h.detach()): each backward then "
                      "stops at this pass, and the state's values carry on, as truncated backpropagation through "
                      "time wants where each batch continues the last one"), "02"),
                 (N_("or, where each batch is a new sequence, reset the state at its start (h = None, zeros, or "
                     "the model's own reset): a detached state would start each batch from the last one's "
                     "values"), "02")]
# The carried tensor reset in place (state.zero_()): the write is recorded on top of its history, which stays.
RESET_IN_PLACE_FIXES = [(N_("reset it with a new tensor (state = torch.zeros_like(state)), or detach_() it before the "
                             "in-place reset: zero_() and fill_() change its values but keep its history, and the "
                             "previous pass's graph with it"), "02")]
# A tensor made once, before a loop, whose graph every pass's backward goes through: the first pass freed it.
REUSED_FIXES = [(N_("make it again in each pass: run the forward that makes it inside the loop, so that each backward "
                     "has a graph of its own, through the weights as they are now"), "05")]
LOSS_ONCE_FIXES = [(N_("compute the loss inside the loop, from a fresh forward: each pass's backward then has a graph "
                        "of its own, through the weights as they are after the last update"), "05")]
# The forward that makes a tensor ran in an earlier pass but not in this one (a forward that returns early on a short
# batch): this pass's loss used the tensors the earlier pass left behind.
SKIPPED_FIXES = [(N_("run that forward in every pass before a loss uses what it makes: where it returns early (a short "
                      "last batch, a condition), skip the whole step for that batch, or drop short batches "
                      "(DataLoader(..., drop_last=True))"), "05")]
# A module that keeps a tensor one call made (a cache) and serves it to later calls: its graph was freed.
CACHED_FIXES = [(N_("make it anew in every call while training (keep a cache for evaluation only, made under "
                     "torch.no_grad()): each backward then has a graph of its own, through the weights as they are "
                     "now"), "05")]
# A sum kept from one pass into the next (loss += term, never reset): it still holds the first pass's loss.
ACCUMULATED_FIXES = [(N_("start a new sum before each pass's terms (loss = 0, or the first term alone): the earlier "
                          "pass's gradient is in .grad already"), "02")]
UNTRAINED_FIXES = [(N_("make it without a graph, once: under torch.no_grad(), or .detach() it (or make what it is "
                        "made from without requires_grad): no optimizer trains that, so no pass needs its "
                        "gradient"), "04")]
# Made once from an nn.Parameter no optimizer holds (made in __init__ and not kept as a module's attribute, or left
# out of the optimizer's list): made to be trained, so cutting its graph would freeze it for good.
UNREGISTERED_FIXES = [(N_("if that parameter is to be trained: keep it as the module's attribute (self.p = "
                           "nn.Parameter(...)), so that module.parameters() and the optimizer hold it, and make the "
                           "tensor from it inside forward(), once per pass"), "05"),
                      (N_("if it is to stay fixed: make the tensor under torch.no_grad(), or from a plain tensor (no "
                          "nn.Parameter)"), "04")]
TARGET_FIXES = [(N_("detach it where it serves as a target (the other net's output in this net's loss): the loss "
                     "then trains this net alone, and the other net's graph is left for its own loss"), "04")]
FREED_FIXES = [(N_("detach the shared tensor in the loss that must not reach it"), "04"),
                (N_("recompute: run a fresh forward for the second loss"), "05"),
                (N_("retain_graph=True on the first backward; it keeps every saved tensor alive until the next "
                    "backward (about the size of the parameters for seed 000's GAN at batch 64)"), "02")]
# Two losses of one forward, no step between them: both may be meant to train the shared part (a loss in terms).
SUM_ONCE_FIXES = [(N_("if both losses are meant to train the shared part (two terms of one objective): add them and "
                       "call backward() once on the sum, whose gradient is the sum of theirs"), "02")]
TWICE_FIXES = [(N_("call backward() once per loss: the first call already filled every .grad; a second one would "
                    "add the same gradient again"), "01"),
                (N_("if a second pass over the same graph is really meant (a gradient taken twice), pass "
                    "retain_graph=True to every backward but the last"), "02")]
LEAF_FIXES = [(N_("wrap the update in `with torch.no_grad():`, as optimizers do"), "01"),
               (N_("or let an optimizer make the update (opt.step() writes under no_grad): x = x + 1 would bind "
                   "the name to a new tensor and leave the weight as it was"), "01")]
INPUT_LEAF_FIXES = [(N_("make the op out of place (F.relu(x), nn.ReLU() without inplace=True, y = x + 1): this leaf "
                         "is an input that requires grad, not a weight to update, and its gradient must pass through "
                         "the op"), "03")]
FLAGGED_LEAF_FIXES = [(N_("write out of place (h = h + 1): a new tensor, and the gradient still reaches the leaf "
                          "through it"), "01"),
                       (N_("or wrap the write in `with torch.no_grad():`, where the values written need no gradient"),
                        "01")]
# A weight written in place with values computed from itself (p.mul_(max_norm / p.norm())): a constraint on the
# weight, made under no_grad as an optimizer's update is; or a clip of the gradient written into the weight.
SELF_WRITE_FIXES = [(N_("if the gradient was meant (a clip before the step), scale p.grad, not p: "
                         "torch.nn.utils.clip_grad_norm_(params, max_norm) does it for every parameter"), "01"),
                    (N_("if the weight itself is to be constrained (a max-norm, WGAN's clipping), do it under "
                        "torch.no_grad(), as an optimizer's update is: it needs no gradient"), "01")]
RECOMPUTED_FIXES = [(N_("make that op out of place (nn.ReLU() instead of nn.ReLU(inplace=True), x = x + y instead of "
                         "x += y): a block run twice must not write into its own input"), "03")]
GRAD_WRITE_FIXES = [(N_("write out of place (x = x.index_copy(...), x = x + y), or clone() the leaf and write into "
                          "the clone: the values written require grad, and their gradient must pass through the "
                          "write"), "03")]

# The tempting wrong fixes, chosen by cause as the fixes above are.
STEP_WRONG = [(N_("retain_graph=True: it keeps the graph, but the step changed the weights the graph saved anyway, so "
                   "the same error comes back"), "02"),
               (N_("an older torch (before 1.5): its optimizers updated p.data, which moves no version counter, so it "
                   "raised nothing and computed this gradient from the changed weights: silently wrong"), "05")]
SHARED_TERM_WRONG = [(N_("reordering the backwards before the step with the term in both losses: the step then "
                          "adds that term's gradient twice"), "05")]
GAN_WRONG = [(N_("fake.detach() in G's loss (D(fake.detach())): the adversarial term then no longer reaches G, so it "
                  "gives G no gradient (G's .grad stays None where no other term of its loss reaches it), and G stops "
                  "learning from D"), "04")]
DETACH_WRONG = [(N_("detach() on the input of the later loss, if that loss must train the net before it: that net's "
                     "gradients then stay None and it stops learning"), "04")]
INPLACE_WRONG = [(N_(".data for the in-place op (x.data.add_(...)): the error goes because autograd no longer sees "
                      "the change, and the backward uses the changed values: a wrong gradient, silently"), "03")]
LEAF_WRONG = [(N_(".data (w.data.add_(...)): the error goes because autograd no longer sees the change; a graph that "
                   "saved w before it then gives a wrong gradient, silently, where torch.no_grad() would raise"), "01")]
FREED_WRONG = [(N_("retain_graph=True when an optimizer step between the two backwards changes a weight this graph "
                    "saved: that trades this error for the in-place one; it is right only when both backwards need "
                    "the graph as it was, and it keeps every saved tensor of the graph alive until the last backward"),
                 "02")]
CARRIED_WRONG = [(N_("retain_graph=True on the backward: each backward then runs back through every earlier pass, a "
                      "longer graph each time, and the first optimizer step turns this into the in-place error"), "02")]
REUSED_WRONG = [(N_("detach() on the reused tensor: the error goes, but the losses then give no gradient to the "
                     "weights of the forward that made it, which stop learning"), "04"),
                (N_("retain_graph=True on the backward: every pass then goes back through the one old forward, and "
                    "once an optimizer steps the weights it saved, the in-place error comes instead"), "02")]
RECOMPUTED_WRONG = [(N_("torch.no_grad() around the op: the backward then runs through the recomputed block as if the "
                         "op were not there, and the gradients before it are wrong, silently"), "04"),
                    (N_("use_reentrant=False with the op still in place: the block then writes into the input it "
                        "saved, and the version error comes instead"), "03")]
LOSS_ONCE_WRONG = [(N_("retain_graph=True on the backward: every pass then gets the gradient at the weights the "
                        "loss was made with; an update through .data goes unseen, and an optimizer's step of a weight "
                        "the graph saved gives the in-place error"), "02")]
SKIPPED_WRONG = [(N_("retain_graph=True on the backward: this pass would then train on the last batch's outputs "
                      "again, and once an optimizer steps the weights that graph saved, the in-place error comes "
                      "instead"), "02"),
                 (N_("detach() on the stale tensor: the loss still comes from the last batch's outputs, and no "
                     "gradient from it reaches the net that made them"), "04")]
CACHED_WRONG = [(N_("detach() on the kept tensor: the error goes, but from the second pass on no gradient reaches "
                     "what it was made from, and those weights stop learning"), "04"),
                (N_("retain_graph=True on the backward: every pass then goes back through the first pass's graph, "
                    "at the weights as they were then, and once they are stepped the in-place error comes "
                    "instead"), "02")]
ACCUMULATED_WRONG = [(N_("retain_graph=True on the first backward: the second then adds the earlier pass's gradient "
                          "again, and where a step changed the weights between, the in-place error comes instead"),
                      "02"),
                     (N_("backward() once, the second dropped: this pass's terms then train nothing"), "01")]
UNTRAINED_WRONG = [(N_("retain_graph=True on the backward: every pass then goes back through the one old graph, for "
                        "gradients nothing uses"), "02")]
UNREGISTERED_WRONG = [(N_("detach() or torch.no_grad() alone where the parameter is meant to train: the error "
                           "goes, and the parameter never changes, silently"), "04"),
                      (N_("retain_graph=True on the backward: every pass then goes back through the one old graph, "
                          "and its gradient reaches no optimizer"), "02")]
TARGET_WRONG = [(N_("detached copies where the outputs are kept: then no loss has a graph back to its own net, and "
                     "its backward raises that the loss does not require grad"), "04"),
                (N_("retain_graph=True on the backward: each pass's backward then runs on into the other net too, "
                    "through its output used as a target, and where that net's step changed a weight the old graph "
                    "saved, the in-place error comes instead"), "02")]
INPUT_LEAF_WRONG = [(N_("torch.no_grad() around the op: the op then drops out of the graph, and the gradient that "
                         "reaches the input is the one it would get if the op were not there, silently"), "04")]
SELF_WRITE_WRONG = [(N_("writing out of place (p = p * c) or into a clone: that makes a new tensor and leaves the "
                         "weight, and its .grad, as they were"), "01")]
GRAD_WRITE_WRONG = [(N_("torch.no_grad() around the write: the values written require grad, and under no_grad their "
                           "gradient is lost, silently"), "04")]
TWICE_WRONG = [(N_("retain_graph=True only to let the second call run: it adds the same gradient again, and .grad "
                    "doubles"), "01")]

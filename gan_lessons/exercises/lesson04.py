"""Lesson 04's exercises: a D step that keeps its hands off G (check_d_step), and sampling for a figure with
nothing left behind (check_sample)."""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn, optim

from gan_lessons.exercises.exercise import Exercise, Found, Raised
from gan_lessons.exercises.feedback import AUTOGRAD_HINTS, returned
from gan_lessons.exercises.steps import (
    compare_steps,
    known_mistake,
    left_as_given,
    parameter_names,
    recorded_steps,
    right_answer,
)
from gan_lessons.exercises.variants import variant
from gan_lessons.i18n import N_, _


# --- lesson 04: a D step that keeps its hands off G ----------------------------------------------------------
def _gan(batch=8):
    """Seed 000's models, a batch, and D's .grad holding an earlier gradient (as it does mid-training). D's last
    layer is scaled up so that its scores spread past the hinge's margins, as a trained D's do (at initialisation
    every score is near 0, where the hinge loss and a plain Wasserstein loss give the same gradient)."""
    from gan_lessons.models import Discriminator, Generator
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    with torch.no_grad():
        D.net[-2].weight.mul_(80)
    opt_D = optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    z, x_real = torch.randn(batch, G.z_dim), torch.rand(batch, 1, 28, 28) * 2 - 1
    F.binary_cross_entropy_with_logits(D(torch.rand(batch, 1, 28, 28)), torch.ones(batch)).backward()
    return G, D, opt_D, z, x_real


def reference_d_step(G, D, opt_D, z, x_real):
    """D's step of lesson 04's build, on the hinge loss (SAGAN's, BigGAN's): the fake batch detached, so loss_D
    trains D only."""
    x_fake = G(z).detach()                    # cut from G: D's backward stops here
    loss_D = F.relu(1 - D(x_real)).mean() + F.relu(1 + D(x_fake)).mean()
    opt_D.zero_grad()
    loss_D.backward()
    opt_D.step()
    return loss_D


LOSS_D = "F.relu(1 - D(x_real)).mean() + F.relu(1 + D(x_fake)).mean()"      # reference_d_step's loss, as written


def _d_step_written(loss=LOSS_D, scale=1.0, replace=None, **edits):
    """reference_d_step written another way (variants.variant): its loss written as `loss` and scaled by `scale`
    (right: the mean of the two terms), with other edits; the wrong ones below each have a hint."""
    written = loss if scale == 1.0 else f"{scale} * ({loss})"
    return variant(reference_d_step, replace={**(replace or {}), **({LOSS_D: written} if written != LOSS_D else {})},
                   **edits)


CLEARED_AFTER = N_("D's gradients were cleared after loss_D.backward(), which throws the new gradient away before "
                   "the step")
STEPPED_FIRST = N_("opt_D.step() ran before loss_D.backward(): D stepped on an empty .grad, and the new gradient came "
                   "after the step")     # the same steps as CLEARED_AFTER; told apart by D's .grad when the call ends
D_STEP_MISTAKE_HINTS: list[tuple[dict, str]] = [
    ({"loss": "F.relu(1 - D(x_real)).mean() + F.relu(1 + D(x_fake).detach()).mean()",
      "replace": {"G(z).detach()": "G(z)"}},
     N_("the fake term gives D no gradient: D's gradient at opt_D.step() is the real images' term alone")),
    ({"loss": "F.relu(1 + D(x_real)).mean() + F.relu(1 - D(x_fake)).mean()"},
     N_("the signs are swapped: this loss pushes D's scores on x_real down and on the fakes up")),
    ({"loss": "(1 - D(x_real)).mean() + (1 + D(x_fake)).mean()"},
     N_("every score kept pulling on D however far past its margin it was, where the hinge loss stops pulling at 1 "
        "for each real image and at -1 for each fake, score by score")),
    ({"loss": "F.relu(1 - D(x_real)).sum() + F.relu(1 + D(x_fake)).sum()"},
     N_("each term is summed over the batch, where the hinge loss averages it: D's gradient is the batch size "
        "times the right one")),
    ({"drop": "opt_D.zero_grad()"},
     N_("D's .grad still held an earlier gradient, and backward adds to it: nothing cleared it before "
        "loss_D.backward()")),
    ({"move": ("opt_D.zero_grad()", "opt_D.step()")}, CLEARED_AFTER),
]
# each known mistake, in a loss summed over its two terms and in one averaged (both right otherwise)
D_STEP_MISTAKES = [(_d_step_written(scale=scale, **how), hint) for how, hint in D_STEP_MISTAKE_HINTS
                   for scale in (1.0, 0.5)]
D_STEP_HINTS = AUTOGRAD_HINTS + [
    ("does not require grad and does not have a grad_fn",
     N_("loss_D has no graph: D's forward ran where no graph was recorded")),
]


@dataclass
class _DStepRun:
    """What one call of a d_step did on _gan(): D's gradients at each opt_D.step(), G, whether backward computed any
    G gradient (hooks on G's parameters count them, even if they are cleared before the step), G's mode at each
    forward and whether it ran on the z passed in, whether D's .grad holds a gradient when the call ends, and what
    the call changed in the objects it was given (left_as_given's lines)."""
    records: dict
    G: nn.Module
    through_G: bool
    modes: list
    on_z: list
    grad_left: bool
    side_effects: list


def _run_d_step(step) -> _DStepRun:
    G, D, opt_D, z, x_real = _gan()
    names = parameter_names(D=D)
    through_G, modes, on_z = [], [], []

    def before_G(module, args):
        modes.append(module.training)
        on_z.append(args[0].shape == z.shape and torch.equal(args[0].detach(), z))
    handles = [p.register_hook(lambda grad: through_G.append(1)) for p in G.parameters()]
    handles.append(G.register_forward_pre_hook(before_G))
    try:
        with left_as_given("d_step", {"D": D}, {"z": z, "x_real": x_real}) as side_effects, \
                left_as_given("d_step", {"G": G}, modes=False) as on_G:
            with recorded_steps({"opt_D": opt_D}, names) as records:
                step(G, D, opt_D, z, x_real)
    finally:
        for h in handles:
            h.remove()
    return _DStepRun(records, G, bool(through_G), modes, on_z,
                     any(p.grad is not None and p.grad.any() for p in D.parameters()), side_effects + on_G)


def _same_buffers(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.buffers(), b.buffers()))


def d_step_checks(d_step) -> Found:
    """Lesson 04. d_step(G, D, opt_D, z, x_real): one D step on the hinge loss, on seed 000's models, with D's .grad
    holding an earlier gradient. Every D parameter must get the right gradient at opt_D.step(), and loss_D's
    backward must not go into G."""
    try:
        run = _run_d_step(d_step)
    except Exception as error:
        raise Raised("d_step", error) from error
    if run.side_effects:              # told alone: a changed z or batch changes every gradient after it
        return run.side_effects
    mine, G, modes = run.records, run.G, run.modes
    problems = []
    reached = [n for n, p in G.named_parameters() if p.grad is not None]
    if reached:
        problems.append(_("loss_D reached G: {count} of G's 14 parameters have a .grad (G.{first}, ...): the fake "
                          "batch D sees is still joined to G's graph").format(count=len(reached), first=reached[0]))
    elif run.through_G:
        problems.append(_("loss_D's backward still ran through G (its gradients were computed, then cleared): the "
                          "fake batch D sees is still joined to G's graph, so that backward does not stop at it"))
    if not all(p.requires_grad for p in G.parameters()):
        problems.append(_("G's parameters no longer require grad after your step: G was left frozen"))
    if not all(m.training for m in G.modules()):
        problems.append(_("G is left in eval mode after your step: G's next training step would normalise with "
                          "its BatchNorm's running statistics"))
    elif modes.count(True) > 1 and not _same_buffers(G, _run_d_step(reference_d_step).G):
        problems.append(_("G ran {count} forwards in training mode in one D step, and each moved its BatchNorm's "
                          "running statistics: they end elsewhere than after the one forward that makes the "
                          "fakes").format(count=modes.count(True)))
    mistake = None if reached else known_mistake(mine, D_STEP_MISTAKES, lambda s: _run_d_step(s).records)
    if mistake == CLEARED_AFTER and run.grad_left:
        mistake = STEPPED_FIRST
    reference = right_answer(mine, [reference_d_step, _d_step_written(scale=0.5)], lambda s: _run_d_step(s).records)
    hint = (_("G's forward ran in eval mode, where the step is given G in training mode, so its BatchNorm used "
              "the running statistics and the fakes differ") if False in modes else
            _("G's forward ran on another z than the one passed in, so the fakes D sees differ")
            if False in run.on_z else
            _("check your loss against the exercise's hinge loss, term by term, and where D's .grad is cleared"))
    problems += [_(mistake)] if mistake else compare_steps(mine, reference, hint)
    if not problems:
        forms = [reference_d_step, _d_step_written(scale=0.5)]
        problems = returned("d_step", d_step(*_gan()), [form(*_gan()) for form in forms], "loss_D")
    return problems


# --- lesson 04: sampling for a figure, with nothing left behind ---------------------------------------------
def _sampling_problem():
    from gan_lessons.models import Generator
    torch.manual_seed(4)
    G = Generator(tanh=True)
    opt = optim.SGD(G.parameters(), lr=0.1)
    for _step in range(2):                        # a few training steps, so the running statistics mean something
        opt.zero_grad()
        G(torch.randn(16, G.z_dim)).mean().backward()
        opt.step()
    with torch.no_grad():                         # a last layer whose images span (-1, 1), as a trained G's do, so
        last = G.net[12]                          # that an answer that rescales or clips them changes them
        last.weight.copy_(torch.randn(last.weight.shape))
        last.bias.zero_()
    return G, torch.randn(8, G.z_dim)


def sample_checks(sample) -> Found:
    """Lesson 04. sample(G, z) returns G's images for a figure mid-training: computed in evaluation mode (BatchNorm
    uses its running statistics), with no graph built, G's running statistics and parameters untouched, and G left
    in the mode it was in."""
    G, z = _sampling_problem()
    G.eval()
    with torch.no_grad():
        expected = G(z)
    G.train()
    state = {k: v.clone() for k, v in G.state_dict().items()}
    saved: list[int] = []

    def pack(t):                     # the size of each tensor the forward saves
        saved.append(t.numel())
        return t
    try:
        with left_as_given("sample", {"G": G}, {"z": z}, modes=False) as side_effects, \
                torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            images = sample(G, z)
    except Exception as error:
        raise Raised("sample", error) from error
    problems = list(side_effects)
    if not isinstance(images, torch.Tensor):
        return [_("sample returned {kind}, not the tensor of images: return it").format(kind=type(images).__name__)]
    moved = [k for k, v in G.state_dict().items() if not torch.equal(v, state[k])]
    if any("running" in k or "num_batches" in k for k in moved):
        problems.append(_("G's BatchNorm running statistics changed ({first}, ...): a training-mode forward updates "
                          "them, graph or no graph").format(first=moved[0]))
    elif moved:
        problems.append(_("G's parameters changed ({first}, ...): sampling must not step or modify G").format(
            first=moved[0]))
    if saved and not images.requires_grad:
        problems.append(_("G's forward saved {count} tensors for a backward that never runs (the images were "
                          "detached afterwards, which does not unsave them)").format(count=len(saved)))
    elif saved:
        problems.append(_("G's forward saved {count} tensors for a backward that never runs").format(count=len(saved)))
    if images.requires_grad:
        problems.append(_("the images still require grad and carry a graph back into G"))
    frozen = [n for n, p in G.named_parameters() if not p.requires_grad]
    if frozen:
        problems.append(_("G's parameters no longer require grad after sample (G.{first}, ...): the next training "
                          "step's backward would give them no gradient").format(first=frozen[0]))
    left = [n or "G" for n, m in G.named_modules() if not m.training]
    if not G.training:
        problems.append(_("G is left in eval mode, and the next training step would use the running statistics"))
    elif left:
        problems.append(_("G.training is True after sample, but G still has {count} submodule(s) in eval mode "
                          "(G.{first}, ...): the next training step would use their running statistics").format(
            count=len(left), first=left[0]))
    problems += _image_problems(images, expected, z)
    if not problems:
        G.eval()                                 # called on a G already in eval mode, it must stay there
        sample(G, z)
        if any(m.training for m in G.modules()):
            problems.append(_("G was in eval mode before sample and is in training mode after"))
    if not problems:                             # another z: the images follow the z passed in
        problems = _another_z(sample, G, z)
    return problems


def _another_z(sample, G, z):
    """sample on a G in eval mode with another z than the first call's: G's images for that z, or a line."""
    z_other = torch.randn(z.shape, generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        want = G(z_other)
    G.train()
    again = sample(G, z_other)
    if isinstance(again, torch.Tensor) and again.shape == want.shape and torch.allclose(again.detach(), want,
                                                                                         atol=1e-5):
        return []
    return [_("called again with another z, sample returned other images than G's for that z: its images do not "
              "follow the z passed in")]


def _image_problems(images, expected, z):
    """What differs between the images sample returned and G's evaluation-mode output: their shape, or that they are
    G's training-mode output (BatchNorm on the batch's statistics), or by how much."""
    if images.shape != expected.shape:
        return [_("the images have shape {shape}, where G's output has shape {expected}").format(
            shape=tuple(images.shape), expected=tuple(expected.shape))]
    if torch.allclose(images, expected, atol=1e-5):      # float32 sums in another order (one image at a time)
        return []
    G = _sampling_problem()[0]
    with torch.no_grad():
        trained = G(z)
    if torch.allclose(images, trained, atol=1e-5):
        return [_("the images are G's training-mode output: its BatchNorm normalised with this batch's statistics, "
                  "where evaluation mode uses the running ones")]
    return [_("the images differ from G's evaluation-mode output, by up to {difference:.3g}").format(
        difference=(images - expected).abs().max().item())]


def _d_step_calls():
    args = _gan()
    return [args, args], [args]


def reference_sample(G, z):
    """The lesson's answer: G's evaluation-mode images, no graph built, G left in the mode it was in."""
    was_training = G.training
    G.eval()                                  # BatchNorm normalises with its running statistics
    with torch.no_grad():                     # no graph: nothing saved for a backward
        images = G(z)
    G.train(was_training)
    return images


class _Mode:
    """A module's training flags (its own and its submodules') and its parameters' requires_grad, as an outcome
    reads them (through state_dict)."""

    def __init__(self, module):
        self.module = module

    def state_dict(self):
        return {"training": [m.training for m in self.module.modules()],
                "requires_grad": [p.requires_grad for p in self.module.parameters()]}


def _sample_calls():
    """A sample with G already in eval mode (it must stay there), then one mid-training; the images are compared with
    whether they carry a graph, and G's training flag after each call with its weights and statistics."""
    G, z = _sampling_problem()
    modes: list = []

    def in_eval_mode():
        G.eval()
        return G, z

    def in_training_mode():
        modes.append([m.training for m in G.modules()])      # as the first call left it
        G.train()
        return G, z
    return [in_eval_mode, in_training_mode], [G, modes, _Mode(G)]


def _images(images):
    return (images.detach(), images.requires_grad) if isinstance(images, torch.Tensor) else images


D_STEP = Exercise("04", "d_step", reference_d_step, d_step_checks, _d_step_calls, hints=D_STEP_HINTS,
                  flags=True, what=N_("your d_step"), success=N_(           # flags: G's .grad must stay None
                      "D's 8 parameters get the right gradient at opt_D.step(), and loss_D's backward never enters G"))
SAMPLE = Exercise("04", "sample", reference_sample, sample_checks, _sample_calls, result=_images,
                  what=N_("your sample"),
                  hints=AUTOGRAD_HINTS + [("expected to be boolean",
                                           N_("G.train(mode) takes True (training) or False (evaluation)"))],
                  forbids=("graph made, then detached",),      # a graph built for nothing is what sample avoids
                  success=N_("eval-mode images, no graph, G's statistics and parameters untouched, G left in the mode "
                             "it was in"))
check_d_step = D_STEP.check
check_sample = SAMPLE.check

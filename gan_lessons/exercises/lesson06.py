"""Lesson 06's exercise: a checkpoint a run resumes from exactly (check_resume)."""
import copy

import torch
from torch import nn, optim

from gan_lessons.exercises.feedback import ELLIPSIS_HINT, raised, unanswered, verdict
from gan_lessons.lesson import headline


def _resume_run(seed):
    torch.manual_seed(seed)
    G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))
    D = nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Flatten(0))
    opt_G = optim.Adam(G.parameters(), lr=1e-2, betas=(0.5, 0.999))
    opt_D = optim.Adam(D.parameters(), lr=1e-2, betas=(0.5, 0.999))
    return G, D, opt_G, opt_D


def _resume_steps(G, D, opt_G, opt_D, steps):
    from gan_lessons.strategies import d_first_fresh_fake
    x_real = torch.tensor([2.0, -1.0]) + 0.3 * torch.arange(16.0).reshape(8, 2).sin()
    for _ in range(steps):
        d_first_fresh_fake(G, D, opt_G, opt_D, x_real, lambda n: torch.randn(n, 4))


def _tensors(state):
    """Every tensor in a nested state dict, flattened to (path, tensor)."""
    if isinstance(state, torch.Tensor):
        return [("", state)]
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, (list, tuple)) else []
    return [(f"{k}.{p}".rstrip("."), t) for k, v in items for p, t in _tensors(v)]


def _same(a, b) -> bool:
    ta, tb = _tensors(a), _tensors(b)
    return len(ta) == len(tb) and all(pa == pb and torch.equal(x, y) for (pa, x), (pb, y) in zip(ta, tb))


def check_resume(save_state, load_state, steps=3) -> bool:
    """Lesson 06. save_state(G, D, opt_G, opt_D) returns what a checkpoint holds; load_state(state, G, D, opt_G,
    opt_D) puts it back into fresh objects. The state goes through torch.save and torch.load(weights_only=True),
    as the trainer's checkpoints do. A run of 2 * steps steps and a run stopped after `steps`, saved, loaded into
    differently initialised objects and continued must end with bit-identical weights."""
    import tempfile
    from pathlib import Path
    name = "checkpoint"
    for what, answer in (("your save_state", save_state), ("your load_state", load_state)):
        if unanswered(name, answer, what):
            return False
    G, D, opt_G, opt_D = _resume_run(0)
    _resume_steps(G, D, opt_G, opt_D, 2 * steps)
    straight = [p.detach().clone() for p in (*G.parameters(), *D.parameters())]

    G, D, opt_G, opt_D = _resume_run(0)
    _resume_steps(G, D, opt_G, opt_D, steps)
    truth = copy.deepcopy({"G": G.state_dict(), "D": D.state_dict(), "opt_G": opt_G.state_dict(),
                           "opt_D": opt_D.state_dict(), "rng": torch.get_rng_state()})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "last.pt"
        try:
            saved = save_state(G, D, opt_G, opt_D)
            if ... in (saved.values() if isinstance(saved, dict) else [saved]):
                return verdict(name, [ELLIPSIS_HINT + " (save_state returned a `...`)"], "")
            torch.save(saved, path)
        except Exception as error:
            return verdict(name, [raised("save_state", error, [])], "")
        if not torch.equal(torch.get_rng_state(), truth["rng"]):
            return verdict(name, ["save_state drew random numbers: saving must leave the run exactly as it was"], "")
        try:
            state = torch.load(path, weights_only=True)
        except Exception as error:
            return verdict(name, [f"torch.load(weights_only=True) refuses what save_state returned "
                                   f"({headline(str(error))}): keep to state_dict()s, tensors, numbers and "
                                   f"dicts of them, as the trainer does"], "")
    G, D, opt_G, opt_D = _resume_run(1)            # other initial weights, another random state
    try:
        load_state(state, G, D, opt_G, opt_D)
    except Exception as error:
        return verdict(name, [raised("load_state", error, [("Missing key", "load each state_dict into the "
                                                             "object it came from")])], "")
    problems = []
    if not (_same(G.state_dict(), truth["G"]) and _same(D.state_dict(), truth["D"])):
        problems.append("after load_state, G's or D's weights are not the saved ones: save and load both "
                        "models' state_dict()")
    for opt_name, opt in (("opt_G", opt_G), ("opt_D", opt_D)):
        if not _same(opt.state_dict()["state"], truth[opt_name]["state"]):
            problems.append(f"after load_state, {opt_name} has lost Adam's running averages and step count (its "
                            f"state): without them the next steps differ; save and load {opt_name}.state_dict()")
    if not torch.equal(torch.get_rng_state(), truth["rng"]):
        problems.append("after load_state, torch's random state is not the saved one, so the resumed run draws "
                        "other z: save torch.get_rng_state() and put it back with torch.set_rng_state()")
    if not problems:
        _resume_steps(G, D, opt_G, opt_D, steps)
        resumed = [p.detach() for p in (*G.parameters(), *D.parameters())]
        if not all(torch.equal(a, b) for a, b in zip(straight, resumed)):
            problems.append("the resumed run ends with other weights than the run that never stopped")
    return verdict(name, problems, f"a run stopped after {steps} steps, saved, loaded into fresh objects and "
                                    f"continued ends with the same weights, bit for bit, as one that never stopped")

"""A trained generator outside training: loaded from a run's checkpoint or an exported one, sampled from, and
exported alone in half precision (the trainer is gan_lessons.training)."""
from pathlib import Path

import torch

from gan_lessons.files import CheckpointError, load_checkpoint, save_checkpoint
from gan_lessons.i18n import N_, _
from gan_lessons.models import Generator

UNREADABLE_RUN = N_("delete it, or train again without {resume=True}")    # load_checkpoint's remedy for a run's last.pt


def load_generator(path) -> Generator:
    """G from a checkpoint (or an exported half-precision one), in eval mode on the CPU."""
    state = load_checkpoint(path, remedy=N_("give a run's last.pt or an exported generator"))
    if not isinstance(state, dict) or not isinstance(state.get("G"), dict) or "config" not in state:
        raise CheckpointError(_("{path} holds no generator (no 'G' and 'config'); give a run's last.pt or an "
                                "exported generator").format(path=path))
    G = Generator(state["config"]["z_dim"], state["config"].get("tanh", False))    # Tanh has no weights
    G.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in state["G"].items()})
    return G.eval()


@torch.no_grad()
def generate(G, n, seed=0, batch=1000):
    """n images from G in eval mode, on G's device, returned on the CPU; G's train/eval mode is left as it was."""
    gen, was, device = torch.Generator().manual_seed(seed), G.training, next(G.parameters()).device
    G.eval()
    x = torch.cat([G(torch.randn(min(batch, n - i), G.z_dim, generator=gen).to(device)).clamp(-1, 1).cpu()
                   for i in range(0, n, batch)])
    G.train(was)
    return x


def export_generator(checkpoint, path) -> None:
    """G alone, in half precision (3.3 MB instead of the 40 MB training checkpoint), for shipping."""
    state = load_checkpoint(checkpoint, UNREADABLE_RUN)
    G = {k: v.half() if v.is_floating_point() else v for k, v in state["G"].items()}
    save_checkpoint(Path(path), {"G": G, "config": state["config"], "history": state["history"]})

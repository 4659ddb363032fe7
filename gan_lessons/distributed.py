"""Training on several processes, one per device, as `torchrun --nproc_per_node=N -m gan_lessons train ...` starts
them: DistributedDataParallel over NCCL on GPUs, gloo on the CPU.

The global batch is `--batch-size`, split evenly over the processes: at each step every process takes its own slice
of the same shuffled batch the one-process run would take, and its own slice of the same noise draw, so the
processes see different images and different noise, and together exactly the one-process run's. DDP averages the
gradients, so the learning rate needs no scaling; what differs from one process is BatchNorm in G, which normalises
each process's slice by its own statistics (SyncBatchNorm would share them, on GPUs only). One process, rank 0,
writes every file (checkpoints, grids, metrics); each reads the checkpoint to resume."""
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Ranks:
    """Where this process stands among those torchrun started."""
    rank: int                    # 0 .. world - 1; rank 0 writes the files
    world: int                   # how many processes train together
    local: int                   # its index on this machine: its GPU

    @property
    def main(self) -> bool:
        return self.rank == 0


def ranks() -> Ranks | None:
    """This process's Ranks when torchrun started several (WORLD_SIZE > 1), else None (one process: no DDP)."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return None
    return Ranks(int(os.environ.get("RANK", "0")), world, int(os.environ.get("LOCAL_RANK", "0")))


def start(r: Ranks, device: torch.device) -> torch.device:
    """Join the process group (once) and return the device this process trains on: its own GPU on CUDA."""
    if device.type == "cuda":
        device = torch.device("cuda", r.local)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def wrap(module: torch.nn.Module, device: torch.device):
    """The module under DistributedDataParallel: each backward averages its gradients over the processes."""
    from torch.nn.parallel import DistributedDataParallel
    return DistributedDataParallel(module, device_ids=[device.index] if device.type == "cuda" else None)


def mean(t: torch.Tensor) -> torch.Tensor:
    """t averaged over the processes (every process calls it)."""
    t = t.clone()
    dist.all_reduce(t)
    return t / dist.get_world_size()


def decided(flag: bool) -> bool:
    """Rank 0's flag, on every process (a decision only rank 0 can make, such as a time limit by its clock)."""
    t = torch.tensor([int(flag)], device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.broadcast(t, 0)
    return bool(t.item())


def lost(error: BaseException) -> bool:
    """Is this the error a collective raises when another process of the group has gone (crashed, killed)?"""
    text = str(error)
    return isinstance(error, dist.DistError) or any(
        w in text for w in ("Connection closed by peer", "Connection reset by peer", "gloo", "NCCL"))


def reason(error: BaseException) -> str:
    """The first line of such an error, without the library's source path: what a one-line message can quote."""
    first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return first.split("] ", 1)[-1].split(". ")[0].rstrip(".")[:120]


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def stop() -> None:
    """Leave the process group (at the end of a run)."""
    if dist.is_initialized():
        dist.destroy_process_group()

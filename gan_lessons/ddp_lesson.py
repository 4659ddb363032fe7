"""Lesson 14's experiments: each is a plain function(rank, world, ...) that processes.run() calls in every process of
a gloo group (two processes on the CPU), and returns what that process saw. Small G and D, so each runs in well
under a second; seed 000's networks behave the same way.

The vocabulary is the lessons': G, D, x_real, x_fake, z, loss_D, opt_D; `ddp` is D wrapped in DistributedDataParallel."""
import contextlib
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from gan_lessons import strategies

BATCH = 8        # each process's batch


def make_D(batch_norm=True, seed=0):
    """A small D: 8 features in, one score out; BatchNorm in the middle unless batch_norm=False."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16) if batch_norm else nn.Identity(), nn.LeakyReLU(0.2),
                         nn.Linear(16, 1))


def make_G(seed=1):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))


def batch(rank, seed=100):
    """This process's own real batch: another one on every rank."""
    return torch.randn(BATCH, 8, generator=torch.Generator().manual_seed(seed + rank))


class CountingHook:
    """A DDP communication hook that averages each bucket over the processes, as DDP's own does, and counts the
    buckets it sends (one all_reduce each)."""

    def __init__(self):
        self.sent = 0

    def send(self, state, bucket):
        self.sent += 1
        world = dist.get_world_size()
        return dist.all_reduce(bucket.buffer(), async_op=True).get_future().then(lambda f: f.value()[0] / world)


def _grads(module):
    return torch.cat([p.grad.flatten() for p in module.parameters()])


def averaged(rank, world):
    """One backward of D's loss on this process's batch, without DDP and with it: the gradient each saw, and how
    many buckets DDP sent."""
    x_real = batch(rank)
    D = make_D()
    (-D(x_real).mean()).backward()
    own = _grads(D)
    D = make_D()
    ddp, hook = DDP(D), CountingHook()
    ddp.register_comm_hook(None, hook.send)
    (-ddp(x_real).mean()).backward()
    return {"own": own, "after_ddp": _grads(D), "buckets_sent": hook.sent,
            "bucket_sizes": ddp._get_ddp_logging_data().get("bucket_sizes")}


def buffers(rank, world, **flags):
    """Rank 1 writes 5 into D's running mean; then one DDP forward. What each process's running mean holds after,
    and its version counter before and after the forward. `flags` go to DDP (broadcast_buffers=...)."""
    D = make_D()
    ddp = DDP(D, **flags)
    running = D[1].running_mean
    if rank == 1:
        with torch.no_grad():
            running.fill_(5.0)
    before = running._version
    ddp(batch(rank))
    return {"running_mean": running.clone(), "version": (before, running._version)}


def sample_then_train(rank, world, sample_first=True):
    """One training step, then (sample_first) a forward under no_grad, as a GAN that shows a grid mid-epoch makes;
    then rank 1 writes 5 into D's running mean, and one training forward follows. Each process's running mean after
    it, and whether DDP said, before that forward, that it would copy the buffers."""
    D = make_D()
    ddp = DDP(D)
    (-ddp(batch(rank)).mean()).backward()
    if sample_first:
        with torch.no_grad():
            ddp(batch(rank, seed=50))
    if rank == 1:
        with torch.no_grad():
            D[1].running_mean.fill_(5.0)
    will_copy = ddp.will_sync_module_buffers()
    ddp(batch(rank))
    return {"running_mean": D[1].running_mean.clone(), "will_copy": will_copy}


def seeded_per_rank(rank, world, **flags):
    """The lesson's advice, seed + rank, for a D with spectral norm (whose power iteration keeps a vector u per
    layer, a buffer), wrapped with `flags`: each process's u vectors after wrapping, and D's output on one input
    that every process shares."""
    torch.manual_seed(rank)
    sn = nn.utils.parametrizations.spectral_norm
    D = nn.Sequential(sn(nn.Linear(8, 16)), nn.LeakyReLU(0.2), sn(nn.Linear(16, 1)))
    ddp = DDP(D, **flags)
    u = torch.cat([b.flatten() for name, b in D.named_buffers() if name.endswith("_u")])
    return {"u": u, "out": ddp(batch(0)).detach()}


def two_forwards(rank, world, copy_between=False):
    """Seed 000's D step under DDP: D on x_real, D on x_fake, one backward of the summed loss. copy_between: a
    copy_ into D's running mean between the forwards and the backward, as code that syncs statistics by hand does."""
    D = make_D()
    ddp = DDP(D)
    x_real, x_fake = batch(rank), batch(rank, seed=200)
    loss_D = F.softplus(-ddp(x_real)).mean() + F.softplus(ddp(x_fake)).mean()
    if copy_between:
        with torch.no_grad():
            D[1].running_mean.copy_(D[1].running_mean * 0.5)
    loss_D.backward()
    return {"version": D[1].running_mean._version}


def sync_batch_norm(rank, world):
    """BatchNorm made SyncBatchNorm, as DDP's docs suggest, then one forward on the CPU."""
    D = nn.SyncBatchNorm.convert_sync_batchnorm(make_D())
    DDP(D)(batch(rank))


class ConditionalD(nn.Module):
    """A conditional D with an auxiliary classifier head (AC-GAN): a score and 10 class logits from one body.
    With returns_classes=False, its forward leaves the class head out: it returns the score and None."""

    def __init__(self, returns_classes=True):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2))
        self.score, self.classes = nn.Linear(16, 1), nn.Linear(16, 10)
        self.returns_classes = returns_classes

    def forward(self, x):
        h = self.body(x)
        return (self.score(h), self.classes(h)) if self.returns_classes else (self.score(h), None)


def unused_head(rank, world, iterations=2, find_unused_parameters=False, static_graph=False, zero_term=False,
                returns_classes=True):
    """D steps on its score alone: the class head reaches no loss (zero_term: it does, through 0 * classes.sum()).
    Returns the iterations that ran, the class head's gradient after the last, and D's weights after the last."""
    D = ConditionalD(returns_classes)
    ddp = DDP(D, find_unused_parameters=find_unused_parameters, static_graph=static_graph)
    opt_D = torch.optim.SGD(D.parameters(), lr=0.1)
    ran = 0
    for _i in range(iterations):
        score, classes = ddp(batch(rank))
        opt_D.zero_grad()
        (-score.mean() + (0 * classes.sum() if zero_term else 0)).backward()
        opt_D.step()
        ran += 1
    return {"ran": ran, "classes_grad": D.classes.weight.grad,
            "D": torch.cat([p.detach().flatten() for p in D.parameters()])}


def grad_of_parameters(rank, world):
    """D's gradient taken with torch.autograd.grad(loss, D's parameters) through the DDP-wrapped D, beside the one
    this process's loss alone gives; and the names of DDP's state_dict and of D's own."""
    D = make_D(batch_norm=False)
    own = torch.autograd.grad(-D(batch(rank)).mean(), list(D.parameters()))
    ddp = DDP(D)
    through = torch.autograd.grad(-ddp(batch(rank)).mean(), list(D.parameters()))
    return {"own": torch.cat([g.flatten() for g in own]), "through_ddp": torch.cat([g.flatten() for g in through]),
            "ddp_keys": list(ddp.state_dict())[:2], "module_keys": list(ddp.module.state_dict())[:2]}


def seed003(rank, world):
    """Seed 003's strategy 1 (retain_graph, D steps, then G's backward through D's old graph), G and D under DDP."""
    G, D = make_G(), make_D(batch_norm=False)
    gen = torch.Generator().manual_seed(rank)
    strategies.retain_graph_seed003(DDP(G), DDP(D), torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters()),
                                    batch(rank), lambda n: torch.randn(n, 4, generator=gen))


def accumulate(rank, world, step, source=None, accum=2, calls=2, stale=0.0):
    """A D step over `accum` micro-batches, DDP-wrapped D (`step` is a name in this module or, with `source`, a
    student's function), each call with `stale` in every .grad of D (as a G step's backward through D leaves one).
    Per call: the gradient D stepped on, the buckets DDP sent, the backwards that reached D, D's forwards that went
    around DDP (through ddp.module), the backwards that ran inside no_sync() after a forward outside it, and how
    many samples D's forwards ran on (with the size of each of the two batches)."""
    D = make_D(batch_norm=False)
    ddp, hook = DDP(D), CountingHook()
    ddp.register_comm_hook(None, hook.send)
    opt_D = torch.optim.SGD(D.parameters(), lr=0.1)
    seen, sent, backwards, around, split = [], [], [], [], []
    opt_D.register_step_pre_hook(lambda opt, args, kwargs: seen.append(_grads(D).clone()))
    arrived, forwards, synced = [], {"ddp": 0, "D": 0}, {"at forward": True, "split": 0}
    sizes, samples = [], []           # the batch of each D forward; per call, how many samples D ran on

    def on_ddp_forward(module, args):
        forwards["ddp"] += 1
        synced["at forward"] = module.require_backward_grad_sync

    def on_D_forward(module, args):
        forwards["D"] += 1
        sizes.append(len(args[0]))

    def on_backward(grad):
        arrived.append(1)
        synced["split"] += synced["at forward"] and not ddp.require_backward_grad_sync
    ddp.register_forward_pre_hook(on_ddp_forward)
    D.register_forward_pre_hook(on_D_forward)
    next(D.parameters()).register_hook(on_backward)
    function = _student(source, step) if source else globals()[step]
    for call in range(calls):
        before, reached, ran = hook.sent, len(arrived), dict(forwards, split=synced["split"])
        for p in D.parameters() if stale else ():
            p.grad = torch.full_like(p, stale)
        sizes.clear()
        function(ddp, opt_D, batch(rank, seed=100 + 10 * call), batch(rank, seed=300 + 10 * call), accum)
        samples.append(sum(sizes))
        sent.append(hook.sent - before)
        backwards.append(len(arrived) - reached)
        around.append((forwards["D"] - ran["D"]) - (forwards["ddp"] - ran["ddp"]))
        split.append(synced["split"] - ran["split"])
    return {"grads": seen, "sent": sent, "backwards": backwards, "around": around, "split": split,
            "samples": samples, "batch": len(batch(rank, seed=100))}


def _student(source, name):
    """A student's function from its source, with what a notebook cell of this lesson has imported."""
    space = {"torch": torch, "nn": nn, "F": F, "contextlib": contextlib, "nullcontext": contextlib.nullcontext,
             "DDP": DDP}
    exec(compile(source, "<your function>", "exec"), space)
    return space[name]


def d_step_synced_each(ddp, opt_D, x_real, x_fake, accum):
    """D's hinge loss over `accum` micro-batches, written as on one process."""
    opt_D.zero_grad()
    for real, fake in zip(x_real.chunk(accum), x_fake.chunk(accum)):
        ((F.relu(1 - ddp(real)).mean() + F.relu(1 + ddp(fake)).mean()) / accum).backward()
    opt_D.step()


def one_process_reference(world, accum=2, calls=2, last_only=False):
    """What one process with the whole global batch steps on: D's gradient at each call, no DDP. (last_only: a
    known wrong step, each process's last micro-batch alone, its loss still divided by accum.)"""
    D = make_D(batch_norm=False)
    opt_D = torch.optim.SGD(D.parameters(), lr=0.1)
    seen = []
    opt_D.register_step_pre_hook(lambda opt, args, kwargs: seen.append(_grads(D).clone()))
    for call in range(calls):
        part = (lambda x: x.chunk(accum)[-1]) if last_only else (lambda x: x)
        x_real = torch.cat([part(batch(r, seed=100 + 10 * call)) for r in range(world)])
        x_fake = torch.cat([part(batch(r, seed=300 + 10 * call)) for r in range(world)])
        opt_D.zero_grad()
        ((F.relu(1 - D(x_real)).mean() + F.relu(1 + D(x_fake)).mean()) / (accum if last_only else 1)).backward()
        opt_D.step()
    return seen


def frozen_and_penalty(rank, world, steps=3, weight=10.0):
    """Three WGAN-GP steps with G and D under DDP: D's loss with a gradient penalty (create_graph through the DDP
    D), then G's step through D frozen. D's and G's weights after, for the replicas to be compared, and the buckets
    D's DDP sent in all and during the penalty's autograd.grad."""
    G, D = make_G(), make_D(batch_norm=False)
    g, d, hook = DDP(G), DDP(D), CountingHook()
    d.register_comm_hook(None, hook.send)
    sent_by_grad = 0
    opt_G, opt_D = torch.optim.Adam(G.parameters(), 1e-3), torch.optim.Adam(D.parameters(), 1e-3)
    gen = torch.Generator().manual_seed(rank)
    for _s in range(steps):
        x_real, z = batch(rank), torch.randn(BATCH, 4, generator=gen)
        x_fake = g(z).detach()
        eps = torch.rand(BATCH, 1, generator=gen)
        x_hat = (eps * x_real + (1 - eps) * x_fake).requires_grad_(True)
        before = hook.sent
        grad, = torch.autograd.grad(d(x_hat).sum(), x_hat, create_graph=True)
        sent_by_grad += hook.sent - before
        penalty = ((grad.norm(dim=1) - 1) ** 2).mean()
        opt_D.zero_grad()
        (d(x_fake).mean() - d(x_real).mean() + weight * penalty).backward()
        opt_D.step()
        D.requires_grad_(False)
        opt_G.zero_grad()
        (-d(g(z)).mean()).backward()
        opt_G.step()
        D.requires_grad_(True)
    return {"sent_by_grad": sent_by_grad, "sent": hook.sent,
            "D": torch.cat([p.detach().flatten() for p in D.parameters()]),
            "G": torch.cat([p.detach().flatten() for p in G.parameters()])}


def noise_and_files(rank, world, seed_per_rank=False):
    """Each process seeds and draws z as one-process code does (the same seed, or the seed plus the rank); rank 0
    alone saves D, the others wait at a barrier and load it."""
    torch.manual_seed(0 + (rank if seed_per_rank else 0))
    z = torch.randn(BATCH, 4)
    path = os.path.join(tempfile.gettempdir(), f"gan_lessons_ddp_{os.getppid()}.pt")
    D = make_D(seed=7)
    if rank == 0:
        torch.save(D.state_dict(), path)
    dist.barrier()                              # nobody reads before rank 0 has written
    loaded = torch.load(path)
    dist.barrier()
    if rank == 0:
        os.remove(path)
    return {"z": z, "loaded_equal": all(torch.equal(loaded[k], v) for k, v in D.state_dict().items())}



def flag_costs(rank, world, steps=50, rounds=5):
    """Milliseconds per D step (forward, backward, step; both heads in the loss) with DDP's defaults, with
    find_unused_parameters=True and with static_graph=True, in alternating rounds: the median of each."""
    import statistics
    import time
    times = {"default": [], "find_unused_parameters": [], "static_graph": []}
    for _r in range(rounds):
        for flag in times:
            D = ConditionalD()
            ddp = DDP(D, **({} if flag == "default" else {flag: True}))
            opt_D = torch.optim.SGD(D.parameters(), lr=0.01)
            for s in range(steps + 2):
                dist.barrier()
                start = time.perf_counter()
                score, classes = ddp(batch(rank))
                opt_D.zero_grad()
                (-score.mean() + F.cross_entropy(classes, torch.arange(BATCH) % 10)).backward()
                opt_D.step()
                if s >= 2:                                      # the first two set up DDP's buckets and graph
                    times[flag].append((time.perf_counter() - start) * 1e3)
    return {flag: statistics.median(t) for flag, t in times.items()}


def stalls(rank, world, seconds=30):
    """Rank 1 never returns in time (for processes.run's timeout); rank 0 returns at once."""
    import time
    if rank == 1:
        time.sleep(seconds)
    return rank


def warns(rank, world):
    """Every process raises the same FutureWarning (for processes.run's warnings), then returns its rank."""
    import warnings
    warnings.warn("this flag is deprecated", FutureWarning, stacklevel=1)
    return rank


def raises_on(rank, world, which=1):
    """Rank `which` raises a ValueError (for processes.run's errors); the others wait at a barrier that never ends."""
    if rank == which:
        raise ValueError(f"rank {rank} could not go on")
    dist.barrier()
    return rank

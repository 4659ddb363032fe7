"""The shim `benchmarks/doctor_real.py` puts first on PYTHONPATH, so that Python imports it at start-up, in the
plain run and in the doctor's alike. It makes any training script runnable here, offline, in seconds, and
repeatable, without changing a line of it:

- seeds: torch, random and numpy start from 0, so two runs of one script print and write the same;
- data: torchvision's downloadable datasets (MNIST, FashionMNIST, KMNIST, CIFAR10, CIFAR100, SVHN, STL10, CelebA)
  and ImageFolder become FakeData of their shape (DOCTOR_REAL_SAMPLES images, 512 by default), and a folder that
  a script globs for images (`glob.glob("data/x/train/*.*")`) and finds empty gets 8 random images, created only
  inside the run's own folder (DOCTOR_REAL_ROOT);
- run length: every DataLoader gives DOCTOR_REAL_BATCHES batches (2 by default) in all, over its passes (a pass
  that stops early, `next(iter(loader))`, leaves the rest to the next), and none after, so an epoch loop ends at
  once after its first epoch, and a loop that draws batches forever (`while True: for x in loader: yield x`) ends
  the run, with exit status 0, at its 10,000th empty pass; workers are turned off (num_workers=0: the batches and
  their order are the same, drawn in the main process);
- torchvision imports beside a CPU-only torch (gan_lessons is imported for that, in both runs);
- with no GPU, `.cuda()` on a module or a tensor leaves it where it is, and `.to()` a CUDA device moves it to the
  CPU (a script written for one GPU, which moves its nets and batches there without asking whether CUDA is
  there, runs on the CPU).

Anything else a script needs (a download of its own, a GPU, gym) fails the same way in both runs, and the report
says so. Only active when DOCTOR_REAL_ROOT is set."""
import os

if os.environ.get("DOCTOR_REAL_ROOT"):
    import glob
    import itertools
    import random

    import torch
    import torch.utils.data

    ROOT = os.path.realpath(os.environ["DOCTOR_REAL_ROOT"])
    SAMPLES = int(os.environ.get("DOCTOR_REAL_SAMPLES", "512"))
    BATCHES = int(os.environ.get("DOCTOR_REAL_BATCHES", "2"))
    EMPTY_PASSES = 10_000       # later passes over one loader before the run is taken to loop on it forever

    final = {}                                  # optimizer number (in the order first stepped): its params' digest

    def _after_step(optimizer, args, kwargs):
        import hashlib
        h = hashlib.sha256()
        for group in optimizer.param_groups:
            for p in group["params"]:
                h.update(p.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
        number = final.setdefault(id(optimizer), [len(final), None])
        number[1] = h.hexdigest()[:16]

    def _weights():
        with open(os.path.join(ROOT, "doctor_real_weights.txt"), "w") as f:
            f.write("".join(f"optimizer {n}: {d}\n" for n, d in sorted(final.values())))

    import atexit
    atexit.register(_weights)
    from torch.optim.optimizer import register_optimizer_step_post_hook
    register_optimizer_step_post_hook(_after_step)
    torch.manual_seed(0)
    random.seed(0)
    try:
        import numpy
        numpy.random.seed(0)
    except ImportError:
        numpy = None

    loader_init, loader_iter = torch.utils.data.DataLoader.__init__, torch.utils.data.DataLoader.__iter__

    def __init__(self, *args, **kwargs):
        if len(args) > 5:                       # num_workers given by position
            args = args[:5] + (0,) + args[6:]
        kwargs.update(num_workers=0)
        kwargs.pop("prefetch_factor", None)
        kwargs.pop("persistent_workers", None)
        loader_init(self, *args, **kwargs)

    def __iter__(self):
        state = self.__dict__.setdefault("_doctor_real", {"left": BATCHES, "empty": 0})
        if state["left"] <= 0:
            state["empty"] += 1
            if state["empty"] > EMPTY_PASSES:   # a loop that draws batches forever (`while True: for x in loader`)
                raise SystemExit(0)             # ends here, as an epoch loop ends: the run is over
            return iter(())

        def batches():
            for drawn in itertools.islice(loader_iter(self), state["left"]):
                state["left"] -= 1
                yield drawn
        return batches()

    torch.utils.data.DataLoader.__init__, torch.utils.data.DataLoader.__iter__ = __init__, __iter__

    real_glob = glob.glob

    def _fill(pattern):
        """Eight random images in the folder `pattern` globs for, if it lies inside the run's folder and is empty."""
        folder, name = os.path.split(pattern)
        if numpy is None or "*" not in name or glob.has_magic(folder):
            return
        folder = os.path.realpath(folder or ".")
        if not (folder + os.sep).startswith(ROOT + os.sep) or (os.path.isdir(folder) and os.listdir(folder)):
            return
        from PIL import Image
        os.makedirs(folder, exist_ok=True)
        ext = ".png" if name.endswith(".png") else ".jpg"
        rng = numpy.random.default_rng(len(folder))
        for i in range(8):
            Image.fromarray(rng.integers(0, 256, (288, 288, 3), dtype=numpy.uint8)).save(
                os.path.join(folder, f"{i:03d}{ext}"))

    def fake_glob(pattern, *args, **kwargs):
        found = real_glob(pattern, *args, **kwargs)
        if not found and isinstance(pattern, str):
            _fill(pattern)
            found = real_glob(pattern, *args, **kwargs)
        return found

    glob.glob = fake_glob

    if not torch.cuda.is_available():
        def _on_cpu(to):
            def moved(self, *args, **kwargs):
                args = tuple("cpu" if _cuda(a) else a for a in args)
                if _cuda(kwargs.get("device")):
                    kwargs["device"] = "cpu"
                return to(self, *args, **kwargs)
            return moved

        def _cuda(device):
            return isinstance(device, (str, torch.device)) and torch.device(device).type == "cuda"

        torch.nn.Module.cuda = lambda self, device=None: self                 # type: ignore[method-assign]
        torch.Tensor.cuda = lambda self, *args, **kwargs: self                # type: ignore[method-assign]
        torch.nn.Module.to = _on_cpu(torch.nn.Module.to)                      # type: ignore[method-assign]
        torch.Tensor.to = _on_cpu(torch.Tensor.to)                            # type: ignore[method-assign]

    try:
        # isort: off
        import gan_lessons                      # noqa: F401  (torchvision importable beside a CPU-only torch)
        import torchvision.datasets as tvd
        # isort: on
    except ImportError:
        tvd = None

    def _fake(shape, classes):
        class Fake(tvd.FakeData):
            def __init__(self, root=None, *args, train=True, split=None, transform=None, target_transform=None,
                         download=False, **kwargs):
                train = train and split not in ("test", "val", "valid")
                super().__init__(size=SAMPLES if train else SAMPLES // 4, image_size=shape, num_classes=classes,
                                 transform=transform, target_transform=target_transform,
                                 random_offset=0 if train else 10 ** 6)
        return Fake

    if tvd is not None:
        for name, shape, classes in [("MNIST", (1, 28, 28), 10), ("FashionMNIST", (1, 28, 28), 10),
                                     ("KMNIST", (1, 28, 28), 10), ("CIFAR10", (3, 32, 32), 10),
                                     ("CIFAR100", (3, 32, 32), 100), ("SVHN", (3, 32, 32), 10),
                                     ("STL10", (3, 96, 96), 10), ("CelebA", (3, 218, 178), 2),
                                     ("ImageFolder", (3, 256, 256), 2)]:
            setattr(tvd, name, _fake(shape, classes))

"""gan-lessons: PyTorch autograd taught through the errors that break GAN training.

Modules, each named for what it holds:
  lesson      quick mode, seeding, asserted error demonstrations and claims, the setup cell (lesson 01)
  i18n        the language the package speaks: English, or Chinese through gettext
  graphs      computation graphs from live objects, with saved-tensor states (lessons 01-05; the engine's, 11-12)
  models      seed 000's G and D (lessons 03-06)
  strategies  seven GAN update orders and WGAN-GP, one plain function each (lesson 05)
  costs       passes, gradient passes, time and memory of a strategy (lesson 05)
  timing      timing claims a busy machine cannot get wrong (lesson 05)
  widgets     lesson 05's strategy switch
  exercises   the build-or-fix exercises: each declared, its reference, graded by one function (lessons 01-14)
  engine      the tiny autograd engine lessons 11 and 12 have the student build: the reference
  data        MNIST, online or from the registry wheel offline (lesson 06)
  config      TrainConfig, each wrong setting refused with what to change (lesson 06)
  training    the trainer and resume (lesson 06)
  capture     fast mode on a GPU: the whole training step recorded once as a CUDA graph (lesson 06)
  generators  a trained generator: loaded, sampled from, exported (lesson 06)
  files       atomic writes, checkpoints loaded as data, a run's files (lesson 06)
  wording     error messages that name settings, for Python or the command line (lesson 06)
  metrics     the shipped classifier, MNIST-FID, classifier score, coverage (lesson 06)
  plots       sample grids, GIFs, loss curves (lesson 06)
  doctor      the autograd doctor and its IPython extension (lesson 07)
  distributed training on several processes under torchrun (lesson 14)
  processes   several processes from a notebook, as torchrun would start them (lesson 14)
  ddp_lesson  lesson 14's experiments, one plain function per process
  release     the lessons as nbgrader assignments
  cli         the command line's parser and its words
  __main__    the command line: train, sample, evaluate, export, classifier, doctor
"""
__version__ = "0.1.0"


import importlib.abc
import importlib.util
import sys

_REGISTERED: list = []


def import_torchvision():
    """torchvision, importable beside a CPU-only torch. PyPI's torchvision wheels are CUDA builds; beside a CPU-only
    torch (what `make test` installs) their compiled ops cannot load, and torchvision's import then fails on
    "operator torchvision::nms does not exist" (pytorch/vision#9085). The suite uses only torchvision's pure-Python
    parts (MNIST, make_grid, save_image), so declare the two operators that import expects, and import again. Any
    other failure is raised as is."""
    import torch
    try:
        import torchvision
    except RuntimeError as error:
        if "torchvision::nms does not exist" not in str(error):
            raise
        lib = torch.library.Library("torchvision", "FRAGMENT")
        for op in ("nms", "qnms"):
            lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _REGISTERED.append(lib)  # keep the registrations alive
        import torchvision
    return torchvision


class _Imported(importlib.abc.Loader):
    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


class _TorchvisionOnFirstUse(importlib.abc.MetaPathFinder):
    """torchvision is imported where it is first used, by this package or by anyone after `import gan_lessons`,
    not with the package: its import takes about a second, which the command line's quick answers (--help, a bad
    flag) would otherwise wait for. The first `import torchvision` goes through import_torchvision."""

    def find_spec(self, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        return importlib.util.spec_from_loader(name, _Imported(import_torchvision()))


if "torchvision" not in sys.modules:
    sys.meta_path.insert(0, _TorchvisionOnFirstUse())


def load_ipython_extension(ip):
    """`%load_ext gan_lessons` turns on the autograd doctor for every cell (lesson 07)."""
    from gan_lessons.doctor import load_ipython_extension as load
    load(ip)


def unload_ipython_extension(ip):
    from gan_lessons.doctor import unload_ipython_extension as unload
    unload(ip)

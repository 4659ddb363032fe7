"""Helpers shared by the tests (the session setup for the whole suite is the root conftest.py)."""
import os
import subprocess
import sys

import pytest


class CommandLine:
    """The real command line, `python -m gan_lessons ARGS`, in a subprocess with one torch thread (as under
    `make test`'s workers, so runs compared weight for weight train alike however the tests are started); `env`
    adds to the environment."""

    @staticmethod
    def _command(args):
        return [sys.executable, "-m", "gan_lessons", *args]

    @staticmethod
    def _env(env):
        return {**os.environ, "OMP_NUM_THREADS": "1", **(env or {})}

    def __call__(self, *args, env=None, timeout=300, **kw) -> subprocess.CompletedProcess:
        """Run it to the end; stdout and stderr captured as text."""
        return subprocess.run(self._command(args), capture_output=True, text=True, env=self._env(env),
                              timeout=timeout, **kw)

    def start(self, *args, env=None, **kw) -> subprocess.Popen:
        """Start it and return at once (to signal or kill it mid-run); stdout and stderr piped, as text."""
        return subprocess.Popen(self._command(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self._env(env), **kw)


@pytest.fixture(scope="session")
def cli():
    """cli("train", "--out", ...) runs the command line and returns its CompletedProcess (see CommandLine)."""
    return CommandLine()

"""What the doctor's tests share: an IPython shell with `%load_ext gan_lessons`, where code runs as notebook cells."""
import pytest


@pytest.fixture(scope="module")
def ip():
    pytest.importorskip("IPython")
    from IPython.testing.globalipapp import get_ipython
    shell = get_ipython()
    shell.run_line_magic("load_ext", "gan_lessons")
    yield shell
    shell.run_line_magic("unload_ext", "gan_lessons")

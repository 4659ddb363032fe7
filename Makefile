# Two entry points, each doing its own setup and safe to re-run:
#   make lab    set up .venv and open the lessons in JupyterLab
#   make test   set up .venv and run the whole test suite (unit tests + every notebook under nbval)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: lab test setup dot chromium train bench student clean

lab: setup dot
	$(VENV)/bin/jupyter lab notebooks/ $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

test: setup dot chromium
	@command -v dot >/dev/null || { echo "The tests need graphviz's 'dot' program. Install it with: sudo apt-get install graphviz"; exit 1; }
	$(PY) -m pytest -n 2 --dist loadscope

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "gan-lessons needs Python 3.10 or newer; found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[lab,test]'
	@touch $(STAMP)

# graphviz's `dot` is a system program: install it where we can, else say how.
dot:
	@if command -v dot >/dev/null; then :; \
	elif [ -n "$$CONDA_PREFIX" ] && command -v conda >/dev/null; then conda install -y -c conda-forge graphviz; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then (apt-get install -y -qq graphviz || (apt-get update -qq && apt-get install -y -qq graphviz)); \
	else echo "graphviz 'dot' is missing; graphs will show as text. Install it with: sudo apt-get install graphviz"; fi

# The browser tests drive Debian's chromium (never `playwright install`); without it they are skipped.
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then (apt-get install -y -qq chromium || (apt-get update -qq && apt-get install -y -qq chromium)); \
	else echo "chromium is missing; the browser tests will be skipped. Install it with: sudo apt-get install chromium"; fi

# The full MNIST run (20 epochs; on a GPU when there is one), then ship its generator.
train: setup
	$(PY) -m gan_lessons train --out runs/mnist --eval-each 2000
	$(PY) -m gan_lessons export runs/mnist

# Student copies with the exercise answers blanked, in build/student/.
student: setup
	$(PY) tools/student.py --out build/student

bench: setup
	$(PY) benchmarks/bench.py --fast --quality

clean:
	rm -rf $(VENV) build

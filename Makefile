# Two entry points, each doing its own setup and safe to re-run:
#   make lab          set up .venv and open a working copy of the lessons (work/) in JupyterLab
#   make test         set up .venv and run the test suite (the linter, mypy, the unit tests, the English lessons under
#                     nbval, the command line, the doctor)
# And the rest, each in a line (the comment above each target says more):
#   make test-all     make test, then make test-rest: every test there is; CI runs it
#   make test-rest    what make test leaves out: the website's build, the lessons' other copies under nbval (Chinese,
#                     student copies), the tests marked `extended` (the browser, nbgrader's round trip, Colab's stack, a
#                     busy machine, ...) and the GPU run's rehearsal
#   make quick        a quick check: the linter, mypy and the tests not marked `slow` (no notebook, browser or training)
#   make setup        .venv with the package, its test tools and the reference torch
#   make lint         ruff over the package, tools, benchmarks, tests and the lessons' text sources
#   make dot          graphviz's dot (apt where it can), for the graphs
#   make fonts        a CJK font (apt where it can), for the Chinese lessons' figures
#   make chromium     Debian's chromium (apt where it can), for the browser tests
#   make train        the full 20-epoch MNIST run, then its generator shipped into gan_lessons/assets/
#   make notebooks    the lessons built from their text sources and executed, then the student copies
#   make student      the student copies: nbgrader generate_assignment's release of every lesson
#   make messages     the Chinese message catalog: extract, update, compile
#   make bench        the step's cost, eager and compiled, and time to quality (benchmarks/results/)
#   make check-torch  the lessons' checks on another torch (TORCH=2.1.0)
#   make check-colab  every lesson and student copy on Colab's own stack
#   make doctor-versions  the doctor's catalogue of errors on torch 2.1.2, 2.11.0 and 2.15.0 (TORCHES=...)
#   make gpu-carry    the files a GPU machine without a network needs (wheels, dot, MNIST)
#   make gpu-run      the GPU run on a GPU machine: PART=all (BUDGET=480 seconds), or one of train, bench, notebooks
#   make gpu-smoke    the GPU run's parts, tiny, on this CPU
#   make site         the website: both editions' lessons and the documentation, with Jupyter Book
#   make site-en      the website's English book alone (make site builds both books side by side)
#   make site-zh      the website's Chinese book alone
#   make clean        remove the environments, build/ and the GPU run's folders
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The reference torch and torchvision (tests/constraints.txt says why these): the stored outputs were made with them.
CONSTRAINTS := tests/constraints.txt
TORCH_PIN   := $(shell sed -n 's/^torch==//p' $(CONSTRAINTS))
# With no NVIDIA GPU, take torch's CPU build (no CUDA packages): from the configured index where it has one,
# else from PyTorch's CPU index.
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
torch_index = if command -v nvidia-smi >/dev/null 2>&1 || $(PY) -m pip index versions torch 2>/dev/null | grep -qF "$(TORCH_PIN)+cpu"; \
	then :; else echo "--extra-index-url $(TORCH_CPU_INDEX)"; fi
# System packages without what they only recommend (chromium alone would pull in cups, samba and avahi).
APT_INSTALL := apt-get install -y -qq --no-install-recommends

.PHONY: lab test test-all test-rest quick lint setup dot chromium fonts messages train bench notebooks student clean check-torch check-colab gpu-carry gpu-run gpu-smoke site site-en site-zh

# quick leaves out every test marked `slow` (set in the test's file; every lesson under nbval is, in conftest.py):
# the notebooks, the browser, nbgrader's round trip, training runs, two-process runs, the doctor on whole scripts
# and its case suite, timing under load, the GPU rehearsal. `make test` runs them, but those marked `extended`.
quick: setup
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -n 2 --dist loadscope -q -m "not slow" tests

# lab opens a working copy of the lessons, work/ (git-ignored), so running a lesson never changes the committed
# notebooks. A lesson already in work/ is kept as it was left; delete it there to start that lesson afresh.
lab: setup dot fonts
	@mkdir -p work && cp -Rn notebooks/. work/
	$(VENV)/bin/jupyter lab work/ $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

# test: the 25 slowest tests are listed at the end (--durations), where a slower suite shows first.
test: setup dot fonts
	@command -v dot >/dev/null || { echo "The tests need graphviz's 'dot' program. Install it with: sudo apt-get install graphviz"; exit 1; }
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -n 2 --dist loadscope -m "not copies and not extended" --durations=25

# What `make test` leaves out. The website, built first with warnings as errors (the browser's tests open this very
# build), and the GPU run's rehearsal, last. The lessons' other copies (the `copies` marker, set in conftest.py by the notebook's
# folder): the Chinese edition (its code is the English edition's, which tools/parity.py checks; its outputs are the
# Chinese ones) and the student copies (their cells run with the answers left blank). And the tests marked
# `extended` in their files, which run lessons or the trainer again in another setting: JupyterLab and the website
# in a browser, nbgrader's round trip, Colab's stack, timing claims on a busy machine, the GPU run's budget, two
# processes training like one.
test-rest: setup dot chromium fonts
	$(MAKE) --no-print-directory site
	$(PY) -m pytest -n 2 --dist loadscope -m "copies or extended" --durations=10
	$(MAKE) --no-print-directory gpu-smoke

test-all: test
	$(MAKE) --no-print-directory test-rest

# ruff over the package, tools, benchmarks, tests and the lessons' text sources (config: pyproject.toml).
lint: setup
	$(PY) -m ruff check .

setup: $(STAMP)

$(STAMP): pyproject.toml $(CONSTRAINTS)
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "gan-lessons needs Python 3.10 or newer; found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c $(CONSTRAINTS) $$($(torch_index)) -e '.[lab,test]'
	@touch $(STAMP)

# graphviz's `dot` is a system program: install it where we can, else say how.
dot:
	@if command -v dot >/dev/null; then :; \
	elif [ -n "$$CONDA_PREFIX" ] && command -v conda >/dev/null; then conda install -y -c conda-forge graphviz; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then ($(APT_INSTALL) graphviz || (apt-get update -qq && $(APT_INSTALL) graphviz)); \
	else echo "graphviz 'dot' is missing; graphs will show as text. Install it with: sudo apt-get install graphviz"; fi

# The Chinese lessons' figures need a font with CJK glyphs (Debian's Noto CJK); tests/translations/test_zh.py checks that
# one is found. Install it where we can, else say how.
fonts:
	@if fc-list 2>/dev/null | grep -q "CJK"; then :; \
	elif [ -n "$$CONDA_PREFIX" ] && command -v conda >/dev/null; then conda install -y -c conda-forge font-ttf-noto-cjk; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then ($(APT_INSTALL) fonts-noto-cjk || (apt-get update -qq && $(APT_INSTALL) fonts-noto-cjk)); \
	else echo "no CJK font: the Chinese lessons' figures will show boxes. Install one with: sudo apt-get install fonts-noto-cjk"; fi

# The browser tests drive Debian's chromium (never `playwright install`); without it they are skipped.
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then ($(APT_INSTALL) chromium || (apt-get update -qq && $(APT_INSTALL) chromium)); \
	else echo "chromium is missing; the browser tests will be skipped. Install it with: sudo apt-get install chromium"; fi

# The full MNIST run (20 epochs; on a GPU when there is one; an interrupted run is continued), then ship its generator.
train: setup
	$(PY) -m gan_lessons train --out runs/mnist --eval-each 2000 $$([ -f runs/mnist/last.pt ] && echo --resume)
	$(PY) -m gan_lessons export runs/mnist

# The lessons from their text sources (notebooks/src/ and the Chinese notebooks/zh/src/, what people edit): build and
# execute each notebook, then make the student copies. One lesson: `make notebooks LESSONS=notebooks/src/05_*.py`.
LESSONS ?= $(wildcard notebooks/src/[0-9][0-9]_*.py notebooks/zh/src/[0-9][0-9]_*.py)
notebooks: setup
	$(PY) tools/build_notebook.py $(LESSONS)
	$(PY) tools/student.py

# Student copies free of answers, in notebooks/student/ and notebooks/zh/student/: nbgrader generate_assignment's release
# with nbgrader_config.py (committed: Colab opens them; tests/lessons/test_student.py fails while they differ from a fresh one).
student: setup
	$(PY) tools/student.py

# The package's Chinese message catalog (gan_lessons/i18n.py): extract the messages, update the .po, compile the .mo.
messages: setup
	$(PY) tools/messages.py

bench: setup
	$(PY) benchmarks/bench.py --fast --quality

# The lessons' checks (every expect_error, every checked claim) on another torch, in a virtual environment of its
# own: nbval's lax mode runs every cell and compares no output. `make check-torch TORCH=2.1.0`. It takes the build
# the package index serves (on PyPI, CUDA packages included: several GB).
TORCH ?= 2.15.0
CHECK_VENV := .venv-torch-$(TORCH)
check-torch: dot
	@test -x $(CHECK_VENV)/bin/python || $(PYTHON) -m venv $(CHECK_VENV)
	$(CHECK_VENV)/bin/python -m pip install -q "torch==$(TORCH)" torchvision \
		$$(case "$(TORCH)" in 2.[0-2].*) echo "numpy<2";; esac) -e '.[test]'
	$(CHECK_VENV)/bin/python -c 'import torch; print("checking the lessons on torch", torch.__version__)'
	$(CHECK_VENV)/bin/python -m pytest -n 2 --dist loadscope --nbval-lax notebooks

# The doctor's catalogue (tests/doctor/test_catalogue.py: each kind of autograd error raised, recognised and
# diagnosed) on other torch releases, each in the environment check-torch makes for it: `make doctor-versions`, or
# `make doctor-versions TORCHES="2.1.2"`. Each release's own wording is the one its programs raise.
TORCHES ?= 2.1.2 2.11.0 2.15.0
doctor-versions: dot
	@for v in $(TORCHES); do \
		venv=.venv-torch-$$v; \
		test -x $$venv/bin/python || $(PYTHON) -m venv $$venv || exit 1; \
		$$venv/bin/python -m pip install -q "torch==$$v" torchvision \
			$$(case "$$v" in 2.[0-2].*) echo "numpy<2";; esac) -e '.[test]' || exit 1; \
		$$venv/bin/python -c 'import torch; print("the doctor catalogue on torch", torch.__version__)'; \
		$$venv/bin/python -m pytest -p no:cacheprovider -q tests/doctor/test_catalogue.py || exit 1; \
	done

# The lessons on Colab's own stack (googlecolab/backend-info, 2026-08: Python 3.13, torch 2.11.0, torchvision 0.26.0,
# ipywidgets 7.7.1, IPython 7.34.0, ipykernel 6.17.1), in a virtual environment of its own: every lesson and student
# copy under nbval's lax mode, then the widget tests and the doctor's IPython-extension tests. The pins go on pip's
# command line beside the package, so nothing it needs upgrades them, and the versions are checked before the tests.
# The package index serves no +cpu build of torch 2.11: pip takes the CUDA one (several GB), run on the CPU; wheels
# already downloaded can be offered with PIP_FIND_LINKS. The Python is python3.13, else pyenv's 3.13, else python3
# (the versions line says which); `make check-colab COLAB_PYTHON=python3.12` for another. The environment's own
# .gitignore (`*`, as Python 3.13's venv writes it) keeps it out of git and ruff.
COLAB_PINS   := torch==2.11.0 torchvision==0.26.0 ipython==7.34.0 ipywidgets==7.7.1 ipykernel==6.17.1
COLAB_PYTHON ?= $(firstword $(shell for p in python3.13 $$HOME/.pyenv/versions/3.13*/bin/python3.13; do \
	"$$p" -c '' 2>/dev/null && echo "$$p"; done) python3)
COLAB_VENV   := .venv-colab
check-colab: dot
	@test -x $(COLAB_VENV)/bin/python || { $(COLAB_PYTHON) -m venv $(COLAB_VENV) && echo '*' > $(COLAB_VENV)/.gitignore; }
	$(COLAB_VENV)/bin/python -m pip install -q $(COLAB_PINS) -e '.[test]'
	@$(COLAB_VENV)/bin/python -c 'import sys, platform, importlib.metadata as m; \
		pins = [p.split("==") for p in sys.argv[1:]]; have = {n: m.version(n) for n, _ in pins}; \
		print("checking the lessons on Colab versions: Python", platform.python_version(), *(f"{n} {have[n]}" for n, _ in pins)); \
		wrong = [f"{n} {have[n]}, not {v}" for n, v in pins if have[n].split("+")[0] != v]; \
		sys.exit("not the pinned versions: " + "; ".join(wrong) if wrong else None)' $(COLAB_PINS)
	$(COLAB_VENV)/bin/python -m pytest -n 2 --dist loadscope --nbval-lax notebooks
	$(COLAB_VENV)/bin/python -m pytest -p no:cacheprovider -n 2 --dist loadscope -k "test_widgets or ipython or load_ext" \
		tests/package/test_widgets.py tests/doctor/test_doctor.py tests/doctor/test_doctor_cases.py tests/doctor/test_doctor_script.py

# The GPU run (CONTRIBUTING.md, "Checking on a GPU machine without a network"). Here, with a network: fill the carry folder (wheels for CPython 3.12, graphviz's
# dot, MNIST). On a GPU machine that reaches no package index: PART=all runs the three parts in order under one
# deadline of BUDGET seconds; a single part runs without one. gpu-smoke runs PART=all tiny on this CPU, in a fresh
# environment, from a carry folder for this Python.
GPU_CARRY ?= .gpu-carry
gpu-carry: setup
	$(PY) tools/gpu.py carry --dir $(GPU_CARRY)

BUDGET ?= 480
RESULTS ?= gpu-results
SKIP ?=
gpu-run:
	@case "$(PART)" in all|train|bench|notebooks) ;; *) echo "Say which part: make gpu-run PART=all (or train, bench, notebooks)"; exit 2;; esac
	python3 tools/gpu.py run $(PART) --carry $(GPU_CARRY) --results $(RESULTS) $(if $(filter all,$(PART)),--budget $(BUDGET) --skip "$(SKIP)")

gpu-smoke: setup
	$(PY) tools/gpu.py smoke

# site builds the website with Jupyter Book 1 (site/_config.yml, site/_toc.yml), in an environment of its own,
# from the committed notebooks as they are (nothing is run again), into build/site/_build/html; a warning fails it.
# The two editions are two books, built side by side (one core each), the Chinese one then copied in at zh/.
SITE_VENV ?= .venv-site
site:
	@test -x $(SITE_VENV)/bin/python || { $(PYTHON) -m venv $(SITE_VENV) && echo '*' > $(SITE_VENV)/.gitignore; }
	$(SITE_VENV)/bin/python -m pip install -q "jupyter-book==1.0.4.post1" "jieba==0.42.1"
	rm -rf build/site build/site-zh
	$(MAKE) --no-print-directory -j2 site-en site-zh
	cp -r build/site-zh/_build/html build/site/_build/html/zh

site-en:
	$(SITE_VENV)/bin/jupyter-book build . --config site/_config.yml --toc site/_toc.yml --path-output build/site -W -q

site-zh:
	$(SITE_VENV)/bin/jupyter-book build . --config site/zh/_config.yml --toc site/zh/_toc.yml --path-output build/site-zh -W -q

clean:
	rm -rf $(VENV) .venv-torch-* .venv-colab $(SITE_VENV) build .gpu-carry* gpu-results

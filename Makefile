# Two entry points on a fresh machine: `make run` (set up, then the main job) and
# `make test` (set up, then the test suite). Both create .venv with torch pinned to the
# local CPU wheel (constraints.txt), so no install can pull a CUDA build.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := PIP_CONSTRAINT=$(CURDIR)/constraints.txt $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.installed

.PHONY: setup run test test-slow bench docs docs-console figures diagnose-study clean

setup: $(STAMP)

# uv installs the ~150 packages in seconds where pip takes minutes on a fresh machine (about 35 s against 5 min,
# measured side by side with empty caches); uv reads no pip.conf, so it is told where the local torch wheel lies
# (FIND_LINKS, pip's own setting on these machines). Without such a wheel pip installs torch first (it knows the
# local wheel) and uv the rest, which torch==2.13.0 already satisfies; without uv, pip does everything.
# --compile-bytecode: uv writes no .pyc (pip does); where PYTHONDONTWRITEBYTECODE is set, as on these machines,
# nothing ever writes them, and every process then compiles torch, pandas and scipy from source: importing the
# package's stack took 12.8 s of CPU in a fresh .venv against 5.6 s compiled (2026-12-06), in each of the suite's
# ~dozens of processes (notebook kernels, CLI runs, doc builds) and each dpfair command. Compiling once costs
# ~30 s of wall time at setup.
FIND_LINKS ?= $(PIP_FIND_LINKS)
UV := VIRTUAL_ENV=$(CURDIR)/$(VENV) $(VENV)/bin/uv pip install -q --compile-bytecode -c constraints.txt
EXTRAS := -e '.[test,ray,docs]'

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	if ! $(PIP) install -q uv; then \
		$(PIP) install -q -c constraints.txt torch==2.13.0 && $(PIP) install -q -c constraints.txt $(EXTRAS); \
	elif [ -n "$(FIND_LINKS)" ] && ls $(FIND_LINKS)/torch-2.13.0*.whl >/dev/null 2>&1; then \
		$(UV) --find-links $(FIND_LINKS) torch==2.13.0 $(EXTRAS); \
	else \
		$(PIP) install -q -c constraints.txt torch==2.13.0 && $(UV) $(EXTRAS); \
	fi
	$(PY) -c "import torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
	touch $(STAMP)

# The main job: first the diagnosis (which groups DP-SGD will hurt, by how much and why, predicted without
# private training), then the comparison it predicts (SGD vs DP-SGD, measured), at the same settings.
run: setup
	$(VENV)/bin/dpfair diagnose --data adult
	$(VENV)/bin/dpfair compare --data adult

# worksteal: an idle worker takes queued tests from the busy one, so the suite does not end on one worker
# running the notebooks' queue alone (seen with the default --dist load). Bytecode is written during the run even
# where PYTHONDONTWRITEBYTECODE is set (into __pycache__/, ignored by git): otherwise each of the suite's processes
# recompiles the package and pytest rewrites every test module again in each worker (collection 17.9 s -> 11.5 s).
test: setup
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q -n 2 --dist worksteal --durations=25

test-slow: setup
	$(PY) -m pytest -q -m slow

# The documentation site: warnings are errors, every reference must resolve (-W -n), notebooks rendered as
# committed (never executed), no network. Open build/docs/html/index.html.
docs: setup
	$(PY) -m sphinx -b html -W -n --keep-going -j 1 docs build/docs/html

# BASELINE=/path/to/a/checkout (e.g. `git worktree add ../base b1675e0`, the commit before issue 38) adds the
# before column: its train(), its startup, and (sweep_throughput --commands) compare --seeds 16 and the quick study.
bench: setup
	$(PY) benchmarks/per_sample_step.py --project --out benchmarks/results/per_sample_step.json
	OMP_NUM_THREADS=1 $(PY) benchmarks/sweep_throughput.py $(if $(BASELINE),--baseline $(BASELINE) --commands) \
		--out benchmarks/results/sweep_throughput.json
	OMP_NUM_THREADS=1 $(PY) benchmarks/startup_time.py $(if $(BASELINE),--baseline $(BASELINE)) \
		--out benchmarks/results/startup_time.json

# Re-executes every notebook with the full profile IN PLACE: notebooks/*.ipynb and paper_figs/
# are overwritten. Hours with an empty run cache; execute.py prints its estimate first.
figures: setup
	$(PY) notebooks/execute.py --in-place --profile full

# The full validation study of `dpfair diagnose` (issue 14): predicted vs actual per-group costs on 10 settings x
# 2 regimes x 3 noise levels x 5 seeds, beside naive predictors. Resumable (every run is cached); rewrites
# notebooks/diagnose.ipynb and paper_figs/diagnose/ with the full profile.
diagnose-study: setup
	$(PY) notebooks/execute.py diagnose --in-place --profile full

clean:
	rm -rf $(VENV) .pytest_cache

# The console blocks of README.md and the guide ($ dpfair ... and its output), rewritten from fresh runs of their
# commands (tests/test_docs.py checks them against fresh runs).
docs-console: setup
	$(PY) docs/_ext/console_blocks.py --write

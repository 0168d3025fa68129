# gitrelay: the two quick-start commands are `make demo` and `make test`.
# `make check` is the fast tier for editing: lint, type check, and every layer's tests not
# marked slow or servers (about 2 minutes on two idle cores).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Two steps, so that `make demo` installs only what gitrelay runs on and `make test` adds the
# test tools on top.
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed

.PHONY: demo install test check lint typecheck unit unit-fast bench bench-quick clean

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

demo: $(RUN_STAMP)
	$(VENV)/bin/gitrelay demo

# gitrelay on your PATH in one command (pipx or uv when present, else a venv of its own
# and a link in ~/.local/bin), then `gitrelay setup` for the coding hosts found.
install:
	@PYTHON=$(PYTHON) sh ./install.sh

lint: $(STAMP)
	@echo "== lint: ruff"
	$(VENV)/bin/ruff check gitrelay tests bench

typecheck: $(STAMP)
	@echo "== type check: mypy --strict"
	$(VENV)/bin/mypy

# The tests on every core, at most four (pytest-xdist), then the slowest tests. (make test
# runs two per core, as the whole suite mostly waits on git, servers and hosts: the fast
# tier does not, and ran no faster so: tests/maketest.py.)
XDIST := --numprocesses=auto --maxprocesses=4 --dist=worksteal
unit: $(STAMP)
	@echo "== tests: every test file, real git servers included where installed"
	$(VENV)/bin/pytest --durations=10 $(XDIST)

unit-fast: $(STAMP)
	@echo "== tests: the fast tier (not slow, not servers)"
	$(VENV)/bin/pytest -m "not slow and not servers" --durations=10 $(XDIST)

bench-quick: $(STAMP)
	@echo "== benchmark: python -m bench --quick"
	$(PY) -m bench --quick --out bench/results/quick.json

# Lint, type check, every test and the quick benchmark, each step's output as it runs,
# then one verdict line: `make test: N passed, N failed, N skipped in N s`.
test: $(STAMP)
	@$(PY) -m tests.maketest

check: lint typecheck unit-fast

bench: $(STAMP)
	$(PY) -m bench --out bench/results/full.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis bench/results

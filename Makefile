# gitrelay: the two quick-start commands are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit bench bench-quick clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/gitrelay demo

lint: $(STAMP)
	$(VENV)/bin/ruff check gitrelay tests bench

typecheck: $(STAMP)
	$(VENV)/bin/mypy

unit: $(STAMP)
	$(VENV)/bin/pytest -q

bench-quick: $(STAMP)
	$(PY) -m bench --quick --out bench/results/quick.json

test: lint typecheck unit bench-quick

bench: $(STAMP)
	$(PY) -m bench --out bench/results/full.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis bench/results

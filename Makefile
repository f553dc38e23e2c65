# Every target creates .venv and installs what it needs; nothing is installed by hand.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install test demo bench bench-quick lint typecheck clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, pinned to the CPU build on local disk, so nothing pulls a CUDA build.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider
	$(PY) -m ruff check src tests benchmarks
	$(PY) -m mypy src

lint: $(STAMP)
	$(PY) -m ruff check src tests benchmarks

typecheck: $(STAMP)
	$(PY) -m mypy src

demo: $(STAMP)
	$(PY) -m rsilab.demo

bench: $(STAMP)
	$(PY) -m benchmarks

bench-quick: $(STAMP)
	$(PY) -m benchmarks --quick

clean:
	rm -rf $(VENV) .rsilab .rsilab-demo

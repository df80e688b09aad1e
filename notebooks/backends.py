# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (backends)=
# # Backends: same answers, faster?
#
# Every chapter can run on three inference backends (`longctx.backends`): `hf`
# (transformers in torch, the engine behind every committed row), `llamacpp` (llama.cpp in
# process on the GGUF file itself) and `openai` (any OpenAI-compatible server: vLLM,
# SGLang, llama.cpp's own). All three read byte-identical prompts (the model's chat
# template and tokenizer, fillers included) and decode greedily with the same stop rules.
# They are still different numerics: `hf` dequantizes the Q4_K_M weights and computes in
# bfloat16 or float32, llama.cpp computes on the quantized blocks. So a user who switches
# backend needs two numbers: **how often the answers change, and whether accuracy does**.
# This page measures both on committed prompts of two chapters, and the speed of each
# backend in one benchmark run.

# %% [markdown]
# ## What we found
#
# * **The two backends give the same answer to {glue:text}`be-identical` of the prompts,
#   and accuracy within a few points.** Over {glue:text}`be-prompts` committed prompts
#   ({glue:text}`be-examples` examples), llama.cpp scored {glue:text}`be-acc-llamacpp` and hf
#   (float32, the committed rows) {glue:text}`be-acc-hf`, a paired difference of
#   {glue:text}`be-difference`: the interval rules out a change of more than 3 points
#   either way (a margin chosen here, not in advance). Every key-value answer was identical; the
#   {glue:text}`be-differ` answers that differ are all in multi-document QA, where hf's is
#   right in {glue:text}`be-differ-hf-right` and llama.cpp's in
#   {glue:text}`be-differ-llamacpp-right`: free-text answers of a 0.5B model part ways on
#   near-ties between tokens, in both directions. Long answers part ways more often: in the
#   VarSum benchmark, {glue:text}`be-varsum-same` of {glue:text}`be-varsum-prompts` answers
#   were the same, at the same accuracy.
# * **On the benchmark's CPU llama.cpp is not faster than the hf engine.** Key-value prompts
#   (reading dominates): {glue:text}`be-kv-llamacpp` the hf engine; VarSum (writing
#   dominates): {glue:text}`be-varsum-llamacpp`. The benchmark machine's CPU has native
#   bfloat16 (AVX512-BF16),
#   where `dtype="auto"` runs torch in bfloat16 and its matrix products are as fast as
#   llama.cpp's 4-bit kernels; and the hf engine decodes {glue:text}`be-hf-batch` sequences
#   per step while llama-cpp-python's API decodes one. The hf engine itself is
#   {glue:text}`be-varsum-hf-naive` the plain `model.generate` loop on VarSum (stop rules
#   and batching) and {glue:text}`be-kv-hf-naive` on key-value prompts, whose answers end at
#   once anyway. On a CPU where bfloat16 is slow, the hf engine runs in **float32**, where
#   llama.cpp's 4-bit kernels can be the faster; `make bench` tells which case a machine is.
# * **llama.cpp's prefix cache is not worth its side effect here.** Reusing the prefix a
#   prompt shares with the previous one saved {glue:text}`be-prefix-kv` of the time on
#   key-value prompts and {glue:text}`be-prefix-varsum` on VarSum (the chapters' prompts
#   share only their instructions), but {glue:text}`be-prefix-changed` of
#   {glue:text}`be-prefix-prompts` long VarSum answers changed with it: a prompt read in two
#   pieces is rounded differently. So the backend reads every prompt from an empty cache
#   (an answer does not depend on which prompts ran before it); `prefix_cache=True`
#   turns reuse on. The committed `llamacpp` rows and the benchmark's llama.cpp arm above
#   were made with reuse on.
# * **The `openai` client** through a local llama.cpp server ran at
#   {glue:text}`be-kv-openai` and {glue:text}`be-varsum-openai` the hf engine here (that
#   server answers one request at a time); its purpose is vLLM and SGLang on GPUs, which
#   batch the client's concurrent requests.
# * **The default stays `hf`**: it is as fast or faster on that CPU, every committed row is
#   an `hf` row (a switch would regenerate every chapter), and masked padding and attention
#   need the weights in torch. Use `backend="llamacpp"` on CPUs without fast bfloat16, and
#   `backend="openai"` with vLLM or SGLang at scale (README, "Run at scale").

# %% tags=["parameters", "remove-cell"]
model = "qwen2.5-coder-0.5b-instruct"
results_dir = "data/results"  # the committed generations
bench_file = "data/bench/backends-cpu.json"  # written by `make bench`
# llama.cpp with (arm "llamacpp") and without ("llamacpp_cold") reuse of a shared prefix
prefix_file = "data/bench/llamacpp-prefix-cpu.json"

# %% tags=["remove-cell"]
from longctx import backend_comparison as page
from longctx.page import check_statements, glue_figure
from longctx.paths import resolve
from longctx.report import glue_all, show

view = page.analysis(model, resolve(results_dir), bench_file, prefix_file)
glue_all(view.quoted)
glue_figure("fig-backends", page.figure(view), page.figure_text(view))

# %% [markdown]
# ```{glue:md} fig-backends
# :format: myst
# ```

# %% [markdown]
# ## Agreement on committed prompts
#
# The rows come from the book-scale plans of two chapters: key-value retrieval at 10 and 30
# pairs (every depth, with and without query-aware contextualization) and multi-document QA
# closed-book, oracle and 10 documents. The `hf` rows are the committed ones (CPU,
# float32); the `llamacpp` rows were generated with
# `longctx reproduce --chapters kv_retrieval multidoc_qa --backend llamacpp --only "10 pairs"
# "30 pairs" closed-book "10 documents"` and are committed in
# `data/results/qwen2.5-coder-0.5b-instruct--llamacpp/`. The difference is paired: each
# example's accuracy over its prompts under one backend minus the other, so an example
# seen at five depths counts once.

# %% tags=["hide-input"]
show(*page.agreement_table(view), caption=page.AGREEMENT_CAPTION)

# %% [markdown]
# (backends-speed)=
# ## Speed
#
# `make bench` (`scripts/bench_backends.py`) sends the same prompts through four paths in
# one run, one computing at a time: a plain one-prompt-at-a-time `model.generate` loop
# with no stop rule (the baseline one writes first), the `hf` engine (length-sorted
# batches, stop at the answer), llama.cpp in process, and the `openai` client against a
# local llama.cpp server, which is how the same client drives vLLM or SGLang at scale. Two
# workloads, because the backends differ in the phase that dominates: key-value prompts
# (about 1,400 tokens in, one UUID out: reading the prompt dominates) and VarSum with no
# filler (a short prompt and up to 512 tokens of working: writing dominates).

# %% tags=["hide-input"]
show(*page.speed_table(view), caption=page.SPEED_CAPTION)

# %% [markdown]
# (backends-readers)=
# ## Speed of a reader's claims
#
# What a new reader's claims cost on a CPU, and which backend to run them on, comes from
# `scripts/bench_readers.py`: it sends the same claims-scale prompts (the competition's
# matched control and 20-document QA) through each model and backend by the runner itself,
# and `longctx reproduce --scale claims --dry-run` reads its file to estimate each claim's
# time. A reader runs its claims on the faster backend of its model, and a model keeps one
# column for every claim once its rows have started on one backend.

# %% tags=["hide-input"]
show(*page.readers_table(), caption=page.READERS_CAPTION)

# %% [markdown]
# (backends-gpu)=
# ## Throughput on a GPU
#
# The committed rows made on a GPU (transformers engine, length-sorted batches within a
# token budget) say how fast each reader read each chapter's prompts there, from their own
# timings. The rate counts decoding in, and a batch waits for its longest answer, so a
# store of short prompts with some long answers reads fewer prompt tokens per second than
# one whose answers are a few tokens.

# %% tags=["hide-input"]
show(*page.gpu_throughput_table(resolve(results_dir)), caption=page.GPU_CAPTION)

# %% tags=["remove-cell"]
check_statements("backends", view.said, view.book_run)

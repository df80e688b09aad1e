"""Final-token attention equals eager output_attentions; ABS on hand-worked vectors."""

import pytest
import torch

from longctx.attention import attention_balance_score
from longctx.backends.hf_attention import eager_final_token_attention, final_token_attention
from longctx.errors import ParameterError
from tiny import tiny_config


def _tiny(kind: str):
    import transformers as tf

    torch.manual_seed(0)
    common = tiny_config(num_hidden_layers=3, max_position_embeddings=256)
    if kind == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(**common))
    elif kind == "llama":
        model = tf.LlamaForCausalLM(tf.LlamaConfig(**common))
    elif kind == "gemma3":
        # q/k norms, query_pre_attn_scalar scaling, a sliding window shorter than the prompt
        cfg = tf.Gemma3TextConfig(
            **common,
            head_dim=16,
            sliding_window=8,
            query_pre_attn_scalar=24,
            layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        )
        model = tf.Gemma3ForCausalLM(cfg)
    elif kind == "gemma2":
        # attention logit soft-capping
        cfg = tf.Gemma2Config(
            **common,
            head_dim=16,
            attn_logit_softcapping=5.0,
            sliding_window=8,
            query_pre_attn_scalar=16,
            layer_types=["full_attention", "sliding_attention", "full_attention"],
        )
        model = tf.Gemma2ForCausalLM(cfg)
    # Soft-capped Gemma2 has no SDPA path in transformers; it keeps eager (the capture does not care).
    model.set_attn_implementation("eager" if kind == "gemma2" else "sdpa")
    return model.eval()


@pytest.mark.parametrize("kind", ["qwen2", "llama", "gemma3", "gemma2"])
@pytest.mark.parametrize("layer", [-1, 0, 1])
def test_matches_eager_output_attentions(kind, layer):
    model = _tiny(kind)
    ids = torch.randint(0, 97, (23,), generator=torch.Generator().manual_seed(1))
    fast = final_token_attention(model, ids, layer=layer)
    ref = eager_final_token_attention(model, ids, layer=layer)
    assert fast.shape == (23,)
    assert torch.allclose(fast, ref, atol=1e-4), (fast - ref).abs().max()
    assert fast.sum().item() == pytest.approx(1.0, abs=1e-5)
    # Restored
    assert model.config._attn_implementation == ("eager" if kind == "gemma2" else "sdpa")


@pytest.mark.parametrize("kind", ["qwen2", "gemma3"])
def test_several_layers_in_one_pass_are_the_mean_of_each(kind):
    model = _tiny(kind)
    ids = torch.randint(0, 97, (19,), generator=torch.Generator().manual_seed(2))
    layers = [1, -1]
    mean = final_token_attention(model, ids, layer=layers)
    each = [eager_final_token_attention(model, ids, layer=i) for i in layers]
    assert torch.allclose(mean, torch.stack(each).mean(0), atol=1e-4)
    assert mean.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_sliding_window_layer_ignores_old_tokens():
    model = _tiny("gemma3")
    ids = torch.arange(30) % 97
    row = final_token_attention(model, ids, layer=1)  # sliding window of 8
    assert torch.all(row[:-8] == 0) and torch.all(row[-8:] > 0)


def test_rejects_batches_and_bad_layers():
    model = _tiny("qwen2")
    with pytest.raises(ParameterError, match="one sequence"):
        final_token_attention(model, torch.zeros(2, 5, dtype=torch.long))
    with pytest.raises(ParameterError, match="outside"):
        final_token_attention(model, [1, 2, 3], layer=7)
    with pytest.raises(ParameterError, match="at least one layer"):
        final_token_attention(model, [1, 2, 3], layer=[])


def test_abs_hand_worked():
    # all mass on the first token: mu = 0, ABS = 0; on the last: mu = 1, ABS = 0
    assert attention_balance_score([1, 0, 0, 0, 0]) == 0.0
    assert attention_balance_score([0, 0, 0, 0, 2]) == 0.0
    # uniform: mu = 0.5, ABS = 1; all on the middle token of five: mu = 0.5
    assert attention_balance_score([1, 1, 1, 1, 1]) == pytest.approx(1.0)
    assert attention_balance_score([0, 0, 3, 0, 0]) == pytest.approx(1.0)
    # T = 5, positions 0, .25, .5, .75, 1; a = (.5, .5, 0, 0, 0): mu = .125, ABS = 1 - 2 * .375 = .25
    assert attention_balance_score([0.5, 0.5, 0, 0, 0]) == pytest.approx(0.25)
    # unnormalized weights give the same score: a = (2, 0, 0, 6) -> mu = 6/8 = .75, ABS = .5
    assert attention_balance_score([2, 0, 0, 6]) == pytest.approx(0.5)


def test_abs_rejects_bad_vectors():
    for bad in ([1.0], [0, 0, 0], [1, -1, 2]):
        with pytest.raises(ParameterError):
            attention_balance_score(bad)


def test_a_backend_without_attention_has_it_computed_from_the_same_weights_in_torch(tmp_path):
    """A llama.cpp reader's attention block (C-NORM's delimiter selection) runs on the same
    weights through hf and is stored in the reader's own store, keyed by the weights, so the
    second stage it chooses runs on llama.cpp."""
    from longctx.attention import attention_key
    from longctx.reader import Reader
    from longctx.runner import Block, attention_reader, run

    reader = Reader("smollm2-135m-instruct", "llamacpp")
    assert attention_reader(reader).backend.name == "hf"
    assert attention_reader(Reader("smollm2-135m-instruct")) == Reader("smollm2-135m-instruct")
    items = [{"prompt": "Which key holds 7? a: 3, b: 7.", "candidate": "none", "sample": 0}]
    block = Block("selection", "sel", [], True, attention=items)
    report = run([block], reader, tmp_path, progress=False, log=lambda _: None)
    assert report.complete
    rows = reader.store(tmp_path, "sel").rows()
    key = attention_key(reader.ref.fingerprint, items[0]["prompt"], "auto", -1, False)
    assert [r["key"] for r in rows] == [key] and 0 <= rows[0]["abs"]


def test_an_attention_block_gives_each_document_its_share_over_several_layers(tmp_path):
    """The mitigations chapter's attention stage: an item listing its documents gets each
    one's share of the final token's attention, averaged over the block's layers, in a row
    keyed by its documents and layers (and found again by that key)."""
    from longctx.attention import attention_key
    from longctx.reader import Reader
    from longctx.runner import Block, content_key, run

    reader = Reader("smollm2-135m-instruct")
    docs = [
        "Document [1](Title: Rome) Rome is in Italy.",
        "Document [2](Title: Oslo) Oslo is cold.",
    ]
    items = [{"prompt": "\n".join(docs) + "\nQuestion: where is Rome?", "documents": docs}]
    block = Block("mass", "att", [], True, attention=items, attention_layer=(-2, -1))
    run([block], reader, tmp_path, progress=False, log=lambda _: None)
    (row,) = reader.store(tmp_path, "att").rows()
    key = attention_key(reader.ref.fingerprint, items[0]["prompt"], "auto", (-2, -1), False, docs)
    assert row["key"] == key == content_key(row) and row["layer"] == [-2, -1]
    mass = row["document_mass"]
    assert len(mass) == 2 and all(0 < m < 1 for m in mass) and sum(mass) < 1
    again = run([block], reader, tmp_path, progress=False, log=lambda _: None)
    assert again.blocks[0]["stored"] == 1 and again.blocks[0]["generated"] == 0

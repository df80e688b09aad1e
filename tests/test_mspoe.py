"""Ms-PoE on tiny random models: with every ratio 1 it computes what the model computes;
with one ratio r for every head it is RoPE with frequencies divided by r; heads are ranked
by how many keys their last query singles out."""

import pytest
import torch

from longctx.backends.hf_mspoe import head_ratios, multiscale_positions, outlier_share
from longctx.errors import ParameterError
from tiny import tiny_config


def _tiny(kind: str):
    import transformers as tf

    torch.manual_seed(0)
    common = tiny_config(num_hidden_layers=3, max_position_embeddings=256)
    cls = {
        "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config),
        "llama": (tf.LlamaForCausalLM, tf.LlamaConfig),
    }
    model = cls[kind][0](cls[kind][1](**common))
    model.set_attn_implementation("sdpa")
    return model.eval()


IDS = torch.tensor([[5, 17, 3, 88, 41, 9, 60, 2, 33, 71, 12, 50, 8, 90, 26, 4]])


@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_every_ratio_one_gives_the_models_own_logits_and_greedy_answer(kind):
    model = _tiny(kind)
    with torch.inference_mode():
        plain = model(IDS).logits
        plain_gen = model.generate(IDS, max_new_tokens=6, do_sample=False)
        with multiscale_positions(model, 1.0, 1.0, layers=range(3)):
            patched = model(IDS).logits
            patched_gen = model.generate(IDS, max_new_tokens=6, do_sample=False)
        after = model(IDS).logits  # the hooks are gone
    assert torch.allclose(patched, plain, atol=1e-5)
    assert torch.equal(patched_gen, plain_gen)
    assert torch.equal(after, plain)


def test_one_ratio_for_every_head_is_rope_with_slower_frequencies():
    model = _tiny("qwen2")
    with torch.inference_mode():
        with multiscale_positions(model, 2.0, 2.0, layers=range(3)):
            scaled = model(IDS).logits
        rotary = model.model.rotary_emb
        saved = rotary.inv_freq.clone()
        rotary.inv_freq = saved / 2.0
        try:
            slower = model(IDS).logits
        finally:
            rotary.inv_freq = saved
        plain = model(IDS).logits
    assert torch.allclose(scaled, slower, atol=1e-5)
    assert not torch.allclose(scaled, plain, atol=1e-3)


@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_the_paper_ratios_keep_attention_relative_under_grouped_query_attention(kind):
    """RoPE, scaled or not, makes a query and a key meet by their distance only, so moving
    every position by the same amount changes nothing: that holds only if each query head is
    rotated with the ratio of the key head it reads (four query heads over two key heads)."""
    model = _tiny(kind)
    positions = torch.arange(IDS.shape[1])[None]
    with torch.inference_mode(), multiscale_positions(model, layers=range(3)):
        here = model(IDS, position_ids=positions).logits
        moved = model(IDS, position_ids=positions + 50).logits
    assert torch.allclose(here, moved, atol=1e-4)


def test_the_paper_ratios_change_the_reading_only_in_the_layers_they_patch():
    model = _tiny("qwen2")
    with torch.inference_mode():
        plain = model(IDS).logits
        with multiscale_positions(model, layers=[]):
            untouched = model(IDS).logits
        with multiscale_positions(model):  # layers 2.. of 3: one layer
            one_layer = model(IDS).logits
    assert torch.equal(untouched, plain) and not torch.allclose(one_layer, plain, atol=1e-4)


def test_heads_that_single_out_keys_keep_the_smallest_ratios():
    flat = torch.zeros(1, 40)
    peaked = torch.zeros(1, 40)
    peaked[0, [3, 17]] = 8.0  # two keys far above the rest
    share = outlier_share(torch.cat([flat, peaked, flat]))
    assert share.tolist() == pytest.approx([0.0, 2 / 40, 0.0])
    ratios = head_ratios(torch.tensor([0.0, 0.05, 0.01, 0.0]), 1.2, 1.8)
    # ranks: head 1 (0.05), head 2 (0.01), then heads 0 and 3 by index
    assert ratios.tolist() == pytest.approx([1.5, 1.2, 1.35, 1.65])


def test_ms_poe_refuses_a_batch_and_impossible_ratios():
    model = _tiny("qwen2")
    with pytest.raises(ParameterError, match="1 <= low <= high"):
        with multiscale_positions(model, 1.8, 1.2):
            pass
    with pytest.raises(ParameterError, match="one prompt at a time"):
        with torch.inference_mode(), multiscale_positions(model):
            model(torch.cat([IDS, IDS]))


def test_a_block_read_with_ms_poe_goes_through_the_runner_with_keys_of_its_own(tmp_path):
    """Through the runner on a shipped reader: ratios of 1 answer as the plain reader does;
    the rows record the ratios, their requests say so in the condition, and a backend
    without rescaled positions refuses in one line before loading anything."""
    from dataclasses import replace

    from longctx.errors import CapabilityError
    from longctx.reader import Reader
    from longctx.requests import Request, StopRule
    from longctx.runner import Block, positions_label, run

    reader = Reader("smollm2-135m-instruct")
    plain = [
        Request("t", f"q{i}", f"Name a colour that starts with {c}.", (), {"n": i}, 8, StopRule())
        for i, c in enumerate("BGR")
    ]
    label = positions_label((1.0, 1.0))
    rescaled = [replace(r, condition={**r.condition, "positions": label}) for r in plain]
    blocks = [
        Block("plain", "p", plain),
        Block("ms-poe", "m", rescaled, positions=(1.0, 1.0)),
    ]
    run(blocks, reader, tmp_path, batch_size=1, progress=False, log=lambda _: None)
    before = [r["output"] for r in reader.store(tmp_path, "p").rows()]
    after = reader.store(tmp_path, "m").rows()
    assert [r["output"] for r in after] == before
    assert all(r["params"]["positions"] == [1.0, 1.0] for r in after)
    with pytest.raises(
        ParameterError, match="positions='ms-poe 1-1 per key head' in its condition"
    ):
        run([Block("bad", "b", plain, positions=(1.0, 1.0))], reader, tmp_path, progress=False)
    with pytest.raises(CapabilityError, match="Ms-PoE"):
        run(
            [Block("cpp", "c", rescaled, positions=(1.0, 1.0))],
            Reader(reader.model, "llamacpp"),
            tmp_path,
            progress=False,
            log=lambda _: None,
        )

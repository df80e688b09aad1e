"""Filler construction, and masked gaps equal an explicit attention mask over the filler."""

from dataclasses import dataclass

import pytest
import torch

from longctx.backends.hf_engine import generate, masked_inputs
from longctx.errors import ContextTooLongError, ParameterError
from longctx.padding import FillerMaker, masked_gap, split_masked
from longctx.requests import GenerateCall, StopRule
from tiny import tiny_config


class CharTokenizer:
    """One token per character (ids 1..96), enough to drive a tiny random model."""

    pad_token_id = 0
    eos_token_id = 96

    def __call__(self, text, add_special_tokens=False):
        @dataclass
        class Enc:
            input_ids: list

        return Enc([1 + (ord(c) % 90) for c in text])

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(ord(" ") + i) for i in ids if i not in (0, 96))


@dataclass
class TinyLM:
    model: object
    tokenizer: object
    device: str = "cpu"
    max_context: int = 512
    name: str = "tiny"

    def check_fits(self, n, new, label="prompt"):
        if n + new > self.max_context:
            raise ContextTooLongError(f"{label}: {n} + {new} > {self.max_context}")


def _tiny(kind="qwen2"):
    import transformers as tf

    torch.manual_seed(0)
    common = tiny_config(
        num_hidden_layers=2, max_position_embeddings=512, eos_token_id=96, pad_token_id=0
    )
    cls = {
        "qwen2": (tf.Qwen2ForCausalLM, tf.Qwen2Config),
        "llama": (tf.LlamaForCausalLM, tf.LlamaConfig),
    }[kind]
    model = cls[0](cls[1](**common))
    model.set_attn_implementation("sdpa")
    return model.eval()


@pytest.mark.parametrize("kind", ["qwen2", "llama"])
def test_shifted_positions_equal_explicit_mask(kind):
    """Logits of [prefix][masked filler][question] computed two ways: the full input with the
    filler masked out of the attention, and the short input with the question's positions
    shifted by the filler length. They must agree at every question position."""
    model = _tiny(kind)
    g = torch.Generator().manual_seed(3)
    prefix, filler, question = (torch.randint(1, 96, (n,), generator=g) for n in (11, 37, 9))
    full = torch.cat([prefix, filler, question])[None]
    mask = torch.cat([torch.ones(11), torch.zeros(37), torch.ones(9)]).long()[None]
    with torch.no_grad():
        ref = model(full, attention_mask=mask, position_ids=torch.arange(57)[None]).logits[0, -9:]
        short = torch.cat([prefix, question])[None]
        pos = torch.tensor([list(range(11)) + list(range(48, 57))])
        ours = model(short, position_ids=pos).logits[0, -9:]
        unshifted = model(short).logits[0, -9:]
    assert torch.allclose(ours, ref, atol=1e-5), (ours - ref).abs().max()
    # The shift matters: positions are really moved
    assert not torch.allclose(unshifted, ref, atol=1e-3)


def _explicit_greedy(model, tok, prompt, steps):
    """Reference decoding of a prompt with at most one masked gap: the filler is really
    there (token 5 repeated) and masked out; the whole sequence is recomputed at every step,
    no cache, no position tricks. Returns the decoded new text."""
    segments, gaps = split_masked(prompt)
    ids = tok("".join(segments)).input_ids
    gap_at, gap = len(tok(segments[0]).input_ids), sum(gaps)
    seq = ids[:gap_at] + [5] * gap + ids[gap_at:]
    keep = [1] * gap_at + [0] * gap + [1] * (len(ids) - gap_at)
    out = []
    for _ in range(steps):
        with torch.no_grad():
            logits = model(
                torch.tensor([seq]),
                attention_mask=torch.tensor([keep]),
                position_ids=torch.arange(len(seq))[None],
            ).logits
        t = int(logits[0, -1].argmax())
        out.append(t)
        seq.append(t)
        keep.append(1)
    return tok.decode(out)


def test_masked_generation_matches_explicit_mask_end_to_end():
    model, tok = _tiny(), CharTokenizer()
    lm = TinyLM(model, tok)
    prompts = [
        "evidence: x=3" + masked_gap(40) + "question?",
        "ab" + masked_gap(7) + "cd",
        "no gap at all here",
    ]
    gens = generate(
        lm,
        GenerateCall(
            prompts,
            max_new_tokens=6,
            stop_rules=StopRule(newline=False),
            batch_size=3,
            progress=False,
        ),
    )
    for prompt, gen in zip(prompts, gens):
        assert gen.raw_text == _explicit_greedy(model, tok, prompt, 6)
        segments, gaps = split_masked(prompt)
        ids = tok("".join(segments)).input_ids
        assert gen.prompt_tokens == len(ids) + sum(gaps)
        want_extra = {"computed_prompt_tokens": len(ids), "masked_tokens": sum(gaps)}
        assert gen.extra == (want_extra if sum(gaps) else {})


def test_generate_batches_masked_with_plain_prompts_and_keeps_order():
    model, tok = _tiny(), CharTokenizer()
    lm = TinyLM(model, tok)
    prompts = ["plain prompt", "masked" + masked_gap(9) + "prompt", "another plain one"]
    seen = []
    gens = generate(
        lm,
        GenerateCall(
            prompts,
            max_new_tokens=4,
            stop_rules=StopRule(newline=False),
            batch_size=2,
            progress=False,
            on_batch=lambda idx, g: seen.extend(idx),
        ),
    )
    assert sorted(seen) == [0, 1, 2]
    assert gens[1].extra["masked_tokens"] == 9 and not gens[0].extra and not gens[2].extra
    alone = generate(
        lm,
        GenerateCall(
            [prompts[1]], max_new_tokens=4, stop_rules=StopRule(newline=False), progress=False
        ),
    )
    assert gens[1].raw_text == alone[0].raw_text  # batching does not change a row


def test_masked_length_counts_against_the_window():
    lm = TinyLM(_tiny(), CharTokenizer(), max_context=100)
    with pytest.raises(ContextTooLongError, match="masked gaps"):
        generate(lm, GenerateCall(["abc" + masked_gap(95) + "d"], max_new_tokens=4, progress=False))


def test_a_finished_row_leaves_the_batch_without_changing_the_others():
    """Row 0 stops after one token (its rule fires on any character) and leaves the batch; the
    rows still answering decode exactly what a cache-free full recomputation gives."""
    model, tok = _tiny(), CharTokenizer()
    lm = TinyLM(model, tok)
    prompts = ["a short one", "the second prompt, longer", "x" + masked_gap(12) + "third"]
    rules = [StopRule(newline=False, answer_pattern=".")] + [StopRule(newline=False)] * 2
    gens = generate(
        lm, GenerateCall(prompts, max_new_tokens=8, stop_rules=rules, batch_size=3, progress=False)
    )
    assert gens[0].new_tokens == 1 and gens[0].stop_reason == "stop_rule"
    assert {g.batch_size for g in gens} == {3}
    for prompt, gen in zip(prompts[1:], gens[1:]):
        assert gen.raw_text == _explicit_greedy(model, tok, prompt, 8)


def test_masked_inputs_positions():
    ids, pos = masked_inputs(CharTokenizer(), "ab" + masked_gap(10) + "cde" + masked_gap(3) + "f")
    assert len(ids) == 6
    assert pos == [0, 1, 12, 13, 14, 18]


def test_split_masked_and_zero_gap():
    assert masked_gap(0) == ""
    assert split_masked("a" + masked_gap(4) + "b") == (["a", "b"], [4])
    with pytest.raises(ParameterError):
        masked_gap(-1)


class SpaceMergingTokenizer:
    """Merges runs of up to 16 spaces into one token, one token per other character."""

    def __call__(self, text, add_special_tokens=False):
        import re

        @dataclass
        class Enc:
            input_ids: list

        ids = []
        for m in re.finditer(r" {1,16}|[^ ]", text):
            ids.append(1000 + len(m.group(0)) if m.group(0).startswith(" ") else ord(m.group(0)))
        return Enc(ids)

    def decode(self, ids):
        return "".join(" " * (i - 1000) if i > 1000 else chr(i) for i in ids)


def test_whitespace_filler_has_the_exact_token_count():
    maker = FillerMaker(SpaceMergingTokenizer(), essay_text="word " * 5000)
    assert maker.whitespace_unit == " " * 16
    for n in (1, 10, 333):
        f = maker.make("whitespace", n)
        assert f.n_tokens == n and set(f.text) == {" "}


def test_essay_filler_is_a_prefix_of_the_essays_with_the_asked_length():
    essay = "".join(f"Sentence {i} of the essay. " for i in range(3000))
    maker = FillerMaker(SpaceMergingTokenizer(), essay_text=essay)
    f = maker.make("essay", 500)
    assert f.n_tokens == 500 and essay.startswith(f.text)
    assert maker.make("essay", 200).text == f.text[: len(maker.make("essay", 200).text)]
    with pytest.raises(ParameterError, match="holds only"):
        maker.make("essay", 10**6)


def test_mask_and_zero_fillers():
    maker = FillerMaker(SpaceMergingTokenizer(), essay_text="x")
    assert maker.make("mask", 30).text == masked_gap(30) and maker.make("mask", 30).n_tokens == 30
    assert maker.make("essay", 0).text == "" and maker.make("whitespace", 0).n_tokens == 0
    with pytest.raises(ParameterError, match="unknown filler"):
        maker.make("noise", 5)
    with pytest.raises(ParameterError, match="non-negative"):
        maker.make("essay", -3)


def test_real_tokenizer_fillers(smollm2):
    maker = FillerMaker(smollm2.tokenizer)
    for kind in ("essay", "whitespace"):
        f = maker.make(kind, 300)
        assert abs(f.n_tokens - 300) <= 2, (kind, f.n_tokens)
    assert maker.make("essay", 50).text.startswith("April 2012")


class MergingTokenizer(CharTokenizer):
    """Like CharTokenizer, but a run of spaces or newlines is one token (as BPE merges them)."""

    def __call__(self, text, add_special_tokens=False):
        import re as _re

        @dataclass
        class Enc:
            input_ids: list

        ids = []
        for m in _re.finditer(r" +|\n+|.", text, flags=_re.S):
            piece = m.group(0)
            ids.append(1 + (ord(piece[0]) % 90) if len(piece) == 1 else 90 + (ord(piece[0]) % 5))
        return Enc(ids)


@pytest.mark.parametrize("kind,unit", [("space_tokens", " "), ("newline_tokens", "\n")])
def test_token_level_filler_is_exactly_n_single_tokens(kind, unit):
    """Text filler of n spaces would merge into one token; the token-level filler is n copies
    of the single-space (newline) token, spliced between the separately tokenized parts."""
    from longctx.padding import encode_prompt, filler_slot

    tok = MergingTokenizer()
    assert len(tok(unit * 50).input_ids) == 1  # why text filler cannot do this
    prompt = f"evidence{filler_slot(kind, 50)}question"
    ids = encode_prompt(tok, prompt)
    one = tok(unit).input_ids[0]
    assert ids == tok("evidence").input_ids + [one] * 50 + tok("question").input_ids
    assert encode_prompt(tok, "no filler here") == tok("no filler here").input_ids
    assert filler_slot(kind, 0) == "" and FillerMaker(tok).make(kind, 7).n_tokens == 7


def test_token_level_filler_needs_a_single_token_unit():
    from longctx.padding import encode_prompt, filler_slot

    class Split(CharTokenizer):
        def __call__(self, text, add_special_tokens=False):
            enc = super().__call__(text)
            enc.input_ids = enc.input_ids * 2 if text == " " else enc.input_ids
            return enc

    with pytest.raises(ParameterError, match="single space as 2 tokens"):
        encode_prompt(Split(), "a" + filler_slot("space_tokens", 3) + "b")


def test_token_level_filler_reaches_the_model_in_generate():
    """The engine counts the filler tokens in the prompt length it reports."""
    from longctx.padding import filler_slot

    lm = TinyLM(_tiny(), MergingTokenizer())
    (short,) = generate(
        lm,
        GenerateCall(
            ["evidence question"],
            max_new_tokens=2,
            stop_rules=StopRule(newline=False),
            progress=False,
        ),
    )
    (padded,) = generate(
        lm,
        GenerateCall(
            ["evidence " + filler_slot("space_tokens", 40) + "question"],
            max_new_tokens=2,
            stop_rules=StopRule(newline=False),
            progress=False,
        ),
    )
    assert padded.prompt_tokens == short.prompt_tokens + 40


def test_whitespace_placeholder_becomes_unit_ids_without_tokenizing_the_spaces():
    """The engine splices n copies of the whitespace unit's id instead of tokenizing n units
    of text (megabytes of spaces at 16K tokens); essay placeholders are still expanded to text."""
    from longctx.padding import encode_prompt, expand_fillers, filler_slot

    tok = SpaceMergingTokenizer()
    prompt = "evidence\n" + filler_slot("whitespace", 40) + "\nquestion"
    assert expand_fillers(prompt, tok) == prompt  # left for encode_prompt
    unit = tok(FillerMaker(tok).whitespace_unit).input_ids
    assert len(unit) == 1
    assert (
        encode_prompt(tok, prompt)
        == tok("evidence\n").input_ids + unit * 40 + tok("\nquestion").input_ids
    )

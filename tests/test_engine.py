import pytest

from longctx.backends.hf_engine import _buckets
from longctx.requests import GenerateCall, StopRule
from longctx.tasks.kv_retrieval import UUID_PATTERN

KEY = "9f4a92b9-5f69-4725-ba1e-403f08dea695"
VALUE = "703a7ce5-f17f-4e6d-b895-5836ba5ec71c"


def test_newline_rule_waits_for_non_empty_output():
    rule = StopRule()
    assert rule.cut("\n\n  Paris\nmore") == ("\n\n  Paris", True)
    assert rule.cut("Paris") == ("Paris", False)
    assert rule.cut("\n \n") == ("\n \n", False)


def test_uuid_rule_never_stops_inside_the_echoed_key():
    rule = StopRule(answer_pattern=UUID_PATTERN, echoes=(KEY,))
    partial = f'The value for "{KEY}" is "{VALUE[:20]}'
    assert rule.cut(partial) == (partial, False)  # the echoed key alone does not end the answer
    done = f'The value for "{KEY}" is "{VALUE}". Also'
    assert rule.cut(done) == (f'The value for "{KEY}" is "{VALUE}', True)


def test_echo_only_line_is_not_the_answer_line():
    rule = StopRule(answer_pattern=None, echoes=(KEY,))
    text = f'Key: "{KEY}"\n{VALUE}\nrest'
    assert rule.cut(text) == (f'Key: "{KEY}"\n{VALUE}', True)
    # without the echo guard the first line would end the answer
    assert StopRule().cut(text)[0] == f'Key: "{KEY}"'


def test_lead_in_line_ending_with_a_colon_is_not_the_answer_line():
    # SmolLM2's habit: announce the value, then give it on the next line.
    text = f"The value corresponding to the specified key is:\n\n{VALUE}\nmore"
    assert StopRule().cut(text) == (
        f"The value corresponding to the specified key is:\n\n{VALUE}",
        True,
    )
    assert StopRule().cut("**Answer:**\nParis\n") == ("**Answer:**\nParis", True)
    assert StopRule().cut("Paris: the capital\nmore") == ("Paris: the capital", True)
    assert StopRule().cut("```\nParis\n```") == ("```\nParis", True)


def test_buckets_sort_by_length_and_cover_everything():
    lengths = [5, 1, 9, 3, 7]
    batches = _buckets(lengths, 2)
    assert batches == [[1, 3], [0, 4], [2]]
    assert sorted(i for b in batches for i in b) == list(range(5))


@pytest.mark.model
def test_batched_equals_unbatched(smollm2):
    from longctx.backends.hf_engine import generate
    from longctx.tasks import kv_retrieval as kv

    reqs = kv.make_requests(kv.synthetic_examples(3, 4, seed=5), [0.0, 1.0])
    prompts = [smollm2.render(r.prompt) for r in reqs]
    rules = [r.stop for r in reqs]
    one = generate(
        smollm2,
        GenerateCall(prompts, max_new_tokens=40, stop_rules=rules, batch_size=1, progress=False),
    )
    many = generate(
        smollm2,
        GenerateCall(prompts, max_new_tokens=40, stop_rules=rules, batch_size=4, progress=False),
    )
    assert [g.text for g in one] == [g.text for g in many]
    assert [g.prompt_tokens for g in one] == [g.prompt_tokens for g in many]
    assert {g.batch_size for g in many} == {4, 2}
    assert all(g.new_tokens <= 40 for g in many)


@pytest.mark.model
def test_too_long_prompt_fails_before_generating(smollm2):
    from longctx.backends.hf_engine import generate
    from longctx.errors import ContextTooLongError

    long_prompt = "word " * 9000  # SmolLM2's window is 8,192 tokens
    with pytest.raises(
        ContextTooLongError, match="over the 8192-token window of smollm2-135m-instruct"
    ):
        generate(smollm2, GenerateCall(["short", long_prompt], max_new_tokens=8, progress=False))


@pytest.mark.model
def test_decoding_equals_transformers_generate(smollm2):
    """Our cache loop (rows leave the batch as they finish) gives the tokens transformers'
    own greedy ``generate`` gives, prompt by prompt."""
    import torch

    from longctx.backends.hf_engine import generate
    from longctx.tasks import kv_retrieval as kv

    reqs = kv.make_requests(kv.synthetic_examples(2, 4, seed=9), [0.0, 1.0])
    prompts = [smollm2.render(r.prompt) for r in reqs]
    ours = generate(
        smollm2,
        GenerateCall(
            prompts,
            max_new_tokens=24,
            stop_rules=StopRule(newline=False),
            batch_size=4,
            progress=False,
        ),
    )
    tok = smollm2.tokenizer
    for prompt, gen in zip(prompts, ours):
        ids = tok(prompt, add_special_tokens=False, return_tensors="pt").input_ids
        with torch.inference_mode():
            out = smollm2.model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=24,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=tok.pad_token_id,
            )
        want = tok.decode(out[0, ids.shape[1] :].tolist(), skip_special_tokens=True)
        assert gen.raw_text == want

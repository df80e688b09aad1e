"""The shape of the tiny, randomly initialised causal LMs the backend tests build: small
enough to run in a blink, with grouped-query attention like the shipped readers."""

from __future__ import annotations


def tiny_config(**overrides) -> dict:
    """Keywords for a transformers config (Qwen2, Llama, Gemma): 97 tokens, width 64, four
    query heads over two key-value heads; ``overrides`` add to or replace them."""
    return {
        "vocab_size": 97,
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        **overrides,
    }

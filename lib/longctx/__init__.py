"""longctx: a reproducible companion for how language models read long contexts."""

__version__ = "0.1.0"

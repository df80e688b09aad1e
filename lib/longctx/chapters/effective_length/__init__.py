"""Effective length: how much of its window each reader really uses, with an interval on
the length itself (NoLiMa's, RULER's and LongScore's definitions, :mod:`longctx.effective_length`).

Its design (:mod:`.design`: the same needles at every length from 250 tokens to the
reader's window, two needle kinds) is in place and its rule is pre-registered
(``data/paper/preregistered.csv``); the chapter joins the book, with its findings section
and its claims in the matrix, once the default reader's rows at every length are committed.
"""

"""Mitigations chapter: what rescues the middle. Every training-free fix for a lost middle on
Lost in the Middle's multi-document QA task, one reader and one random-shuffle control.

Its design (:mod:`.design`) is in place and its rules are pre-registered
(``data/paper/preregistered.csv``); the chapter joins the book, with its page and its
claims in the matrix, once the default reader's rows for every arm are committed.
"""

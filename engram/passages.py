"""A long memory's passages: the chunks the indexer embeds one vector each for, and
the excerpts a search shows (seed 004: "the same chunk the ranking scored")."""

from __future__ import annotations

import re

PASSAGE_CHARS = 1200  # a memory this long or shorter is one passage, whole
SENTENCE = re.compile(r"(?<=[.!?\n])\s+")


def passages(content: str, size: int = PASSAGE_CHARS) -> list[str]:
    """Consecutive passages of at most ``size`` characters, cut between sentences
    where possible (a single longer sentence is cut hard); a text that fits is one
    passage, as it is."""
    if len(content) <= size:
        return [content]
    out: list[str] = []
    current = ""
    for sentence in SENTENCE.split(content):
        while len(sentence) > size:
            if current:
                out.append(current)
                current = ""
            out.append(sentence[:size])
            sentence = sentence[size:]
        candidate = f"{current} {sentence}" if current else sentence
        if len(candidate) > size:
            out.append(current)
            current = sentence
        else:
            current = candidate
    if current:
        out.append(current)
    return out

"""A long memory's passages: the chunks the indexer embeds one vector each for, and
the excerpts a search shows (seed 004: "the same chunk the ranking scored").

A passage is an exact slice of the memory's text (QA: re-joined sentences had lost the
text's line breaks and indentation), cut after a sentence or at a line's end where it
can be, else between words, into pieces of about equal length (QA: a hard cut at the
size had left a one-character passage, and cut words in two)."""

from __future__ import annotations

import math
import re
import unicodedata

PASSAGE_CHARS = 1200  # a memory this long or shorter is one passage, whole
# After a sentence's end (a Chinese or Japanese one, its ideographic full stop or its
# fullwidth ! and ?, needs no space after it), or a line's.
BREAK = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])\s*|\s*\n\s*")
SPACE = re.compile(r"\s")
JOINERS = {"\u200d", "\ufe0e", "\ufe0f"}  # zero-width joiner, variation selectors


def passages(content: str, size: int = PASSAGE_CHARS) -> list[str]:
    """Consecutive passages of at most ``size`` characters; a text that fits is one
    passage, as it is."""
    if len(content) <= size:
        return [content]
    return [content[start:end] for start, end in spans(content, size)]


def spans(content: str, size: int = PASSAGE_CHARS) -> list[tuple[int, int]]:
    """Where each passage starts and ends: whole sentences or lines packed up to ``size``,
    and one longer than that cut between words."""
    out: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for start, end in _segments(content):
        if current is not None and end - current[0] <= size:
            current = (current[0], end)
            continue
        if end - start > size:
            # A short run before it goes with its first piece (QA: "Okay." before a long
            # run of words was a passage of its own).
            if current is not None and current[1] - current[0] < size // 4:
                start, current = current[0], None
            *whole, last = _cut(content, start, end, size)
            out += ([current] if current is not None else []) + whole
            current = last
            continue
        if current is not None:
            out.append(current)
        current = (start, end)
    if current is not None:
        out.append(current)
    return out


def _segments(content: str) -> list[tuple[int, int]]:
    """The sentences and lines, without the spaces and line breaks between them."""
    out, start = [], 0
    for gap in BREAK.finditer(content):
        if gap.start() > start:
            out.append((start, gap.start()))
        start = gap.end()
    if start < len(content):
        out.append((start, len(content)))
    return out


def _cut(content: str, start: int, end: int, size: int) -> list[tuple[int, int]]:
    """A segment longer than ``size`` in pieces of about equal length, each cut at the
    last space before its share (or at the share itself when no space is near, never
    inside a character of several code points)."""
    out = []
    while end - start > size:
        share = start + math.ceil((end - start) / math.ceil((end - start) / size))
        space = max((m.start() for m in SPACE.finditer(content, start, share + 1)), default=-1)
        cut = space if space > start + (share - start) // 2 else _whole(content, start, share)
        out.append((start, cut))
        start = cut
        while start < end and content[start].isspace():
            start += 1
    out.append((start, end))
    return out


def _whole(content: str, start: int, cut: int) -> int:
    """``cut``, moved back off a combining mark, a joiner or the second of a flag's pair
    (QA: passages began with a Thai vowel sign, or re-paired flags)."""
    while cut > start + 1 and (
        unicodedata.combining(content[cut])
        or unicodedata.category(content[cut]) in ("Mn", "Mc", "Me")
        or content[cut] in JOINERS
        or content[cut - 1] == "\u200d"
    ):
        cut -= 1
    flags = 0
    while cut - flags > start and _flag(content[cut - flags - 1]):
        flags += 1
    return cut - 1 if flags % 2 and cut - 1 > start else cut


def _flag(char: str) -> bool:
    return "\U0001f1e6" <= char <= "\U0001f1ff"  # a regional indicator: two make a flag

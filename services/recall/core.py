"""Pure recall logic: query terms, rank fusion and the bounded packet. No I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

WORD = re.compile(r"[^\W_]+", re.UNICODE)
RRF_K = 60


@dataclass(frozen=True)
class Candidate:
    item_id: str
    revision: int
    scope: str
    kind: str
    title: str | None
    content: str
    pinned: bool
    updated_at: float = 0.0


@dataclass
class Ranked:
    item: Candidate
    score: float = 0.0
    why: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Packet:
    text: str
    entries: list[Ranked]
    omitted: int


def or_query(text: str, limit: int = 64) -> str:
    """The query's words OR-ed, as a to_tsquery string ('' when there are none)."""
    seen: dict[str, None] = {}
    for word in WORD.findall(text.lower()):
        seen.setdefault(word, None)
    return " | ".join(list(seen)[:limit])


def fuse(lists: dict[str, list[Candidate]], pinned: list[Candidate], top: int) -> list[Ranked]:
    """Reciprocal rank fusion, 1 / (60 + rank) per list; pinned first, then by score."""
    ranked: dict[str, Ranked] = {}
    for name, items in lists.items():
        for rank, item in enumerate(items, start=1):
            entry = ranked.setdefault(item.item_id, Ranked(item))
            entry.score += 1.0 / (RRF_K + rank)
            entry.why.append(f"{name}#{rank}")
    for item in pinned:
        ranked.setdefault(item.item_id, Ranked(item)).why.insert(0, "pinned")
    order = sorted(ranked.values(), key=lambda r: (not r.item.pinned, -r.score))
    return order[:top]


def header(item: Candidate) -> str:
    return f"[memory:{item.item_id}@{item.revision}; {item.scope}; {item.kind}]"


def render(item: Candidate) -> str:
    body = f"{item.title}: {item.content}" if item.title else item.content
    return f"{header(item)}\n{body}"


def build_packet(
    entries: list[Ranked], max_chars: int, *, stop_at_first_misfit: bool = True
) -> Packet:
    """Join whole entries up to ``max_chars``; an entry is never cut in the middle."""
    chosen: list[Ranked] = []
    parts: list[str] = []
    used = 0
    for entry in entries:
        text = render(entry.item)
        cost = len(text) + (2 if parts else 0)
        if used + cost > max_chars:
            if stop_at_first_misfit:
                break
            continue
        chosen.append(entry)
        parts.append(text)
        used += cost
    return Packet("\n\n".join(parts), chosen, omitted=len(entries) - len(chosen))

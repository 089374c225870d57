"""Seed 004's entity aliases, pure: the other names a query's entities go by.

An org names an entity and its aliases ("Kubernetes": "k8s", "kube"). A query that names
any of them, as whole words, case aside, also looks for the others: a memory that says
"k8s" answers a question about Kubernetes.

A name is matched as its words, each as written but for its case and the sentence's
punctuation around it ("C++" and "C#" are two names, neither of them "plan C."). A name
written in capitals alone ("IT", "NYC") is an acronym, matched in capitals only, so that
"it" in a question does not name Information Technology."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_EXPANSION = 40  # other names one query may add, in all
# What ends or opens a sentence or a clause around a word, not a part of a name.
AROUND = ".,;:!?\"'()[]{}<>«»“”\u2018\u2019…"


def words(text: str) -> list[str]:
    """A text's words as names are matched: NFC, split at spaces, the sentence's
    punctuation around each dropped."""
    found = (w.strip(AROUND) for w in unicodedata.normalize("NFC", text).split())
    return [w for w in found if w]


def folded(name: str) -> str:
    """A name as it is kept and compared: its words, lower case, single spaces."""
    return " ".join(words(name.casefold()))


def names_of(entity: str, aliases: Iterable[str]) -> list[str]:
    """Every name of an entity, folded, each once (its own name first)."""
    return list(dict.fromkeys(folded(n) for n in (entity, *aliases)))


@dataclass(frozen=True)
class _Said:
    folded: str  # the query's words, lower case, spaced, padded with a space each side
    written: str  # the same as written (for acronyms)

    def names(self, name: str) -> bool:
        if _acronym(name):
            return f" {' '.join(words(name))} " in self.written
        return f" {folded(name)} " in self.folded


def other_names(query: str, groups: Sequence[Sequence[str]]) -> list[str]:
    """The names the query does not say of each entity it names (``groups``: each
    entity's names as written, its own first), each once, at most ``MAX_EXPANSION``."""
    said = _Said(f" {folded(query)} ", f" {' '.join(words(query))} ")
    found: dict[str, str] = {}
    for group in groups:
        if any(said.names(name) for name in group):
            for name in group:
                if not said.names(name):
                    found.setdefault(folded(name), name)
    return list(found.values())[:MAX_EXPANSION]


def _acronym(name: str) -> bool:
    letters = [ch for ch in name if ch.isalpha()]
    return len(letters) >= 2 and all(ch.isupper() for ch in letters)

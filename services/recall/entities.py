"""Seed 004's entity aliases, pure: the other names a query's entities go by.

An org names an entity and its aliases ("Kubernetes": "k8s", "kube"). A query that names
any of them, as whole words, case aside, also looks for the others: a memory that says
"k8s" answers a question about Kubernetes."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

WORD = re.compile(r"\w+")
MAX_EXPANSION = 40  # other names one query may add, in all


def folded(name: str) -> str:
    """A name as it is matched: its words, lower case, single spaces."""
    return " ".join(WORD.findall(name.casefold()))


def names_of(entity: str, aliases: Iterable[str]) -> list[str]:
    """Every name of an entity, folded, each once (its own name first)."""
    return list(dict.fromkeys(folded(n) for n in (entity, *aliases)))


def other_names(query: str, groups: Sequence[Sequence[str]]) -> list[str]:
    """The names the query does not say of each entity it names (``groups``: each
    entity's names as written, its own first), each once, at most ``MAX_EXPANSION``."""
    said = f" {folded(query)} "
    found: dict[str, str] = {}
    for group in groups:
        names = {folded(n): n for n in group}
        if any(f" {name} " in said for name in names):
            for name, written in names.items():
                if f" {name} " not in said:
                    found.setdefault(name, written)
    return list(found.values())[:MAX_EXPANSION]

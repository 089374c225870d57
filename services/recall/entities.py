"""Seed 004's entity aliases, pure: the other names a query's entities go by.

An org names an entity and its aliases ("Kubernetes": "k8s", "kube"). A query that names
any of them, as whole words, case aside, also looks for the others: a memory that says
"k8s" answers a question about Kubernetes.

A name of letters and digits alone (and hyphens, apostrophes and dots, which join words:
"Node.js", "Big-Apple") is matched as the query's words are split anywhere else
("kubernetes-based" and "kube's" name Kubernetes). A name with symbols of its own is
matched as written but for its case and the sentence's punctuation around it ("C++" and
"C#" are two names, neither of them "plan C."). A short name written in capitals ("IT",
"NYC", "AWS") is an acronym, matched in capitals only, so that "it" in a question does
not name Information Technology.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

MAX_EXPANSION = 40  # other names one query may add, in all
# What ends or opens a sentence or a clause around a word, not a part of a name.
AROUND = ".,;:!?\"'()[]{}<>«»“”\u2018\u2019…`"
WORD = re.compile(r"\w+")
ACRONYM = re.compile(r"[A-Z]{2,4}")  # a short name in capitals: IT, NYC, AWS
# A character of a name's own that is no letter, digit, space or joiner of words (a
# hyphen, an apostrophe, a dot): "C++", "C#", "CI/CD", "AT&T".
SYMBOL = re.compile(r"[^\w\s\-'.\u2019]")


def words(text: str) -> list[str]:
    """A text's words as names with symbols are matched: NFC, split at spaces, the
    sentence's punctuation around each dropped."""
    found = (w.strip(AROUND) for w in unicodedata.normalize("NFC", text).split())
    return [w for w in found if w]


def folded(name: str) -> str:
    """A name as it is kept and compared: its words, lower case, single spaces."""
    return " ".join(words(name.casefold()))


def names_of(entity: str, aliases: Iterable[str]) -> list[str]:
    """Every name of an entity, folded, each once (its own name first)."""
    return list(dict.fromkeys(folded(n) for n in (entity, *aliases)))


@dataclass(frozen=True)
class Name:
    written: str
    key: str  # the words it is matched as, spaced, padded with a space each side
    form: int  # which of the query's forms it is matched in (``_Query``)


@dataclass(frozen=True)
class Entity:
    names: tuple[Name, ...]  # its own first


def entity_of(names: Sequence[str]) -> Entity:
    """An entity's names (its own first) as they are matched: folded once, when the org's
    aliases are read, not at every query (QA: 1,000 entities cost 49 ms a search)."""
    return Entity(tuple(_name(n) for n in names))


def other_names(query: str, entities: Sequence[Entity]) -> list[str]:
    """The names the query does not say of each entity it names, each once, at most
    ``MAX_EXPANSION``."""
    said = _Query.of(query)
    found: dict[str, str] = {}
    for entity in entities:
        named = [said.names(n) for n in entity.names]
        if any(named):
            for name, is_said in zip(entity.names, named, strict=True):
                if not is_said:
                    found.setdefault(name.key, name.written)
    return list(found.values())[:MAX_EXPANSION]


PLAIN, SYMBOLS, CAPITALS = 0, 1, 2


@dataclass(frozen=True)
class _Query:
    forms: tuple[str, str, str]  # its words split plainly, with symbols, and as written

    @classmethod
    def of(cls, query: str) -> _Query:
        text = unicodedata.normalize("NFC", query)
        plain = " ".join(WORD.findall(text.casefold()))
        return cls((f" {plain} ", f" {folded(text)} ", f" {' '.join(WORD.findall(text))} "))

    def names(self, name: Name) -> bool:
        return name.key in self.forms[name.form]


def _name(written: str) -> Name:
    text = unicodedata.normalize("NFC", written)
    plain = WORD.findall(text)
    if not SYMBOL.search(text.strip(AROUND)):  # words, and what joins them: "Node.js"
        if len(plain) == 1 and ACRONYM.fullmatch(plain[0]):
            return Name(written, f" {plain[0]} ", CAPITALS)
        return Name(written, f" {' '.join(plain).casefold()} ", PLAIN)
    return Name(written, f" {folded(text)} ", SYMBOLS)

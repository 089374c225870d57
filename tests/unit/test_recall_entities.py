"""Seed 004's entity aliases, pure: which other names a query's entities add."""

from __future__ import annotations

from services.recall.entities import MAX_EXPANSION, Entity, entity_of, folded, names_of
from services.recall.entities import other_names as expand


def other_names(query: str, groups: list[list[str]]) -> list[str]:
    return expand(query, [entity_of(g) for g in groups])


GROUPS = [["Kubernetes", "k8s", "kube"], ["New York", "NYC", "the Big Apple"]]


def test_a_query_naming_an_entity_looks_for_its_other_names() -> None:
    assert other_names("Where does our kube cluster run?", GROUPS) == ["Kubernetes", "k8s"]
    assert other_names("flights to new   YORK", GROUPS) == ["NYC", "the Big Apple"]
    assert other_names("k8s in NYC", GROUPS) == ["Kubernetes", "kube", "New York", "the Big Apple"]


def test_a_name_matches_as_whole_words_only() -> None:
    assert other_names("kubectl and cubes", GROUPS) == []  # not inside a longer word
    assert other_names("New Yorker magazine", GROUPS) == []
    assert other_names("", GROUPS) == [] and other_names("kube", []) == []


def test_names_fold_to_their_words() -> None:
    assert folded("  The  Big-Apple! ") == "the big-apple"
    assert names_of("Kubernetes", ["K8S", "kubernetes", "kube"]) == ["kubernetes", "k8s", "kube"]
    assert folded("e\u0301cole") == folded("\u00e9cole")  # one spelling, composed or not


def test_symbols_are_part_of_a_name_and_the_sentences_punctuation_is_not() -> None:
    """QA: C++ and C# both folded to "c", and "plan C." named C++."""
    langs = [["C++", "cpp"], ["C#", "csharp"]]
    assert other_names("is cpp faster?", langs) == ["C++"]
    assert other_names("Which C# version (C#)?", langs) == ["csharp"]
    assert other_names("go with plan C.", langs) == []


def test_a_name_in_capitals_is_an_acronym_matched_in_capitals() -> None:
    """QA: "it" in a question named Information Technology by its alias IT."""
    groups = [["Information Technology", "IT"]]
    assert other_names("When does it open?", groups) == []
    assert other_names("Ask IT about it", groups) == ["Information Technology"]
    assert other_names("information technology hours", groups) == ["IT"]


def test_an_expansion_is_bounded() -> None:
    many = [[f"entity{n}", *(f"alias{n}x{m}" for m in range(20))] for n in range(5)]
    query = " ".join(f"entity{n}" for n in range(5))
    assert len(other_names(query, many)) == MAX_EXPANSION


def test_words_joined_or_inflected_still_name_a_plain_name() -> None:
    """A review: splitting the query at spaces alone lost "kubernetes-based", "kube's"."""
    groups = [["Kubernetes", "K8S", "kube"], ["Node.js", "node"], ["Big-Apple", "NYC"]]
    assert other_names("a kubernetes-based stack", groups) == ["K8S", "kube"]
    assert other_names("the kube's dashboard", groups) == ["Kubernetes", "K8S"]
    assert other_names("deploy to k8s", groups) == ["Kubernetes", "kube"]  # no acronym
    assert other_names("KUBERNETES upgrade", groups) == ["K8S", "kube"]
    assert other_names("big apple trip", groups) == ["NYC"]
    assert other_names("node.js or deno", groups) == []  # both of its names said


def test_entities_are_folded_once() -> None:
    entity = entity_of(["C++", "cpp"])
    assert isinstance(entity, Entity) and [n.written for n in entity.names] == ["C++", "cpp"]

"""A memory's labels (its key, tags and sources: a person's words, as its text is): sealed
under the memory's own key in its events, with the keyed hashes that outlive a forget, and
how a save, a copy, a candidate or a relabel changes them."""

from __future__ import annotations

from typing import Any

from contracts.events import Labels, MemoryRelabeled, MemoryRevised, Sealed
from services.command.context import Context
from services.command.state import Item

# A memory's tags, and its sources, as many as a save may name.
MAX_LABELS = 32


def labelled(
    item_id: str,
    ctx: Context,
    key: str | None,
    tags: tuple[str, ...] = (),
    sources: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A new memory's labels as its event carries them: sealed under the memory's key, a
    person's words as its text is, with the keyed hashes that outlive a forget."""
    sealed = sealed_labels(item_id, Labels(key=key, tags=tags, sources=sources), ctx)
    if sealed is None:
        return {}
    return {
        "labels": sealed,
        "key_hash": ctx.key_hash(key) if key is not None else None,
        "source_hashes": tuple(ctx.source_hash(s) for s in sources),
    }


def _sealed(item_id: str, labels: Labels, ctx: Context) -> Sealed:
    return ctx.seal(item_id, labels.model_dump_json(exclude_defaults=True))


def sealed_labels(item_id: str, labels: Labels, ctx: Context) -> Sealed | None:
    """A memory's labels sealed under its key; None when it has none."""
    if labels.key is None and not labels.tags and not labels.sources:
        return None
    return _sealed(item_id, labels, ctx)


def labels_of(item: Item, ctx: Context) -> Labels:
    """The labels of a memory the command names, opened (sealed under the memory's key,
    which the writer fetched for the command). None of them for a memory saved before
    labels were sealed: its state kept only its key's hash."""
    if item.labels is None:
        return Labels()
    return Labels.model_validate_json(ctx.open(item.labels))


def _newest(old: tuple[str, ...], named: tuple[str, ...]) -> tuple[str, ...]:
    """A memory's list with a save's names joined: what the save names last, in its order
    (QA: one it named again kept its old place, and was the first the limit dropped), then
    only the last ``MAX_LABELS``."""
    kept = dict.fromkeys(named)
    return (*(x for x in old if x not in kept), *kept)[-MAX_LABELS:]


def inherited(item: Item, candidate_id: str, ctx: Context) -> dict[str, Any]:
    """The labels of a candidate proposed for ``item`` (an agent's correction of it): its
    key, tags and sources, sealed anew under the candidate's key, so the memory that a
    confirm makes of it keeps them (QA: it kept the key only). A memory saved before labels
    were sealed passes on its key's hash alone: the writer knows no more of it."""
    old = labels_of(item, ctx)
    return labelled(candidate_id, ctx, old.key, old.tags, old.sources) | (
        {"key_hash": item.key_hash} if item.key_hash is not None else {}
    )


def relabelled(
    revised: MemoryRevised,
    item: Item,
    ctx: Context,
    key: str | None,
    tags: tuple[str, ...],
    sources: tuple[str, ...],
) -> MemoryRevised:
    """A keyed save's (or a copy's) revision of the key's memory, with the tags and sources
    the save brings added to the memory's (QA: they were dropped, so a forget of the
    memory suppressed no extraction from the save's sources). Each list keeps its last
    ``MAX_LABELS`` (``_newest``); the extractor keeps every source's hash all the same."""
    if not tags and not sources:  # the labels stay: no need to open them
        return revised
    old = labels_of(item, ctx)
    added_sources = tuple(s for s in dict.fromkeys(sources) if s not in old.sources)
    hashes = tuple(ctx.source_hash(s) for s in added_sources)
    if item.labels is None:  # saved before labels were sealed: the writer does not know
        # its tags and sources, and new labels would replace them in the read model
        return revised.model_copy(update={"source_hashes": hashes}) if hashes else revised
    labels = Labels(
        key=old.key or key, tags=_newest(old.tags, tags), sources=_newest(old.sources, sources)
    )
    if (labels.tags, labels.sources) == (old.tags, old.sources):
        return revised  # nothing new, and nothing named anew: the labels stay as they are
    return revised.model_copy(
        update={
            "labels": _sealed(item.item_id, labels, ctx),
            "source_hashes": hashes,
        }
    )


def relabeled(
    item: Item, kind: str | None, tags: tuple[str, ...] | None, ctx: Context
) -> MemoryRelabeled | None:
    """Another kind or other tags, a new revision with the same text (a relabel, or a
    merged proposal of one): None when the memory has them already. ``tags`` replaces the
    memory's; None keeps them, as a kind of None keeps its kind."""
    old = labels_of(item, ctx)
    new_kind, new_tags = kind or item.kind, old.tags if tags is None else tags
    if (new_kind, new_tags) == (item.kind, old.tags):
        return None
    return MemoryRelabeled(
        item_id=item.item_id,
        revision=item.revision + 1,
        kind=new_kind,
        labels=sealed_labels(item.item_id, old.model_copy(update={"tags": new_tags}), ctx),
    )

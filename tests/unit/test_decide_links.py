"""Links between memories (seed 004): link, unlink, related_ids, bounds, forgetting."""

from __future__ import annotations

import pickle

import pytest

from contracts import commands as c
from contracts.events import MemoryLinked, MemoryRemembered, MemoryRevised, MemoryUnlinked
from services.command.errors import (
    Forbidden,
    Gone,
    InvalidCommand,
    LinkCapacityExceeded,
    NotFound,
)
from services.command.state import StreamState
from tests.unit.conftest import make_context, run


def remembered(state: StreamState, text: str) -> str:
    [event] = run(state, c.RememberMemory(content=text))
    return event.item_id


def test_a_link_is_written_once_and_a_new_weight_replaces_the_old_one() -> None:
    state = StreamState("acme/member:ana")
    a, b = remembered(state, "a"), remembered(state, "b")
    [linked] = run(state, c.LinkMemory(item_id=a, target_id=b, kind="depends-on", weight=0.3))
    assert isinstance(linked, MemoryLinked)
    assert (linked.item_id, linked.target_id, linked.kind, linked.weight) == (
        a,
        b,
        "depends-on",
        0.3,
    )
    revision = state.items[a].revision
    # The same call again changes nothing; no weight keeps the one it has.
    assert run(state, c.LinkMemory(item_id=a, target_id=b, kind="depends-on", weight=0.3)) == []
    assert run(state, c.LinkMemory(item_id=a, target_id=b, kind="depends-on")) == []
    [reweighted] = run(state, c.LinkMemory(item_id=a, target_id=b, kind="depends-on", weight=1))
    assert isinstance(reweighted, MemoryLinked) and reweighted.weight == 1
    assert state.items[a].links == {(b, "depends-on"): 1}
    assert state.items[a].revision == revision  # a link is no revision of the text


def test_unlink_removes_exactly_the_link_its_key_names() -> None:
    state = StreamState("s")
    a, b = remembered(state, "a"), remembered(state, "b")
    run(state, c.LinkMemory(item_id=a, target_id=b))
    run(state, c.LinkMemory(item_id=a, target_id=b, kind="depends-on"))
    [unlinked] = run(state, c.UnlinkMemory(item_id=a, target_id=b, kind="depends-on"))
    assert isinstance(unlinked, MemoryUnlinked)
    assert state.items[a].links == {(b, "related"): None}
    with pytest.raises(NotFound) as err:
        run(state, c.UnlinkMemory(item_id=a, target_id=b, kind="depends-on"))
    assert err.value.extra == {"item_id": a, "target_id": b, "kind": "depends-on"}


def test_a_target_must_be_a_memory_the_caller_can_see() -> None:
    state = StreamState("s")
    a = remembered(state, "a")
    with pytest.raises(InvalidCommand, match="itself"):
        run(state, c.LinkMemory(item_id=a, target_id=a))
    with pytest.raises(NotFound, match="no memory elsewhere you can see"):
        run(state, c.LinkMemory(item_id=a, target_id="elsewhere"))
    # One of another stream that the writer found visible (a teammate's shared memory).
    [linked] = run(
        state,
        c.LinkMemory(item_id=a, target_id="elsewhere"),
        make_context(targets=frozenset({"elsewhere"})),
    )
    assert linked.target_id == "elsewhere"  # type: ignore[attr-defined]
    with pytest.raises(NotFound):  # the source must be a memory of this stream
        run(state, c.LinkMemory(item_id="elsewhere", target_id=a))


def test_the_kind_supersedes_is_reserved_and_kinds_are_slugs() -> None:
    with pytest.raises(ValueError, match="reserved"):
        c.LinkMemory(item_id="a", target_id="b", kind="supersedes")
    with pytest.raises(ValueError):
        c.LinkMemory(item_id="a", target_id="b", kind="Not A Slug")
    with pytest.raises(ValueError):
        c.LinkMemory(item_id="a", target_id="b", weight=1.5)


def test_bounds_answer_link_capacity_exceeded() -> None:
    state = StreamState("s")
    a, b = remembered(state, "a"), remembered(state, "b")
    for n in range(c.MAX_LINK_KINDS):
        run(state, c.LinkMemory(item_id=a, target_id=b, kind=f"k{n}"))
    with pytest.raises(LinkCapacityExceeded) as err:
        run(state, c.LinkMemory(item_id=a, target_id=b, kind="one-more"))
    assert (err.value.code, err.value.extra["limit"]) == ("link_capacity_exceeded", 16)
    # A kind it holds already can still change its weight.
    assert run(state, c.LinkMemory(item_id=a, target_id=b, kind="k0", weight=0.1))

    many = frozenset(f"t{n}" for n in range(c.MAX_LINKS))
    ctx = make_context(targets=many | {"last"})
    state.items[a].links = {(t, "related"): None for t in many}
    with pytest.raises(LinkCapacityExceeded, match="1000 links"):
        run(state, c.LinkMemory(item_id=a, target_id="last"), ctx)


def test_related_ids_link_a_new_memory_and_a_correction() -> None:
    state = StreamState("s")
    b = remembered(state, "b")
    saved, linked = run(state, c.RememberMemory(content="a", related_ids=(b,)))
    assert isinstance(saved, MemoryRemembered) and isinstance(linked, MemoryLinked)
    assert (linked.item_id, linked.target_id, linked.kind) == (saved.item_id, b, "related")
    assert state.results["cmd-3"]["item_id"] == saved.item_id  # the answer names the save
    c_id = remembered(state, "c")
    revised, linked = run(
        state,
        c.CorrectMemory(
            item_id=saved.item_id, base_revision=1, content="a2", related_ids=(b, c_id)
        ),
    )[0:2]
    assert isinstance(revised, MemoryRevised) and isinstance(linked, MemoryLinked)
    assert state.items[saved.item_id].links == {(b, "related"): None, (c_id, "related"): None}
    with pytest.raises(NotFound):  # nothing is saved when a related id is unknown
        run(state, c.RememberMemory(content="d", related_ids=("nowhere",)))


def test_forget_drops_the_memory_s_links_and_its_stream_s_links_to_it() -> None:
    state = StreamState("s")
    a, b, d = remembered(state, "a"), remembered(state, "b"), remembered(state, "d")
    run(state, c.LinkMemory(item_id=a, target_id=b))
    run(state, c.LinkMemory(item_id=a, target_id=d))
    run(state, c.LinkMemory(item_id=b, target_id=d))
    run(state, c.ForgetMemory(item_id=b))
    assert state.items[b].links is None
    assert state.items[a].links == {(d, "related"): None}
    with pytest.raises(Gone):
        run(state, c.LinkMemory(item_id=a, target_id=b))
    with pytest.raises(Gone):
        run(state, c.LinkMemory(item_id=b, target_id=a))


def test_a_state_checkpointed_before_links_existed_takes_links() -> None:
    state = StreamState("s")
    a, b = remembered(state, "a"), remembered(state, "b")
    for item in state.items.values():  # as unpickled from a checkpoint of before links
        del item.__dict__["links"]
    del state.__dict__["linked"]
    old = pickle.loads(pickle.dumps(state))
    run(old, c.LinkMemory(item_id=a, target_id=b))
    run(old, c.ForgetMemory(item_id=b))
    assert old.items[a].links == {} and old.linked == {a}


def test_a_teammate_cannot_link_from_or_unlink_a_shared_memory_its_author_or_an_admin_can() -> None:
    state = StreamState("acme/shared")
    ana, bob = make_context(scope="shared"), make_context(scope="shared", member="bob")
    [saved] = run(state, c.RememberMemory(content="Ana's fact"), ana)
    [other] = run(state, c.RememberMemory(content="Bob's fact"), bob)
    a, b = saved.item_id, other.item_id
    with pytest.raises(Forbidden, match="ana's"):
        run(state, c.LinkMemory(item_id=a, target_id=b), bob)
    assert run(state, c.LinkMemory(item_id=b, target_id=a), bob)  # from his own: fine
    assert run(state, c.LinkMemory(item_id=a, target_id=b), ana)
    with pytest.raises(Forbidden, match="ana's"):
        run(state, c.UnlinkMemory(item_id=a, target_id=b), bob)
    admin = make_context(scope="shared", member="carl", is_admin=True)
    assert run(state, c.UnlinkMemory(item_id=a, target_id=b), admin)

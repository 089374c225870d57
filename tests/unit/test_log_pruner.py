"""A pruner rolls the segment of what its reader handled: it appends roll markers until one
went a segment's age after it first saw those records handled (QA: a single marker sent
sooner landed in the same open segment, which then stayed on a quiet partition for good)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from engram.log_pruner import LogPruner


class Pruner(LogPruner):
    """A pruner of one partition whose reader has committed ``handled``, on a fake broker
    that appends each marker at the log's end."""

    def __init__(self) -> None:
        broker: Any = (
            SimpleNamespace(delete_records=self._delete),
            SimpleNamespace(send_and_wait=self._append),
        )
        super().__init__(
            "127.0.0.1:9", "topic", segment_ms=60_000, clock=lambda: self.now, kafka=broker
        )
        self.now, self.handled, self.end = 0.0, 0, 0
        self.markers: list[float] = []  # when each was appended
        self.log_start = 0

    async def committed(self, partitions: list[int]) -> dict[int, int]:
        return {0: self.handled} if self.handled else {}

    async def _delete(self, records: dict[Any, Any]) -> dict[Any, int]:
        self.log_start = max(r.before_offset for r in records.values())
        return {tp: r.before_offset for tp, r in records.items()}

    async def _append(self, topic: str, value: bytes, **_: object) -> Any:
        self.markers.append(self.now)
        self.end += 1
        return SimpleNamespace(offset=self.end - 1)

    async def pass_at(self, now: float, read_all: bool = True) -> None:
        self.now = now
        await self.prune_once([0])
        if read_all:  # the reader reads on, the markers too
            self.handled = self.end


async def test_markers_go_on_until_one_came_a_segments_age_after_the_records() -> None:
    pruner = Pruner()
    await pruner.pass_at(0)
    assert pruner.markers == []  # nothing handled, nothing to roll
    pruner.end = pruner.handled = 2  # two records, appended and handled
    for now in (5, 35, 65, 95):
        await pruner.pass_at(now)
    # 65 s after they were first seen handled (at 5): that marker rolled their segment.
    assert pruner.markers == [5, 35, 65]
    assert pruner.log_start == pruner.end  # the broker keeps the segment the last opened
    pruner.end += 1  # one more record, handled at once
    pruner.handled = pruner.end
    for now in (125, 155, 185, 215):
        await pruner.pass_at(now)
    assert pruner.markers == [5, 35, 65, 125, 155, 185]
    assert pruner.log_start == pruner.end


async def test_nothing_handled_is_neither_deleted_nor_rolled() -> None:
    pruner = Pruner()
    pruner.end = 5  # records the reader has not handled
    for now in (0, 60, 120):
        await pruner.pass_at(now, read_all=False)
    assert (pruner.markers, pruner.log_start) == ([], 0)

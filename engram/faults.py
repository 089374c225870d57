"""What kind of fault an error is, for the code that decides what to do next: one of the
moment (try again), one of a record's data (set that record aside), or neither."""

from __future__ import annotations

import asyncpg
from aiokafka.errors import (
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    RecordTooLargeError,
)
from asyncpg.exceptions._base import DataError as ArgumentError
from asyncpg.exceptions._base import InternalClientError

# What Postgres says of a record's data, not of itself (a value out of a column's range, a
# row past an index's limit): the same record fails the same way every time.
# (asyncpg raises its own DataError, not exported, for an argument it cannot encode.)
UNSTORABLE = (asyncpg.DataError, ArgumentError, asyncpg.ProgramLimitExceededError)

# A record too large for the broker would be too large again, for good: it is the
# record's fault, not the moment's.
_TOO_LARGE = (MessageSizeTooLargeError, RecordTooLargeError, RecordListTooLargeError)
# Postgres's classes of the moment: connection (08), rollback (40: serialisation, deadlock),
# resources (53), operator intervention (57: a restart, "the database system is starting
# up"); a lock not available (55P03) and a read-only transaction after a failover (25006).
_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57"})
_TRANSIENT_SQLSTATES = frozenset({"55P03", "25006"})


# The kinds a fault of the moment is of (``is_transient`` tells which of them is one).
MOMENT_KINDS: tuple[type[Exception], ...] = (
    KafkaError,
    OSError,
    TimeoutError,
    asyncpg.InterfaceError,
    asyncpg.PostgresError,
    InternalClientError,
)


def is_transient(exc: BaseException) -> bool:
    """A fault of the moment (the broker's, the database's, the network's): the work that
    met it is done again, and no command or record is refused for it."""
    if isinstance(exc, _TOO_LARGE):
        return False
    if isinstance(exc, KafkaError | OSError | TimeoutError | asyncpg.InterfaceError):
        return True
    if isinstance(exc, InternalClientError):
        # asyncpg's protocol in a state it cannot go on from, as after its connection was
        # cut under an operation ("cannot switch to state 15": QA, a terminated backend)
        return True
    if isinstance(exc, asyncpg.PostgresError):
        state = str(exc.sqlstate or "")
        return state[:2] in _TRANSIENT_SQLSTATE_CLASSES or state in _TRANSIENT_SQLSTATES
    return False


def of_the_moment(exc: BaseException) -> bool:
    """A fault of the moment, or a group of them only (a parallel fetch's)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(of_the_moment(e) for e in exc.exceptions)
    return is_transient(exc)

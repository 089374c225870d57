"""The operator's commands on a running Engram (DESIGN §8), registered on ``engram``:

engram lag                 how far behind each consumer is
engram dlq list | redrive  the dead letters; publish one again
engram prune-commands      delete decided commands from engram.commands now
engram import-memory-md    import a legacy MEMORY.md once, as a pinned note
engram mcp                 serve the memory tools to an agent over MCP (stdio)
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from engram.service import StartupRefused, ready_settings

if TYPE_CHECKING:
    from rich.table import Table

    from engram.operate import Lag

console = Console()
err = Console(stderr=True)
dlq_app = typer.Typer(help="The dead-letter topics (engram.dlq.<service>).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.command()(lag)
    app.add_typer(dlq_app, name="dlq")
    app.command("prune-commands")(prune_commands)
    app.command("import-memory-md")(import_memory_md)
    app.command("mcp")(mcp)


def mcp(
    token: str = typer.Option(..., envvar="ENGRAM_TOKEN", help="The agent's bearer token."),
    command_url: str = typer.Option("http://127.0.0.1:8081", envvar="ENGRAM_COMMAND_URL"),
    recall_url: str = typer.Option("http://127.0.0.1:8085", envvar="ENGRAM_RECALL_URL"),
    run_file: Path | None = typer.Option(
        None,
        envvar="ENGRAM_RUN_FILE",
        help="A file the agent worker writes before each run: JSON with the run's run_id "
        "and the user's message (user_message), sent with every save. Without it an "
        "agent's saves wait as candidates.",
    ),
) -> None:
    """Serve Engram's memory tools (memory__remember, memory__search, …) over MCP on stdin
    and stdout, acting with the token: what an agent runtime launches as its memory."""
    from engram.mcp_tools import build_server, no_run
    from engram.mcp_tools import run_file as reading

    if (problem := token_problem(token)) is not None:  # fail now, not at every call
        err.print(f"error: --token / ENGRAM_TOKEN: {problem}")
        raise typer.Exit(2)
    run = no_run if run_file is None else reading(run_file)
    build_server(token, command_url, recall_url, run=run).run("stdio")


def token_problem(token: str) -> str | None:
    """Why a token can be no bearer token of Engram's, read without its key (the services
    verify its signature): not a JWT, no org or member, or expired. None when it may be."""
    import time

    import jwt

    from engram.auth import name_problem

    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        return f"not a bearer token ({exc})"
    for claim in ("org", "sub"):  # the names the services check the same way
        if (problem := name_problem(claim, claims.get(claim))) is not None:
            return problem
    exp = claims.get("exp")
    if isinstance(exp, int | float) and exp <= time.time():
        return "the token has expired: mint a new one (engram token)"
    return None


def prune_commands(
    group: str = typer.Option("engram-command", help="The command service's consumer group."),
) -> None:
    """One pass of the command service's pruner over every partition of engram.commands:
    delete what the group has decided, and append a roll marker, which closes each segment
    the group has read into that is a minute old (the service does this every
    ENGRAM_COMMAND_PRUNE_SECONDS, until the segments are closed; this is for "now", after a
    forget). The broker removes the files at its next retention check."""
    from contracts.topics import COMMANDS
    from engram.log_pruner import GroupLogPruner

    common = ready_settings()

    async def go() -> dict[int, int]:
        pruner = GroupLogPruner(common.kafka_bootstrap_servers, COMMANDS, group)
        await pruner.start()
        try:
            return await pruner.prune_once(await pruner.all_partitions())
        finally:
            await pruner.stop()

    starts = asyncio.run(go())
    if not starts:
        console.print(f"group {group} has decided nothing on engram.commands: nothing to delete")
        return
    for partition, start in sorted(starts.items()):
        console.print(f"engram.commands partition {partition}: records below {start} deleted")


def import_memory_md(
    path: Path = typer.Argument(..., help="The legacy MEMORY.md to import."),
    token: str = typer.Option(..., envvar="ENGRAM_TOKEN", help="The person's bearer token."),
    scope: str = typer.Option("private", help="private, shared, agent, session or project."),
    command_url: str = "http://127.0.0.1:8081",
) -> None:
    """Import a legacy MEMORY.md once, as a pinned note of the token's person (seed 000).
    A second import of the same scope changes nothing and says so. The file is only read,
    never written; one that cannot be read ends the command before anything is sent."""
    import httpx

    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        err.print(f"[bold red]error:[/bold red] cannot read {path}: {exc}", highlight=False)
        raise typer.Exit(1) from None
    try:
        answer = httpx.post(
            f"{command_url}/v1/memories/import-memory-md",
            headers={"authorization": f"Bearer {token}"},
            json={"content": content, "scope": scope},
            timeout=30,
        )
    except httpx.TransportError as exc:
        raise StartupRefused(
            f"the command service at {command_url} does not answer ({exc}): start it with "
            "`engram up`"
        ) from None
    try:
        body = answer.json()
    except ValueError:
        body = {"detail": answer.text[:500]}
    if answer.status_code >= 400:
        err.print(f"[bold red]error:[/bold red] {body.get('detail', body)}", highlight=False)
        raise typer.Exit(1)
    if body.get("duplicate"):
        console.print(f"{path} was imported before, as memory {body['item_id']}: nothing to do")
    else:
        console.print(f"{path} imported as pinned note {body['item_id']} ({body['status']})")


def lag() -> None:
    """How far behind each consumer is: records between its next offset and its topic's
    last stable offset (the command service's group from Kafka, the others from their
    offsets tables in Postgres). A consumer that is no service's (a test's or a tool's,
    left behind) is listed apart, with the table that holds its offsets."""
    from engram.operate import consumer_lag
    from engram.topic_reads import OperateError

    common = ready_settings()
    try:
        rows = asyncio.run(
            consumer_lag(
                common.kafka_bootstrap_servers,
                common.database_url,
                groups=service_groups(),
                expected=service_reads(),
            )
        )
    except OperateError as exc:
        err.print(f"[bold red]error:[/bold red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    if not rows:
        console.print("no consumer has stored an offset yet")
        return
    ours = [r for r in rows if r.service is not None]
    others = [r for r in rows if r.service is None]
    if ours:
        console.print(_lag_table("the services' consumers", ours))
        if any(r.service == "indexer" and r.behind for r in ours):
            console.print(IDLE_INDEXER)
    if others:
        console.print(
            _lag_table("consumers of no service (a test's or a tool's): where they stopped", others)
        )


IDLE_INDEXER = (
    "the indexer reads no event while it has no embedding model and no vector stored (its "
    "/health then says idle): its lag grows until there is something to index, and it reads "
    "on from there"
)


def _lag_table(title: str, rows: list[Lag]) -> Table:
    from rich.table import Table

    others = rows[0].service is None
    table = Table("consumer", "topic", "partition", "next offset", "end", "behind", title=title)
    if others:  # where to delete a stale one's offsets from
        table.add_column("offsets in")
    for column in table.columns:  # names whole, on two lines if need be; numbers on one
        column.overflow, column.no_wrap = "fold", column.header in ("partition", "end")
    for r in rows:
        behind = str(r.behind) if r.exact else f"~{r.behind} offsets"
        row = [r.consumer, r.topic, str(r.partition), str(r.at), str(r.end), behind]
        table.add_row(*row, *([r.stored_in] if others else []))
    return table


def service_groups() -> dict[str, str]:
    """The services' consumer group ids, as their settings (and environment) give them:
    the command service's, and those of ``service_reads`` by the schema of their table."""
    from services.command.settings import CommandSettings

    groups = {consumer: table.split(".")[0] for table, consumer, _ in service_reads()}
    return {CommandSettings().group_id: "command", **groups}


def service_reads() -> list[tuple[str, str, str]]:
    """(offsets table, consumer, topic) of each topic a service tracks in Postgres: listed
    by ``lag`` before it has stored an offset there."""
    from contracts import topics
    from services.extractor.settings import ExtractorSettings
    from services.indexer.settings import IndexerSettings
    from services.projector.settings import ProjectorSettings

    extractor = ExtractorSettings()
    return [
        ("projector.offsets", ProjectorSettings().group_id, topics.EVENTS),
        ("indexer.offsets", IndexerSettings().group_id, topics.EVENTS),
        ("extractor.offsets", extractor.events_group_id, topics.EVENTS),
        ("extractor.offsets", extractor.group_id, topics.CONVERSATIONS),
    ]


def _printable(text: str) -> str:
    """A letter's text as a terminal takes it: its control characters escaped (a letter
    holds what a poison record held), and what UTF-8 cannot encode replaced."""
    shown = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in text)
    return shown.encode("utf-8", errors="replace").decode("utf-8")


@dlq_app.command("list")
def dlq_list(
    services: list[str] = typer.Argument(None, help="Services (default: all five)."),
    last: int = typer.Option(
        5,
        min=0,
        max=10_000,
        help="How many of the newest letters to show, per service (0 to 10,000).",
    ),
) -> None:
    """How many dead letters each service has, and the newest ones: where the record came
    from, when, and the error. Letters are counted as records (a letter written in a
    transaction is followed by a marker that takes an offset); past 10,000 offsets, or
    15 s of reading, the count is of offsets, and says so."""
    from contracts.topics import SERVICES
    from engram.letters import dead_letters
    from engram.topic_reads import OperateError

    common = ready_settings()
    for service in services or list(SERVICES):
        try:
            letters = asyncio.run(dead_letters(common.kafka_bootstrap_servers, service, last))
        except OperateError as exc:
            err.print(f"[bold red]error:[/bold red] {exc}", highlight=False)
            raise typer.Exit(1) from None
        count = (
            f"{letters.count} letter(s)"
            if letters.exact
            else f"about {letters.count} letter(s) (offsets, transaction markers included: "
            "too many to count)"
        )
        console.print(f"[bold]{letters.topic}[/bold]: {count}")
        for letter in letters.newest:
            b = letter.body
            where = f"{b.get('topic')}[{b.get('partition')}]@{b.get('offset')}"
            error = " ".join(str(b.get("error", "")).split())[:240]
            line = f"  {letter.offset}: {b.get('failed_at', '?')} {where}: {error}"
            console.print(_printable(line), markup=False, highlight=False)


@dlq_app.command("redrive")
def dlq_redrive(
    service: str = typer.Argument(..., help="Whose dead-letter topic."),
    offset: int = typer.Argument(..., help="The letter's offset (see `engram dlq list`)."),
) -> None:
    """Publish a dead letter's record again to the topic it came from (commands and
    conversation turns only), once what made it fail is fixed."""
    from engram.letters import redrive
    from engram.topic_reads import OperateError

    common = ready_settings()
    try:
        topic, partition, at = asyncio.run(redrive(common.kafka_bootstrap_servers, service, offset))
    except OperateError as exc:
        err.print(f"[bold red]error:[/bold red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    console.print(f"re-driven: the record is now {topic}[{partition}]@{at}")

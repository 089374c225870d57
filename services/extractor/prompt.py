"""The OpenAI-compatible chat request for extraction, and the reading of its reply.

Pure: the adapter sends what ``chat_request`` builds and hands the response body
to ``read_reply``. Only the user's message is sent (seed 000: extraction reads
the user message of a run); the assistant's reply never leaves Engram.
"""

from __future__ import annotations

import json
import re
from typing import Any, get_args

from contracts.commands import Kind
from services.extractor.core import MAX_CANDIDATES, Candidate

EXTRACTABLE: frozenset[str] = frozenset(get_args(Kind)) - {"lesson"}
MAX_KEY = 100  # a name, not a sentence (a command's key may hold up to MAX_TITLE)
FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")

SYSTEM_PROMPT = f"""\
You propose long-term memories about the user from one message the user wrote.
Reply with JSON only, in this shape:
{{"candidates": [{{"content": "...", "kind": "preference", "evidence": "...",
"key": "..."}}]}}

Rules:
- At most {MAX_CANDIDATES} candidates; an empty list is a good answer.
- Keep only lasting facts, preferences, decisions and procedures the user clearly
  states about themselves or their work, not details of the current task.
- Count only clear statements by the user as preferences.
- kind is one of: fact, preference, decision, procedure, note, hypothesis.
- content is one short self-contained sentence.
- evidence is an exact quote copied from the user's message that supports the
  content. Candidates whose evidence is not in the message are discarded.
- key names the one thing the content gives a value to, in a few lowercase words
  ("dentist", "trip budget", "preferred editor"), the same key for the same thing
  whenever it comes up again; null when the content names no single thing.
- Never keep passwords, keys, tokens, codes or links that give access.
"""


class ReplyError(ValueError):
    """The model's reply is not the JSON asked for."""


def chat_request(model: str, message: str) -> dict[str, Any]:
    return {
        "model": model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": message},
        ],
    }


def read_reply(body: Any) -> list[Candidate]:
    """Candidates from a chat-completions response body; unusable entries are skipped."""
    try:
        text = body["choices"][0]["message"]["content"]
        parsed = json.loads(FENCE.sub("", text.strip()))
    except (KeyError, IndexError, TypeError, AttributeError, ValueError, RecursionError) as exc:
        raise ReplyError(f"the model's reply is not JSON with candidates: {exc!r}") from exc
    entries = parsed.get("candidates") if isinstance(parsed, dict) else parsed
    if not isinstance(entries, list):
        raise ReplyError("the model's reply has no list of candidates")
    found = (_candidate(e) for e in entries)
    return [c for c in found if c is not None]


def _candidate(entry: Any) -> Candidate | None:
    if not isinstance(entry, dict):
        return None
    content, evidence, kind = entry.get("content"), entry.get("evidence"), entry.get("kind")
    if not isinstance(content, str) or not isinstance(evidence, str):
        return None
    key = entry.get("key")
    key = " ".join(key.casefold().split()) if isinstance(key, str) else ""
    # An unknown kind is still a memory: keep it as a note for the person to sort; a key
    # that is no short name is left out (the memory is kept without one).
    return Candidate(
        content=" ".join(content.split()),
        kind=kind if kind in EXTRACTABLE else "note",
        evidence=evidence,
        key=key if 0 < len(key) <= MAX_KEY else None,
    )

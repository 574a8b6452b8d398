"""The coding-agent steps the session benchmarks append, shared by both sides of a comparison.

Like ``_synthetic_text``, this module imports nothing from harness or pydantic-ai, so the
reference runner (a separate virtual environment without harness) builds exactly the same
conversation.

A *step* is one model response (a short text and its tool calls) and the tool results that
answer it. When the transcript corpus is present (``$HARNESS_CORPUS``, else
``../shared/corpus`` beside the checkout; see its README), the steps are the corpus's own
response / tool-result pairs, in file order and repeated as often as needed, so message
shapes and sizes are those of real coding agents. Every call becomes a ``bash`` call with a
``command`` argument (the original arguments as JSON when there was no command) and gets a
fresh id, so repeated steps never share a call id. Without the corpus, the steps are
synthetic: a ``cat`` of a 2 KB module and its content.

The corpus files are read at run time; nothing of them is copied into the repository.
"""

from __future__ import annotations

__all__ = ["Call", "Step", "corpus_location", "first_prompt", "source", "steps", "steps_for_messages"]

import itertools
import json
import os
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple, cast

from _synthetic_text import file_text, path_for


class Call(NamedTuple):
    """One tool call of a step and the result that answers it."""

    call_id: str
    command: str
    result: str


class Step(NamedTuple):
    """One model response (``text`` plus ``calls``) and its tool results."""

    text: str
    calls: tuple[Call, ...]


def corpus_location() -> Path | None:
    """The corpus folder, or ``None`` when it is absent."""
    configured = os.environ.get("HARNESS_CORPUS")
    candidates = [Path(configured)] if configured else []
    candidates.append(Path(__file__).resolve().parents[1].parent / "shared" / "corpus")
    for candidate in candidates:
        if candidate.is_dir() and any(candidate.glob("*.json")):
            return candidate
    return None


def _command(args: Any) -> str:
    if isinstance(args, dict):
        command = cast(dict[str, Any], args).get("command")
        if isinstance(command, str):
            return command
    return json.dumps(args, ensure_ascii=False)


def _corpus_templates(folder: Path) -> list[tuple[str, list[tuple[str, str]]]]:
    """``(text, [(command, result)])`` for every response whose calls the next request answers."""
    templates: list[tuple[str, list[tuple[str, str]]]] = []
    for path in sorted(p for p in folder.glob("*.json") if p.name != "manifest.json"):
        messages = cast(list[dict[str, Any]], json.loads(path.read_text(encoding="utf-8")))
        for response, request in itertools.pairwise(messages):
            if response.get("kind") != "response" or request.get("kind") != "request":
                continue
            parts = cast(list[dict[str, Any]], response.get("parts", []))
            answers = {
                str(p.get("tool_call_id")): str(p.get("content", ""))
                for p in cast(list[dict[str, Any]], request.get("parts", []))
                if p.get("part_kind") == "tool-return"
            }
            calls = [p for p in parts if p.get("part_kind") == "tool-call"]
            if not calls or any(str(c.get("tool_call_id")) not in answers for c in calls):
                continue
            text = "\n".join(str(p.get("content", "")) for p in parts if p.get("part_kind") == "text")
            templates.append(
                (text, [(_command(c.get("args")), answers[str(c.get("tool_call_id"))]) for c in calls])
            )
    return templates


@cache
def _templates() -> tuple[str, tuple[tuple[str, tuple[tuple[str, str], ...]], ...]]:
    folder = corpus_location()
    if folder is not None:
        found = _corpus_templates(folder)
        if found:
            files = len([p for p in folder.glob("*.json") if p.name != "manifest.json"])
            return (
                f"corpus ({files} files, {len(found)} steps)",
                tuple((text, tuple(calls)) for text, calls in found),
            )
    synthetic = tuple(
        (
            f"Reading {path_for(i)} to see what function_{i % 50}_3 does.",
            ((f"cat {path_for(i)}", file_text(i)),),
        )
        for i in range(50)
    )
    return "synthetic (2 KB file reads)", synthetic


def source() -> str:
    """Where the steps come from: the corpus (with its size) or the synthetic fallback."""
    return _templates()[0]


def first_prompt() -> str:
    """The task prompt every benchmark session starts with."""
    return "Fix the failing test in tests/test_models.py and make sure the whole suite passes."


def steps(count: int, start: int = 0) -> Iterator[Step]:
    """``count`` steps, numbered from ``start`` (call ids ``c<step>_<k>`` are unique per number)."""
    templates = _templates()[1]
    for number in range(start, start + count):
        text, calls = templates[number % len(templates)]
        yield Step(
            text=text,
            calls=tuple(Call(f"c{number:06d}_{k}", cmd, result) for k, (cmd, result) in enumerate(calls)),
        )


def steps_for_messages(messages: int) -> int:
    """Steps that bring a session holding the first prompt to ``messages`` messages (2 per step)."""
    return max(0, (messages - 1) // 2)

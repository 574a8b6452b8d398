"""A streamed run's abort stops the deltas and the run the same way with every model.

``TestModel`` (the model of the README's streaming example) and a ``FunctionModel`` whose
stream never waits make all their deltas without yielding to the event loop; before the
fix the whole run finished first, the consumer got every delta after its abort, and the
run ended ``completed``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from harness import Agent, CanonicalMessage, TextPart
from harness.core.model import Model
from harness.core.streaming import TextDelta
from harness.errors import HarnessError, UserAbort
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.models.test import TestModel
from harness.run.recovery import INTERRUPTED_MARKER
from harness.session import Session

WORDS = 200
TEXT = " ".join(f"word{i}" for i in range(WORDS))


def _test_model() -> Model:
    return TestModel(final_text=TEXT)


def _function_model() -> Model:
    async def stream(messages: list[CanonicalMessage], info: FunctionInfo) -> AsyncIterator[Any]:
        del messages, info
        for index, word in enumerate(TEXT.split(" ")):
            yield word if index == 0 else " " + word  # never awaits: as fast as a local model

    return FunctionModel(stream_function=stream)


MODELS: dict[str, Callable[[], Model]] = {"TestModel": _test_model, "FunctionModel": _function_model}


def _saved_texts(session: Session) -> list[str]:
    last = session.messages[-1]
    assert last.kind == "response"
    return [p.content for p in last.parts if isinstance(p, TextPart)]


@pytest.mark.parametrize("make_model", MODELS.values(), ids=MODELS.keys())
async def test_leaving_the_block_stops_the_run_and_saves_what_streamed(
    tmp_path: Path, make_model: Callable[[], Model]
) -> None:
    session = Session(path=tmp_path / "s.json")
    seen: list[str] = []
    async with Agent(make_model()).run_stream("talk", session=session) as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                seen.append(event.text)
                if len(seen) == 3:
                    break
    with pytest.raises(HarnessError, match="has not finished"):
        _ = stream.result
    saved = Session.load(tmp_path / "s.json")
    partial, marker = _saved_texts(saved)
    assert marker == INTERRUPTED_MARKER
    assert partial.startswith("".join(seen))
    assert len(partial.split()) <= 4  # stopped at once, not after the 200 words
    assert check_invariants(saved.messages) == []


@pytest.mark.parametrize("make_model", MODELS.values(), ids=MODELS.keys())
async def test_abort_inside_the_block_stops_the_deltas_and_raises_user_abort(
    make_model: Callable[[], Model],
) -> None:
    session = Session()
    after_abort: list[str] = []

    async def consume() -> None:
        aborted = False
        async with Agent(make_model()).run_stream("talk", session=session) as stream:
            async for event in stream:
                if not isinstance(event, TextDelta):
                    continue
                if aborted:
                    after_abort.append(event.text)
                elif event.text.strip() == "word2":
                    stream.abort()
                    aborted = True

    with pytest.raises(UserAbort):
        await consume()
    assert len(after_abort) <= 1  # at most the delta already queued when the abort came
    assert _saved_texts(session)[-1] == INTERRUPTED_MARKER

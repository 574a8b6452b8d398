"""Scripted models: a conversation written as a list of steps, played one step per request.

::

    from harness.testing import scripted_model, tool_call

    model = scripted_model(
        tool_call("read_file", {"path": "a.txt"}),             # one call
        [tool_call("grep", {"q": "x"}), tool_call("bash", {"cmd": "ls"})],  # parallel calls
        [ThoughtPart("done reading"), "Here is the answer."],   # thinking and text
    )
    agent = Agent(model, tools=[...], capabilities=[...])

Each step is one model response: a string (a text part), a part, a :func:`tool_call`,
a list of those (one response holding them all), a complete response
:class:`~harness.core.messages.CanonicalMessage`, or a function called like a
:class:`~harness.models.function.FunctionModel` function. Asking for more responses than
there are steps raises :class:`~harness.errors.ModelResponseError`. The model
records every message list it was sent in ``model.requests``.
"""

from __future__ import annotations

from harness.errors import ScriptError

__all__ = ["ScriptError", "ScriptedCall", "Step", "scripted_model", "tool_call"]

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from harness.core.messages import CanonicalMessage, Part, TextPart, ToolCallPart
from harness.errors import MessageError
from harness.models.function import FunctionModel, FunctionReturn, ModelFunction


@attrs.frozen
class ScriptedCall:
    """A tool call in a script, whose id is generated when the model is built.

    Attributes:
        tool_name: The tool to call.
        args: The call's arguments.
        tool_call_id: An explicit id, or ``None`` for a generated one.
    """

    tool_name: str
    args: Mapping[str, Any] | str | None = None
    tool_call_id: str | None = None


def tool_call(
    tool_name: str, args: Mapping[str, Any] | str | None = None, *, tool_call_id: str | None = None
) -> ScriptedCall:
    """A tool call step (or element of a step) for :func:`scripted_model`."""
    return ScriptedCall(tool_name, args, tool_call_id)


Step = str | Part | ScriptedCall | CanonicalMessage | Sequence[str | Part | ScriptedCall] | ModelFunction
"""One response of a script (see the module docstring)."""


class _Ids:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.count = 0

    def next(self) -> str:
        self.count += 1
        return f"{self.prefix}{self.count}"


def _part(item: object, ids: _Ids, where: str) -> Part:
    if isinstance(item, str):
        return TextPart(item)
    if isinstance(item, ScriptedCall):
        return ToolCallPart(
            tool_call_id=item.tool_call_id or ids.next(), tool_name=item.tool_name, args=item.args
        )
    if isinstance(item, Part):
        return item
    raise ScriptError(f"{where}: cannot turn {type(item).__name__} into a response part")


def _response(step: object, ids: _Ids, where: str) -> FunctionReturn | ModelFunction:
    if isinstance(step, CanonicalMessage):
        if step.kind != "response":
            raise ScriptError(f"{where}: a scripted step must be a response, got a request")
        return step
    if isinstance(step, str):
        return step
    items: list[object]
    if isinstance(step, Sequence):
        items = list(step)  # pyright: ignore[reportUnknownArgumentType]
        if not items:
            raise ScriptError(f"{where}: an empty list is not a response")
    elif callable(step) and not isinstance(step, ScriptedCall):
        return step  # pyright: ignore[reportReturnType]
    else:
        items = [step]
    parts = [_part(item, ids, where) for item in items]
    try:
        return CanonicalMessage.response(*parts)
    except MessageError as exc:
        raise ScriptError(f"{where}: {exc}") from exc


def scripted_model(
    *steps: Step,
    model_name: str = "scripted",
    context_window: int | None = None,
    id_prefix: str = "scripted_",
) -> FunctionModel:
    """A :class:`~harness.models.function.FunctionModel` playing ``steps`` in order.

    Args:
        steps: One response per request (see the module docstring).
        model_name: The model's name (it picks the tokenizer).
        context_window: The context window the model reports.
        id_prefix: Prefix of generated tool call ids (``scripted_1``, ``scripted_2``...).

    Raises:
        ScriptError: A step cannot be a response (a request, a request part, an empty
            list); the message names the step's index.
    """
    ids = _Ids(id_prefix)
    responses = [_response(step, ids, f"step {index}") for index, step in enumerate(steps)]
    return FunctionModel.from_responses(*responses, model_name=model_name, context_window=context_window)

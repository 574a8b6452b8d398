"""The synthetic benchmark histories, as harness messages (see ``_synthetic_text``)."""

from __future__ import annotations

__all__ = ["build_history", "file_key"]

from _synthetic_text import cycles

from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart


def build_history(n: int) -> list[CanonicalMessage]:
    """``n`` messages of user prompt / read_file call / 2 KB return / answer, ending in a request."""
    messages: list[CanonicalMessage] = []
    for cycle in cycles(n):
        messages.append(CanonicalMessage.request(UserPromptPart(cycle.prompt)))
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=cycle.call_id, tool_name="read_file", args={"path": cycle.path})
            )
        )
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=cycle.call_id, tool_name="read_file", content=cycle.content)
            )
        )
        messages.append(CanonicalMessage.response(TextPart(cycle.answer)))
    messages = messages[: n - 1]
    if messages[-1].kind == "request":
        messages = messages[:-1]
    messages.append(CanonicalMessage.user("Continue with the next step."))
    return messages


def file_key(call: ToolCallPart) -> str | None:
    """The reference benchmark's key function: the ``path`` argument of ``read_file`` calls."""
    if call.tool_name != "read_file":
        return None
    path = call.args_as_dict().get("path")
    return path if isinstance(path, str) else None

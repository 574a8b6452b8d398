"""The core vocabulary: messages and usage, and the protocol every model implements.

Messages, parts and usage are frozen all the way down (see :mod:`harness.core.frozen`).

Imports nothing above it: every other layer builds on these types.
"""

from __future__ import annotations

from harness.core.frozen import FrozenDict, FrozenList, freeze, thaw
from harness.core.messages import (
    HARNESS_KEY,
    REQUEST_PART_KINDS,
    RESPONSE_PART_KINDS,
    CanonicalMessage,
    JsonValue,
    MessageKind,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    Usage,
    UserPromptPart,
    harness_mark,
    history_repr,
    latest_assistant_text,
    marked_metadata,
    message_text,
    replace,
    tool_answer_ids,
    tool_call_ids,
    tool_return_ids,
    with_harness_mark,
)
from harness.core.model import Model, ModelSettings, ToolDefinition
from harness.core.nodes import CallToolsNode, EndNode, ModelRequestNode, Node

__all__ = [
    "CallToolsNode",
    "CanonicalMessage",
    "EndNode",
    "freeze",
    "FrozenDict",
    "FrozenList",
    "HARNESS_KEY",
    "harness_mark",
    "history_repr",
    "JsonValue",
    "latest_assistant_text",
    "marked_metadata",
    "message_text",
    "MessageKind",
    "Model",
    "ModelRequestNode",
    "ModelSettings",
    "Node",
    "Part",
    "replace",
    "REQUEST_PART_KINDS",
    "RESPONSE_PART_KINDS",
    "RetryPromptPart",
    "SystemPromptPart",
    "TextPart",
    "thaw",
    "ThoughtPart",
    "tool_answer_ids",
    "tool_call_ids",
    "tool_return_ids",
    "ToolCallPart",
    "ToolDefinition",
    "ToolReturnPart",
    "UnknownPart",
    "Usage",
    "UserPromptPart",
    "with_harness_mark",
]

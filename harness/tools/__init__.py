"""Tools: schema, validation and conversion, the run context a tool sees, the tool-call lifecycle."""

from __future__ import annotations

from harness.tools.context import RunContext, RunState
from harness.tools.lifecycle import ToolCallRecord, ToolCallRegistry, ToolCallStatus, ToolEvent, ToolEventKind
from harness.tools.remote import RUN_LOCAL_FIELDS, SESSION_LOCAL_FIELDS, remote_context
from harness.tools.tool import (
    TRANSIENT_TOOL_ERRORS,
    Tool,
    as_tool,
    parse_google_docstring,
    schema_for_annotation,
    validate_arguments,
)

__all__ = [
    "RUN_LOCAL_FIELDS",
    "SESSION_LOCAL_FIELDS",
    "remote_context",
    "TRANSIENT_TOOL_ERRORS",
    "as_tool",
    "parse_google_docstring",
    "RunContext",
    "RunState",
    "schema_for_annotation",
    "Tool",
    "ToolCallRecord",
    "ToolCallRegistry",
    "ToolCallStatus",
    "ToolEvent",
    "ToolEventKind",
    "validate_arguments",
]

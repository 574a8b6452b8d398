"""harness: a minimal agent loop with pluggy hooks and context-window capabilities."""

from harness.agent import Agent, RunResult
from harness.capability import Capability, Trigger
from harness.compaction import CompactionResult, compact, compact_sync
from harness.context import CompactionEvent, RequestContext
from harness.errors import (
    CapabilityError,
    CapabilityOrderError,
    HarnessError,
    HarnessExperimentalWarning,
    HarnessWarning,
    MessageError,
    ModelError,
    PluginLoadError,
    WireFormatError,
    is_experimental,
    warn_experimental,
)
from harness.markers import hookimpl, hookspec
from harness.messages import (
    CanonicalMessage,
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
    latest_assistant_text,
    message_text,
    tool_answer_ids,
    tool_call_ids,
    tool_return_ids,
    with_harness_mark,
)
from harness.plugins import PluginManager
from harness.session import Session, SessionLoadError
from harness.tokens import ApproximateTokenCountWarning, TokenCounter, TokenizerError, get_token_counter
from harness.wire import dump_messages, load_messages

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "ApproximateTokenCountWarning",
    "CanonicalMessage",
    "Capability",
    "CompactionEvent",
    "CompactionResult",
    "CapabilityError",
    "CapabilityOrderError",
    "HarnessError",
    "HarnessExperimentalWarning",
    "HarnessWarning",
    "MessageError",
    "ModelError",
    "Part",
    "PluginLoadError",
    "PluginManager",
    "RequestContext",
    "RetryPromptPart",
    "RunResult",
    "Session",
    "SessionLoadError",
    "SystemPromptPart",
    "TextPart",
    "ThoughtPart",
    "ToolCallPart",
    "ToolReturnPart",
    "TokenizerError",
    "TokenCounter",
    "Trigger",
    "UnknownPart",
    "Usage",
    "UserPromptPart",
    "WireFormatError",
    "__version__",
    "compact",
    "compact_sync",
    "dump_messages",
    "get_token_counter",
    "hookimpl",
    "hookspec",
    "is_experimental",
    "harness_mark",
    "latest_assistant_text",
    "load_messages",
    "message_text",
    "tool_answer_ids",
    "tool_call_ids",
    "tool_return_ids",
    "warn_experimental",
    "with_harness_mark",
]

"""The attribute, event and operation names the plugin writes (for queries and tests).

The ``gen_ai.*`` names are the OpenTelemetry GenAI semantic conventions' (development
status); the ``harness.*`` names are this plugin's own, for facts the conventions have no
name for. The ``gen_ai.conversation.compaction*`` names follow the conventions' style
for the compaction manifest, which they do not define.
"""

from __future__ import annotations

__all__ = [
    "AGENT_NAME",
    "COMPACTED",
    "COMPACTION_CLEARED_IDS",
    "COMPACTION_DETAILS",
    "COMPACTION_EVENT",
    "COMPACTION_MESSAGES_AFTER",
    "COMPACTION_MESSAGES_BEFORE",
    "COMPACTION_REASON",
    "COMPACTION_REMOVED_IDS",
    "COMPACTION_STRATEGY",
    "COMPACTION_TOKENS_AFTER",
    "COMPACTION_TOKENS_BEFORE",
    "COMPACTION_TOKENS_SAVED",
    "CONVERSATION_ID",
    "ERROR_TYPE",
    "INPUT_MESSAGES",
    "OPERATION_CHAT",
    "OPERATION_EXECUTE_TOOL",
    "OPERATION_INVOKE_AGENT",
    "OPERATION_NAME",
    "OTHER_PROVIDER",
    "OUTPUT_MESSAGES",
    "PROVIDER_NAME",
    "REQUEST_ATTEMPT",
    "REQUEST_CALLS",
    "REQUEST_MAX_TOKENS",
    "REQUEST_MODEL",
    "REQUEST_PURPOSE",
    "REQUEST_SOURCE",
    "REQUEST_TEMPERATURE",
    "RESPONSE_FINISH_REASONS",
    "RESPONSE_ID",
    "RESPONSE_MODEL",
    "RUN_ITERATIONS",
    "RUN_PENDING_APPROVALS",
    "RUN_REQUEST_ID",
    "RUN_STATUS",
    "SYSTEM_INSTRUCTIONS",
    "TOOL_ATTEMPTS",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_CALL_RESULT",
    "TOOL_DEFINITIONS",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "TOOL_OUTCOME",
    "TOOL_TYPE",
    "USAGE_CACHE_CREATION_INPUT_TOKENS",
    "USAGE_CACHE_READ_INPUT_TOKENS",
    "USAGE_INPUT_TOKENS",
    "USAGE_OUTPUT_TOKENS",
]

from typing import Final

# -- operations ---------------------------------------------------------------------------
OPERATION_NAME: Final = "gen_ai.operation.name"
OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_CHAT: Final = "chat"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"

# -- shared -------------------------------------------------------------------------------
PROVIDER_NAME: Final = "gen_ai.provider.name"
OTHER_PROVIDER: Final = "_OTHER"
"""The conventions' value for a provider they have no name for (``FunctionModel``, ``TestModel``...)."""
CONVERSATION_ID: Final = "gen_ai.conversation.id"
AGENT_NAME: Final = "gen_ai.agent.name"
ERROR_TYPE: Final = "error.type"
REQUEST_MODEL: Final = "gen_ai.request.model"
USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"

# -- content (opt-in) -----------------------------------------------------------------------
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"

# -- the run ----------------------------------------------------------------------------------
RUN_REQUEST_ID: Final = "harness.run.request_id"
RUN_STATUS: Final = "harness.run.status"
RUN_ITERATIONS: Final = "harness.run.iterations"
RUN_PENDING_APPROVALS: Final = "harness.run.pending_approvals"

# -- model requests -----------------------------------------------------------------------------
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_ID: Final = "gen_ai.response.id"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
COMPACTED: Final = "gen_ai.conversation.compacted"
REQUEST_PURPOSE: Final = "harness.request.purpose"
REQUEST_SOURCE: Final = "harness.request.source"
REQUEST_ATTEMPT: Final = "harness.request.attempt"
REQUEST_CALLS: Final = "harness.request.calls"

# -- tool calls -----------------------------------------------------------------------------------
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_OUTCOME: Final = "harness.tool.outcome"
TOOL_ATTEMPTS: Final = "harness.tool.attempts"

# -- compactions ----------------------------------------------------------------------------------
COMPACTION_EVENT: Final = "gen_ai.conversation.compaction"
COMPACTION_STRATEGY: Final = "gen_ai.conversation.compaction.strategy"
COMPACTION_REASON: Final = "gen_ai.conversation.compaction.reason"
COMPACTION_MESSAGES_BEFORE: Final = "gen_ai.conversation.compaction.messages_before"
COMPACTION_MESSAGES_AFTER: Final = "gen_ai.conversation.compaction.messages_after"
COMPACTION_TOKENS_BEFORE: Final = "gen_ai.conversation.compaction.tokens_before"
COMPACTION_TOKENS_AFTER: Final = "gen_ai.conversation.compaction.tokens_after"
COMPACTION_TOKENS_SAVED: Final = "gen_ai.conversation.compaction.tokens_saved"
COMPACTION_REMOVED_IDS: Final = "gen_ai.conversation.compaction.removed_tool_call_ids"
COMPACTION_CLEARED_IDS: Final = "gen_ai.conversation.compaction.cleared_tool_call_ids"
COMPACTION_DETAILS: Final = "gen_ai.conversation.compaction.details"

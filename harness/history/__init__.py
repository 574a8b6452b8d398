"""Pure rules about histories: invariants, lossless repairs and safe cut points.

Nothing here mutates its input. Repairs return a :class:`HistoryEdit` holding a new list
in which every message that was not changed is the *same object* as in the input (token
caches key on identity), plus a :class:`Change` for everything that was done.

Vocabulary:

* An **answer** to a tool call is a :class:`~harness.core.messages.ToolReturnPart` or a
  :class:`~harness.core.messages.RetryPromptPart` that names a tool (``tool_name`` is set)
  carrying the call's ``tool_call_id``. A retry prompt without a tool name is a general
  retry and answers nothing. A retry prompt that names a tool but has no id answers no
  call and is reported as an orphan (id ``""``).
* A history is **sendable** when :func:`check_invariants` returns ``[]``. The empty
  history is sendable, and so is a history ending with a request nobody answered yet
  (that is the request being sent).

Modules (import the names from here):

* :mod:`~harness.history.invariants`: :func:`check_invariants` -> list of :class:`Violation`.
* :mod:`~harness.history.changes`: :class:`HistoryEdit`, :class:`Change`, :func:`changed_span`.
* :mod:`~harness.history.repairs`: :func:`rename_duplicate_call_ids`,
  :func:`answer_dangling_calls` (``mode="remove"`` deletes), :func:`remove_orphan_returns`
  (deletes answers nothing explains), :func:`remove_empty_responses`.
* :mod:`~harness.history.merges`: :func:`merge_consecutive_requests`,
  :func:`merge_consecutive_responses`, :func:`merge_trailing_request`.
* :mod:`~harness.history.cleanup`: :func:`run_cleanup_loop` (the four repairs and two
  merges until the history is sendable), :func:`sanitize_for_resume` (strips system prompts).
* :mod:`~harness.history.pruning`: :func:`prune_old_tool_outputs` (replaces old tool
  output with a placeholder; the caller passes a :class:`PartCounter`).
* :mod:`~harness.history.cutoffs` (keep ``messages[c:]``): :func:`is_safe_cutoff`,
  :func:`safe_cutoff`, :func:`safe_token_cutoff`.
* :mod:`~harness.history.pairs`: :class:`ToolPair`, :func:`tool_pairs`.
* :mod:`~harness.history.queries`: :func:`is_empty_response`, :func:`is_system_only_request`,
  :func:`leading_system_request`, :func:`first_user_request_index`, :func:`user_prompt_count`.

Every function is O(number of parts) except where noted. The package imports only the
standard library, attrs, :mod:`harness.errors` and :mod:`harness.core`.
"""

from __future__ import annotations

__all__ = [
    "CHANGE_KINDS",
    "VIOLATION_KINDS",
    "Change",
    "HistoryEdit",
    "PartCounter",
    "ToolPair",
    "Violation",
    "ViolationKind",
    "answer_dangling_calls",
    "changed_span",
    "check_invariants",
    "first_user_request_index",
    "is_empty_response",
    "is_safe_cutoff",
    "is_system_only_request",
    "leading_system_request",
    "merge_consecutive_requests",
    "merge_consecutive_responses",
    "merge_trailing_request",
    "prune_old_tool_outputs",
    "remove_empty_responses",
    "remove_orphan_returns",
    "rename_duplicate_call_ids",
    "run_cleanup_loop",
    "safe_cutoff",
    "safe_token_cutoff",
    "sanitize_for_resume",
    "tool_pairs",
    "user_prompt_count",
]

from harness.history.changes import CHANGE_KINDS, Change, HistoryEdit, changed_span
from harness.history.cleanup import run_cleanup_loop, sanitize_for_resume
from harness.history.cutoffs import is_safe_cutoff, safe_cutoff, safe_token_cutoff
from harness.history.invariants import VIOLATION_KINDS, Violation, ViolationKind, check_invariants
from harness.history.merges import (
    merge_consecutive_requests,
    merge_consecutive_responses,
    merge_trailing_request,
)
from harness.history.pairs import ToolPair, tool_pairs
from harness.history.pruning import PartCounter, prune_old_tool_outputs
from harness.history.queries import (
    first_user_request_index,
    is_empty_response,
    is_system_only_request,
    leading_system_request,
    user_prompt_count,
)
from harness.history.repairs import (
    answer_dangling_calls,
    remove_empty_responses,
    remove_orphan_returns,
    rename_duplicate_call_ids,
)

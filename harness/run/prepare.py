"""History preparation at the start of a run (the contract's step 3).

``prune_old_tool_outputs``, then ``run_cleanup_loop``, then the new user request merged
into a trailing request (merged, never dropped), then ``sanitize_for_resume``.
"""

from __future__ import annotations

__all__ = ["prepare_history"]

from collections.abc import Sequence
from datetime import UTC, datetime

from harness import history as hist
from harness.core.messages import CanonicalMessage, UserPromptPart
from harness.errors import HarnessError
from harness.tokens import TokenCounter


def prepare_history(
    messages: Sequence[CanonicalMessage],
    prompt: str | None,
    counter: TokenCounter,
    *,
    request: CanonicalMessage | None = None,
) -> list[CanonicalMessage]:
    """Return the history a run starts from: cleaned, with ``prompt`` as its last request.

    Args:
        messages: The session's stored history (not modified).
        prompt: The new user prompt, or ``None`` to continue a pending request.
        counter: Token counter for pruning old tool outputs.
        request: The request holding ``prompt``, when the caller built it (to know it
            afterwards); default: a new request with one user-prompt part.

    Raises:
        HarnessError: ``prompt`` is ``None`` but the history does not end with a request.
    """
    prepared = list(messages)
    prepared = hist.prune_old_tool_outputs(prepared, counter=counter).messages
    prepared = hist.run_cleanup_loop(prepared).messages
    if prompt is not None:
        if request is None:
            request = CanonicalMessage.request(UserPromptPart(prompt, timestamp=datetime.now(UTC)))
        prepared = hist.merge_trailing_request(prepared, request).messages
    elif not prepared or prepared[-1].kind != "request":
        raise HarnessError(
            "Agent.run(prompt=None) continues a pending request, but the history does not end with one"
        )
    return hist.sanitize_for_resume(prepared).messages

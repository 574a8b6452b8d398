"""Which requests over the budget no stack could have brought under it.

A stack must keep the first message (the instructions and the task), the request being
sent, and the response whose tool calls that request answers (a pair is never split).
When those alone exceed the budget, the request is over budget whatever the stack does:
it is counted as unavoidable, and the other requests over budget are what a stack could
have prevented.
"""

from __future__ import annotations

__all__ = ["floor_tokens", "is_unavoidable"]

from collections.abc import Sequence

from harness.core.messages import CanonicalMessage
from harness.tokens import TokenCounter


def floor_tokens(sent: Sequence[CanonicalMessage], counter: TokenCounter) -> int:
    """Tokens of what every stack must keep of ``sent``: the first message and the newest turn."""
    if len(sent) <= 3:
        return counter.count_messages(sent)
    return counter.count_messages([sent[0], *sent[-2:]])


def is_unavoidable(sent: Sequence[CanonicalMessage], size: int, budget: int, counter: TokenCounter) -> bool:
    """True when ``sent`` (of ``size`` tokens) is over ``budget`` and no stack could make it fit."""
    return size > budget and floor_tokens(sent, counter) > budget

"""Writing your own capability: ``TruncateLongToolReturns``, and the invariant guard at work.

What it shows, for third-party plugin authors:

* A capability is a subclass of :class:`harness.capabilities.base.Capability` with a
  :class:`~harness.capabilities.base.Trigger` (when to act) and an ``async compact(ctx, *, reason)``
  step (what to do). The base class supplies the ``before_model_request`` hook that runs
  ``compact`` when ``should_compact`` returns a reason.
* ``TruncateLongToolReturns`` shortens tool returns longer than ``max_chars``. Messages are
  frozen, so it builds edited copies and keeps every untouched message as the same object
  (cheap to re-count, cache friendly). It marks what it edited with
  ``with_harness_mark`` and recognises its own work by that mark, never by text, so
  running it twice changes nothing. It never touches the request being sent (the model
  has not seen those results yet). It reports the edit through ``ctx.replace_messages``,
  which measures tokens and fires the ``on_compaction`` hook.
* It declares ``runs_before = ("clear_tool_results",)``: listed after ``ClearToolResults``,
  the plugin manager still runs it first.
* It is used with ``harness.run.compaction.compact_sync`` (a ``/compact`` command or a dry run)
  and inside an ``Agent``.
* A deliberately broken capability that drops a tool return is stopped by the invariant
  guard: ``CapabilityError`` names it and the history is restored.

Run it with ``uv run python examples/custom_capability.py``.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import ClassVar

import attrs

from harness import (
    CanonicalMessage,
    CapabilityError,
    HarnessExperimentalWarning,
    Part,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.capabilities import Capability, RequestContext, Trigger
from harness.core import harness_mark, with_harness_mark
from harness.history import check_invariants
from harness.hooks import PluginManager
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent, compact_sync

warnings.filterwarnings("ignore", category=HarnessExperimentalWarning)

from harness_clear_tool_results import ClearToolResults  # noqa: E402


class TruncateLongToolReturns(Capability):
    """Shorten tool returns longer than ``max_chars`` characters, keeping their head.

    Args:
        max_chars: Returns longer than this are cut to this many characters plus a note.
        max_messages: Optional trigger: act only above this many messages.
        max_tokens: Optional trigger: act only above this many tokens.

    Without a trigger it acts before every request; a request with nothing new to
    truncate reports nothing.
    """

    name: ClassVar[str] = "truncate_long_tool_returns"
    runs_before: ClassVar[tuple[str, ...]] = ("clear_tool_results",)

    def __init__(
        self, *, max_chars: int = 200, max_messages: int | None = None, max_tokens: int | None = None
    ) -> None:
        if max_chars < 1:
            raise ValueError("max_chars must be positive.")
        self.max_chars = max_chars
        self.trigger = Trigger.create(max_messages=max_messages, max_tokens=max_tokens, required=False)

    def should_compact(self, ctx: RequestContext) -> str | None:
        """Act on every request without a trigger, else when the trigger fires."""
        if not self.trigger.configured:
            return "every request"
        return self.trigger.exceeded(ctx, self.name)

    def _shorten(self, part: Part) -> ToolReturnPart | None:
        """The truncated copy of ``part``, or ``None`` when it stays as it is."""
        if not isinstance(part, ToolReturnPart) or not isinstance(part.content, str):
            return None
        if len(part.content) <= self.max_chars or harness_mark(part) is not None:
            return None  # short enough, or already edited by a capability (recognised by its mark)
        dropped = len(part.content) - self.max_chars
        short = part.content[: self.max_chars] + f"\n[... {dropped} characters truncated]"
        copy = attrs.evolve(part, content=short)  # parts are frozen attrs classes
        return with_harness_mark(copy, truncated_by=self.name, original_chars=len(part.content))

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Truncate every long tool return except those of the request being sent."""
        messages = ctx.messages
        edited: list[CanonicalMessage] = []
        truncated: list[str] = []
        for index, message in enumerate(messages):
            if index == len(messages) - 1 or message.kind != "request":
                edited.append(message)  # unchanged messages stay the same objects
                continue
            parts: list[Part] = []
            for part in message.parts:
                short = self._shorten(part)
                parts.append(part if short is None else short)
                if short is not None:
                    truncated.append(short.tool_call_id)
            changed = any(a is not b for a, b in zip(parts, message.parts, strict=True))
            edited.append(message.replace(parts=tuple(parts)) if changed else message)
        ctx.replace_messages(  # a no-op (nothing reported) when no message changed
            edited,
            strategy=self.name,
            reason=reason,
            cleared_tool_call_ids=truncated,
            details={"max_chars": self.max_chars},
        )


class DropOldestToolReturn(Capability):
    """A BROKEN capability: it drops a tool return and leaves its call dangling."""

    name: ClassVar[str] = "drop_oldest_tool_return"

    async def compact(self, ctx: RequestContext, *, reason: str = "forced") -> None:
        """Remove the first tool return of the history (never do this)."""
        edited: list[CanonicalMessage] = []
        dropped = False
        for message in ctx.messages:
            kept = tuple(p for p in message.parts if dropped or not isinstance(p, ToolReturnPart))
            dropped = dropped or len(kept) != len(message.parts)
            if kept:
                edited.append(message.replace(parts=kept))
        ctx.replace_messages(edited, strategy=self.name, reason=reason)


LOG = "\n".join(f"line {i}: all good" for i in range(60))


def history() -> list[CanonicalMessage]:
    """A short coding session with two long tool results, ending with the request being sent."""
    return [
        CanonicalMessage.request(UserPromptPart("Why does the build fail?")),
        CanonicalMessage.response(
            TextPart("Reading the log."),
            ToolCallPart(tool_call_id="c1", tool_name="read_log", args={"name": "build"}),
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c1", tool_name="read_log", content=LOG)),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c2", tool_name="read_log", args={"name": "test"})
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c2", tool_name="read_log", content=LOG + "\nline 60: FAILED")
        ),
        CanonicalMessage.response(TextPart("The last test line failed.")),
        CanonicalMessage.request(UserPromptPart("Which one?")),
    ]


def show_compact_sync() -> None:
    """Apply the capability outside a run, twice."""
    messages = history()
    result = compact_sync(
        messages, [ClearToolResults(max_messages=50), TruncateLongToolReturns(max_chars=120)], force=False
    )
    (event,) = result.events
    print(f"compact_sync: {event.strategy} truncated {list(event.cleared_tool_call_ids)}")
    print(
        f"  tokens {result.tokens_before} -> {result.tokens_after}, input untouched: {messages == history()}"
    )
    part = result.messages[2].parts[0]
    print(f"  mark on the edited part: {dict(harness_mark(part) or {})}")
    again = compact_sync(result.messages, [TruncateLongToolReturns(max_chars=120)], force=False)
    print(f"  second pass: {len(again.events)} events (recognised by its mark)")


def show_in_agent() -> None:
    """Use the capability in an agent: the model sees old long results truncated."""

    def read_log(name: str) -> str:
        """Read a log file.

        Args:
            name: The log's name.
        """
        return LOG if name == "build" else LOG + "\nline 60: FAILED"

    def model(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id="c1", tool_name="read_log", args={"name": "build"})
            )
        if len(returns) == 1:
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id="c2", tool_name="read_log", args={"name": "test"})
            )
        old, newest = (len(str(r.content)) for r in returns)
        return f"I saw the old result as {old} characters and the newest in full, {newest} characters."

    manager = PluginManager()
    agent = Agent(
        FunctionModel(model),
        tools=[read_log],
        plugin_manager=manager,
        capabilities=[ClearToolResults(max_messages=50), TruncateLongToolReturns(max_chars=120)],
    )
    print("agent: resolved order", [getattr(c, "name", "") for c in manager.capabilities])
    result = agent.run_sync("Why does the build fail?")
    print(f"  output: {result.output}")
    print(f"  violations: {check_invariants(result.all_messages)}")


def show_guard() -> None:
    """A broken capability is caught and the history restored."""
    messages = history()
    try:
        compact_sync(messages, [DropOldestToolReturn()], force=True)
    except CapabilityError as exc:
        print(f"guard (compact_sync): CapabilityError from {exc.capability!r}")
        detail = str(exc).removeprefix(f"capability {exc.capability!r}: ")
        print(f"  {detail[:100]}...")

    manager = PluginManager()
    manager.add_capabilities([DropOldestToolReturn()])
    live = history()
    before = list(live)
    ctx = RequestContext(messages=live, token_counter=manager.token_counter())
    try:
        asyncio.run(manager.run_before_model_request(ctx))
    except CapabilityError:
        restored = len(ctx.messages) == len(before) and all(
            a is b for a, b in zip(ctx.messages, before, strict=True)
        )
        print(f"guard (in place): history restored: {restored}, events kept: {len(ctx.events)}")


def main() -> None:
    """Run the three demonstrations."""
    show_compact_sync()
    show_in_agent()
    show_guard()


if __name__ == "__main__":
    main()

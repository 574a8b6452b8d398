"""A ready-made hypothesis property test for a capability.

::

    from harness.testing import check_capability_invariants

    def test_my_capability_is_safe():
        check_capability_invariants(lambda: MyCapability(max_tokens=50), max_examples=100)

It needs the ``testing`` extra (``hypothesis``), imported when the function is called.
"""

from __future__ import annotations

__all__ = ["check_capability_invariants", "pin_parts"]

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from harness.core.messages import CanonicalMessage, UnknownPart, replace
from harness.core.pins import pin
from harness.run.compaction import compact_sync
from harness.testing.assertions import assert_transformation_safe

if TYPE_CHECKING:
    from hypothesis.strategies import SearchStrategy

    from harness.core.model import Model


def check_capability_invariants(
    capability_factory: Callable[[], object],
    *,
    max_examples: int = 50,
    histories: SearchStrategy[list[CanonicalMessage]] | None = None,
    force: bool | None = None,
    user_prompts: bool = True,
    idempotent: bool = False,
    model: Model | None = None,
    model_name: str | None = None,
    context_window: int | None = None,
    shrink: bool = True,
    pins: bool = True,
) -> None:
    """Run a capability over generated histories and assert the history invariants.

    For each example a fresh capability from ``capability_factory`` runs through
    :func:`harness.run.compaction.compact_sync` (so ordering, the invariant guard and events
    apply exactly as in a run), then :func:`~harness.testing.assert_transformation_safe`
    checks the result: no invariant broken, no tool call split from its answers, the
    request being sent kept, and (with ``user_prompts``) no user prompt lost. A
    ``CapabilityError`` from the guard fails the test too. Hypothesis shrinks a failure to
    a minimal history. With ``pins``, random parts of the drawn histories are pinned
    (:func:`harness.pin`), and :func:`~harness.testing.assert_pins_kept` checks that the
    capability kept every one of them unchanged.

    Call it from a synchronous test (it runs its own event loop).

    Args:
        capability_factory: Builds the capability (called once per example).
        max_examples: Hypothesis examples to try.
        histories: The strategy to draw histories from (default:
            ``harness.testing.strategies.histories(min_messages=1, max_messages=30)``, which
            end with the request being sent).
        force: ``True`` calls ``compact`` unconditionally, ``False`` goes through the
            trigger, ``None`` (default) draws both.
        user_prompts: Also assert that no user prompt is lost (turn off for summarizers).
        idempotent: Also assert that a second run of the same capability over the result,
            in the same mode, changes nothing.
        model: Passed to ``compact_sync`` (e.g. a scripted summarizer).
        model_name: Passed to ``compact_sync`` (picks the tokenizer).
        context_window: Passed to ``compact_sync`` (fraction triggers).
        shrink: Let hypothesis shrink a failure to a minimal history (slower to fail).
        pins: Pin random parts (about one in four) and assert none is lost or changed.

    Raises:
        AssertionError: A property failed (hypothesis reports the minimal example).
        harness.CapabilityError: The capability raised or left an invalid history.
    """
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    from harness.testing.strategies import histories as default_histories

    strategy = histories if histories is not None else default_histories(min_messages=1, max_messages=30)
    forces = st.booleans() if force is None else st.just(force)
    flags = st.lists(st.sampled_from((False, False, False, True)), max_size=64) if pins else st.just([])

    phases = tuple(Phase) if shrink else tuple(p for p in Phase if p not in (Phase.shrink, Phase.explain))

    @settings(
        max_examples=max_examples,
        deadline=None,
        phases=phases,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(strategy, forces, flags)
    def run(drawn: list[CanonicalMessage], forced: bool, pinned: list[bool]) -> None:
        before = pin_parts(drawn, pinned)
        capability = capability_factory()
        result = compact_sync(
            before,
            [capability],
            force=forced,
            model=model,
            model_name=model_name,
            context_window=context_window,
        )
        assert_transformation_safe(before, result.messages, user_prompts=user_prompts)
        if idempotent:
            again = compact_sync(
                result.messages,
                [capability],
                force=forced,
                model=model,
                model_name=model_name,
                context_window=context_window,
            )
            if again.messages != result.messages or again.events:
                raise AssertionError(
                    "not idempotent: a second run changed the history "
                    f"({len(result.messages)} -> {len(again.messages)} messages, "
                    f"{len(again.events)} event(s))"
                )

    run()


def pin_parts(messages: list[CanonicalMessage], flags: Sequence[bool]) -> list[CanonicalMessage]:
    """``messages`` with the parts whose flag is true pinned (flags in part order; missing: unpinned).

    Parts that cannot carry a pin (unknown parts, metadata that is not a mapping) are skipped.
    """
    if not any(flags):
        return messages
    out: list[CanonicalMessage] = []
    index = 0
    for message in messages:
        parts = list(message.parts)
        for position, part in enumerate(parts):
            flagged = index < len(flags) and flags[index]
            index += 1
            metadata = getattr(part, "metadata", None)
            if (
                flagged
                and not isinstance(part, UnknownPart)
                and (metadata is None or isinstance(metadata, Mapping))
            ):
                parts[position] = pin(part, "property")
        out.append(message if parts == list(message.parts) else replace(message, parts=tuple(parts)))
    return out

"""The summarizer interface and the model-backed summarizer.

A summarizer is any callable taking a :class:`SummaryRequest` and returning (or
awaiting to) a ``str`` or a :class:`Summary`. :class:`ModelSummarizer` asks a harness
:class:`~harness.core.model.Model`; :class:`harness_summarizing.StructuralDigest` needs no
model at all.
"""

from __future__ import annotations

__all__ = [
    "ModelSummarizer",
    "Summarizer",
    "Summary",
    "SummaryRequest",
]

from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from harness.core import (
    CanonicalMessage,
    JsonValue,
    Model,
    ModelSettings,
    Part,
    SystemPromptPart,
    TextPart,
    Usage,
    UserPromptPart,
)

if TYPE_CHECKING:
    from harness.capabilities import RequestContext


@attrs.frozen
class SummaryRequest:
    """Everything a summarizer gets for one compaction.

    Attributes:
        messages: The messages being summarized, without the parts kept verbatim (the
            system prompt, the preserved first user request, kept user prompts) and
            without the previous summary.
        transcript: ``messages`` rendered as text (tool returns bounded).
        prompt: The rendered summary prompt (``transcript`` and ``previous_summary``
            substituted into the template).
        instructions: System instructions for a model summarizer.
        previous_summary: Text of the summary being updated, or ``None``.
        previous_digest: Structured payload of the previous summary when it was a
            structural digest (lets :class:`~harness_summarizing.StructuralDigest` merge
            exactly), else ``None``.
        kept_verbatim: Parts kept word for word beside the summary (system prompts, the
            first user request, kept user prompts); a summarizer need not repeat them.
        context: The request context (model, usage, token counter).
        max_tokens: About how many tokens the summary may take so the compacted history
            fits its target (``None``: no bound). The structural digest renders within
            it; a model summarizer may use it to size its answer.
    """

    messages: tuple[CanonicalMessage, ...]
    transcript: str
    prompt: str
    instructions: str
    previous_summary: str | None = None
    previous_digest: Mapping[str, Any] | None = None
    kept_verbatim: tuple[Part, ...] = ()
    context: RequestContext | None = attrs.field(default=None, repr=False)
    max_tokens: int | None = None


@attrs.frozen
class Summary:
    """A summarizer's answer.

    Attributes:
        text: The summary text shown to the model.
        digest: Optional JSON payload stored in the summary's mark (used by the structural
            digest to merge incrementally).
        usage: Usage of the summarizer's own model requests; added to the run's usage.
    """

    text: str
    digest: JsonValue = None
    usage: Usage | None = None


class Summarizer(Protocol):
    """What ``SummarizingCompaction(summarizer=...)`` accepts (sync or async)."""

    def __call__(self, request: SummaryRequest, /) -> str | Summary | Awaitable[str | Summary]:
        """Summarize ``request.messages`` (updating ``request.previous_summary``)."""
        ...


@attrs.define
class ModelSummarizer:
    """Summarize with a harness model: one request holding the instructions and the prompt.

    The usage the provider reports is returned (and charged to the run by the
    capability). When the model reports none, the prompt and the answer are counted with
    the run's token counter instead, so summarization is never free in the run's books.

    Attributes:
        model: The model to ask.
        settings: Settings for the request.
    """

    model: Model
    settings: ModelSettings = attrs.field(factory=ModelSettings)

    async def __call__(self, request: SummaryRequest) -> Summary:
        """Ask the model for a summary of ``request``.

        Returns:
            The summary text (text parts of the response joined) and the request's usage.
        """
        prompt_message = CanonicalMessage.request(
            SystemPromptPart(request.instructions), UserPromptPart(request.prompt)
        )
        if request.context is not None:  # one of the run's effect units (journaled by engines)
            response = await request.context.request_model(
                self.model, [prompt_message], (), self.settings, source="summarizing"
            )
        else:
            response = await self.model.request([prompt_message], [], self.settings)
        text = "".join(p.content for p in response.parts if isinstance(p, TextPart))
        usage = response.usage
        if usage is None and request.context is not None:
            counter = request.context.token_counter
            usage = Usage(
                request_tokens=counter.count_messages([prompt_message]),
                response_tokens=counter.count_text(text),
            )
        return Summary(text=text, usage=usage)

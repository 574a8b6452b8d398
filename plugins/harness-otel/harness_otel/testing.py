"""Test the spans your agent emits: a real SDK tracer provider that keeps its spans in memory.

Needs ``opentelemetry-sdk`` (``pip install opentelemetry-sdk``); the plugin itself needs
only the API. Example::

    recorder = SpanRecorder()
    agent.plugin_manager.register(OTelPlugin(tracer_provider=recorder.provider))
    await agent.run("hi")
    run = recorder.one("invoke_agent")
    assert [s.name for s in recorder.children(run)] == ["chat test", "execute_tool add", "chat test"]
"""

from __future__ import annotations

__all__ = ["SpanRecorder"]

try:
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
except ImportError as exc:  # pragma: no cover - the SDK is a test dependency
    raise ImportError(
        "harness_otel.testing needs the OpenTelemetry SDK: pip install opentelemetry-sdk"
    ) from exc


class SpanRecorder:
    """A tracer provider whose finished spans are kept in memory, with look-ups.

    Attributes:
        provider: The SDK tracer provider to give ``OTelPlugin(tracer_provider=...)``.
        exporter: The in-memory exporter it writes each finished span to, at once.
    """

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def finished(self) -> list[ReadableSpan]:
        """Every finished span, in the order they ended."""
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        """The finished spans whose name starts with ``prefix``, in the order they started."""
        return sorted((s for s in self.finished if s.name.startswith(prefix)), key=_start)

    def one(self, prefix: str) -> ReadableSpan:
        """The only finished span whose name starts with ``prefix``.

        Raises:
            AssertionError: None or several are (the message lists every span's name).
        """
        found = self.named(prefix)
        if len(found) != 1:
            names = [s.name for s in self.finished]
            raise AssertionError(f"{len(found)} finished spans start with {prefix!r}: {names}")
        return found[0]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        """The finished spans whose parent is ``parent``, in the order they started."""
        context = parent.context
        if context is None:  # pragma: no cover - finished SDK spans have one
            return []
        return sorted(
            (s for s in self.finished if s.parent is not None and s.parent.span_id == context.span_id),
            key=_start,
        )

    def clear(self) -> None:
        """Forget the spans finished so far."""
        self.exporter.clear()

    def shutdown(self) -> None:
        """Shut the provider down (its processor and exporter)."""
        self.provider.shutdown()


def _start(span: ReadableSpan) -> int:
    return span.start_time or 0

"""The plugin as installed: its entry point, the global tracer provider, registration and its arguments."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Generator
from pathlib import Path

import harness_otel
import pytest
from harness_otel import OTelPlugin
from harness_otel.testing import SpanRecorder
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import NoOpTracerProvider

from harness import Agent, PluginLoadError, PluginManager, ToolCall, ToolOutcome, hookimpl
from harness.models.test import TestModel


def test_the_entry_point_registers_the_shared_instance() -> None:
    pm = PluginManager()
    assert pm.load_entrypoint_plugins(allow=["harness-otel"]) == ["otel"]
    assert pm.pluggy_manager.get_plugin("otel") is harness_otel.plugin
    [info] = [p for p in pm.list_plugins() if p.name == "otel"]
    assert info.kind == "plugin"
    assert info.distribution == "harness-otel"
    assert info.hooks == ("on_compaction", "wrap_model_request", "wrap_run", "wrap_tool_call")
    assert pm.has_middleware("wrap_run")
    assert pm.has_middleware("wrap_tool_call")


def test_installing_it_traces_runs_to_the_global_provider(tmp_path: Path) -> None:
    script = tmp_path / "traced.py"
    script.write_text(
        textwrap.dedent(
            """
            import asyncio, warnings
            warnings.simplefilter("ignore")
            from opentelemetry import trace
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import SimpleSpanProcessor
            from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
            from harness import Agent, PluginManager
            from harness.models.test import TestModel

            pm = PluginManager()
            pm.load_entrypoint_plugins()  # HARNESS_LOAD_PLUGINS=otel: the plugin installed alone
            exporter = InMemorySpanExporter()
            provider = TracerProvider()  # installed after the plugin was imported: still used
            provider.add_span_processor(SimpleSpanProcessor(exporter))
            trace.set_tracer_provider(provider)

            def ping() -> str:
                '''Ping.'''
                return "pong"

            agent = Agent(TestModel(), tools=[ping], plugin_manager=pm)
            asyncio.run(agent.run("hi"))
            print(sorted(pm.pluggy_manager.list_name_plugin())[0][0])
            for span in exporter.get_finished_spans():
                print(span.name)
            """
        )
    )
    env = {"HARNESS_LOAD_PLUGINS": "otel", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["otel", "chat test", "execute_tool ping", "chat test", "invoke_agent"]


PLAIN_AGENT = '''
import warnings
warnings.simplefilter("always")
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from harness import Agent
from harness.models.test import TestModel

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)


def ping() -> str:
    """Ping."""
    return "pong"


agent = Agent(TestModel(), tools=[ping])  # no plugin manager, no load_entrypoint_plugins()
agent.run_sync("hi")  # the user's line
print([span.name for span in exporter.get_finished_spans()])
'''


def test_installing_it_turns_it_on_for_a_plain_agent(tmp_path: Path) -> None:
    script = tmp_path / "plain.py"
    script.write_text(PLAIN_AGENT)
    env = {"PATH": "/usr/bin:/bin"}  # no HARNESS_LOAD_PLUGINS: every installed plugin
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['chat test', 'execute_tool ping', 'chat test', 'invoke_agent']"
    line = next(i for i, text in enumerate(PLAIN_AGENT.splitlines(), 1) if "the user's line" in text)
    warned = [text for text in done.stderr.splitlines() if "Warning" in text]
    assert len(warned) == 1, done.stderr  # once, when spans were first recorded, at the user's line
    assert warned[0].startswith(f"{script}:{line}: HarnessExperimentalWarning: harness_otel is experimental")


def test_installed_without_an_sdk_it_says_nothing(tmp_path: Path) -> None:
    script = tmp_path / "quiet.py"
    script.write_text(
        "import warnings\nwarnings.simplefilter('error')\nimport harness, harness_otel\n"
        "from harness.models.test import TestModel\n"
        "agent = harness.Agent(TestModel())\n"
        "assert agent.plugin_manager.pluggy_manager.get_plugin('otel') is harness_otel.plugin\n"
        "print(agent.run_sync('hi').output, harness.is_experimental('harness_otel'))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, env={}, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["done", "True"]


def test_registering_one_on_a_default_manager_replaces_the_installed_one() -> None:
    agent = Agent(TestModel())
    assert agent.plugin_manager.pluggy_manager.get_plugin("otel") is harness_otel.plugin
    mine = OTelPlugin(capture_content=True)
    assert agent.plugin_manager.register(mine) == "otel"
    assert agent.plugin_manager.pluggy_manager.get_plugin("otel") is mine
    assert not agent.plugin_manager.pluggy_manager.is_registered(harness_otel.plugin)


async def test_without_an_sdk_the_spans_cost_nothing_and_break_nothing() -> None:
    agent = Agent(TestModel(), tools=[])
    agent.plugin_manager.register(OTelPlugin(tracer_provider=NoOpTracerProvider()))
    result = await agent.run("hi")
    assert result.output == "done"


def test_a_second_plugin_under_the_same_name_is_refused() -> None:
    pm = PluginManager()
    pm.load_entrypoint_plugins(allow=["otel"])
    with pytest.raises(PluginLoadError, match="'otel'"):
        pm.register(OTelPlugin())
    pm.unregister("otel")  # what to do to configure it yourself
    assert pm.register(OTelPlugin(capture_content=True)) == "otel"


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"tracer_provider": "console"},
            TypeError,
            "tracer_provider must be an opentelemetry.trace.TracerProvider",
        ),
        ({"capture_content": "yes"}, TypeError, "capture_content must be True, False or None, got str"),
        ({"agent_name": 3}, TypeError, "agent_name must be a string, got int"),
        ({"agent_name": "  "}, ValueError, "agent_name must not be empty"),
    ],
)
def test_bad_arguments_are_refused_by_name(
    kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        OTelPlugin(**kwargs)  # pyright: ignore[reportArgumentType]


def test_repr_shows_the_configuration() -> None:
    assert repr(OTelPlugin(capture_content=True, agent_name="a")) == (
        "OTelPlugin(tracer_provider=None, capture_content=True, agent_name='a')"
    )


class Refuse:
    @hookimpl(wrapper=True)
    def wrap_tool_call(self, call: ToolCall) -> Generator[None, ToolOutcome, object]:
        return f"{call.tool_name} is not allowed"
        yield


async def test_a_tool_call_refused_by_a_plugin_registered_first_still_has_a_span(spans: SpanRecorder) -> None:
    ran: list[str] = []

    def ping() -> str:
        """Ping."""
        ran.append("ping")
        return "pong"

    agent = Agent(TestModel(), tools=[ping])
    agent.plugin_manager.register(Refuse())
    agent.plugin_manager.register(OTelPlugin(tracer_provider=spans.provider))
    await agent.run("hi")
    assert ran == []
    tool = spans.one("execute_tool ping")
    assert (tool.attributes or {})["harness.tool.outcome"] == "returned"


async def test_an_unsampled_run_records_nothing_inside_it() -> None:
    recorder = SpanRecorder()
    sampled_out = TracerProvider(sampler=ALWAYS_OFF)
    sampled_out.add_span_processor(SimpleSpanProcessor(recorder.exporter))
    agent = Agent(TestModel(), tools=[])
    agent.plugin_manager.register(OTelPlugin(tracer_provider=sampled_out, capture_content=True))
    assert (await agent.run("hi")).output == "done"
    assert recorder.finished == []

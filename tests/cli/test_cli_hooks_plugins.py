"""``harness plugins``, ``harness hooks`` and HARNESS_TRACE_PLUGINS tracing."""

from __future__ import annotations

import asyncio
import importlib
import inspect as pyinspect
import json

import pytest
from click.testing import CliRunner

from harness.capabilities import CompactionEvent, RequestContext
from harness.cli import cli
from harness.core import CanonicalMessage, TextPart
from harness.errors import CapabilityError, is_experimental, warn_experimental
from harness.hooks import ASYNC_HOOKS, PROJECT_NAME, TRACE_ENV, WRAPPER_HOOKS, PluginManager, hookimpl
from harness.hooks import specs as hookspecs
from harness.tokens import TokenCounter

INSTALLED = {
    "sliding_window": "harness-sliding-window",
    "clear_tool_results": "harness-clear-tool-results",
    "dedupe_file_reads": "harness-dedupe-file-reads",
    "limit_warner": "harness-limit-warner",
    "summarizing": "harness-summarizing",
    "recall": "harness-recall",
    "clamp_oversized_messages": "harness-clamp-oversized",
    "compact_on_request": "harness-compact-on-request",
    "tiered": "harness-tiered",
    "anthropic_context_management": "harness-anthropic-context",
}
MIDDLEWARE_PLUGINS = {
    "model_fallback": ("harness-model-fallback", "wrap_model_request"),
    "tool_limits": ("harness-tool-limits", "wrap_tool_call"),
    "tool_approval": ("harness-tool-approval", "wrap_tool_call"),
}
"""Installed middleware plugins (configured classes implementing a wrapper hook), with that hook."""
OBSERVER_PLUGINS = {"otel": "harness-otel"}
"""Installed plugins registered as instances through their entry point (telemetry)."""
STORE_PLUGINS = {"postgres": "harness-postgres"}
"""Installed plugins that are session stores (a ``resolve_store`` module), not capabilities."""
ENGINE_PLUGINS = {"dbos": "harness-dbos", "temporal": "harness-temporal"}
"""Installed plugins that are durable engines (a ``resolve_engine`` module)."""
SPEC_NAMES = [name for name, value in vars(hookspecs).items() if hasattr(value, f"{PROJECT_NAME}_spec")]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


# --------------------------------------------------------------------------------------
# plugins
# --------------------------------------------------------------------------------------


def test_plugins_json_describes_every_capability_plugin(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["plugins", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["plugins"]}
    for name, distribution in INSTALLED.items():
        row = rows[name]
        assert row["distribution"] == distribution
        assert row["version"] == "0.1.0"
        assert row["kind"] == "capability"
        assert "before_model_request" in row["hooks"]
        assert row["experimental"] is True
        assert row["entry_point"].startswith(f"harness_{name.split('_')[0]}")
    for name, (distribution, hook) in MIDDLEWARE_PLUGINS.items():
        row = rows[name]
        assert row["distribution"] == distribution
        assert row["kind"] == "capability"
        assert hook in row["hooks"]
    assert set(next(iter(rows.values()))) == {
        "name",
        "distribution",
        "version",
        "kind",
        "hooks",
        "experimental",
        "entry_point",
        "error",
    }
    assert all(row["error"] is None for row in rows.values())


def test_plugins_table(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["plugins"])
    assert result.exit_code == 0, result.output
    for name, distribution in INSTALLED.items():
        assert name in result.output
        assert distribution in result.output
    assert "experimental" in result.output


def test_plugins_honours_the_environment_filters(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["plugins", "--json"], env={"HARNESS_DISABLE_PLUGINS": "summarizing,tiered"})
    names = {row["name"] for row in json.loads(result.stdout)["plugins"]}
    installed = set(INSTALLED) | set(MIDDLEWARE_PLUGINS) | set(OBSERVER_PLUGINS) | set(STORE_PLUGINS)
    installed |= set(ENGINE_PLUGINS)
    assert names == installed - {"summarizing", "tiered"}
    empty = runner.invoke(cli, ["plugins"], env={"HARNESS_LOAD_PLUGINS": ""})
    assert empty.exit_code == 0
    assert "no harness plugins installed" in empty.output
    assert (
        json.loads(runner.invoke(cli, ["plugins", "--json"], env={"HARNESS_LOAD_PLUGINS": ""}).stdout)[
            "plugins"
        ]
        == []
    )


def test_experimental_is_what_the_package_declared() -> None:
    importlib.import_module("harness_tiered")  # each calls warn_experimental when imported
    importlib.import_module("harness_sliding_window")
    assert is_experimental("harness_tiered.tiered")  # a module of a declared package
    assert is_experimental("harness_sliding_window")
    assert not is_experimental("harness.config")  # core modules are not experimental
    assert not is_experimental("json")
    assert not is_experimental("harness_tiered_extra")  # a name prefix is not a package


def test_the_declaration_is_recorded_even_when_the_warning_is_silenced() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warn_experimental("my_silenced_plugin")
    assert is_experimental("my_silenced_plugin.capability")


# --------------------------------------------------------------------------------------
# hooks
# --------------------------------------------------------------------------------------


def test_hooks_json_lists_every_spec_with_kind_and_implementers(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["hooks", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["hooks"]}
    assert list(rows) == SPEC_NAMES
    for name, row in rows.items():
        spec = getattr(hookspecs, name)
        options = getattr(spec, f"{PROJECT_NAME}_spec")
        expected_kind = (
            "firstresult" if options["firstresult"] else "historic" if options["historic"] else "plain"
        )
        if name in WRAPPER_HOOKS:
            assert row["kind"] == "wrapper"
            assert row["calling"] == "driven by harness (sync generator)"
            continue
        assert row["kind"] == expected_kind
        assert row["calling"] == ("awaited by harness" if name in ASYNC_HOOKS else "sync (pluggy)")
        assert row["summary"] == (pyinspect.getdoc(spec) or "").splitlines()[0]
        assert row["signature"].startswith(f"{name}(")
    assert rows["count_tokens"]["kind"] == "firstresult"
    assert (
        rows["count_tokens"]["signature"] == "count_tokens(text: str, model_name: str | None) -> int | None"
    )
    assert rows["before_model_request"]["signature"] == "before_model_request(ctx: RequestContext) -> None"
    assert set(rows["before_model_request"]["implementers"]) == set(INSTALLED)
    assert rows["on_tool"]["implementers"] == []
    assert {"wrap_model_request", "wrap_tool_call", "wrap_run", "after_model_response"} <= set(rows)


def test_hooks_table(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["hooks"])
    assert result.exit_code == 0, result.output
    for name in SPEC_NAMES:
        assert name in result.output
    assert "awaited by harness" in result.output
    assert "firstresult" in result.output


# --------------------------------------------------------------------------------------
# tracing
# --------------------------------------------------------------------------------------


class Observer:
    """A plugin implementing a pluggy-dispatched hook and two awaited ones."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    @hookimpl
    def count_tokens(self, text: str) -> int:
        return len(text)

    @hookimpl
    async def on_compaction(self, event: CompactionEvent) -> None:
        self.seen.append(event.strategy)

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        ctx.report(CompactionEvent("observer", "test", 1, 1, 1, 1))


class Failing:
    @hookimpl
    async def before_model_request(self, ctx: RequestContext) -> None:
        raise RuntimeError("boom")


def _ctx() -> RequestContext:
    return RequestContext(
        messages=[
            CanonicalMessage.user("hi"),
            CanonicalMessage.response(TextPart("yo")),
            CanonicalMessage.user("x"),
        ],
        token_counter=TokenCounter(),
    )


def test_enable_tracing_covers_context_hooks_observers_and_pluggy_hooks() -> None:
    lines: list[str] = []
    manager = PluginManager()
    manager.enable_tracing(lines.append)
    manager.enable_tracing(lines.append)  # idempotent
    observer = Observer()
    manager.register(observer, "observer")
    assert manager.count_tokens("four", None) == 4
    asyncio.run(manager.run_before_model_request(_ctx()))
    assert observer.seen == ["observer"]
    text = "".join(lines)
    assert all(line.startswith("harness-trace: ") for line in text.splitlines())
    assert "harness-trace: count_tokens -> observer\n" in text
    assert "harness-trace: count_tokens <- 4\n" in text
    assert "harness-trace: before_model_request -> observer (3 messages)\n" in text
    assert "harness-trace: on_compaction -> observer\n" in text
    assert "harness-trace: before_model_request <- observer: " in text
    assert text.count("count_tokens -> observer") == 1


def test_tracing_reports_a_failing_step() -> None:
    lines: list[str] = []
    manager = PluginManager()
    manager.enable_tracing(lines.append)
    manager.register(Failing(), "failing")
    with pytest.raises(CapabilityError):
        asyncio.run(manager.run_before_model_request(_ctx()))
    assert "harness-trace: before_model_request <- failing: raised RuntimeError\n" in lines


def test_the_environment_variable_enables_tracing_to_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(TRACE_ENV, "1")
    manager = PluginManager()
    manager.register(Observer(), "observer")
    manager.count_tokens("abc", None)
    assert "harness-trace: count_tokens -> observer" in capsys.readouterr().err
    for off in ("", "0", "false", "no"):
        monkeypatch.setenv(TRACE_ENV, off)
        quiet = PluginManager()
        quiet.register(Observer(), "observer")
        quiet.count_tokens("abc", None)
        assert capsys.readouterr().err == ""

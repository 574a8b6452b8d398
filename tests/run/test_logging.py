"""The library logs through ``logging`` (one logger per package, no handler); ``harness -v/-q`` route it."""

from __future__ import annotations

import logging

import pytest
from click.testing import CliRunner

from harness import Agent, CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.cli import cli
from harness.cli.logs import configure_logging, level_for
from harness.models.function import FunctionInfo, FunctionModel


def echo(text: str) -> str:
    """Echo.

    Args:
        text: The text.
    """
    return text


def one_call(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage:
    if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
        return CanonicalMessage.response(TextPart("done"))
    return CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="echo", args={"text": "hi"}))


def test_the_library_installs_no_handler() -> None:
    import harness.run

    assert harness.run.Agent is Agent  # every layer imported

    for name in ("harness", "harness.run", "harness.hooks"):
        assert not [h for h in logging.getLogger(name).handlers if h.get_name() != "harness-cli"], name


async def test_a_run_logs_its_start_and_end_at_info_and_each_step_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    agent = Agent(FunctionModel(one_call), tools=[echo])
    with caplog.at_level(logging.DEBUG, logger="harness"):
        result = await agent.run("go")
    records = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert (
        "harness.run",
        "INFO",
        f"run {result.request_id} started on session {result.session.session_id}",
    ) in records
    assert any(level == "INFO" and f"run {result.request_id} completed" in text for _, level, text in records)
    assert any(level == "DEBUG" and "request 1:" in text for _, level, text in records)
    assert any(level == "DEBUG" and "tool call c1 echo: returned" in text for _, level, text in records)
    assert all(name.startswith("harness.") for name, _, _ in records)


async def test_nothing_is_logged_at_the_default_level(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="harness"):
        await Agent(FunctionModel(one_call), tools=[echo]).run("go")
    assert caplog.records == []


def test_verbosity_flags_set_the_level() -> None:
    assert level_for(0, quiet=False) == logging.WARNING
    assert level_for(1, quiet=False) == logging.INFO
    assert level_for(2, quiet=False) == logging.DEBUG
    assert level_for(3, quiet=True) == logging.ERROR
    runner = CliRunner()
    logger = logging.getLogger("harness")
    try:
        for flags, level in ((["-q"], logging.ERROR), (["-vv"], logging.DEBUG), ([], logging.WARNING)):
            assert runner.invoke(cli, [*flags, "hooks", "--json"]).exit_code == 0
            handlers = [h for h in logger.handlers if h.get_name() == "harness-cli"]
            assert len(handlers) == 1, "one CLI handler, replaced on each invocation"
            assert handlers[0].level == level
    finally:
        for handler in [h for h in logger.handlers if h.get_name() == "harness-cli"]:
            logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


def test_the_cli_handler_writes_records_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("harness")
    handler = configure_logging(1, quiet=False)
    try:
        logging.getLogger("harness.run").info("hello %s", "there")
        logging.getLogger("harness.run").debug("hidden")
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)
    err = capsys.readouterr().err
    assert "INFO harness.run: hello there" in err
    assert "hidden" not in err

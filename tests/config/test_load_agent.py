"""load_agent("package.module:attribute"): how a durable-engine worker builds the run's agent."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

import harness.config
from harness.config import load_agent
from harness.config.agents import load_agent as load_agent_direct
from harness.errors import AgentLoadError, HarnessError
from harness.run import Agent

PACKAGE = "load_agent_fixture_pkg"

AGENTS = """
from harness.run import Agent
from harness.testing import scripted_model

BUILT = []

AGENT = Agent(scripted_model("from the attribute"), system_prompt="module agent")
NOT_CALLABLE = 42


def factory():
    agent = Agent(scripted_model("from the factory"), system_prompt="factory agent")
    BUILT.append(agent)
    return agent


def raising():
    raise RuntimeError("OPENAI_API_KEY is not set")


def wrong():
    return "not an agent"


def needs_arguments(model_name):
    return Agent(scripted_model("x", model_name=model_name))


class Holder:
    agent = AGENT
    nested = None

    @staticmethod
    def make():
        return Agent(scripted_model("from a static method"), system_prompt="static agent")


Holder.nested = Holder()
"""


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """An importable package of agent references; forgotten by ``sys.modules`` afterwards."""
    root = tmp_path / "importable"
    folder = root / PACKAGE
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "agents.py").write_text(textwrap.dedent(AGENTS))
    (folder / "broken.py").write_text("raise ImportError('needs the frobnicate package')\n")
    (folder / "exploding.py").write_text("VALUE = 1 / 0\n")
    monkeypatch.syspath_prepend(str(root))
    yield PACKAGE
    for name in list(sys.modules):
        if name == PACKAGE or name.startswith(PACKAGE + "."):
            del sys.modules[name]


def test_load_agent_is_exported_by_harness_config() -> None:
    assert load_agent is load_agent_direct
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        _ = harness.config.no_such_name


def test_an_agent_attribute_is_returned_as_it_is(package: str) -> None:
    agent = load_agent(f"{package}.agents:AGENT")
    module = sys.modules[f"{package}.agents"]
    assert agent is module.AGENT
    assert agent.run_settings.system_prompt == "module agent"
    assert load_agent(f"  {package}.agents:AGENT\n") is agent  # surrounding blanks are ignored


def test_a_factory_is_called_every_time(package: str) -> None:
    first = load_agent(f"{package}.agents:factory")
    second = load_agent(f"{package}.agents:factory")
    assert isinstance(first, Agent)
    assert first is not second  # each worker gets its own instance
    assert first.run_settings.system_prompt == "factory agent"
    assert [first, second] == sys.modules[f"{package}.agents"].BUILT


def test_dotted_attributes_after_the_colon(package: str) -> None:
    module = importlib.import_module(f"{package}.agents")
    assert load_agent(f"{package}.agents:Holder.agent") is module.AGENT
    assert load_agent(f"{package}.agents:Holder.nested.agent") is module.AGENT
    built = load_agent(f"{package}.agents:Holder.make")
    assert built.run_settings.system_prompt == "static agent"


async def test_a_loaded_agent_runs(package: str) -> None:
    result = await load_agent(f"{package}.agents:factory").run("hi")
    assert result.output == "from the factory"


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        pytest.param("", "expected 'package.module:attribute'", id="empty"),
        pytest.param("just_a_module", "expected 'package.module:attribute'", id="no-colon"),
        pytest.param("module:", "expected 'package.module:attribute'", id="no-attribute"),
        pytest.param(":attribute", "expected 'package.module:attribute'", id="no-module"),
        pytest.param("   ", "expected 'package.module:attribute'", id="blank"),
    ],
)
def test_a_malformed_reference_is_refused(reference: str, expected: str) -> None:
    with pytest.raises(AgentLoadError) as caught:
        load_agent(reference)
    assert expected in str(caught.value)
    assert caught.value.reference == reference
    assert str(caught.value).startswith(f"agent {reference!r}: ")


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        pytest.param(
            "no_such_module_for_load_agent:make",
            "importing 'no_such_module_for_load_agent' failed: ModuleNotFoundError",
            id="missing-module",
        ),
        pytest.param(
            "{pkg}.broken:make",
            "importing '{pkg}.broken' failed: ImportError: needs the frobnicate package",
            id="import-error",
        ),
        pytest.param(
            "{pkg}.exploding:make",
            "importing '{pkg}.exploding' failed: ZeroDivisionError",
            id="module-raising",
        ),
        pytest.param(
            "{pkg}.agents:missing", "'{pkg}.agents' has no attribute 'missing'", id="missing-attribute"
        ),
        pytest.param(
            "{pkg}.agents:Holder.missing",
            "'{pkg}.agents' has no attribute 'Holder.missing'",
            id="missing-dotted-attribute",
        ),
        pytest.param(
            "{pkg}.agents:NOT_CALLABLE",
            "'NOT_CALLABLE' is a int, not an Agent or a factory",
            id="not-callable",
        ),
        pytest.param(
            "{pkg}.agents:raising",
            "calling 'raising' failed: RuntimeError: OPENAI_API_KEY is not set",
            id="factory-raising",
        ),
        pytest.param(
            "{pkg}.agents:needs_arguments",
            "calling 'needs_arguments' failed: TypeError",
            id="factory-with-arguments",
        ),
        pytest.param(
            "{pkg}.agents:wrong", "'wrong'() returned a str, not an Agent", id="factory-returning-a-str"
        ),
    ],
)
def test_each_failure_is_an_agent_load_error_naming_it(package: str, target: str, expected: str) -> None:
    reference = target.format(pkg=package)
    with pytest.raises(AgentLoadError) as caught:
        load_agent(reference)
    error = caught.value
    assert isinstance(error, HarnessError)
    assert error.reference == reference
    message = str(error)
    assert message.startswith(f"agent {reference!r}: ")
    assert expected.format(pkg=package) in message

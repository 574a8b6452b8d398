"""The scripted model drives the real agent over a real folder; the public-API-only rule."""

from __future__ import annotations

import ast
from pathlib import Path

import harness_coding_agent
import pytest
from harness_coding_agent import SYSTEM_PROMPT, ScriptedExplorer, build_agent, provider, scripted_model

from harness import Session
from harness.core import ToolCallPart
from harness.history import check_invariants
from harness.hooks import PluginManager
from harness.models.resolve import resolve_model

PACKAGE = Path(harness_coding_agent.__file__).parent


def make_project(root: Path, big_lines: int) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "README.md").write_text("# Widget\nMakes widgets.\n")
    (root / "big.py").write_text(
        "class Engine:\n    pass\n" + "".join(f"def step_{i}():\n    return {i}\n" for i in range(big_lines))
    )
    (root / "small.py").write_text("class Helper:\n    pass\n")
    (root / "src" / "inner.py").write_text("x = 1\n")
    return root


def calls_of(session: Session) -> list[ToolCallPart]:
    return [call for message in session.messages if message.kind == "response" for call in message.tool_calls]


async def test_the_answer_comes_from_what_the_tools_returned(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", big_lines=40)
    session = Session()
    result = await build_agent(scripted_model(), root=root).run("Explore.", session=session)
    answer = result.output or ""
    assert "The folder holds 2 sub-folders (docs/, src/) and 3 files at the top level." in answer
    assert "big.py: 82 lines; the part I read defines Engine, step_0" in answer
    assert "small.py: 2 lines; the part I read defines Helper." in answer
    assert "found 2 classes in 2 files, among them Engine, Helper" in answer
    # src/inner.py comes from the listed sub-folder: the explorer reads the largest files it saw anywhere
    assert "src/inner.py: 1 lines" in answer or "src/inner.py: 1 line" in answer
    assert "wc -l: the 3 files I read hold 85 lines; the largest is big.py (82)." in answer
    assert "I read big.py, small.py a second time" in answer
    names = [call.tool_name for call in calls_of(session)]
    assert names[0] == "list_dir"
    assert {"read_file", "search_text", "run_shell"} <= set(names)
    reads = [call.args_as_dict()["path"] for call in calls_of(session) if call.tool_name == "read_file"]
    assert reads.count("big.py") == 2
    assert check_invariants(session.messages) == []

    # Not canned: another folder gives another answer.
    other = make_project(tmp_path / "q", big_lines=5)
    answer2 = (await build_agent(scripted_model(), root=other).run("Explore.")).output or ""
    assert "big.py: 12 lines" in answer2
    assert answer2 != answer


async def test_runs_are_deterministic(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", big_lines=10)
    first = await build_agent(scripted_model(), root=root).run("Explore.")
    second = await build_agent(scripted_model(), root=root).run("Explore.")
    assert first.output == second.output
    assert first.iterations == second.iterations


async def test_a_prompt_naming_files_reads_them_and_reports_failures(tmp_path: Path) -> None:
    root = make_project(tmp_path / "p", big_lines=3)
    session = Session()
    agent = build_agent(scripted_model(), root=root)
    result = await agent.run("What is in small.py and ../etc/passwd.txt?", session=session)
    answer = result.output or ""
    assert "small.py: 2 lines; the part I read defines Helper." in answer
    assert "Problems: read_file(../etc/passwd.txt):" in answer
    assert "outside the folder" in answer
    # A second prompt in the same session starts a new task.
    again = await agent.run("And README.md?", session=session)
    assert (again.output or "").startswith("README.md: 2 lines")


def test_the_agent_has_the_system_prompt_and_four_tools(tmp_path: Path) -> None:
    agent = build_agent(scripted_model(), root=tmp_path)
    assert agent.system_prompt == SYSTEM_PROMPT
    assert sorted(agent.tools) == ["list_dir", "read_file", "run_shell", "search_text"]
    assert build_agent(scripted_model(), root=tmp_path, system_prompt="x").system_prompt == "x"


def test_explorer_options_are_checked() -> None:
    with pytest.raises(ValueError, match="lines_per_read"):
        ScriptedExplorer(lines_per_read=0)


def test_the_provider_plugin_resolves_scripted_only() -> None:
    manager = PluginManager()
    manager.register(provider)
    model = resolve_model("scripted", plugin_manager=manager)
    assert model.model_name == "scripted"
    assert model.context_window == provider.SCRIPTED_CONTEXT_WINDOW
    assert resolve_model("test", plugin_manager=manager).model_name == "test"


def public_harness_import(module: str) -> bool:
    parts = module.split(".")
    return parts[0] == "harness" and not any(part.startswith("_") for part in parts)


def test_the_package_imports_only_the_public_harness_api() -> None:
    checked = 0
    for file in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(file.read_text(), filename=str(file))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules = [node.module]
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
                names = []
            else:
                continue
            for module in modules:
                if module.split(".")[0] != "harness":
                    continue
                checked += 1
                assert public_harness_import(module), f"{file.name} imports the private module {module}"
                private = [name for name in names if name.startswith("_")]
                assert not private, f"{file.name} imports private names {private} from {module}"
    assert checked >= 5

"""The coding agent's tools: confinement, read-only shell, caps, output formats."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness_coding_agent.tools import CodingTools

from harness.errors import ToolRetry


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "core.py").write_text("".join(f"def f{i}():\n    return {i}\n" for i in range(10)))
    (root / "README.md").write_text("# Demo\nA tiny project.\n")
    (root / "blob.bin").write_bytes(b"\x00\x01\x02")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "core.py").write_text("def hidden_in_cache(): pass\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    return root


def test_read_file_numbers_lines_and_pages(project: Path) -> None:
    tools = CodingTools(project)
    text = tools.read_file("pkg/core.py", offset=3, limit=2)
    lines = text.splitlines()
    assert lines[0] == "pkg/core.py: lines 3-4 of 20 (call again with offset=5 for more)"
    assert lines[1:] == ["3\tdef f1():", "4\t    return 1"]
    whole = tools.read_file("README.md")
    assert whole.splitlines()[0] == "README.md: lines 1-2 of 2"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../secret.txt", "outside the folder"),
        ("/etc/passwd", "outside the folder"),
        ("missing.py", "no such file"),
        ("pkg", "is a folder"),
        ("blob.bin", "binary file"),
    ],
)
def test_read_file_refusals_explain_why(project: Path, path: str, reason: str) -> None:
    with pytest.raises(ToolRetry, match=reason):
        CodingTools(project).read_file(path)


def test_a_link_pointing_out_of_the_root_is_refused(project: Path) -> None:
    os.symlink(project.parent / "secret.txt", project / "link.txt")
    with pytest.raises(ToolRetry, match="outside the folder"):
        CodingTools(project).read_file("link.txt")


def test_read_file_offset_past_the_end(project: Path) -> None:
    with pytest.raises(ToolRetry, match="has 2 lines; offset 9"):
        CodingTools(project).read_file("README.md", offset=9)


def test_list_dir_folders_first_with_sizes(project: Path) -> None:
    lines = CodingTools(project).list_dir(".").splitlines()
    assert lines[0] == ".: 2 folders, 2 files"
    assert lines[1:3] == ["__pycache__/", "pkg/"]
    assert "README.md  23" in lines
    with pytest.raises(ToolRetry, match="is a file"):
        CodingTools(project).list_dir("README.md")


def test_search_text_regex_glob_and_skipped_folders(project: Path) -> None:
    tools = CodingTools(project)
    lines = tools.search_text(r"^def f[12]\(", ".", "*.py").splitlines()
    assert lines == [
        "2 matches for '^def f[12]\\\\(' in 1 files",
        "pkg/core.py:3: def f1():",
        "pkg/core.py:5: def f2():",
    ]
    assert "hidden_in_cache" not in tools.search_text("hidden", ".")
    with pytest.raises(ToolRetry, match="invalid regular expression"):
        tools.search_text("(unclosed")


def test_search_text_caps_its_matches(project: Path) -> None:
    text = CodingTools(project, max_matches=3).search_text("return")
    assert text.splitlines()[0].startswith("3 matches for 'return' in ")
    assert "(stopped at 3; narrow the pattern" in text.splitlines()[0]
    assert len(text.splitlines()) == 4


def test_run_shell_runs_allowed_commands_in_the_root(project: Path) -> None:
    out = CodingTools(project).run_shell("wc -l pkg/core.py README.md")
    assert out.splitlines()[0] == "$ wc -l pkg/core.py README.md"
    assert "20 pkg/core.py" in out
    assert "22 total" in out


def test_run_shell_reports_a_failing_command(project: Path) -> None:
    out = CodingTools(project).run_shell("cat nothing-here.txt")
    assert "[exit status 1]" in out
    assert "No such file" in out


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("rm -rf pkg", "'rm' is not allowed"),
        ("python -c 1", "'python' is not allowed"),
        ("cat README.md | head", "pipes, redirections"),
        ("cat README.md > copy.md", "pipes, redirections"),
        ("ls; rm x", "'ls;' is not allowed"),
        ("ls && ls", "pipes, redirections"),
        ("echo $(id)", "'echo' is not allowed"),
        ("cat $(ls)", "pipes, redirections"),
        ("find . -delete", "find -delete is not allowed"),
        ("find . -exec cat {} +", "find -exec is not allowed"),
        ("git push", "git push is not allowed"),
        ("git -C / log", "git -C is not allowed"),
        ("git diff --output=x", "git option '--output=x' is not allowed"),
        ("cat /etc/passwd", "outside the folder"),
        ("cat ../secret.txt", "outside the folder"),
        ("grep --file=/etc/passwd x", "outside the folder"),
        ("", "empty command"),
        ("cat 'unclosed", "cannot parse"),
    ],
)
def test_run_shell_refusals(project: Path, command: str, reason: str) -> None:
    with pytest.raises(ToolRetry, match=reason):
        CodingTools(project).run_shell(command)
    assert (project / "pkg" / "core.py").exists()


def test_git_gets_safe_options(project: Path) -> None:
    argv = CodingTools(project).check_command("git log -n 3 --oneline")
    assert argv == ["git", "--no-pager", "log", "--no-ext-diff", "--no-textconv", "-n", "3", "--oneline"]


def test_outputs_are_capped(project: Path) -> None:
    text = CodingTools(project, max_output_chars=50).read_file("pkg/core.py")
    assert len(text.splitlines()[-1]) < 60
    assert text.endswith("more characters]")
    assert text.startswith("pkg/core.py: lines 1-20 of 20")


def test_bad_configuration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="root must be an existing folder"):
        CodingTools(tmp_path / "nope")
    with pytest.raises(ValueError, match="shell_timeout"):
        CodingTools(tmp_path, shell_timeout=0)


def test_tools_have_schemas_from_their_docstrings(project: Path) -> None:
    tools = {tool.name: tool for tool in CodingTools(project).tools()}
    assert sorted(tools) == ["list_dir", "read_file", "run_shell", "search_text"]
    schema = tools["read_file"].parameters_json_schema
    assert schema["required"] == ["path"]
    assert schema["properties"]["limit"]["default"] == 200
    assert "relative to the project folder" in schema["properties"]["path"]["description"]

"""The built-in key functions: which calls are file reads, and of which view of which file."""

from __future__ import annotations

import json
from typing import Any

import pytest
from harness_dedupe_file_reads import (
    FILE_KEYS,
    auto_file_key,
    describe_read,
    parse_shell_read,
    read_tool_key,
    shell_cat_key,
)
from harness_dedupe_file_reads.keys import normalize_path, tokenize

from harness.core import ToolCallPart


def call(tool: str, args: Any) -> ToolCallPart:
    return ToolCallPart(tool_call_id="id", tool_name=tool, args=args)


def sh(command: str, tool: str = "bash") -> ToolCallPart:
    return call(tool, {"command": command})


# -- shell commands --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("cat src/a.py", ("cat", "all", "src/a.py")),
        ("  cat src/a.py\n", ("cat", "all", "src/a.py")),
        ("cat ./src//a.py", ("cat", "all", "src/a.py")),
        ("cat -n src/a.py", ("cat -n", "all", "src/a.py")),
        ("cat --number src/a.py", ("cat -n", "all", "src/a.py")),
        ("cat -- -weird.py", ("cat", "all", "-weird.py")),
        ('cat "my file.py"', ("cat", "all", "my file.py")),
        ("cat 'my file.py'", ("cat", "all", "my file.py")),
        ("cat my\\ file.py", ("cat", "all", "my file.py")),
        ('cat "a\\"b.py"', ("cat", "all", 'a"b.py')),
        ("nl src/a.py", ("nl", "all", "src/a.py")),
        ("nl -ba src/a.py", ("nl -ba", "all", "src/a.py")),
        ("head src/a.py", ("cat", "lines 1-10", "src/a.py")),
        ("head -n 20 src/a.py", ("cat", "lines 1-20", "src/a.py")),
        ("head -n20 src/a.py", ("cat", "lines 1-20", "src/a.py")),
        ("head -20 src/a.py", ("cat", "lines 1-20", "src/a.py")),
        ("head --lines=20 src/a.py", ("cat", "lines 1-20", "src/a.py")),
        ("tail src/a.py", ("cat", "last 10", "src/a.py")),
        ("tail -n 5 src/a.py", ("cat", "last 5", "src/a.py")),
        ("tail -n +5 src/a.py", ("cat", "lines 5-$", "src/a.py")),
        ("tail -n +1 src/a.py", ("cat", "all", "src/a.py")),
        ("sed -n '1,20p' src/a.py", ("cat", "lines 1-20", "src/a.py")),
        ('sed -n "1,20p" src/a.py', ("cat", "lines 1-20", "src/a.py")),
        ("sed -n 1,20p src/a.py", ("cat", "lines 1-20", "src/a.py")),
        ("sed -n '7p' src/a.py", ("cat", "lines 7-7", "src/a.py")),
        ("sed -n '10,$p' src/a.py", ("cat", "lines 10-$", "src/a.py")),
        ("sed -n '1,$p' src/a.py", ("cat", "all", "src/a.py")),
        ("sed -n '20,10p' src/a.py", ("cat", "lines 20-20", "src/a.py")),
        ("cat src/a.py | sed -n '5,9p'", ("cat", "lines 5-9", "src/a.py")),
        ("cat -n src/a.py | sed -n '5,9p'", ("cat -n", "lines 5-9", "src/a.py")),
        ("nl -ba src/a.py | sed -n '5,9p'", ("nl -ba", "lines 5-9", "src/a.py")),
        ("cat src/a.py | head -n 5", ("cat", "lines 1-5", "src/a.py")),
        ("cat src/a.py | tail -3", ("cat", "last 3", "src/a.py")),
        ("cd /testbed && cat src/a.py", ("cat", "all", "/testbed/src/a.py")),
        ("cd /testbed && sed -n '1,5p' /etc/hosts", ("cat", "lines 1-5", "/etc/hosts")),
        ("cd repo && nl -ba a.py | sed -n '1,5p'", ("nl -ba", "lines 1-5", "repo/a.py")),
    ],
)
def test_recognised_shell_reads(command: str, expected: tuple[str, str, str]) -> None:
    assert parse_shell_read(command) == expected
    key = shell_cat_key(sh(command))
    assert key is not None
    assert json.loads(key) == ["shell", *expected]


@pytest.mark.parametrize(
    "command",
    [
        "",
        "cat",
        "cat a.py b.py",  # several files
        "cat x.py | grep foo",  # a filter that is not a line selector
        "cat x.py | sed -n '1,5p' | head -2",  # more than one pipe
        "cat <<EOF\nhello\nEOF",  # here-document
        "cat > out.py << 'EOF'\nprint(1)\nEOF",  # writing a file
        "cat x.py > y.py",  # redirection
        "cat < x.py",
        "cat x.py 2>/dev/null",
        "cat x.py; rm x.py",
        "cat x.py && rm x.py",
        "cat x.py || true",
        "cat x.py &",
        "cat $FILE",
        'cat "$FILE"',
        "cat `which python`",
        "cat $(ls)",
        "cat *.py",
        "cat src/?.py",
        "cat src/[ab].py",
        "cat ~/notes.md",
        "cat {a,b}.py",
        "cat x.py # comment",
        "cat -A x.py",  # an unsupported presentation option
        "cat -",
        "cat ''",
        "cat 'unterminated",
        'cat "unterminated',
        "cat x.py\\",
        "catalog x.py",
        "head -c 100 x.py",
        "head -n -5 x.py",
        "head -n 0 x.py",
        "head -n 5 -n 6 x.py",
        "head -n",
        "tail -f log.txt",
        "tail -n +x x.py",
        "sed -i 's/a/b/' x.py",
        "sed -n '/def/,/return/p' x.py",
        "sed -n '1,5p;9p' x.py",
        "sed -n '0,5p' x.py",
        "sed -n '1,5p' a.py b.py",
        "sed -n '1,5p'",
        "sed 1,5p x.py",
        "nl -b a x.py",  # option with a separate argument: ambiguous, refused
        "cd /testbed && cd src && cat a.py",
        "cd && cat a.py",
        "cd -P /x && cat a.py",
        "echo hi && cat a.py",
        "cat a.py | sed -n '1,5p' x.py",  # a selector with its own file after a pipe
        "grep -n foo x.py",
        "python -c \"print(open('x.py').read())\"",
        "cat x.py |",
        "| cat x.py",
        "cd /x &&",
    ],
)
def test_everything_else_is_not_a_read(command: str) -> None:
    assert parse_shell_read(command) is None
    assert shell_cat_key(sh(command)) is None


def test_a_quoted_operator_is_part_of_a_word() -> None:
    assert tokenize("cat 'a|b.py'") == ["cat", "a|b.py"]
    assert parse_shell_read("cat 'a|b.py'") == ("cat", "all", "a|b.py")
    assert parse_shell_read("cat a|b.py") is None


@pytest.mark.parametrize("tool", ["bash", "Bash", "shell", "sh", "execute", "run_command", "terminal"])
def test_shell_tool_names(tool: str) -> None:
    assert shell_cat_key(sh("cat a.py", tool=tool)) is not None


def test_shell_tools_with_cmd_argument_and_string_args() -> None:
    assert shell_cat_key(call("bash", {"cmd": "cat a.py"})) == shell_cat_key(sh("cat a.py"))
    assert shell_cat_key(call("bash", '{"command": "cat a.py"}')) == shell_cat_key(sh("cat a.py"))


@pytest.mark.parametrize(
    "args",
    [
        None,
        {},
        {"command": 5},
        {"command": "cat a.py", "cmd": "cat b.py"},  # ambiguous
        "not json",
        '["cat a.py"]',
    ],
)
def test_shell_calls_with_unusable_args(args: Any) -> None:
    assert shell_cat_key(call("bash", args)) is None


def test_other_tools_are_not_shell_reads() -> None:
    assert shell_cat_key(call("python", {"command": "cat a.py"})) is None


def test_equivalent_shell_forms_share_a_key() -> None:
    same = [
        "sed -n '1,20p' /testbed/a.py",
        "head -n 20 /testbed/a.py",
        "head -20 /testbed/a.py",
        "cat /testbed/a.py | sed -n '1,20p'",
        "cd /testbed && sed -n 1,20p a.py",
        "cd /testbed && cat ./a.py | head -n 20",
    ]
    keys = {shell_cat_key(sh(c)) for c in same}
    assert len(keys) == 1


def test_different_ranges_modes_and_files_get_different_keys() -> None:
    different = [
        "cat a.py",
        "cat -n a.py",
        "nl -ba a.py",
        "nl a.py",
        "sed -n '1,20p' a.py",
        "sed -n '1,21p' a.py",
        "sed -n '2,20p' a.py",
        "tail -n 20 a.py",
        "nl -ba a.py | sed -n '1,20p'",
        "cat b.py",
        "cat src/a.py",
    ]
    keys = [shell_cat_key(sh(c)) for c in different]
    assert None not in keys
    assert len(set(keys)) == len(keys)


# -- read tools --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("read_file", {"path": "a.py"}),
        ("Read", {"file_path": "/repo/a.py"}),
        ("read", {"filename": "a.py"}),
        ("view", {"file": "a.py"}),
        ("open", {"path": "a.py"}),
        ("cat_file", {"path": "a.py"}),
        ("READ_FILE", {"path": "a.py"}),
        ("read_file", '{"path": "a.py"}'),
        ("str_replace_editor", {"command": "view", "path": "a.py"}),
        ("str_replace_based_edit_tool", {"command": "view", "path": "a.py", "view_range": [1, 20]}),
    ],
)
def test_recognised_read_tools(tool: str, args: Any) -> None:
    assert read_tool_key(call(tool, args)) is not None


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("write_file", {"path": "a.py", "content": "x"}),
        ("read_file", {}),
        ("read_file", None),
        ("read_file", {"path": ""}),
        ("read_file", {"path": 3}),
        ("read_file", {"path": "a.py", "file_path": "b.py"}),  # ambiguous
        ("read_file", "not json"),
        ("str_replace_editor", {"command": "str_replace", "path": "a.py", "old_str": "a", "new_str": "b"}),
        ("str_replace_editor", {"command": "create", "path": "a.py", "file_text": "x"}),
    ],
)
def test_not_read_tool_calls(tool: str, args: Any) -> None:
    assert read_tool_key(call(tool, args)) is None


def test_read_tool_range_arguments_are_part_of_the_key() -> None:
    whole = read_tool_key(call("Read", {"file_path": "a.py"}))
    part = read_tool_key(call("Read", {"file_path": "a.py", "offset": 10, "limit": 20}))
    other = read_tool_key(call("Read", {"file_path": "a.py", "offset": 30, "limit": 20}))
    same = read_tool_key(call("Read", {"limit": 20, "offset": 10, "file_path": "./a.py"}))
    assert len({whole, part, other}) == 3
    assert part == same


def test_read_tool_keys_include_the_tool_name() -> None:
    assert read_tool_key(call("read_file", {"path": "a.py"})) != read_tool_key(call("Read", {"path": "a.py"}))
    assert read_tool_key(call("read_file", {"path": "a.py"})) != shell_cat_key(sh("cat a.py"))


def test_unserialisable_extra_args_are_not_keyed() -> None:
    assert read_tool_key(call("read_file", {"path": "a.py", "x": {1, 2}})) is None


# -- registry and helpers -------------------------------------------------------------------


def test_registry() -> None:
    assert set(FILE_KEYS) == {"auto", "read_tool", "shell_cat"}
    assert FILE_KEYS["auto"] is auto_file_key
    assert FILE_KEYS["read_tool"] is read_tool_key
    assert FILE_KEYS["shell_cat"] is shell_cat_key


def test_auto_is_both() -> None:
    assert auto_file_key(sh("cat a.py")) == shell_cat_key(sh("cat a.py"))
    assert auto_file_key(call("read_file", {"path": "a.py"})) == read_tool_key(
        call("read_file", {"path": "a.py"})
    )
    assert auto_file_key(call("grep", {"pattern": "x"})) is None


def test_describe_read_gives_the_path() -> None:
    described = describe_read(sh("cd /testbed && sed -n '1,5p' src/{x}.py"))
    assert described is None  # braces are refused in shell words
    described = describe_read(call("read_file", {"path": "src/{x}.py"}))
    assert described is not None
    assert described.path == "src/{x}.py"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("a.py", "a.py"),
        ("./a.py", "a.py"),
        ("src//a.py", "src/a.py"),
        ("/x/./y", "/x/y"),
        ("src/../a.py", "src/../a.py"),
        (".", "."),
        ("/", "/"),
    ],
)
def test_normalize_path(path: str, expected: str) -> None:
    assert normalize_path(path) == expected

"""The structural digest: extraction, rendering, incremental merging."""

from __future__ import annotations

import json

import pytest
from harness_summarizing import Digest, StructuralDigest, SummaryRequest, extract_file_paths

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    with_harness_mark,
)


def _pair(call_id: str, tool: str, args: object, result: object) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.response(ToolCallPart(tool_call_id=call_id, tool_name=tool, args=args)),  # pyright: ignore[reportArgumentType]
        CanonicalMessage.request(ToolReturnPart(tool_call_id=call_id, tool_name=tool, content=result)),
    ]


def scripted_history() -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("Fix the failing test in tests/test_api.py; keep the {public} API.")]
    messages += _pair("c1", "read_file", {"path": "src/api.py"}, "def f():\n    raise ValueError('x')\n")
    messages += _pair("c2", "Read", {"file_path": "/repo/README.md"}, "readme")
    messages += _pair(
        "c3",
        "bash",
        {"command": "cd /repo && python -m pytest tests/test_api.py"},
        "<returncode>1</returncode>\n<output>\n===== 1 failed =====\nTraceback (most recent call last):\n"
        '  File "x.py", line 1\nAssertionError: expected 2\n</output>',
    )
    messages += _pair("c4", "write_file", {"path": "src/api.py", "content": "fixed"}, "ok")
    messages += _pair(
        "c5", "Edit", {"file_path": "src/util.py", "old_string": "a", "new_string": "b"}, "done"
    )
    messages += _pair(
        "c6",
        "bash",
        {"command": "sed -i 's/a/b/' src/conf.py && cat setup.cfg"},
        {"returncode": 0, "stdout": "[metadata]\nname=x"},
    )
    messages += _pair("c7", "str_replace_editor", {"command": "view", "path": "docs/index.md"}, "docs")
    messages += _pair("c8", "str_replace_editor", {"command": "create", "path": "docs/new.md"}, "created")
    messages += _pair("c9", "grep", {"pattern": "TODO"}, "Error: grep failed badly")
    messages += [
        CanonicalMessage.response(ToolCallPart(tool_call_id="c10", tool_name="bash", args={"command": "ls"})),
        CanonicalMessage.request(
            RetryPromptPart("invalid args: bad\nmore", tool_name="bash", tool_call_id="c10")
        ),
    ]
    messages += [CanonicalMessage.user("Also update the changelog please.")]
    messages += [CanonicalMessage.response(TextPart("Tests pass now; the changelog is next."))]
    return messages


def test_digest_contents_for_scripted_history() -> None:
    digest = StructuralDigest().digest(scripted_history())
    assert digest.messages == len(scripted_history())
    assert digest.tool_calls == 10
    assert digest.requests == [
        "Fix the failing test in tests/test_api.py; keep the {public} API.",
        "Also update the changelog please.",
    ]
    assert digest.files_read == ["src/api.py", "/repo/README.md", "setup.cfg", "docs/index.md"]
    assert digest.files_written == ["src/api.py", "src/util.py", "src/conf.py", "docs/new.md"]
    commands = {c["command"]: c for c in digest.commands}
    failing = commands["cd /repo && python -m pytest tests/test_api.py"]
    assert failing["outcome"] == "exit 1"
    assert failing["output"] == "===== 1 failed ====="
    ok = commands["sed -i 's/a/b/' src/conf.py && cat setup.cfg"]
    assert ok["outcome"] == "exit 0"
    assert ok["output"] == "[metadata]"
    assert "ls" not in commands  # answered by a retry prompt, not run
    assert any("AssertionError: expected 2" in e for e in digest.errors)
    assert any("grep: Error: grep failed badly" in e for e in digest.errors)
    assert any(e.startswith("retry [bash]: invalid args: bad") for e in digest.errors)
    # file contents that merely contain error-like lines are data, not errors
    assert not any("ValueError('x')" in e for e in digest.errors)
    assert digest.last_state == "Tests pass now; the changelog is next."
    assert digest.tools["read_file"] == 1
    assert digest.tools["str_replace_editor"] == 2


def test_render_is_markdown_with_every_section() -> None:
    engine = StructuralDigest()
    text = engine.render(engine.digest(scripted_history()))
    for heading in (
        "## User requests (verbatim)",
        "## Files read",
        "## Files written",
        "## Commands run",
        "## Errors seen",
        "## Last state",
        "## Other tool calls",
    ):
        assert heading in text
    assert "1. Fix the failing test in tests/test_api.py; keep the {public} API." in text
    assert "- `cd /repo && python -m pytest tests/test_api.py` → exit 1: ===== 1 failed =====" in text


def test_incremental_merge_is_exact() -> None:
    engine = StructuralDigest()
    history = scripted_history()
    first = engine.digest(history[:9])
    roundtrip = Digest.from_json(json.loads(json.dumps(first.to_json())))
    merged = engine.digest(history[9:], roundtrip)
    whole = engine.digest(history)
    assert merged.requests == whole.requests
    assert merged.files_read == whole.files_read
    assert merged.files_written == whole.files_written
    assert merged.tool_calls == whole.tool_calls
    assert merged.messages == whole.messages
    assert merged.errors == whole.errors
    assert merged.last_state == whole.last_state
    # the previous digest is not modified
    assert roundtrip.to_json() == Digest.from_json(first.to_json()).to_json()


def test_bounds_keep_first_request_and_newest_items() -> None:
    engine = StructuralDigest(max_requests=3, max_commands=2, max_errors=2, max_files=2, max_request_chars=10)
    messages: list[CanonicalMessage] = []
    for i in range(6):
        messages.append(CanonicalMessage.user(f"request number {i}"))
        messages += _pair(
            f"c{i}", "bash", {"command": f"cat f{i}.py; false"}, f"<returncode>{i + 1}</returncode>"
        )
    digest = engine.digest(messages)
    assert digest.requests == [
        "request nu…[6 chars omitted]",
        "request nu…[6 chars omitted]",
        "request nu…[6 chars omitted]",
    ]
    assert digest.requests_omitted == 3
    assert [c["outcome"] for c in digest.commands] == ["exit 5", "exit 6"]
    assert digest.commands_omitted == 4
    assert len(digest.errors) == 2
    assert digest.errors_omitted == 4
    assert digest.files_read == ["f4.py", "f5.py"]
    text = engine.render(digest)
    assert "4 older commands omitted" in text
    assert "4 older errors omitted" in text
    assert "3 later requests omitted" in text


def test_marked_parts_are_skipped() -> None:
    summary = with_harness_mark(UserPromptPart("old summary"), kind="summary")
    digest = StructuralDigest().digest([CanonicalMessage.request(summary, UserPromptPart("real"))])
    assert digest.requests == ["real"]


def test_from_json_tolerates_garbage() -> None:
    digest = Digest.from_json(
        {
            "messages": "x",
            "requests": "nope",
            "commands": [1, {"command": 2}],
            "tools": {"a": "b", "c": 3},
            "last_state": 5,
        }
    )
    assert digest.messages == 0
    assert digest.requests == []
    assert digest.commands == [{"command": "2"}]
    assert digest.tools == {"c": 3}
    assert digest.last_state is None


async def test_as_summarizer_continues_previous_text_summary() -> None:
    engine = StructuralDigest()
    request = SummaryRequest(
        messages=tuple(scripted_history()),
        transcript="",
        prompt="",
        instructions="",
        previous_summary="The model wrote this earlier.",
    )
    summary = await engine(request)
    assert "## Earlier summary\nThe model wrote this earlier." in summary.text
    assert Digest.from_json(summary.digest).earlier_summary == "The model wrote this earlier."


@pytest.mark.parametrize(
    ("command", "reads", "writes"),
    [
        ("cat a.py b.py", ["a.py", "b.py"], []),
        ("head -n 20 a.py | tail -5", ["a.py"], []),
        ("sed -n '10,20p' src/x.py", ["src/x.py"], []),
        ("sed -i 's/a/b/g' src/x.py", [], ["src/x.py"]),
        ("sed -i.bak -e 's/a/b/' x.py y.py", [], ["x.py", "y.py"]),
        ("echo hi > out.txt 2>/dev/null", [], ["out.txt"]),
        ("echo hi >> log.txt", [], ["log.txt"]),
        ("python - < input.txt 2>&1", ["input.txt"], []),
        ("cat <<'EOF' > gen.py\nprint(1 > 2)\ncat secret.py\nEOF\npython gen.py", [], ["gen.py"]),
        ("nl -ba src/m.py | sed -n '1,5p'", ["src/m.py"], []),
        ("ls -la && grep -rn foo src", [], []),
        ("cp a.py b.py && touch c.py && echo x | tee d.py", [], ["b.py", "c.py", "d.py"]),
        ("FOO=1 sudo cat /etc/hosts", ["/etc/hosts"], []),
        ("python -c \"print('x > y')\"", [], []),
        ("cat 'unbalanced", ["'unbalanced"], []),
        ("open src/file.py 100", ["src/file.py"], []),
        ("create new.py", [], ["new.py"]),
    ],
)
def test_extract_file_paths(command: str, reads: list[str], writes: list[str]) -> None:
    assert extract_file_paths(command) == (reads, writes)


def test_swe_agent_edit_writes_the_open_file() -> None:
    current: list[str] = []
    extract_file_paths("open src/a.py", current=current)
    assert extract_file_paths("edit 1:3\nfoo\nend_of_edit", current=current) == ([], ["src/a.py"])


def test_kept_verbatim_requests_are_referenced_not_repeated() -> None:
    task = UserPromptPart("A long task description. " * 20)
    other = UserPromptPart("a follow-up")
    messages = [CanonicalMessage.request(task), CanonicalMessage.response(TextPart("ok"))]
    messages.append(CanonicalMessage.request(other))
    digest = StructuralDigest().digest(messages, kept_verbatim=[task])
    assert digest.requests[0].startswith("(kept verbatim above) A long task description.")
    assert digest.requests[0].endswith("chars omitted]")
    assert len(digest.requests[0]) < 200
    assert digest.requests[1] == "a follow-up"


def test_digest_defaults() -> None:
    engine = StructuralDigest()
    assert (
        engine.max_request_chars,
        engine.max_requests,
        engine.max_files,
        engine.max_commands,
        engine.max_errors,
        engine.max_output_chars,
        engine.max_command_chars,
        engine.max_state_chars,
        engine.max_names,
        engine.max_error_lines,
        engine.max_error_chars,
    ) == (2000, 30, 50, 30, 40, 160, 200, 1500, 200, 3, 300)

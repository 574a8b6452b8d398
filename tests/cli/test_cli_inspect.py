"""``harness inspect``: parts, tokens, largest returns, repeated reads and the invariant report."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from harness.cli import cli
from harness.cli.inspect_cmd import _heuristic_read, describe_file_read
from harness.core import (
    CanonicalMessage,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.history import check_invariants
from harness.session import Session
from harness.testing import corpus_files
from harness.tokens import TokenCounter
from harness.wire import dump_messages, load_messages


def _history() -> list[CanonicalMessage]:
    return [
        CanonicalMessage.request(SystemPromptPart("be brief"), UserPromptPart("fix the bug in a.py")),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c1", tool_name="read_file", args={"path": "a.py"})
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c1", tool_name="read_file", content="x = 1\n" * 40)
        ),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c2", tool_name="bash", args={"command": "ls"})),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="c2", tool_name="bash", content="a.py b.py")),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c3", tool_name="read_file", args={"path": "a.py"})
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c3", tool_name="read_file", content="x = 2\n" * 90)
        ),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c4", tool_name="read_file", args={"path": "b.py"})
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c4", tool_name="read_file", content="y = 1\n" * 10)
        ),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="c5", tool_name="read_file", args={"path": "a.py"})
        ),
        CanonicalMessage.request(
            ToolReturnPart(tool_call_id="c5", tool_name="read_file", content="x = 3\n" * 60)
        ),
        CanonicalMessage.response(TextPart("fixed")),
    ]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def history_file(tmp_path: Path) -> Path:
    path = tmp_path / "history.json"
    path.write_bytes(dump_messages(_history()))
    return path


def _report(runner: CliRunner, *args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(cli, ["inspect", "--json", *args])
    return result.exit_code, json.loads(result.stdout)


def test_inspect_counts_messages_parts_and_tokens(runner: CliRunner, history_file: Path) -> None:
    code, report = _report(runner, str(history_file))
    assert code == 0
    assert report["format"] == "history"
    assert (report["messages"], report["requests"], report["responses"]) == (12, 6, 6)
    assert report["parts"] == {
        "system-prompt": 1,
        "user-prompt": 1,
        "tool-call": 5,
        "tool-return": 5,
        "text": 1,
    }
    counter = TokenCounter()
    messages = _history()
    expected: dict[str, int] = {}
    for message in messages:
        for part in message.parts:
            expected[part.part_kind] = expected.get(part.part_kind, 0) + counter.count_part(part)
    assert report["tokens"]["by_kind"] == expected
    assert report["tokens"]["total"] == counter.count_messages(messages)
    assert report["tokenizer"] == {"encoding": counter.encoding_name, "exact": counter.exact}
    assert report["invariants"] == {"clean": True, "violations": []}


def test_inspect_lists_the_largest_tool_returns(runner: CliRunner, history_file: Path) -> None:
    _, report = _report(runner, str(history_file), "--top", "3")
    largest = report["largest_tool_returns"]
    assert [item["tool_call_id"] for item in largest] == ["c3", "c5", "c1"]
    assert largest[0] == {
        "tool_name": "read_file",
        "tool_call_id": "c3",
        "tokens": TokenCounter().count_part(
            ToolReturnPart(tool_call_id="c3", tool_name="read_file", content="x = 2\n" * 90)
        ),
        "message_index": 6,
    }
    _, report = _report(runner, str(history_file), "--top", "0")
    assert report["largest_tool_returns"] == []


def test_inspect_finds_repeated_file_reads(runner: CliRunner, history_file: Path) -> None:
    _, report = _report(runner, str(history_file))
    assert report["repeated_file_reads"] == [
        {
            "path": "a.py",
            "tool_name": "read_file",
            "count": 3,
            "tool_call_ids": ["c1", "c3", "c5"],
            "message_indices": [1, 5, 9],
        }
    ]


def test_inspect_table_output(runner: CliRunner, history_file: Path) -> None:
    result = runner.invoke(cli, ["inspect", str(history_file)])
    assert result.exit_code == 0, result.output
    for fragment in ("12 messages", "parts by kind", "largest tool returns", "repeated file reads", "a.py"):
        assert fragment in result.output
    assert "invariants: clean" in result.output


def test_inspect_exits_1_and_lists_violations(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "dangling.json"
    messages = [
        CanonicalMessage.user("go"),
        CanonicalMessage.response(ToolCallPart(tool_call_id="c1", tool_name="bash", args={"command": "ls"})),
        CanonicalMessage.user("where is my answer"),
    ]
    path.write_bytes(dump_messages(messages))
    code, report = _report(runner, str(path))
    assert code == 1
    assert report["invariants"]["clean"] is False
    kinds = {(v["kind"], v["message_index"], v["tool_call_id"]) for v in report["invariants"]["violations"]}
    expected = {(v.kind, v.message_index, v.tool_call_id) for v in check_invariants(messages)}
    assert kinds == expected
    assert expected
    result = runner.invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 1
    assert "invariant violations" in result.output
    assert "violation(s)" in result.output


def test_inspect_reads_session_files_and_checks_them_as_persisted(runner: CliRunner, tmp_path: Path) -> None:
    session = Session.new(messages=_history())
    path = session.save(tmp_path / "session.json")
    code, report = _report(runner, str(path))
    assert report["format"] == "session"
    assert report["messages"] == 12
    # A stored history must not hold system prompts: the session check reports the one we stored.
    assert code == 1
    assert [v["kind"] for v in report["invariants"]["violations"]] == [
        v.kind for v in check_invariants(_history(), persisted=True)
    ]


# Written by pydantic-ai 2.62's ModelMessagesTypeAdapter.dump_json (importing pydantic-ai here would
# cost seconds): a user prompt, then the same file viewed twice.
_CALL = (
    '{"parts":[{"tool_name":"view","args":{"path":"/r.md"},"tool_call_id":"%s","tool_kind":null,"id":null,'
    '"provider_name":null,"provider_details":null,"part_kind":"tool-call"}],"usage":{"input_tokens":0,'
    '"cache_write_tokens":0,"cache_write_1h_tokens":0,"cache_read_tokens":0,"output_tokens":0,'
    '"output_reasoning_tokens":0,"input_audio_tokens":0,"cache_audio_read_tokens":0,"output_audio_tokens":0,'
    '"audio_seconds":0.0,"details":{},"cost":null},"model_name":"m","timestamp":"2026-01-02T03:04:05Z",'
    '"kind":"response","provider_name":null,"provider_url":null,"provider_details":null,'
    '"provider_response_id":null,"finish_reason":null,"run_id":null,"conversation_id":null,"metadata":null,'
    '"workspace_ref":null,"history_digest":null,"failed_attempts":null,"state":"complete"}'
)
_RETURN = (
    '{"parts":[{"tool_name":"view","content":"# readme","tool_call_id":"%s","tool_kind":null,"metadata":null,'
    '"timestamp":"2026-01-02T03:04:05Z","outcome":"success","retry":null,"part_kind":"tool-return"}],'
    '"timestamp":null,"instructions":null,"kind":"request","run_id":null,"conversation_id":null,'
    '"metadata":null,"state":"complete"}'
)
_PROMPT = (
    '{"parts":[{"content":"read it twice","timestamp":"2026-01-02T03:04:05Z","part_kind":"user-prompt"}],'
    '"timestamp":null,"instructions":null,"kind":"request","run_id":null,"conversation_id":null,'
    '"metadata":null,"state":"complete"}'
)
PYDANTIC_AI_DUMP = "[" + ",".join([_PROMPT, _CALL % "t1", _RETURN % "t1", _CALL % "t2", _RETURN % "t2"]) + "]"


def test_inspect_reads_a_pydantic_ai_dump(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "pai.json"
    path.write_text(PYDANTIC_AI_DUMP)
    code, report = _report(runner, str(path))
    assert code == 0
    assert report["format"] == "history"
    assert report["messages"] == 5
    assert report["parts"] == {"user-prompt": 1, "tool-call": 2, "tool-return": 2}
    assert report["repeated_file_reads"][0]["tool_call_ids"] == ["t1", "t2"]
    assert report["repeated_file_reads"][0]["path"] == "/r.md"


def test_model_picks_the_tokenizer(runner: CliRunner, history_file: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # o200k_base may be missing offline: an approximation warning
        _, report = _report(runner, str(history_file), "--model", "gpt-4o")
        counter = TokenCounter("gpt-4o")
        expected = {"encoding": counter.encoding_name, "exact": counter.exact}
    assert report["tokenizer"] == expected
    assert repr(counter) == "TokenCounter(model_name='gpt-4o', encoding='o200k_base')"


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"", "the file is empty"),
        (b"[", "not valid JSON"),
        (b'{"a": 1}', "without a 'messages' key"),
        (b'[{"kind": "nonsense", "parts": []}]', "message 0"),
        (b'{"version": 2, "messages": "x"}', "cannot load session file"),
    ],
)
def test_bad_files_exit_2_with_one_line(
    runner: CliRunner, tmp_path: Path, content: bytes, fragment: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    result = runner.invoke(cli, ["inspect", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert fragment in result.stderr
    assert result.stdout == ""
    assert path.read_bytes() == content


def test_missing_file_and_folder_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    assert runner.invoke(cli, ["inspect", str(tmp_path / "nope.json")]).exit_code == 2
    assert runner.invoke(cli, ["inspect", str(tmp_path)]).exit_code == 2


def test_read_recognition_rules() -> None:
    editor_view = ToolCallPart(
        tool_call_id="e", tool_name="str_replace_editor", args={"command": "view", "path": "/a"}
    )
    editor_edit = ToolCallPart(
        tool_call_id="e", tool_name="str_replace_editor", args={"command": "create", "path": "/a"}
    )
    assert _heuristic_read(editor_view) is not None
    assert _heuristic_read(editor_edit) is None
    assert (
        _heuristic_read(ToolCallPart(tool_call_id="r", tool_name="read_file", args='{"path": "a"')) is None
    )  # broken JSON args
    assert (
        _heuristic_read(
            ToolCallPart(tool_call_id="r", tool_name="read_file", args={"path": "a", "file": "b"})
        )
        is None
    )
    assert (
        _heuristic_read(ToolCallPart(tool_call_id="r", tool_name="bash", args={"command": "cat a"})) is None
    )
    same = _heuristic_read(ToolCallPart(tool_call_id="r1", tool_name="cat", args={"path": "a", "limit": 5}))
    other = _heuristic_read(ToolCallPart(tool_call_id="r2", tool_name="cat", args={"path": "a", "limit": 6}))
    assert same is not None
    assert other is not None
    assert same[1] == "a"
    assert same[0] != other[0]
    # With the dedupe plugin installed, plain shell reads are recognised too.
    shell = describe_file_read(
        ToolCallPart(tool_call_id="s", tool_name="bash", args={"command": "cat src/a.py"})
    )
    assert shell is not None
    assert shell[1] == "src/a.py"


def test_inspect_every_corpus_file(runner: CliRunner, corpus_file: Path) -> None:
    code, report = _report(runner, str(corpus_file))
    messages = load_messages(corpus_file.read_bytes())
    assert report["messages"] == len(messages)
    assert code == (1 if check_invariants(messages) else 0)
    assert sum(report["parts"].values()) == sum(len(m.parts) for m in messages)


def _fresh_shell_history() -> list[CanonicalMessage]:
    """Two identical relative reads with a ``cd`` between them, as mini-swe-agent's fresh shells make."""
    body = "\n".join(f"line {i}" for i in range(200))
    messages = [CanonicalMessage.user("Fix the validator.")]
    for index, command in enumerate(["cat ./app/x.py", "cd /testbed && ls", "cat ./app/x.py"]):
        call_id = f"c{index}"
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_name="bash", args={"command": command}, tool_call_id=call_id)
            )
        )
        content = "x.py" if command.endswith("ls") else body
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_name="bash", content=content, tool_call_id=call_id))
        )
    messages.append(CanonicalMessage.response(TextPart("Fixed.")))
    return messages


def test_inspect_says_when_dedupe_needs_fresh_shells(runner: CliRunner, tmp_path: Path) -> None:
    path = tmp_path / "fresh.json"
    path.write_bytes(dump_messages(_fresh_shell_history()))
    code, report = _report(runner, str(path))
    assert code == 0
    assert [item["count"] for item in report["repeated_file_reads"]] == [2]
    assert report["dedupe_file_reads"] == {"superseded": 0, "superseded_with_fresh_shells": 1}
    text = " ".join(runner.invoke(cli, ["inspect", str(path)]).stdout.split())
    assert "note: dedupe_file_reads supersedes 0 of these reads as configured by default" in text
    assert "--stack dedupe_file_reads:shell_keeps_directory=false" in text
    # following the note does what inspect promised
    done = runner.invoke(
        cli,
        [
            "compact",
            str(path),
            "--stack",
            "dedupe_file_reads:shell_keeps_directory=false",
            "--dry-run",
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    assert sum(edit["tool_calls_cleared"] for edit in json.loads(done.stdout)["edits"]) == 1


def test_inspect_and_dedupe_agree_on_a_mini_swe_agent_transcript(runner: CliRunner) -> None:
    found = [p for p in corpus_files() if p.name == "mini-swe-agent-django-11099-deepseek-chat.json"]
    if not found:
        pytest.skip("the shared corpus (mini-swe-agent-django-11099) is not available")
    code, report = _report(runner, str(found[0]))
    assert code == 0
    repeated = sum(item["count"] - 1 for item in report["repeated_file_reads"])
    dedupe = report["dedupe_file_reads"]
    assert dedupe["superseded"] < repeated == dedupe["superseded_with_fresh_shells"]
    assert "shell_keeps_directory=false" in runner.invoke(cli, ["inspect", str(found[0])]).stdout

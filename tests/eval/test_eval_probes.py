"""Probe extraction on small hand-checked transcripts: the exact probes of every class."""

from __future__ import annotations

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.eval.probes import (
    artifact_paths,
    constraint_sentences,
    error_lines,
    extract_probes,
    identifiers,
    is_identifier,
    terms,
)


def test_every_probe_class_of_a_bug_fix_transcript(bug_fix: list[CanonicalMessage]) -> None:
    probes = extract_probes(bug_fix)
    assert probes.requests == 4
    assert [(p.text, p.due) for p in probes.of("task")] == [("parse_config", 1), ("src/app/main.py", 1)]
    assert [(p.text, p.due) for p in probes.of("constraint")] == [("You must not change the public API.", 1)]
    # the call of the first response enters the history of request 2; the test run's path, request 3
    artifacts = [(p.text, p.due) for p in probes.of("artifact")]
    assert artifacts == [("src/app/main.py", 2), ("tests/test_main.py", 3)]
    assert [(p.text, p.due) for p in probes.of("error")] == [
        ("NameError: name 'load_yaml' is not defined", 3),
        ("FAILED tests/test_main.py::test_parse - NameError", 3),
    ]
    continuation = [(c.request, sorted(c.identifiers), sorted(c.older)) for c in probes.continuations]
    assert continuation == [
        (1, ["src/app/main.py"], []),  # from the task, which was just added
        (2, [], []),  # tests/test_main.py is new: it does not occur earlier
        # load_yaml was just shown by the failing run; parse_config and the path are older
        (3, ["load_yaml", "parse_config", "src/app/main.py"], ["parse_config", "src/app/main.py"]),
        (4, ["parse_config", "src/app/main.py"], []),  # both in the response just added
    ]
    assert [p.term for p in probes.probes] == [True, True, False, True, True, False, False]


def test_system_prompt_terms_and_sentences_are_not_probes() -> None:
    history = [
        CanonicalMessage.request(
            SystemPromptPart("Always run make_check. Never touch vendor/lib.py."),
            UserPromptPart("Rename old_name to new_name. Always run make_check."),
        ),
        CanonicalMessage.response(TextPart("Running make_check after renaming old_name to new_name.")),
    ]
    probes = extract_probes(history)
    assert probes.texts("task") == ["new_name", "old_name"]
    assert probes.texts("constraint") == []  # "Always run make_check." is 3 words, and in the system prompt
    # make_check is shown by the system prompt every request: not a continuation probe
    assert probes.continuations[0].identifiers == frozenset({"new_name", "old_name"})
    assert probes.continuations[0].older == frozenset()  # the task was just added


def test_constraints_from_later_user_prompts_and_a_retry_prompt_error() -> None:
    history = [
        CanonicalMessage.user("Port the parser."),
        CanonicalMessage.response(
            ToolCallPart(tool_call_id="a", tool_name="run", args={"cmd": "cargo build"})
        ),
        CanonicalMessage.request(
            RetryPromptPart(
                "error[E0425]: cannot find value `tokens` in this scope", tool_name="run", tool_call_id="a"
            ),
            UserPromptPart("Do not use unsafe code anywhere. Keep going."),
        ),
        CanonicalMessage.response(TextPart("ok")),
    ]
    probes = extract_probes(history)
    assert probes.texts("task") == []
    assert [(p.text, p.due) for p in probes.of("constraint")] == [("Do not use unsafe code anywhere.", 2)]
    assert [(p.text, p.due) for p in probes.of("error")] == [
        ("error[E0425]: cannot find value `tokens` in this scope", 2)
    ]


def test_continuation_counts_thinking_and_arguments_but_not_tool_names() -> None:
    history = [
        CanonicalMessage.user("Look at config/settings.toml and load_settings."),
        CanonicalMessage.response(
            ThoughtPart("load_settings reads config/settings.toml"),
            ToolCallPart(tool_call_id="a", tool_name="read_file", args={"path": "config/settings.toml"}),
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id="a", tool_name="read_file", content="x = 1")),
        CanonicalMessage.response(TextPart("settings.toml sets x; read_file was enough.")),
    ]
    probes = extract_probes(history)
    assert sorted(probes.continuations[0].identifiers) == ["config/settings.toml", "load_settings"]
    # settings.toml is a suffix of a path shown earlier; read_file occurs only as a tool name
    assert sorted(probes.continuations[1].identifiers) == ["settings.toml"]
    assert sorted(probes.continuations[1].older) == []  # the previous response showed the path


def test_terms_and_identifiers() -> None:
    found = terms("see /testbed/a/b.py, then ./run.sh -x; e.g. self.value\\nNext")
    assert {"testbed/a/b.py", "a/b.py", "b.py", "b", "py", "run.sh", "x", "self.value", "Next"} <= found
    assert "nNext" not in found  # a literal \n escape separates terms
    assert identifiers(["/testbed/a/b.py and camelCase, HTTPError, v2, 404, 12, plain, e.g"]) == {
        "testbed/a/b.py",
        "camelCase",
        "HTTPError",
        "404",
    }
    assert is_identifier("snake_case")
    assert is_identifier("abc1")
    assert not is_identifier("ab")
    assert not is_identifier("API")
    assert not is_identifier("Word")


def test_constraint_sentences_need_a_requirement_word_and_four_words() -> None:
    text = "Please fix it. You should keep the tests green!\nNever push.\nMake sure the docs build cleanly"
    assert constraint_sentences(text) == [
        "You should keep the tests green!",
        "Make sure the docs build cleanly",
    ]
    assert constraint_sentences("The only way in.") == ["The only way in."]
    assert constraint_sentences("It is mustard yellow today.") == []  # whole words only


def test_artifact_paths() -> None:
    text = "cat src/a.py docs/README.md https://example.com/x/y.py setup.cfg s/old/new.value/ tmp/build v1.2"
    assert artifact_paths(text) == ["src/a.py", "docs/README.md", "setup.cfg", "tmp/build"]


def test_error_lines_only_in_failing_results(traceback_text: str) -> None:
    failing = ToolReturnPart(tool_call_id="a", tool_name="bash", content=traceback_text)
    assert error_lines(failing) == [
        "NameError: name 'load_yaml' is not defined",
        "FAILED tests/test_main.py::test_parse - NameError",
    ]
    listing = ToolReturnPart(
        tool_call_id="b",
        tool_name="bash",
        content="<returncode>0</returncode>\nclass ValidationError(Exception):",
    )
    assert error_lines(listing) == []  # exit status 0 and no line reads as an error at its start
    quiet_failure = ToolReturnPart(
        tool_call_id="c", tool_name="bash", content="<returncode>1</returncode>\n<output>\n</output>"
    )
    assert error_lines(quiet_failure) == []
    many = ToolReturnPart(
        tool_call_id="d",
        tool_name="bash",
        content="\n".join(f"FAILED tests/t.py::test_{i}" for i in range(8)),
    )
    assert error_lines(many) == [f"FAILED tests/t.py::test_{i}" for i in range(3, 8)]
    assert error_lines(
        ToolReturnPart(tool_call_id="e", tool_name="bash", content="bash: line 1: tree: command not found")
    ) == ["bash: line 1: tree: command not found"]

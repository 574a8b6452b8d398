"""The digest keeps the names and failure lines of what it replaces, within a token budget."""

from __future__ import annotations

from harness_summarizing import StructuralDigest
from harness_summarizing.salient import NameTally, extract_names, failure_lines

from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
from harness.tokens import TokenCounter


def _pair(call_id: str, command: str, output: str) -> list[CanonicalMessage]:
    return [
        CanonicalMessage.response(
            ToolCallPart(tool_call_id=call_id, tool_name="bash", args={"command": command})
        ),
        CanonicalMessage.request(ToolReturnPart(tool_call_id=call_id, tool_name="bash", content=output)),
    ]


def test_names_are_paths_dotted_snake_and_camel_case() -> None:
    text = "see src/pkg/mod.py: call os.path.join and parse_args on HTTPServer, then fooBar; the end 1234"
    names = list(extract_names(text))
    for expected in ("src/pkg/mod.py", "os.path.join", "parse_args", "HTTPServer", "fooBar"):
        assert expected in names
    assert "the" not in names
    assert "1234" not in names


def test_tally_ranks_heavier_and_more_frequent_names_first() -> None:
    tally = NameTally()
    tally.add(["read_only", "read_only", "seen_once"], 1.0)
    tally.add(["written_by_agent"], 3.0)
    assert tally.top(2) == ["written_by_agent", "read_only"]
    assert tally.top(5, exclude=["read_only"]) == ["written_by_agent", "seen_once"]


def test_failure_lines_are_the_last_error_lines_verbatim() -> None:
    output = "\n".join(
        [
            "collected 3 items",
            "Traceback (most recent call last):",
            '  File "a.py", line 3, in <module>',
            "E       assert 1 == 2",
            "ValueError: bad value for width",
            "FAILED tests/test_a.py::test_width - ValueError",
        ]
    )
    assert failure_lines(output, limit=3) == [
        "E       assert 1 == 2",
        "ValueError: bad value for width",
        "FAILED tests/test_a.py::test_width - ValueError",
    ]
    assert failure_lines("all good\n2 passed") == []
    assert failure_lines("error: " + "x" * 500, max_chars=50)[0].endswith("…")


def test_the_digest_lists_names_and_keeps_failure_lines_of_a_zero_exit() -> None:
    messages = [
        CanonicalMessage.user("fix it"),
        *_pair(
            "c1",
            "python check_widths.py",
            "<returncode>0</returncode><output>Error: width_limit exceeded\n</output>",
        ),
        *_pair(
            "c2",
            "cat setup.py",
            "<returncode>0</returncode><output>raise ValueError('x')  # error text in a file\n</output>",
        ),
        CanonicalMessage.response(TextPart("Now look at compute_layout in layout_engine.py")),
    ]
    digest = StructuralDigest().digest(messages)
    assert any("Error: width_limit exceeded" in e for e in digest.errors)
    assert not any("error text in a file" in e for e in digest.errors)  # a read's output is data
    assert "compute_layout" in digest.names
    assert "check_widths.py" in digest.names
    text = StructuralDigest().render(digest)
    assert "## Names seen" in text
    assert "compute_layout" in text


def test_the_same_failure_is_kept_once() -> None:
    messages = [CanonicalMessage.user("go")]
    for index in range(3):
        messages += _pair(
            f"c{index}",
            f"pytest -x run{index}",
            "<returncode>1</returncode>ImportError: no module named widgets",
        )
    digest = StructuralDigest().digest(messages)
    assert len(digest.errors) == 1
    assert "run2" in digest.errors[0]


def test_render_within_fits_the_budget_and_keeps_the_newest_errors_longest() -> None:
    messages = [CanonicalMessage.user("the task")]
    for index in range(30):
        messages += _pair(
            f"c{index}",
            f"python script_{index}.py --option value_{index}",
            f"<returncode>1</returncode>RuntimeError: failure number {index} in module_{index}",
        )
    engine = StructuralDigest()
    digest = engine.digest(messages)
    counter = TokenCounter()
    full = engine.render(digest)
    budget = counter.count_text(full) // 3
    text = engine.render_within(digest, budget, counter.count_text)
    assert counter.count_text(text) <= budget
    assert "RuntimeError: failure number 29 in module_29" in text
    assert engine.render_within(digest, 10**6, counter.count_text) == full

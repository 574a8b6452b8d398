"""What a cleared result keeps: failure lines, paths and names, bounded and deterministic."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from harness_clear_tool_results import (
    DEFAULT_PLACEHOLDER,
    ClearToolResults,
    defined_names,
    excerpt,
    failure_lines,
    named_paths,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.capabilities import RequestContext
from harness.core import CanonicalMessage, ToolCallPart, ToolReturnPart
from harness.tokens import TokenCounter

PYTHON = """\
Running the reproduction script
Traceback (most recent call last):
  File "/work/app/main.py", line 12, in <module>
    run()
  File "/work/app/core/engine.py", line 88, in run
    raise KeyError(name)
KeyError: 'missing_setting'
"""

PYTEST = """\
============================= test session starts ==============================
collected 3 items

tests/test_parser.py .F.                                                 [100%]

=================================== FAILURES ===================================
______________________________ test_parse_header _______________________________

    def test_parse_header():
>       assert parse("a: 1") == {"a": 2}
E       AssertionError: assert {'a': 1} == {'a': 2}
E         Differing items:
E         {'a': 1} != {'a': 2}

tests/test_parser.py:7: AssertionError
=========================== short test summary info ============================
FAILED tests/test_parser.py::test_parse_header - AssertionError: assert {'a': 1} == {'a': 2}
========================= 1 failed, 2 passed in 0.03s ==========================
"""

RUSTC = """\
   Compiling demo v0.1.0 (/home/u/demo)
error[E0308]: mismatched types
 --> src/lib.rs:4:5
  |
4 |     "text"
  |     ^^^^^^ expected `i32`, found `&str`

error: could not compile `demo` (lib) due to 1 previous error
"""

GO_TEST = """\
=== RUN   TestSum
    sum_test.go:9: got 3, want 4
--- FAIL: TestSum (0.00s)
FAIL
FAIL\texample.com/sum\t0.002s
"""

GCC = """\
main.c: In function 'main':
main.c:5:12: error: 'count' undeclared (first use in this function)
main.c:5:12: note: each undeclared identifier is reported only once
"""

SHELL = """\
bash: line 1: fdfind: command not found
cat: notes/todo.txt: No such file or directory
exit status 127
"""

NODE = """\
node:internal/modules/cjs/loader:1080
  throw err;
  ^

Error: Cannot find module 'left-pad'
Require stack:
- /srv/web/index.js
"""

JAVA = """\
Exception in thread "main" java.lang.IllegalStateException: queue closed
\tat com.acme.Queue.put(Queue.java:42)
Caused by: java.io.IOException: broken pipe
"""

SOURCE_LISTING = """\
120-    try:
121-        module = load(name)
122-    except ImportError:
123-        raise AstroidBuildingError(
124-            "Failed to import module {modname} with error:\\n{error}.",
125-        )
src/loader.py:130:        logger.error("load FAILED for %s", name)
131:    ValueError
# error: this comment is not an error
class LoaderError(Exception):
"""

CLEAN = """\
total 3
-rw-r--r-- 1 u u 10 setup.cfg
test result: ok. 29 passed; 0 failed; 0 ignored
Exit code 0
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (PYTHON, ['  File "/work/app/core/engine.py", line 88, in run', "KeyError: 'missing_setting'"]),
        (
            PYTEST,
            [
                "E       AssertionError: assert {'a': 1} == {'a': 2}",
                "tests/test_parser.py:7: AssertionError",
                "FAILED tests/test_parser.py::test_parse_header - "
                "AssertionError: assert {'a': 1} == {'a': 2}",
                "========================= 1 failed, 2 passed in 0.03s ==========================",
            ],
        ),
        (
            RUSTC,
            [
                "error[E0308]: mismatched types",
                "error: could not compile `demo` (lib) due to 1 previous error",
            ],
        ),
        (GO_TEST, ["--- FAIL: TestSum (0.00s)", "FAIL", "FAIL\texample.com/sum\t0.002s"]),
        (GCC, ["main.c:5:12: error: 'count' undeclared (first use in this function)"]),
        (
            SHELL,
            [
                "bash: line 1: fdfind: command not found",
                "cat: notes/todo.txt: No such file or directory",
                "exit status 127",
            ],
        ),
        (NODE, ["Error: Cannot find module 'left-pad'"]),
        (
            JAVA,
            [
                'Exception in thread "main" java.lang.IllegalStateException: queue closed',
                "Caused by: java.io.IOException: broken pipe",
            ],
        ),
        (SOURCE_LISTING, []),
        (CLEAN, []),
    ],
    ids=["python", "pytest", "rustc", "go", "gcc", "shell", "node", "java", "source", "clean"],
)
def test_failure_lines_of_many_tools(text: str, expected: list[str]) -> None:
    assert failure_lines(text) == expected


def test_failure_lines_are_verbatim_deduplicated_and_cut() -> None:
    long = "ValueError: " + "x" * 600
    lines = failure_lines(f"ValueError: bad\nok\nValueError: bad\n{long}\n")
    assert lines[0] == "ValueError: bad"
    assert len(lines) == 2
    assert lines[1] == long[:397] + "..."


def test_a_chained_traceback_keeps_both_exceptions() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "a.py", line 1, in <module>\n'
        "ZeroDivisionError: division by zero\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "b.py", line 2, in <module>\n'
        "django.core.exceptions.ImproperlyConfigured: settings are not configured\n"
    )
    assert failure_lines(text) == [
        '  File "a.py", line 1, in <module>',
        "ZeroDivisionError: division by zero",
        '  File "b.py", line 2, in <module>',
        "django.core.exceptions.ImproperlyConfigured: settings are not configured",
    ]


def test_paths_and_names() -> None:
    text = (
        "see /srv/app/settings.py and ./scripts/run.sh, then docs/guide.md: also README.rst.\n"
        "https://example.com/a/b.html is a URL, 1/2 is a fraction, and/or is a word\n"
        "def load_config(path):\nclass ConfigError(Exception):\nfn parse_header() {}\n"
    )
    assert named_paths(text) == ["/srv/app/settings.py", "./scripts/run.sh", "docs/guide.md", "README.rst"]
    assert defined_names(text) == ["load_config", "ConfigError", "parse_header"]


def test_the_excerpt_is_bounded() -> None:
    text = "\n".join(f"src/mod{i}.py:{i}: error: problem number {i}" for i in range(20))
    kept = excerpt(text, max_lines=4, max_tokens=1000)
    assert kept.failures == (
        "src/mod0.py:0: error: problem number 0",
        "src/mod1.py:1: error: problem number 1",
        "src/mod18.py:18: error: problem number 18",
        "src/mod19.py:19: error: problem number 19",
    )
    assert kept.paths == tuple(f"src/mod{i}.py" for i in range(2, 10))  # those in kept lines left out
    counter = TokenCounter()
    small = excerpt(text, max_lines=4, max_tokens=40, count=counter.count_text)
    assert counter.count_text(small.render()) <= 40
    assert small.failures
    assert not small.paths
    assert not excerpt(text, max_tokens=0)
    assert excerpt(text, errors=False, paths=False, names=False).render() == ""


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [*PYTHON.splitlines(), *RUSTC.splitlines(), *SHELL.splitlines(), *CLEAN.splitlines(), "x" * 50]
        ),
        max_size=40,
    ),
    st.integers(0, 8),
    st.integers(0, 300),
)
def test_excerpts_are_deterministic_bounded_and_verbatim(
    lines: list[str], max_lines: int, max_tokens: int
) -> None:
    text = "\n".join(lines)
    counter = TokenCounter()
    kept = excerpt(text, max_lines=max_lines, max_tokens=max_tokens, count=counter.count_text)
    assert kept == excerpt(text, max_lines=max_lines, max_tokens=max_tokens, count=TokenCounter().count_text)
    assert len(kept.failures) <= max_lines
    assert counter.count_text(kept.render()) <= max_tokens
    for line in kept.failures:
        assert line in text.splitlines()


def run(cap: ClearToolResults, content: Any) -> list[ToolReturnPart]:
    messages = [CanonicalMessage.user("fix the parser")]
    for i in range(3):
        messages.append(
            CanonicalMessage.response(
                ToolCallPart(tool_call_id=f"c{i}", tool_name="bash", args={"command": "pytest"})
            )
        )
        messages.append(
            CanonicalMessage.request(ToolReturnPart(tool_call_id=f"c{i}", tool_name="bash", content=content))
        )
    ctx = RequestContext(messages=messages, token_counter=TokenCounter())
    asyncio.run(cap.compact(ctx, reason="test"))
    return [p for m in ctx.messages for p in m.parts if isinstance(p, ToolReturnPart)]


def test_a_cleared_result_keeps_its_failure_lines_and_paths() -> None:
    returns = run(ClearToolResults(max_messages=1, keep_pairs=1, keep_max_tokens=200), PYTEST)
    assert returns[0].content == (
        f"{DEFAULT_PLACEHOLDER}\n"
        f"failure lines (4 of {len(PYTEST.splitlines())} lines):\n"
        "E       AssertionError: assert {'a': 1} == {'a': 2}\n"
        "tests/test_parser.py:7: AssertionError\n"
        "FAILED tests/test_parser.py::test_parse_header - AssertionError: assert {'a': 1} == {'a': 2}\n"
        "========================= 1 failed, 2 passed in 0.03s =========================="
    )  # the test's name and path are in the kept lines already: not repeated
    assert returns[0].content == returns[1].content  # same result, same placeholder
    assert returns[2].content == PYTEST  # kept pair


def test_the_default_excerpt_stays_within_60_tokens() -> None:
    counter = TokenCounter()
    for text in (PYTEST, PYTHON, RUSTC, SHELL, NODE):
        content = run(ClearToolResults(max_messages=1, keep_pairs=1), text + "padding line\n" * 40)[0].content
        first, _, kept = content.partition("\n")
        assert first == DEFAULT_PLACEHOLDER
        assert kept
        assert counter.count_text(kept) <= 60
    # The token bound cuts the PYTEST excerpt after its first two lines (names are off by default).
    kept = run(ClearToolResults(max_messages=1, keep_pairs=1), PYTEST)[0].content.split("\n")[2:]
    assert kept == [
        "E       AssertionError: assert {'a': 1} == {'a': 2}",
        "tests/test_parser.py:7: AssertionError",
    ]


def test_keep_options_turn_the_excerpt_off() -> None:
    cap = ClearToolResults(
        max_messages=1, keep_pairs=1, keep_errors=False, keep_paths=False, keep_names=False
    )
    assert run(cap, PYTEST)[0].content == DEFAULT_PLACEHOLDER
    only_paths = ClearToolResults(max_messages=1, keep_pairs=1, keep_errors=False, keep_names=False)
    assert run(only_paths, PYTEST)[0].content == f"{DEFAULT_PLACEHOLDER}\npaths: tests/test_parser.py"


def test_a_result_the_excerpt_would_not_shrink_stays() -> None:
    small = "KeyError: 'x'"
    assert run(ClearToolResults(max_messages=1, keep_pairs=1), small)[0].content == small


def test_structured_results_are_read_as_their_json() -> None:
    content = {"status": "failed", "log": "src/app.py:3: error: bad indent\n" + "ok\n" * 80}
    cleared = run(ClearToolResults(max_messages=1, keep_pairs=1), content)[0].content
    assert isinstance(cleared, str)
    assert cleared.startswith(f"{DEFAULT_PLACEHOLDER}\n")
    assert "src/app.py" in cleared


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"keep_errors": "yes"}, "keep_errors must be True or False"),
        ({"keep_paths": 1}, "keep_paths must be True or False"),
        ({"keep_max_lines": -1}, "keep_max_lines must be a non-negative integer"),
        ({"keep_max_tokens": 1.5}, "keep_max_tokens must be a non-negative integer"),
        ({"keep_max_tokens": True}, "keep_max_tokens must be a non-negative integer"),
    ],
)
def test_bad_keep_settings_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ClearToolResults(max_messages=1, **kwargs)

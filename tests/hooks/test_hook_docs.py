"""Every hook specification is documented, in docs/hooks.md and in its docstring.

The checks run over every hookspec found in ``harness.hooks.specs`` at test time, so a new
hook fails here until it is documented.
"""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from harness import hookspec
from harness.hooks import ASYNC_HOOKS, PROJECT_NAME
from harness.hooks import specs as hookspecs
from harness.hooks.middleware import WRAPPER_HOOKS

DOCS = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"
DOC_FIELDS = ("**When it runs:**", "**Arguments:**", "**Returns:**", "**Ordering:**", "**Sync or async:**")
DOCSTRING_SECTIONS = ("Signature:", "Ordering:", "Return value:", "Async:")


def specs(module: types.ModuleType) -> dict[str, Callable[..., object]]:
    """The hook specifications of ``module``, by name."""
    return {
        name: value
        for name, value in vars(module).items()
        if callable(value) and isinstance(getattr(value, f"{PROJECT_NAME}_spec", None), Mapping)
    }


def spec_options(function: Callable[..., object]) -> Mapping[str, object]:
    return getattr(function, f"{PROJECT_NAME}_spec", {})


def signature_of(name: str, function: Callable[..., object]) -> str:
    """``name(arg: Type, ...) -> Return`` from the (string) annotations."""
    annotations: dict[str, object] = dict(getattr(function, "__annotations__", {}))
    params = [
        f"{param}: {annotations[param]}" if param in annotations else param
        for param in inspect.signature(function).parameters
    ]
    returns = f" -> {annotations['return']}" if "return" in annotations else ""
    return f"{name}({', '.join(params)}){returns}"


def doc_sections(text: str) -> dict[str, str]:
    """The ``### `name``` sections of the hook reference, by hook name."""
    reference = text.split("## Hook reference", 1)[1] if "## Hook reference" in text else ""
    parts = re.split(r"^### `([^`]+)`\s*$", reference, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def docstring_problems(name: str, function: Callable[..., object]) -> list[str]:
    doc = inspect.getdoc(function) or ""
    problems: list[str] = []
    if not doc:
        return [f"{name}: no docstring"]
    expected = f"Signature: ``{signature_of(name, function)}``"
    if expected not in doc:
        problems.append(f"{name}: docstring lacks {expected!r}")
    problems.extend(
        f"{name}: docstring lacks a {s!r} section" for s in DOCSTRING_SECTIONS[1:] if s not in doc
    )
    if "Called" not in doc:
        problems.append(f"{name}: docstring does not say when it is called ('Called ...')")
    params = list(inspect.signature(function).parameters)
    if params:
        args = doc.split("Args:", 1)[1] if "Args:" in doc else ""
        problems.extend(
            f"{name}: docstring Args lacks {p!r}" for p in params if not re.search(rf"^\s*{p}:", args, re.M)
        )
    firstresult = bool(spec_options(function).get("firstresult"))
    if firstresult != ("firstresult" in doc):
        problems.append(f"{name}: docstring must mention 'firstresult' iff the hook is firstresult")
    return problems


def section_problems(name: str, function: Callable[..., object], section: str | None) -> list[str]:
    if section is None:
        return [f"{name}: no '### `{name}`' section in docs/hooks.md"]
    problems: list[str] = []
    signature = signature_of(name, function)
    if f"```python\n{signature}\n```" not in section:
        problems.append(f"{name}: docs/hooks.md lacks the signature block {signature!r}")
    problems.extend(
        f"{name}: docs/hooks.md section lacks {field}" for field in DOC_FIELDS if field not in section
    )
    for param in inspect.signature(function).parameters:
        arguments = section.split("**Arguments:**", 1)[-1].split("**Returns:**", 1)[0]
        if f"`{param}`" not in arguments:
            problems.append(f"{name}: docs/hooks.md Arguments do not describe `{param}`")
    sync_line = section.split("**Sync or async:**", 1)[-1].split("\n- **", 1)[0]
    if name in WRAPPER_HOOKS:
        if "async generator" not in sync_line or "Return(value)" not in sync_line:
            problems.append(f"{name}: a wrapper's 'Sync or async' must describe async generators and Return")
    elif name in ASYNC_HOOKS:
        if "awaited" not in sync_line:
            problems.append(
                f"{name}: an awaited hook's 'Sync or async' must say async implementations are awaited"
            )
    elif "synchronous only" not in sync_line:
        problems.append(f"{name}: a pluggy-dispatched hook's 'Sync or async' must say 'synchronous only'")
    firstresult = bool(spec_options(function).get("firstresult"))
    if firstresult != ("firstresult" in section):
        problems.append(f"{name}: docs/hooks.md must mention 'firstresult' iff the hook is firstresult")
    return problems


def all_problems(module: types.ModuleType, text: str) -> list[str]:
    found = specs(module)
    sections = doc_sections(text)
    problems: list[str] = []
    for name, function in found.items():
        problems.extend(docstring_problems(name, function))
        problems.extend(section_problems(name, function, sections.get(name)))
    problems.extend(
        f"docs/hooks.md documents {stale!r}, which is not a hook specification"
        for stale in sections.keys() - found
    )
    return problems


# --------------------------------------------------------------------------------------
# The real hooks
# --------------------------------------------------------------------------------------


def test_there_are_hooks_to_check():
    found = specs(hookspecs)
    assert {"before_model_request", "after_node", "on_tool", "on_compaction", "count_tokens"} <= set(found)
    assert set(found) == set(hookspecs.__all__) & set(found)


@pytest.mark.parametrize("name", sorted(specs(hookspecs)))
def test_each_hook_is_documented(name: str):
    function = specs(hookspecs)[name]
    text = DOCS.read_text(encoding="utf-8")
    problems = docstring_problems(name, function) + section_problems(
        name, function, doc_sections(text).get(name)
    )
    assert problems == []


def test_the_docs_document_only_hooks_that_exist():
    text = DOCS.read_text(encoding="utf-8")
    stale = sorted(doc_sections(text).keys() - specs(hookspecs).keys())
    assert stale == []


def test_the_docs_state_the_ordering_rules():
    text = DOCS.read_text(encoding="utf-8")
    for fact in (
        "runs_before",
        "runs_after",
        "tryfirst",
        "trylast",
        "registration order",
        "CapabilityOrderError",
    ):
        assert fact in text


# --------------------------------------------------------------------------------------
# The checker fails when a hook is undocumented
# --------------------------------------------------------------------------------------


def fake_specs() -> types.ModuleType:
    module = types.ModuleType("fake_hookspecs")

    @hookspec(firstresult=True)
    def pick_colour(name: str, default: str | None) -> str | None:
        """Choose a colour.

        Signature: ``pick_colour(name: str, default: str | None) -> str | None``

        Called whenever a colour is needed.

        Ordering: pluggy's order; stops at the first non-None result (``firstresult``).

        Return value: the colour, or ``None``.

        Async: not allowed.

        Args:
            name: What is coloured.
            default: The fallback.
        """

    module.pick_colour = pick_colour  # pyright: ignore[reportAttributeAccessIssue]
    return module


GOOD_DOC = """## Hook reference

### `pick_colour`

```python
pick_colour(name: str, default: str | None) -> str | None
```

- **When it runs:** whenever a colour is needed.
- **Arguments:** `name`, what is coloured; `default`, the fallback.
- **Returns:** the colour or `None`.
- **Ordering:** `firstresult`, pluggy's order.
- **Sync or async:** synchronous only.
"""


def test_the_checker_accepts_a_documented_hook():
    assert all_problems(fake_specs(), GOOD_DOC) == []


def test_the_checker_fails_for_an_undocumented_hook():
    assert all_problems(fake_specs(), "# Hooks\n\n## Hook reference\n") == [
        "pick_colour: no '### `pick_colour`' section in docs/hooks.md"
    ]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("-> str | None\n```", "-> str\n```"), "lacks the signature block"),
        (("- **Ordering:**", "- Ordering:"), "section lacks **Ordering:**"),
        (("`default`, the fallback", "the fallback"), "do not describe `default`"),
        (("synchronous only", "sync"), "must say 'synchronous only'"),
        (("`firstresult`, ", ""), "'firstresult' iff"),
        (("### `pick_colour`", "### `pick_color`"), "documents 'pick_color'"),
    ],
)
def test_the_checker_names_what_the_docs_miss(edit: tuple[str, str], expected: str):
    old, new = edit
    assert old in GOOD_DOC
    problems = all_problems(fake_specs(), GOOD_DOC.replace(old, new))
    assert any(expected in p for p in problems), problems


def test_the_checker_reads_docstrings():
    module = fake_specs()
    function = module.pick_colour

    def bare(name: str) -> None:
        pass

    assert docstring_problems("pick_colour", function) == []
    assert docstring_problems("bare", bare) == ["bare: no docstring"]
    bare.__doc__ = "Does things.\n\nSignature: ``bare(name: str) -> None``\n\nOrdering: x\n\nAsync: y\n"
    assert docstring_problems("bare", bare) == [
        "bare: docstring lacks a 'Return value:' section",
        "bare: docstring does not say when it is called ('Called ...')",
        "bare: docstring Args lacks 'name'",
    ]

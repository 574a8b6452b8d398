"""A basic agent: a scripted model, two real tools, a retry, and a session saved and resumed.

What it shows:

* ``Agent`` with :class:`~harness.models.function.FunctionModel` standing in for a provider:
  a plain Python function looks at the history and decides each response (a tool call or
  the final text), so the example runs offline and always prints the same thing.
* Two real tools built from plain functions (their JSON schema comes from the signature
  and the docstring): ``read_file`` reads files of a temporary workspace the example
  creates, ``calculate`` evaluates arithmetic. ``calculate`` raises ``ToolRetry`` on a bad
  expression; the loop turns that into a retry prompt and the model corrects itself.
* A system prompt that is sent with every request but never stored in the history.
* A multi-turn conversation in one ``Session`` saved to a temporary folder, then loaded
  from its file and continued: the model sees the earlier turns.

Run it with ``uv run python examples/basic_agent.py``.
"""

from __future__ import annotations

import ast
import tempfile
from collections.abc import Callable
from pathlib import Path

from harness import (
    CanonicalMessage,
    RetryPromptPart,
    SystemPromptPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from harness.errors import ToolRetry
from harness.history import check_invariants
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent
from harness.session import Session

SYSTEM_PROMPT = "You are a careful assistant. Use the tools; never guess a file's content."

_OPERATORS: dict[type[ast.operator], Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


def _evaluate(node: ast.expr) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    raise ValueError(f"unsupported syntax: {ast.dump(node)}")


def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression with +, -, * and /.

    Args:
        expression: The expression, e.g. ``"12 + 30"``.
    """
    try:
        return _evaluate(ast.parse(expression, mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError) as exc:
        raise ToolRetry(f"cannot evaluate {expression!r}: {exc}") from exc


def make_read_file(root: Path) -> Callable[[str], str]:
    """Return a ``read_file`` tool confined to ``root``."""

    def read_file(path: str) -> str:
        """Read a text file of the workspace.

        Args:
            path: Path relative to the workspace root.
        """
        target = (root / path).resolve()
        if not target.is_relative_to(root.resolve()) or not target.is_file():
            raise ToolRetry(f"no such file in the workspace: {path!r}")
        return target.read_text()

    return read_file


def scripted_model(messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
    """Play a model: decide the next response from the newest request of the history."""
    assert isinstance(messages[0].parts[0], SystemPromptPart), "the system prompt is sent every time"
    assert {tool.name for tool in info.tools} == {"read_file", "calculate"}
    for part in messages[-1].parts:  # the request being answered
        if isinstance(part, UserPromptPart):
            if "notes.txt" in part.text:
                return CanonicalMessage.response(
                    ToolCallPart(tool_call_id="c1", tool_name="read_file", args={"path": "notes.txt"})
                )
            if "Add" in part.text:
                # A deliberate mistake: the expression is incomplete, so calculate raises ToolRetry.
                return CanonicalMessage.response(
                    ToolCallPart(tool_call_id="c2", tool_name="calculate", args={"expression": "12 + 30 +"})
                )
            if "remind" in part.text:
                returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
                files = [r for r in returns if r.tool_name == "read_file"]
                totals = [r.content for r in returns if r.tool_name == "calculate"]
                return f"Earlier I read {len(files)} file(s) and computed {totals[-1]:g}."
        if isinstance(part, RetryPromptPart) and part.tool_name == "calculate":
            return CanonicalMessage.response(
                ToolCallPart(tool_call_id="c3", tool_name="calculate", args={"expression": "12 + 30"})
            )
        if isinstance(part, ToolReturnPart):
            if part.tool_name == "read_file":
                return f"notes.txt says: {str(part.content).strip()}"
            if part.tool_name == "calculate":
                return f"The total is {part.content:g}."
    return "I do not know what to do."


def main() -> None:
    """Run three turns, the last one after loading the session from its file."""
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "workspace"
        workspace.mkdir()
        (workspace / "notes.txt").write_text("apples: 12, pears: 30\n")
        agent = Agent(
            FunctionModel(scripted_model),
            tools=[make_read_file(workspace), calculate],
            system_prompt=SYSTEM_PROMPT,
        )

        session = Session.create(Path(tmp) / "sessions")
        first = agent.run_sync("What does notes.txt say?", session)
        print(f"turn 1: {first.output}")
        second = agent.run_sync("Add the apples and the pears.", session)
        print(f"turn 2: {second.output}")
        retries = [p for m in second.new_messages for p in m.parts if isinstance(p, RetryPromptPart)]
        print(f"turn 2 retry prompts: {len(retries)} ({str(retries[0].content).splitlines()[0]})")

        path = session.save()
        print(f"saved {len(session.messages)} messages to {path.parent.name}/<project>_<session>.json")
        print(f"system prompt stored in the file: {'system-prompt' in path.read_text()}")

        resumed = Session.load(path)
        third = agent.run_sync("Please remind me what you did.", resumed)
        print(f"turn 3 (resumed): {third.output}")
        violations = check_invariants(resumed.messages)
        print(f"history: {len(resumed.messages)} messages, invariant violations: {len(violations)}")
        usage = third.usage
        print(f"usage of turn 3: {usage.request_tokens} request + {usage.response_tokens} response tokens")


if __name__ == "__main__":
    main()

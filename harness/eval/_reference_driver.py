"""The reference side of ``harness eval --reference``: pydantic-ai-harness 0.62 replaying transcripts.

Run by the interpreter of the reference environment (see :mod:`harness.eval.reference`),
never imported by harness: it imports nothing from harness. It reads one JSON job from
standard input::

    {"files": [...], "stacks": ["clear+window", "tiered"], "budgets": [8000, ...],
     "encoding": {"path": ..., "pat_str": ..., "special_tokens": {...}}}

and replays each transcript as ``harness replay`` does, with pydantic-ai's own agent loop:
one ``Agent.run`` per user turn over the growing history, a ``FunctionModel`` answering
with the recorded responses in order (each carrying, as its usage, the cl100k count the
reference itself estimates for the request, so its usage-anchored triggers see the same
counts), and one permissive tool per recorded tool name answering with the recorded
result of the same ``tool_call_id`` (a recorded retry prompt becomes ``ModelRetry``). The
messages the model function receives are what was sent. It prints one JSON document:
``{"runs": [{"file", "stack", "budget", "spec", "messages": [pydantic-ai JSON of each
distinct message], "requests": [[message indices], ...], "error": null | str}]}``.

Stacks (cl100k tokenizer, ``context_window`` = the budget):

* ``none``: no capability (checks the replay itself: every probe stays visible);
* ``clear+window``: ``ClearToolResults(keep_pairs=3, max_fraction=0.8)`` then
  ``SlidingWindowCompaction(keep_messages=6, max_fraction=0.8)``;
* ``tiered``: ``TieredCompaction(target_fraction=0.5)`` over ``DeduplicateFileReads`` (a
  read tool's ``path``/``file_path`` argument or a shell ``cat PATH``), ``ClearToolResults
  (keep_pairs=3)``, ``SummarizingCompaction(keep_messages=6)`` with an extractive
  ``FunctionModel`` summarizer (the first 160 characters of each of the last 40 lines of
  the transcript it is shown) and ``SlidingWindowCompaction(keep_messages=6)``.
"""

from __future__ import annotations

__all__ = ["main"]

import asyncio
import dataclasses
import json
import shlex
import sys
import warnings
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore")

import tiktoken  # noqa: E402
import tiktoken.load  # noqa: E402
from pydantic_ai import Agent, ModelRetry, RunContext, Tool  # noqa: E402
from pydantic_ai.messages import (  # noqa: E402
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.usage import RequestUsage, UsageLimits  # noqa: E402
from pydantic_ai_harness.compaction import (  # noqa: E402
    ClearToolResults,
    DeduplicateFileReads,
    SlidingWindowCompaction,
    SummarizingCompaction,
    TieredCompaction,
)
from pydantic_ai_harness.compaction._shared import estimate_token_count  # noqa: E402

SPECS = {
    "none": "(no capability)",
    "clear+window": (
        "ClearToolResults(keep_pairs=3, max_fraction=0.8) "
        "SlidingWindowCompaction(keep_messages=6, max_fraction=0.8)"
    ),
    "tiered": (
        "TieredCompaction(target_fraction=0.5)[DeduplicateFileReads ClearToolResults(keep_pairs=3) "
        "SummarizingCompaction(keep_messages=6, extractive) SlidingWindowCompaction(keep_messages=6)]"
    ),
}


class ReplayExhaustedError(Exception):
    """The loop asked for more responses than were recorded."""


def file_key(call: ToolCallPart) -> str | None:
    args = call.args_as_dict()
    for name in ("path", "file_path", "filename"):
        value = args.get(name)
        if isinstance(value, str) and call.tool_name.lower() in ("read", "read_file", "view", "open", "cat"):
            return value
    command = args.get("command")
    if isinstance(command, str) and not any(c in command for c in "|;&><`$"):
        try:
            words = shlex.split(command)
        except ValueError:
            return None
        if len(words) == 2 and words[0] == "cat":
            return words[1]
    return None


def extractive_summary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    text = "\n".join(
        str(part.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if isinstance(part, UserPromptPart)
    )
    start, end = text.find("<messages>"), text.rfind("</messages>")
    body = text[start + len("<messages>") : end] if start >= 0 and end > start else text
    lines = [line[:160] for line in body.splitlines() if line.strip()][-40:]
    return ModelResponse(
        parts=[TextPart("\n".join(lines) or "(nothing to summarize)")],
        usage=RequestUsage(input_tokens=1, output_tokens=1),
    )


def build_stack(name: str, budget: int, tokenizer: Any) -> list[Any]:
    common: dict[str, Any] = {"context_window": budget, "tokenizer": tokenizer}
    if name == "none":
        return []
    if name == "clear+window":
        return [
            ClearToolResults(keep_pairs=3, max_fraction=0.8, **common),
            SlidingWindowCompaction(keep_messages=6, max_fraction=0.8, **common),
        ]
    if name == "tiered":
        return [
            TieredCompaction(
                tiers=[
                    DeduplicateFileReads(file_key=file_key, tokenizer=tokenizer),
                    ClearToolResults(keep_pairs=3, max_messages=1, tokenizer=tokenizer),
                    SummarizingCompaction(
                        model=FunctionModel(extractive_summary),
                        keep_messages=6,
                        max_messages=1,
                        tokenizer=tokenizer,
                    ),
                    SlidingWindowCompaction(keep_messages=6, max_messages=1, tokenizer=tokenizer),
                ],
                target_fraction=0.5,
                **common,
            )
        ]
    raise SystemExit(f"unknown reference stack {name!r}; known: {', '.join(SPECS)}")


def user_turns(history: list[ModelMessage]) -> list[str]:
    turns: list[str] = []
    for message in history:
        if isinstance(message, ModelRequest):
            texts = [str(p.content) for p in message.parts if isinstance(p, UserPromptPart)]
            if texts:
                turns.append("\n".join(texts))
    return turns


async def replay(history: list[ModelMessage], stack: list[Any], tokenizer: Any) -> list[list[ModelMessage]]:
    responses = [m for m in history if isinstance(m, ModelResponse)]
    answers: dict[str, ToolReturnPart | RetryPromptPart] = {}
    names: list[str] = []
    for message in history:
        for part in message.parts:
            if isinstance(part, ToolCallPart) and part.tool_name not in names:
                names.append(part.tool_name)
            elif isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id:
                answers.setdefault(part.tool_call_id, part)
    sent: list[list[ModelMessage]] = []
    position = [0]

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if position[0] >= len(responses):
            raise ReplayExhaustedError
        recorded = responses[position[0]]
        position[0] += 1
        sent.append(list(messages))
        usage = RequestUsage(
            input_tokens=estimate_token_count(messages, tokenizer),
            output_tokens=max(1, estimate_token_count([recorded], tokenizer)),
        )
        return dataclasses.replace(recorded, usage=usage)

    def make(name: str) -> Tool[Any]:
        def answer(ctx: RunContext[Any], **_: Any) -> Any:
            recorded = answers.get(ctx.tool_call_id or "")
            if recorded is None:
                return "[no recorded result]"
            if isinstance(recorded, RetryPromptPart):
                raise ModelRetry(
                    recorded.content if isinstance(recorded.content, str) else str(recorded.content)
                )
            return recorded.content

        schema = {"type": "object", "additionalProperties": True}
        return Tool.from_schema(
            answer, name=name, description=f"Replays {name}.", json_schema=schema, takes_ctx=True
        )

    system = [
        p.content
        for m in history[:1]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, SystemPromptPart)
    ]
    agent = Agent(
        FunctionModel(model),
        system_prompt="\n\n".join(system) or (),
        tools=[make(name) for name in names],
        capabilities=stack,
        retries=10_000,
    )
    messages: list[ModelMessage] | None = None
    turns = user_turns(history)
    for index, prompt in enumerate(turns):
        try:
            result = await agent.run(
                prompt, message_history=messages, usage_limits=UsageLimits(request_limit=None)
            )
            messages = result.all_messages()
        except ReplayExhaustedError:
            if index == len(turns) - 1:
                break
            raise
    return sent


def main() -> None:
    job = json.loads(sys.stdin.read())
    spec = job["encoding"]
    encoding = tiktoken.Encoding(
        "cl100k_base",
        pat_str=spec["pat_str"],
        mergeable_ranks=tiktoken.load.load_tiktoken_bpe(spec["path"]),
        special_tokens=spec["special_tokens"],
    )

    def tokenizer(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    runs: list[dict[str, Any]] = []
    for file in job["files"]:
        history = ModelMessagesTypeAdapter.validate_json(Path(file).read_bytes())
        for stack_name in job["stacks"]:
            for budget in job["budgets"]:
                table: dict[str, int] = {}
                messages: list[Any] = []
                requests: list[list[int]] = []
                error = None
                try:
                    contexts = asyncio.run(
                        replay(history, build_stack(stack_name, budget, tokenizer), tokenizer)
                    )
                except Exception as exc:  # reported, not raised: the other runs go on
                    contexts = []
                    error = f"{type(exc).__name__}: {exc}"
                for context in contexts:
                    indices: list[int] = []
                    for message in context:
                        text = ModelMessagesTypeAdapter.dump_json([message]).decode()
                        if text not in table:
                            table[text] = len(messages)
                            messages.append(json.loads(text)[0])
                        indices.append(table[text])
                    requests.append(indices)
                runs.append(
                    {
                        "file": file,
                        "stack": stack_name,
                        "budget": budget,
                        "spec": SPECS[stack_name],
                        "messages": messages,
                        "requests": requests,
                        "error": error,
                    }
                )
    json.dump({"runs": runs}, sys.stdout)


if __name__ == "__main__":
    main()

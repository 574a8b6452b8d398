"""Provider mapping benchmark cases: canonical history -> request payload, per request.

Wire it into ``run.py`` by adding ``from cases_providers import provider_cases`` and a
``"providers": provider_cases`` entry to ``_groups()``; or run this file directly::

    uv run python benchmarks/cases_providers.py --sizes 100 1000 10000
"""

from __future__ import annotations

__all__ = ["provider_cases"]

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import Measurement, measure
from synthetic import build_history

from harness.core import ModelSettings, ToolDefinition
from harness.models.anthropic import AnthropicModel, to_anthropic_messages
from harness.models.openai import OpenAIModel, to_openai_messages

_TOOLS = [
    ToolDefinition(
        "read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}
    )
]


def _size_cases(
    size: int, openai_model: OpenAIModel, anthropic_model: AnthropicModel
) -> Iterator[Measurement]:
    history = build_history(size)
    settings = ModelSettings()
    yield measure("providers", "openai.map", size, lambda: to_openai_messages(history))
    yield measure("providers", "anthropic.map", size, lambda: to_anthropic_messages(history))
    megabytes = len(json.dumps(openai_model.request_body(history, _TOOLS, settings))) / 1e6
    encoded = measure(
        "providers",
        "openai.body+json",
        size,
        lambda: json.dumps(openai_model.request_body(history, _TOOLS, settings)),
    )
    yield Measurement(
        encoded.group, encoded.case, size, encoded.median_us, encoded.runs, f"{megabytes:.2f} MB body"
    )
    yield measure(
        "providers",
        "anthropic.body+json",
        size,
        lambda: json.dumps(anthropic_model.request_body(history, _TOOLS, settings)),
    )


def provider_cases(sizes: list[int]) -> Iterator[Measurement]:
    """Map a synthetic history of each size to both providers' payloads (and encode it as JSON)."""
    openai_model = OpenAIModel("gpt-4o-mini", api_key="unused")
    anthropic_model = AnthropicModel("claude-haiku-4-5", api_key="unused")
    for size in sizes:
        yield from _size_cases(size, openai_model, anthropic_model)


def main() -> None:
    """Print the cases as a table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    args = parser.parse_args()
    for m in provider_cases(args.sizes):
        print(f"{m.case:24} {m.size:>7} {m.median_us / 1000:10.3f} ms  {m.note}")


if __name__ == "__main__":
    main()

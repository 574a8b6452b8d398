"""The context windows of known models, by model-name prefix.

:data:`KNOWN_CONTEXT_WINDOWS` maps lower-cased name prefixes to windows in tokens; the
longest prefix that matches at a name boundary wins. Update it with
:func:`register_context_window`, or pass ``context_window=`` to a model.
"""

from __future__ import annotations

__all__ = ["KNOWN_CONTEXT_WINDOWS", "context_window_for", "register_context_window"]

_PROVIDER_PREFIXES = frozenset({"openai", "anthropic", "ollama", "test"})
"""Provider prefixes of model strings (``"openai:gpt-4o"``), ignored when matching."""

KNOWN_CONTEXT_WINDOWS: dict[str, int] = {
    # OpenAI
    "gpt-5": 400_000,
    "gpt-5-chat": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4-32k": 32_768,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Anthropic: Claude models have (at least) 200k tokens; for 1M-token windows pass context_window=.
    "claude": 200_000,
}
"""Context windows in tokens by model-name prefix; the longest matching prefix wins.

A prefix matches the whole name or a name continuing with ``-``, ``_``, ``:`` or ``@``
(``gpt-4o`` matches ``gpt-4o-mini-2024-07-18``; ``gpt-5`` does not match ``gpt-5.1``, whose
window is not in the table, so it stays unknown rather than guessed). Names are matched
lower-cased, without a ``provider:`` prefix and without an
``organisation/`` part (``openai/gpt-4o`` on OpenRouter matches ``gpt-4o``). Local models
(Ollama, vLLM...) are deliberately absent: their window depends on how the server was
started, so pass ``context_window=`` to the model instead.
"""


_BOUNDARY = frozenset("-:@_")


def _normalise(model_name: str) -> str:
    name = model_name.strip().lower()
    if ":" in name and name.split(":", 1)[0] in _PROVIDER_PREFIXES:
        name = name.split(":", 1)[1]
    return name.rsplit("/", 1)[-1]


def context_window_for(model_name: str) -> int | None:
    """The context window of ``model_name`` from :data:`KNOWN_CONTEXT_WINDOWS`.

    Args:
        model_name: A model name, e.g. ``"gpt-4o-mini-2024-07-18"`` or ``"anthropic:claude-sonnet-4-6"``.

    Returns:
        Tokens, or ``None`` when no known prefix matches.
    """
    name = _normalise(model_name)
    best: str | None = None
    for prefix in KNOWN_CONTEXT_WINDOWS:
        key = prefix.lower()
        if not name.startswith(key) or (len(name) > len(key) and name[len(key)] not in _BOUNDARY):
            continue
        if best is None or len(key) > len(best):
            best = key
    if best is None:
        return None
    for prefix, tokens in KNOWN_CONTEXT_WINDOWS.items():
        if prefix.lower() == best:
            return tokens
    return None  # pragma: no cover - best always comes from the table


def register_context_window(prefix: str, tokens: int) -> None:
    """Add or change a context window in :data:`KNOWN_CONTEXT_WINDOWS`.

    Args:
        prefix: Model-name prefix (matched lower-cased), e.g. ``"llama3.1"``.
        tokens: The window in tokens.

    Raises:
        ValueError: ``prefix`` is blank or ``tokens`` is below 1.
    """
    if not prefix.strip():
        raise ValueError("register_context_window: prefix must not be blank")
    if tokens < 1:
        raise ValueError(f"register_context_window: tokens must be at least 1, got {tokens}")
    KNOWN_CONTEXT_WINDOWS[prefix.strip().lower()] = tokens

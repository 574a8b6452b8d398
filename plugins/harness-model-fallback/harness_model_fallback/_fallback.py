"""The :class:`ModelFallback` plugin: a ``wrap_model_request`` wrapper trying the next model."""

from __future__ import annotations

__all__ = [
    "KINDS",
    "KIND_ERRORS",
    "NOTES_KEY",
    "SOURCE",
    "Attempt",
    "FallbackKind",
    "FallbackRecord",
    "ModelFallback",
    "error_kind",
]

from collections.abc import Callable, Collection, Generator, Mapping, Sequence
from typing import ClassVar, Literal, TypeAlias, cast

import attrs

from harness.capabilities import ModelCall, RequestContext
from harness.core import CanonicalMessage, JsonValue, Model, ModelSettings, with_harness_mark
from harness.errors import (
    ModelContextLengthError,
    ModelError,
    ModelRateLimitError,
    ModelTimeoutError,
    ModelUnavailableError,
)
from harness.hooks import hookimpl
from harness.models import resolve_model
from harness_model_fallback._settings import (
    PROVIDER_SETTINGS,
    SettingsAdapter,
    provider_family,
    strip_settings,
)

SOURCE = "model_fallback"
"""The plugin's name (its entry point, its name in the plugin manager, its key in ``ctx.state``)."""

NOTES_KEY = "model_fallback"
"""The key of ``request.notes`` where the wrapper records who answered and who failed."""

FallbackKind: TypeAlias = Literal["rate_limit", "unavailable", "timeout", "context_length"]
"""A kind of model error the next model may succeed on."""

KINDS: tuple[FallbackKind, ...] = ("rate_limit", "unavailable", "timeout", "context_length")
"""Every fallback kind, in the order they are listed."""

KIND_ERRORS: Mapping[FallbackKind, type[ModelError]] = {
    "rate_limit": ModelRateLimitError,
    "unavailable": ModelUnavailableError,
    "timeout": ModelTimeoutError,
    "context_length": ModelContextLengthError,
}
"""The :mod:`harness.errors` class of each kind (subclasses included)."""


def error_kind(error: BaseException) -> FallbackKind | None:
    """The fallback kind of ``error``, or ``None`` for any other error (auth, bad request...)."""
    for kind, error_type in KIND_ERRORS.items():
        if isinstance(error, error_type):
            return kind
    return None


@attrs.frozen
class Attempt:
    """One model that failed a call.

    Attributes:
        model_name: The model's ``model_name``.
        kind: The error's fallback kind (``None``: a kind no fallback is made for).
        error_type: The error's class name (``"ModelRateLimitError"``...).
        status_code: The provider's HTTP status, when there was one.
        message: The error's message.
    """

    model_name: str
    kind: FallbackKind | None
    error_type: str
    status_code: int | None
    message: str

    @classmethod
    def of(cls, model: Model, error: ModelError) -> Attempt:
        """The attempt of ``model`` that raised ``error``."""
        return cls(model.model_name, error_kind(error), type(error).__name__, error.status_code, str(error))

    def describe(self) -> str:
        """``'gpt-4o' (rate_limit: openai model 'gpt-4o' (HTTP 429): ...)``."""
        kind = self.kind or self.error_type
        return f"{self.model_name!r} ({kind}: {self.message})"

    def to_json(self) -> dict[str, JsonValue]:
        """The attempt as the response's harness mark stores it."""
        return {"model": self.model_name, "kind": self.kind or self.error_type, "status": self.status_code}


@attrs.frozen
class FallbackRecord:
    """What happened to one model call the wrapper handled (kept in ``ctx.state``).

    Attributes:
        purpose: ``"request"`` (the run's own request) or ``"capability"``.
        source: ``"agent"``, or the capability that made the call.
        answered_by: The model that answered, or ``None`` when every one failed.
        failed: The models that failed before, in order.
    """

    purpose: str
    source: str
    answered_by: str | None
    failed: tuple[Attempt, ...] = ()


ModelList: TypeAlias = Sequence[Model] | Sequence[Model | str]
"""``models=``: models and model strings. Spelt with ``Sequence[Model]`` first so that a stack
string (``"model_fallback:models=openai:gpt-4o|test"``) has its model strings resolved by the
stack builder, with the agent's plugin manager."""


def _models(value: ModelList) -> tuple[Model, ...]:
    given = cast(object, value)
    if isinstance(given, str):
        raise TypeError(
            f"models must be a list of models or model strings, not a string; did you mean [{given!r}]?"
        )
    if isinstance(given, Model) or not isinstance(given, Sequence):
        raise TypeError(
            f"models must be a list of models or model strings (['openai:gpt-4o-mini', ...]), "
            f"got {type(given).__name__}"
        )
    models: list[Model] = []
    for index, item in enumerate(cast(Sequence[object], given)):
        if isinstance(item, str):
            models.append(resolve_model(item))
        elif isinstance(item, Model):
            models.append(item)
        else:
            raise TypeError(
                f"models[{index}] must be a harness Model or a model string such as 'openai:gpt-4o-mini', "
                f"got {type(item).__name__}"
            )
    if not models:
        raise ValueError("models must name at least one model to fall back to")
    return tuple(models)


def _kinds(value: Collection[FallbackKind]) -> tuple[FallbackKind, ...]:
    given = cast(object, value)
    if isinstance(given, str):
        raise TypeError(f"on must be a list of error kinds, not a string; did you mean [{given!r}]?")
    if not isinstance(given, Collection):
        raise TypeError(f"on must be a list of error kinds, got {type(given).__name__}")
    items = list(cast(Collection[object], given))
    if not items:
        raise ValueError("on must name at least one error kind: " + ", ".join(repr(k) for k in KINDS))
    for item in items:
        if item not in KINDS:
            expected = ", ".join(repr(k) for k in KINDS)
            raise ValueError(f"on: unknown error kind {item!r}; expected one of {expected}")
    return tuple(kind for kind in KINDS if kind in items)


def _rules(value: Mapping[str, Collection[str]]) -> Mapping[str, frozenset[str]]:
    given = cast(object, value)
    if not isinstance(given, Mapping):
        raise TypeError(
            f"strip must be a mapping of provider families to setting names, got {type(given).__name__}"
        )
    rules: dict[str, frozenset[str]] = {}
    for family, keys in cast(Mapping[object, object], given).items():
        if not isinstance(family, str):
            raise TypeError(f"strip keys must be provider family names (strings), got {family!r}")
        if isinstance(keys, str) or not isinstance(keys, Collection):
            raise TypeError(f"strip[{family!r}] must be a collection of setting names, got {keys!r}")
        names = list(cast(Collection[object], keys))
        bad = [name for name in names if not isinstance(name, str)]
        if bad:
            raise TypeError(f"strip[{family!r}] must hold setting names (strings), got {bad[0]!r}")
        rules[family] = frozenset(cast(list[str], names))
    return rules


def _check_callable(name: str, value: object) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a function or None, got {type(value).__name__}")


@attrs.frozen(kw_only=True, eq=False)
class ModelFallback:
    """Try the next model when a model call fails with an error of a configured kind.

    The request's own model is tried first (the agent's, or the capability's), then each of
    ``models`` in order (a model given twice, or the request's own model listed again, is
    tried once). A call that fails with a :class:`~harness.errors.ModelError` whose kind is
    in ``on`` is sent again to the next model (the wrapper sets ``request.model`` and yields
    again); any other error (authentication, bad request, a non-model error) propagates at
    once. When every model failed, the last error propagates, with a note listing every
    model tried and why it failed. Each model's own retry policy runs first: a model counts
    as failed once its retries gave up.

    Before a call goes to a model of another provider family than the request's own model
    (:func:`provider_family`), the settings lose the ``ModelSettings.extra`` keys written
    for that family (``strip``, default :data:`PROVIDER_SETTINGS`): an OpenAI
    ``reasoning_effort`` never reaches Anthropic, an Anthropic ``thinking`` never reaches
    OpenAI. ``adapt_settings`` replaces that rule altogether.

    What answered is recorded:

    * ``request.answered_by``: the answering model's ``model_name`` (the response's own
      ``model_name`` stays the provider's, e.g. ``"gpt-4o-mini-2024-07-18"``);
    * ``request.notes["model_fallback"]``: ``{"answered_by": name, "failed": [names]}``;
    * the response's harness mark (stored with it in the history):
      ``{"answered_by": name, "fallback_from": [{"model", "kind", "status"}, ...]}``;
    * ``ctx.state["model_fallback"]``: a :class:`FallbackRecord` per call this run (also for
      calls where every model failed); read it with :meth:`records`.

    Attributes:
        models: The models to fall back to, in order: ``Model`` objects, or model strings
            resolved at construction by :func:`harness.models.resolve.resolve_model` (the
            built-in providers; pass a ``Model`` for a provider a plugin adds).
        on: The error kinds that make the next model try: ``"rate_limit"``
            (``ModelRateLimitError``), ``"unavailable"`` (``ModelUnavailableError``),
            ``"timeout"`` (``ModelTimeoutError``), ``"context_length"``
            (``ModelContextLengthError``). Default: all four.
        requests_only: Leave capabilities' own model calls (a summarizer's) alone.
        strip: By provider family, the ``extra`` keys written for it (see
            :func:`strip_settings`); ``{}`` strips nothing.
        family_of: ``family_of(model) -> str | None``, the provider family of a model
            (default :func:`provider_family`).
        adapt_settings: ``adapt_settings(settings, original_model, next_model) ->
            settings``: the settings for the next model, instead of the strip rules.

    Raises:
        TypeError: ``models`` is a string or holds something that is not a model; ``on``
            is a string; ``strip`` is not a mapping of names; ``family_of`` or
            ``adapt_settings`` is not callable.
        ValueError: ``models`` or ``on`` is empty, or ``on`` names an unknown kind.
        ModelResolutionError: A model string names no known provider.
    """

    name: ClassVar[str] = SOURCE
    runs_before: ClassVar[tuple[str, ...]] = ()
    runs_after: ClassVar[tuple[str, ...]] = ()

    models: tuple[Model, ...] = attrs.field(converter=_models)
    on: tuple[FallbackKind, ...] = attrs.field(default=KINDS, converter=_kinds)
    requests_only: bool = False
    strip: Mapping[str, frozenset[str]] = attrs.field(default=PROVIDER_SETTINGS, converter=_rules, repr=False)
    family_of: Callable[[Model], str | None] = provider_family
    adapt_settings: SettingsAdapter | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(cast(object, self.requests_only), bool):
            raise TypeError(f"requests_only must be True or False, got {type(self.requests_only).__name__}")
        _check_callable("family_of", self.family_of)
        _check_callable("adapt_settings", self.adapt_settings)

    @staticmethod
    def records(ctx: RequestContext) -> list[FallbackRecord]:
        """The calls handled so far in ``ctx``'s run, in order."""
        return cast(list[FallbackRecord], ctx.state.setdefault(SOURCE, []))

    def chain(self, first: Model) -> list[Model]:
        """The models a call to ``first`` is tried on, in order."""
        chain = [first]
        for model in self.models:
            if all(model is not seen for seen in chain):
                chain.append(model)
        return chain

    def settings_for(self, settings: ModelSettings, original: Model, model: Model) -> ModelSettings:
        """The settings a call made for ``original`` with ``settings`` is sent to ``model`` with."""
        if self.adapt_settings is not None:
            return self.adapt_settings(settings, original, model)
        return strip_settings(settings, self.family_of(original), self.family_of(model), self.strip)

    @hookimpl(wrapper=True)
    def wrap_model_request(
        self, ctx: RequestContext, request: ModelCall
    ) -> Generator[None, CanonicalMessage, CanonicalMessage]:
        """Send the call to each model in turn until one answers (see the class)."""
        if self.requests_only and request.purpose != "request":
            return (yield)
        original = request.model
        settings = request.settings
        chain = self.chain(original)
        failed: list[Attempt] = []
        for index, model in enumerate(chain):
            if index:
                request.model = model
                request.settings = self.settings_for(settings, original, model)
            try:
                response = yield
            except ModelError as error:
                attempt = Attempt.of(model, error)
                if attempt.kind in self.on and index + 1 < len(chain):
                    failed.append(attempt)
                    continue
                if failed:
                    error.add_note(_tried_note([*failed, attempt], attempt.kind in self.on))
                self.records(ctx).append(
                    FallbackRecord(request.purpose, request.source, None, (*failed, attempt))
                )
                raise
            return self._answered(ctx, request, model, response, failed)
        raise AssertionError("unreachable: the last model either answered or raised")  # pragma: no cover

    def _answered(
        self,
        ctx: RequestContext,
        request: ModelCall,
        model: Model,
        response: CanonicalMessage,
        failed: list[Attempt],
    ) -> CanonicalMessage:
        name = model.model_name
        request.answered_by = name
        request.notes[NOTES_KEY] = {"answered_by": name, "failed": [a.model_name for a in failed]}
        self.records(ctx).append(FallbackRecord(request.purpose, request.source, name, tuple(failed)))
        return with_harness_mark(response, answered_by=name, fallback_from=[a.to_json() for a in failed])


def _tried_note(attempts: list[Attempt], exhausted: bool) -> str:
    lines = "\n".join(f"  {number}. {attempt.describe()}" for number, attempt in enumerate(attempts, 1))
    why = "every model failed" if exhausted else "the last error is not one it falls back on"
    return f"harness-model-fallback tried {len(attempts)} models ({why}):\n{lines}"

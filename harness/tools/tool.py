"""Tools from plain Python functions: schema, validation, conversion, the retry policy.

:meth:`Tool.from_function` reads a function's signature and Google-style docstring and
builds the JSON schema the model sees (:mod:`harness.tools.schema` lists the supported
annotations, structures included). Arguments the model sends are validated against that
schema *before* the function runs and converted to the annotated types
(:mod:`harness.tools.conversion`); a failure becomes a :class:`ToolArgumentsError` that the
loop turns into a ``RetryPromptPart`` telling the model what to fix. A tool raises
:class:`ToolRetry` to ask the model to try again with a message of its own. A first
parameter annotated :class:`~harness.tools.context.RunContext` receives the run context and
is not part of the schema.

Failures and retries: an exception a tool raises is retried (up to the agent's
``tool_max_retries`` attempts, with backoff) only when it is *transient*: a
:data:`TRANSIENT_TOOL_ERRORS` (connection errors, timeouts) or one of the tool's
``retry_on`` classes. Any other exception is deterministic (``ValueError``, ``KeyError``,
``TypeError``...): running the call again would fail again, or repeat its side effects, so
the model gets the error as the tool's result at once. A tool declared
``idempotent=False`` is never re-run automatically, whatever the failure: the model is told
that it failed and may have taken effect, and decides itself whether to call it again.
"""

from __future__ import annotations

from harness.errors import HarnessError, ToolArgumentsError, ToolDefinitionError

__all__ = [
    "TRANSIENT_TOOL_ERRORS",
    "Tool",
    "as_tool",
    "parse_google_docstring",
    "schema_for_annotation",
    "validate_arguments",
]

import asyncio
import functools
import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs

from harness.core.model import ToolDefinition
from harness.tools.context import RunContext
from harness.tools.conversion import argument_converter, conversion_problems, needs_conversion
from harness.tools.docstrings import parse_google_docstring
from harness.tools.schema import (
    json_default,
    matches_schema,
    parameters_schema,
    schema_for_annotation,
    validate_arguments,
)

TRANSIENT_TOOL_ERRORS: Final[tuple[type[Exception], ...]] = (ConnectionError, TimeoutError)
"""Exceptions every tool's calls are retried on: the failure may pass (``ConnectionError``
and its subclasses such as ``ConnectionResetError``, ``TimeoutError`` and so
``asyncio.TimeoutError`` and ``socket.timeout``). A tool adds its own with ``retry_on``."""

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


def _is_run_context(annotation: Any) -> bool:
    return annotation is RunContext or annotation == "RunContext"


def _exception_tuple(value: type[Exception] | tuple[type[Exception], ...]) -> tuple[type[Exception], ...]:
    """``retry_on`` as a tuple; one class alone is accepted too."""
    return (value,) if isinstance(value, type) else tuple(value)


def _check_retry_on(instance: Tool, attribute: attrs.Attribute[Any], value: tuple[object, ...]) -> None:
    del attribute
    for cls in value:
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            raise ToolDefinitionError(
                f"tool {instance.name!r}: retry_on takes Exception subclasses, got {cls!r}",
                tool_name=instance.name,
            )
        if issubclass(cls, HarnessError):
            raise ToolDefinitionError(
                f"tool {instance.name!r}: retry_on cannot hold {cls.__name__}: harness errors (ToolRetry, "
                "argument errors, aborts) have their own handling and are never retried",
                tool_name=instance.name,
            )
    if value and not instance.idempotent:
        raise ToolDefinitionError(
            f"tool {instance.name!r}: retry_on has no effect on a tool declared idempotent=False, which is "
            "never re-run automatically; drop one of them",
            tool_name=instance.name,
        )


@attrs.frozen
class Tool:
    """A function the model can call.

    Attributes:
        name: Name the model uses (unique within an agent).
        description: What the tool does.
        function: The Python function (sync or async).
        parameters_json_schema: JSON schema of the arguments (an ``object`` schema).
        takes_ctx: Whether the function's first parameter receives the :class:`RunContext`.
        retry_budget: Per-tool override of the agent's ``tool_retry_budget``.
        converters: Per-argument converters applied after validation (to ``int``, ``Enum``,
            structures...). What one raises becomes a :class:`ToolArgumentsError` naming the
            argument path.
        retry_on: Exceptions of this tool that are transient too, retried like
            :data:`TRANSIENT_TOOL_ERRORS` (e.g. ``(httpx.TransportError,)``).
        idempotent: ``False`` for a tool whose calls must not be repeated (it writes,
            sends, pays...): a failed call is never re-run automatically, not even after a
            transient error; the model is told and may call it again.
        needs_approval: ``True``, or a predicate on the call's arguments, for calls a human
            must approve before they run. The core only carries it; ``harness-tool-approval``
            pauses the run on such calls.
        metadata: Free-form facts about the tool for plugins (a policy tag, a cost).
    """

    name: str
    description: str
    function: Callable[..., Any]
    parameters_json_schema: Mapping[str, Any]
    takes_ctx: bool = False
    retry_budget: int | None = None
    converters: Mapping[str, Callable[[Any], Any]] = attrs.field(factory=dict[str, Callable[[Any], Any]])
    retry_on: tuple[type[Exception], ...] = attrs.field(
        default=(), converter=_exception_tuple, validator=_check_retry_on
    )
    idempotent: bool = True
    needs_approval: bool | Callable[[Mapping[str, Any]], bool] = False
    metadata: Mapping[str, Any] = attrs.field(factory=dict[str, Any])

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        retry_budget: int | None = None,
        retry_on: type[Exception] | tuple[type[Exception], ...] = (),
        idempotent: bool = True,
        needs_approval: bool | Callable[[Mapping[str, Any]], bool] = False,
        metadata: Mapping[str, Any] | None = None,
    ) -> Tool:
        """Build a tool from ``function``'s signature and Google-style docstring.

        Args:
            function: A sync or async function. Parameters need supported annotations
                (see :mod:`harness.tools.schema`); ``*args``/``**kwargs`` are refused.
            name: Tool name (default: the function's ``__name__``).
            description: Tool description (default: the docstring's description).
            retry_budget: Per-tool override of the agent's retry budget.
            retry_on: Exceptions of this tool to retry as transient failures.
            idempotent: ``False``: never re-run a failed call automatically.
            needs_approval: ``True``, or a predicate on the arguments: a human approves each
                call first (with ``harness-tool-approval`` installed).
            metadata: Free-form facts about the tool for plugins.

        Raises:
            ToolDefinitionError: The name is invalid, a parameter cannot be described, or
                ``retry_on`` is invalid.
        """
        tool_name = name if name is not None else getattr(function, "__name__", "")
        if not _NAME.match(tool_name):
            raise ToolDefinitionError(
                f"invalid tool name {tool_name!r}: use letters, digits, '_', '.', '-' (max 64 chars)"
            )
        doc_description, param_docs = parse_google_docstring(inspect.getdoc(function))
        try:
            hints = typing.get_type_hints(function)
        except Exception as exc:  # unresolvable forward references
            raise ToolDefinitionError(f"tool {tool_name!r}: cannot resolve annotations: {exc}") from exc
        signature = inspect.signature(function)
        parameters: list[tuple[str, Any, dict[str, Any], bool]] = []
        converters: dict[str, Callable[[Any], Any]] = {}
        takes_ctx = False
        for index, (pname, param) in enumerate(signature.parameters.items()):
            annotation = hints.get(pname, param.annotation)
            if index == 0 and _is_run_context(annotation):
                takes_ctx = True
                continue
            if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                raise ToolDefinitionError(f"tool {tool_name!r}: *args/**kwargs parameters are not supported")
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                raise ToolDefinitionError(f"tool {tool_name!r}: positional-only parameter {pname!r}")
            extra: dict[str, Any] = {}
            if param_docs.get(pname):
                extra["description"] = param_docs[pname]
            required = param.default is inspect.Parameter.empty
            if not required:
                shown, default = json_default(param.default)
                if shown:
                    extra["default"] = default
            parameters.append((pname, annotation, extra, required))
        schema, _ = parameters_schema(parameters, f"tool {tool_name!r}")  # refuses what it cannot describe
        for pname, annotation, _, _ in parameters:
            if needs_conversion(annotation):
                converters[pname] = argument_converter(annotation)
        return cls(
            name=tool_name,
            description=description if description is not None else doc_description,
            function=function,
            parameters_json_schema=schema,
            takes_ctx=takes_ctx,
            retry_budget=retry_budget,
            converters=converters,
            retry_on=retry_on,
            idempotent=idempotent,
            needs_approval=needs_approval,
            metadata=dict(metadata) if metadata is not None else {},
        )

    def requires_approval(self, arguments: Mapping[str, Any] | str) -> bool:
        """Whether a call with ``arguments`` needs a human's approval (see :attr:`needs_approval`).

        A predicate that raises, or raw (unparsed) arguments with a predicate, count as
        needing approval: when in doubt, ask.
        """
        rule = self.needs_approval
        if isinstance(rule, bool):
            return rule
        if isinstance(arguments, str):
            return True
        try:
            return bool(rule(arguments))
        except Exception:
            return True

    @property
    def definition(self) -> ToolDefinition:
        """The :class:`ToolDefinition` sent to the model."""
        return ToolDefinition(self.name, self.description, self.parameters_json_schema)

    def is_transient(self, error: BaseException) -> bool:
        """Whether ``error`` may pass on another attempt (see the module docstring)."""
        return isinstance(error, TRANSIENT_TOOL_ERRORS + self.retry_on)

    def validate(self, args: Any) -> dict[str, Any]:
        """Validate ``args`` (already parsed) and convert them to the annotated types.

        Raises:
            ToolArgumentsError: The arguments break the schema, or a converter refused
                them; every problem is listed with its argument path.
        """
        schema = self.parameters_json_schema
        try:
            arguments = validate_arguments(self.name, args, schema)
        except ToolArgumentsError as invalid:
            # Convert the arguments that are valid too, so one retry prompt lists every problem.
            if not isinstance(args, Mapping):
                raise
            properties: Mapping[str, Any] = schema.get("properties", {})
            defs: Mapping[str, Any] = schema.get("$defs", {})
            given = typing.cast("Mapping[str, Any]", args)
            valid = {
                key: value
                for key, value in given.items()
                if key in self.converters and matches_schema(value, properties.get(key, {}), defs)
            }
            problems = [*invalid.errors, *self._convert(valid)]
            raise ToolArgumentsError(self.name, problems) from None
        problems = self._convert(arguments)
        if problems:
            raise ToolArgumentsError(self.name, problems)
        return arguments

    def _convert(self, arguments: dict[str, Any]) -> list[str]:
        """Apply the converters to ``arguments`` in place; return the problems, with their paths."""
        problems: list[str] = []
        for key, convert in self.converters.items():
            if key in arguments:
                try:
                    arguments[key] = convert(arguments[key])
                except ToolArgumentsError as exc:
                    problems.extend(exc.errors)
                except Exception as exc:
                    problems.extend(conversion_problems(exc, key))
        return problems

    async def call(
        self,
        arguments: Mapping[str, Any],
        ctx: RunContext | None = None,
        *,
        run_sync: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None,
    ) -> Any:
        """Run the function with validated ``arguments``.

        Sync functions run in a worker thread so parallel calls do not block the loop:
        ``run_sync(function)`` when given (a run passes its agent's tracked pool, see
        :mod:`harness.run.threads`), else ``asyncio.to_thread``.
        """
        kwargs = dict(arguments)
        if self.takes_ctx:
            call: Callable[..., Any] = functools.partial(self.function, ctx)
        else:
            call = self.function
        if inspect.iscoroutinefunction(self.function):
            return await call(**kwargs)
        if run_sync is not None:
            result = await run_sync(functools.partial(call, **kwargs))
        else:
            result = await asyncio.to_thread(call, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result


def as_tool(tool: Tool | Callable[..., Any]) -> Tool:
    """Return ``tool`` itself, or a tool built from a plain function."""
    return tool if isinstance(tool, Tool) else Tool.from_function(tool)

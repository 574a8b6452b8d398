"""Tools from plain Python functions: JSON schema, argument validation and the retry signal.

:meth:`Tool.from_function` reads a function's signature and Google-style docstring and
builds the JSON schema the model sees. Arguments the model sends are validated against
that schema *before* the function runs; a failure becomes a :class:`ToolArgumentsError`
that the loop turns into a ``RetryPromptPart`` telling the model what to fix. A tool
raises :class:`ToolRetry` to ask the model to try again with a message of its own.

Supported parameter annotations: ``str``, ``int``, ``float``, ``bool``, ``None``,
``Any``, ``list[X]``, ``tuple[X, ...]``, ``dict[str, X]``, ``Literal[...]``, ``Enum``
subclasses, ``X | None`` and unions of those. A first parameter annotated
:class:`~harness.tools.context.RunContext` receives the run context and is not part of the
schema.
"""

from __future__ import annotations

from harness.errors import ToolArgumentsError, ToolDefinitionError

__all__ = [
    "Tool",
    "as_tool",
    "parse_google_docstring",
    "schema_for_annotation",
    "validate_arguments",
]

import asyncio
import enum
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import attrs

from harness.core.model import ToolDefinition
from harness.tools.context import RunContext

# --------------------------------------------------------------------------- docstrings

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?|Attributes):\s*$"
)
_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_google_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and per-parameter descriptions.

    Returns:
        ``(description, {param: description})``. The description is everything before the
        first section header; continuation lines of a parameter are joined with spaces.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    param_indent: int | None = None
    for raw in lines:
        stripped = raw.strip()
        header = _SECTION.match(stripped)
        if header and (raw == stripped):
            section = header.group(1)
            current = None
            param_indent = None
            continue
        if section is None:
            description.append(raw)
            continue
        if section not in ("Args", "Arguments", "Parameters") or not stripped:
            continue
        indent = len(raw) - len(raw.lstrip())
        match = _PARAM.match(stripped)
        if match and (param_indent is None or indent <= param_indent):
            param_indent = indent
            name = match.group(1).lstrip("*")
            current = name
            params[name] = match.group(3).strip()
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(description).strip(), params


# --------------------------------------------------------------------------- schemas

_PRIMITIVES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def schema_for_annotation(annotation: Any, *, where: str = "parameter") -> dict[str, Any]:
    """Return the JSON schema of a parameter annotation.

    Raises:
        ToolDefinitionError: The annotation is not supported; the message names ``where``.
    """
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    if annotation is None or annotation is type(None):
        return {"type": "null"}
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        values = [member.value for member in annotation]
        return {"enum": values}
    if annotation in _PRIMITIVES:
        return {"type": _PRIMITIVES[annotation]}  # pyright: ignore[reportUnknownArgumentType]
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is Literal:
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options = [schema_for_annotation(a, where=where) for a in args]
        simple = [o.get("type") for o in options if set(o) == {"type"} and isinstance(o.get("type"), str)]
        if len(simple) == len(options):
            return {"type": simple}
        return {"anyOf": options}
    if origin in (list, Sequence, typing.Sequence) or annotation is list:
        item = schema_for_annotation(args[0], where=where) if args else {}
        return {"type": "array", "items": item} if item else {"type": "array"}
    if origin is tuple or annotation is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_for_annotation(args[0], where=where)}
        if args:
            return {
                "type": "array",
                "prefixItems": [schema_for_annotation(a, where=where) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        return {"type": "array"}
    if origin in (dict, Mapping, typing.Mapping) or annotation is dict:
        if args and args[0] is not str:
            raise ToolDefinitionError(f"{where}: dict keys must be str for a JSON schema, got {args[0]!r}")
        value = schema_for_annotation(args[1], where=where) if len(args) == 2 else {}
        schema: dict[str, Any] = {"type": "object"}
        if value:
            schema["additionalProperties"] = value
        return schema
    raise ToolDefinitionError(f"{where}: unsupported annotation {annotation!r}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _type_matches(value: Any, expected: str) -> bool:
    actual = _json_type(value)
    if expected == "number":
        return actual in ("number", "integer")
    if expected == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == expected


def _validate(value: Any, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
    if not schema:
        return
    if "anyOf" in schema:
        best: list[str] | None = None
        for option in schema["anyOf"]:
            trial: list[str] = []
            _validate(value, option, path, trial)
            if not trial:
                return
            option_type = option.get("type")
            if best is None and isinstance(option_type, str) and _type_matches(value, option_type):
                best = trial  # the option of the value's own type explains the problem best
        if best is not None:
            errors.extend(best)
        else:
            kinds = [str(o.get("type", o.get("enum", "?"))) for o in schema["anyOf"]]
            errors.append(
                f"{path}: expected one of {', '.join(kinds)}, got {_json_type(value)} {value!r:.60}"
            )
        return
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {list(schema['enum'])!r}")
        return
    expected = schema.get("type")
    if expected is not None:
        allowed = [expected] if isinstance(expected, str) else list(expected)
        if not any(_type_matches(value, t) for t in allowed):
            wanted = " or ".join(allowed)
            errors.append(f"{path}: expected {wanted}, got {_json_type(value)} {value!r:.60}")
            return
    if isinstance(value, list | tuple):
        items: list[Any] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        prefix = schema.get("prefixItems")
        if prefix is not None:
            if len(items) != len(prefix):
                errors.append(f"{path}: expected {len(prefix)} items, got {len(items)}")
                return
            for index, (item, item_schema) in enumerate(zip(items, prefix, strict=True)):
                _validate(item, item_schema, f"{path}[{index}]", errors)
        elif "items" in schema:
            for index, item in enumerate(items):
                _validate(item, schema["items"], f"{path}[{index}]", errors)
    elif isinstance(value, dict):
        _validate_object(value, schema, path, errors)  # pyright: ignore[reportUnknownArgumentType]


def _validate_object(
    value: Mapping[str, Any], schema: Mapping[str, Any], path: str, errors: list[str]
) -> None:
    properties: Mapping[str, Any] = schema.get("properties", {})
    prefix = f"{path}." if path else ""
    for name in schema.get("required", ()):
        if name not in value:
            errors.append(f"{prefix}{name}: missing required argument")
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if key in properties:
            _validate(item, properties[key], f"{prefix}{key}", errors)
        elif extra is False:
            known = ", ".join(sorted(properties)) or "none"
            errors.append(f"{prefix}{key}: unexpected argument (accepted: {known})")
        elif isinstance(extra, Mapping):
            _validate(item, extra, f"{prefix}{key}", errors)  # pyright: ignore[reportUnknownArgumentType]


def validate_arguments(tool_name: str, args: Any, schema: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``args`` against an object ``schema``; return them as a dict.

    Raises:
        ToolArgumentsError: ``args`` is not an object or breaks the schema; every problem
            is listed with its argument path.
    """
    if not isinstance(args, Mapping):
        raise ToolArgumentsError(tool_name, [f"arguments must be a JSON object, got {_json_type(args)}"])
    arguments: dict[str, Any] = dict(args)  # pyright: ignore[reportUnknownArgumentType]
    errors: list[str] = []
    _validate_object(arguments, schema, "", errors)
    if errors:
        raise ToolArgumentsError(tool_name, errors)
    return arguments


# --------------------------------------------------------------------------- tools

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


def _is_run_context(annotation: Any) -> bool:
    return annotation is RunContext or annotation == "RunContext"


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
        converters: Per-argument converters applied after validation (e.g. to ``Enum``).
    """

    name: str
    description: str
    function: Callable[..., Any]
    parameters_json_schema: Mapping[str, Any]
    takes_ctx: bool = False
    retry_budget: int | None = None
    converters: Mapping[str, Callable[[Any], Any]] = attrs.field(factory=dict[str, Callable[[Any], Any]])

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        retry_budget: int | None = None,
    ) -> Tool:
        """Build a tool from ``function``'s signature and Google-style docstring.

        Args:
            function: A sync or async function. Parameters need supported annotations
                (see the module docstring); ``*args``/``**kwargs`` are refused.
            name: Tool name (default: the function's ``__name__``).
            description: Tool description (default: the docstring's description).
            retry_budget: Per-tool override of the agent's retry budget.

        Raises:
            ToolDefinitionError: The name is invalid or a parameter cannot be described.
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
        properties: dict[str, Any] = {}
        required: list[str] = []
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
            schema = schema_for_annotation(annotation, where=f"tool {tool_name!r} parameter {pname!r}")
            if param_docs.get(pname):
                schema["description"] = param_docs[pname]
            if param.default is inspect.Parameter.empty:
                required.append(pname)
            elif _json_type(param.default) in ("null", "boolean", "integer", "number", "string"):
                schema["default"] = param.default
            elif isinstance(param.default, enum.Enum):
                schema["default"] = param.default.value
            properties[pname] = schema
            if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
                converters[pname] = annotation
        parameters: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            parameters["required"] = required
        return cls(
            name=tool_name,
            description=description if description is not None else doc_description,
            function=function,
            parameters_json_schema=parameters,
            takes_ctx=takes_ctx,
            retry_budget=retry_budget,
            converters=converters,
        )

    @property
    def definition(self) -> ToolDefinition:
        """The :class:`ToolDefinition` sent to the model."""
        return ToolDefinition(self.name, self.description, self.parameters_json_schema)

    def validate(self, args: Any) -> dict[str, Any]:
        """Validate ``args`` (already parsed) and apply converters.

        Raises:
            ToolArgumentsError: The arguments break the schema.
        """
        arguments = validate_arguments(self.name, args, self.parameters_json_schema)
        for key, convert in self.converters.items():
            if key in arguments:
                arguments[key] = convert(arguments[key])
        return arguments

    async def call(self, arguments: Mapping[str, Any], ctx: RunContext | None = None) -> Any:
        """Run the function with validated ``arguments``.

        Sync functions run in a worker thread so parallel calls do not block the loop.
        """
        kwargs = dict(arguments)
        if self.takes_ctx:
            call: Callable[..., Any] = functools.partial(self.function, ctx)
        else:
            call = self.function
        if inspect.iscoroutinefunction(self.function):
            return await call(**kwargs)
        result = await asyncio.to_thread(call, **kwargs)
        if inspect.isawaitable(result):
            return await result
        return result


def as_tool(tool: Tool | Callable[..., Any]) -> Tool:
    """Return ``tool`` itself, or a tool built from a plain function."""
    return tool if isinstance(tool, Tool) else Tool.from_function(tool)

"""JSON schemas from parameter annotations, and validating arguments against them.

:func:`schema_for_annotation` describes an annotation to the model; :func:`validate_arguments`
checks what the model sent and lists every problem with its argument path
(``points[2].x: expected integer, got string 'a'``). :mod:`harness.tools.conversion` then
turns the validated JSON into the annotated Python values.

Supported annotations: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any``,
``list[X]`` / ``Sequence[X]``, ``set[X]`` / ``frozenset[X]``, ``tuple[X, ...]``,
``tuple[X, Y]``, ``dict[str, X]`` / ``Mapping[str, X]``, ``Literal[...]``, ``Enum``
subclasses, ``X | None`` and other unions, ``Annotated[X, ...]``, and structures:
dataclasses, attrs classes and ``TypedDict`` classes, nested to any depth. A structure
becomes an ``object`` schema: fields with a default (``NotRequired`` or ``total=False`` keys
of a ``TypedDict``) are not required, unknown fields are refused, and the class docstring's
description and ``Attributes:`` section describe it. A structure that contains itself is
defined once under ``$defs`` and referenced with ``$ref``.
"""

from __future__ import annotations

from harness.errors import ToolArgumentsError, ToolDefinitionError

__all__ = [
    "MAPPING_ORIGINS",
    "SEQUENCE_ORIGINS",
    "SET_ORIGINS",
    "StructureField",
    "json_default",
    "json_type",
    "matches_schema",
    "parameters_schema",
    "schema_for_annotation",
    "structure_fields",
    "validate_arguments",
]

import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import attrs

from harness.tools.docstrings import ATTRIBUTE_SECTIONS, parse_google_docstring

_PRIMITIVES: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}
SEQUENCE_ORIGINS: frozenset[object] = frozenset(
    {list, Sequence, typing.Sequence, list, typing.MutableSequence, typing.Iterable}
)
SET_ORIGINS: frozenset[object] = frozenset({set, frozenset, typing.AbstractSet, set, frozenset})
MAPPING_ORIGINS: frozenset[object] = frozenset({dict, Mapping, typing.Mapping, dict, typing.MutableMapping})
"""``get_origin`` values of the list-like, set-like and dict-like annotations."""
_REF_PREFIX = "#/$defs/"


# --------------------------------------------------------------------------- structures


@attrs.frozen
class StructureField:
    """One field of a structure, as the schema and the conversion see it."""

    name: str
    annotation: Any
    required: bool
    default: Any = None
    has_default: bool = False


def _hints(cls: type, where: str, *, extras: bool = False) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=extras)
    except Exception as exc:  # unresolvable forward references
        raise ToolDefinitionError(
            f"{where}: cannot resolve the annotations of {cls.__qualname__}: {exc}"
        ) from exc


def _typeddict_fields(cls: type, where: str) -> list[StructureField]:
    hints = _hints(cls, where, extras=True)
    required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    fields: list[StructureField] = []
    for name, hint in hints.items():
        required = name in required_keys
        annotation: Any = hint
        while get_origin(annotation) in (typing.Required, typing.NotRequired, typing.Annotated):
            if get_origin(annotation) is typing.Required:
                required = True
            elif get_origin(annotation) is typing.NotRequired:
                required = False
            annotation = get_args(annotation)[0]
        fields.append(StructureField(name, annotation, required))
    return fields


def structure_fields(cls: type, where: str = "structure") -> list[StructureField] | None:
    """The fields of a dataclass, attrs class or ``TypedDict`` (``None`` for anything else).

    Fields that ``__init__`` does not take (``init=False``) are left out.

    Raises:
        ToolDefinitionError: The class's annotations cannot be resolved.
    """
    if typing.is_typeddict(cls):
        return _typeddict_fields(cls, where)
    if attrs.has(cls):
        hints = _hints(cls, where)
        result: list[StructureField] = []
        for field in attrs.fields(cls):
            if not field.init:
                continue
            annotation = hints.get(field.name, field.type if field.type is not None else Any)
            default: object = field.default
            if default is attrs.NOTHING:
                result.append(StructureField(field.name, annotation, True))
            else:
                plain = not isinstance(default, attrs.Factory)  # pyright: ignore[reportArgumentType]
                result.append(StructureField(field.name, annotation, False, default, plain))
        return result
    if dataclasses.is_dataclass(cls):
        hints = _hints(cls, where)
        result = []
        for field in dataclasses.fields(cls):
            if not field.init:
                continue
            annotation = hints.get(field.name, Any)
            if field.default is not dataclasses.MISSING:
                result.append(StructureField(field.name, annotation, False, field.default, True))
            elif field.default_factory is not dataclasses.MISSING:
                result.append(StructureField(field.name, annotation, False))
            else:
                result.append(StructureField(field.name, annotation, True))
        return result
    return None


def json_default(value: object) -> tuple[bool, Any]:
    """``(True, json_value)`` when a default can be shown in a schema, else ``(False, None)``."""
    if value is None or isinstance(value, str | bool | int | float):
        return True, value
    if isinstance(value, enum.Enum):
        return json_default(value.value)
    if isinstance(value, list | tuple | frozenset | set):
        items = [json_default(item) for item in typing.cast("Sequence[object]", value)]
        if all(ok for ok, _ in items):
            return True, [item for _, item in items]
    return False, None


def _class_docs(cls: type) -> tuple[str, dict[str, str]]:
    doc: object = cls.__dict__.get("__doc__")
    if not isinstance(doc, str):
        return "", {}
    if dataclasses.is_dataclass(cls) and doc.startswith(f"{cls.__name__}("):
        return "", {}  # the signature dataclasses writes when there is no docstring
    return parse_google_docstring(doc, sections=ATTRIBUTE_SECTIONS)


# --------------------------------------------------------------------------- schemas


class _Builder:
    """Builds one schema; collects the ``$defs`` of structures that contain themselves."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.defs: dict[str, dict[str, Any]] = {}
        self._names: dict[type, str] = {}
        self._active: list[type] = []
        self._recursive: set[type] = set()

    def _ref(self, cls: type) -> dict[str, Any]:
        name = self._names.get(cls)
        if name is None:
            name = cls.__name__
            taken = set(self._names.values())
            suffix = 2
            while name in taken:
                name, suffix = f"{cls.__name__}_{suffix}", suffix + 1
            self._names[cls] = name
        return {"$ref": _REF_PREFIX + name}

    def structure(self, cls: type, fields: Sequence[StructureField]) -> dict[str, Any]:
        if cls in self._recursive and self._names.get(cls) in self.defs:
            return self._ref(cls)
        if cls in self._active:
            self._recursive.add(cls)
            return self._ref(cls)
        self._active.append(cls)
        try:
            description, field_docs = _class_docs(cls)
            properties: dict[str, Any] = {}
            required: list[str] = []
            for field in fields:
                where = f"{self.where} field {cls.__qualname__}.{field.name}"
                schema = self.build(field.annotation, where)
                if field_docs.get(field.name):
                    schema["description"] = field_docs[field.name]
                if field.required:
                    required.append(field.name)
                elif field.has_default:
                    shown, default = json_default(field.default)
                    if shown:
                        schema["default"] = default
                properties[field.name] = schema
        finally:
            self._active.pop()
        result: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            result["required"] = required
        if description:
            result["description"] = description
        if cls in self._recursive:
            self.defs[self._names[cls]] = result
            return self._ref(cls)
        return result

    def build(self, annotation: Any, where: str | None = None) -> dict[str, Any]:
        where = self.where if where is None else where
        if annotation is inspect.Parameter.empty or annotation is Any:
            return {}
        if annotation is None or annotation is type(None):
            return {"type": "null"}
        if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
            return {"enum": [member.value for member in annotation]}
        if annotation in _PRIMITIVES:
            return {"type": _PRIMITIVES[annotation]}  # pyright: ignore[reportUnknownArgumentType]
        origin = get_origin(annotation)
        args = get_args(annotation)
        if origin is typing.Annotated:
            return self.build(args[0], where)
        if origin is Literal:
            return {"enum": list(args)}
        if origin in (Union, types.UnionType):
            options = [self.build(a, where) for a in args]
            simple = [o.get("type") for o in options if set(o) == {"type"} and isinstance(o.get("type"), str)]
            if len(simple) == len(options):
                return {"type": simple}
            return {"anyOf": options}
        if origin in SEQUENCE_ORIGINS or annotation in (list, Sequence):
            item = self.build(args[0], where) if args else {}
            return {"type": "array", "items": item} if item else {"type": "array"}
        if origin in SET_ORIGINS or annotation in (set, frozenset):
            item = self.build(args[0], where) if args else {}
            schema: dict[str, Any] = {"type": "array", "uniqueItems": True}
            if item:
                schema["items"] = item
            return schema
        if origin is tuple or annotation is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return {"type": "array", "items": self.build(args[0], where)}
            if args:
                return {
                    "type": "array",
                    "prefixItems": [self.build(a, where) for a in args],
                    "minItems": len(args),
                    "maxItems": len(args),
                }
            return {"type": "array"}
        if origin in MAPPING_ORIGINS or annotation in (dict, Mapping):
            if args and args[0] is not str:
                raise ToolDefinitionError(
                    f"{where}: dict keys must be str for a JSON schema, got {args[0]!r}"
                )
            value = self.build(args[1], where) if len(args) == 2 else {}
            schema = {"type": "object"}
            if value:
                schema["additionalProperties"] = value
            return schema
        if isinstance(annotation, type):
            fields = structure_fields(annotation, where)
            if fields is not None:
                return self.structure(annotation, fields)
        raise ToolDefinitionError(
            f"{where}: unsupported annotation {annotation!r} (use a JSON type, a list, tuple or dict "
            "of them, an Enum, a Literal, a dataclass, an attrs class or a TypedDict)"
        )


def schema_for_annotation(annotation: Any, *, where: str = "parameter") -> dict[str, Any]:
    """Return the JSON schema of a parameter annotation.

    A structure that contains itself is put under ``$defs`` of the returned schema.

    Raises:
        ToolDefinitionError: The annotation is not supported; the message names ``where``.
    """
    builder = _Builder(where)
    schema = builder.build(annotation)
    if builder.defs:
        schema = {**schema, "$defs": builder.defs}
    return schema


def parameters_schema(
    parameters: Sequence[tuple[str, Any, dict[str, Any], bool]], where: str
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The ``object`` schema of a tool's parameters and its ``$defs``.

    Args:
        parameters: ``(name, annotation, extra schema keys, required)`` per parameter.
        where: How the tool is named in errors.
    """
    builder = _Builder(where)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, annotation, extra, is_required in parameters:
        properties[name] = {**builder.build(annotation, f"{where} parameter {name!r}"), **extra}
        if is_required:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    if builder.defs:
        schema["$defs"] = builder.defs
    return schema, builder.defs


# --------------------------------------------------------------------------- validation


def json_type(value: Any) -> str:
    """The JSON type name of a parsed JSON value (a Python type name for anything else)."""
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
    actual = json_type(value)
    if expected == "number":
        return actual in ("number", "integer")
    if expected == "integer" and actual == "number":
        return float(value).is_integer()
    return actual == expected


def _in_enum(value: Any, options: Sequence[Any]) -> bool:
    """``value in options``, except that a boolean matches only a boolean (``True != 1`` here)."""
    is_bool = isinstance(value, bool)
    return any(option == value and isinstance(option, bool) == is_bool for option in options)


class _Validator:
    def __init__(self, defs: Mapping[str, Any]) -> None:
        self.defs = defs

    def check(self, value: Any, schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
        if not schema:
            return
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            self.check(value, self.defs.get(ref[len(_REF_PREFIX) :], {}), path, errors)
            return
        if "anyOf" in schema:
            self._any_of(value, schema["anyOf"], path, errors)
            return
        if "enum" in schema and not _in_enum(value, schema["enum"]):
            errors.append(f"{path}: {value!r:.60} is not one of {list(schema['enum'])!r}")
            return
        expected = schema.get("type")
        if expected is not None:
            allowed = [expected] if isinstance(expected, str) else list(expected)
            if not any(_type_matches(value, t) for t in allowed):
                wanted = " or ".join(allowed)
                errors.append(f"{path}: expected {wanted}, got {json_type(value)} {value!r:.60}")
                return
        if isinstance(value, list | tuple):
            self._array(list(value), schema, path, errors)  # pyright: ignore[reportUnknownArgumentType]
        elif isinstance(value, dict):
            self.check_object(value, schema, path, errors)  # pyright: ignore[reportUnknownArgumentType]

    def _any_of(self, value: Any, options: Sequence[Mapping[str, Any]], path: str, errors: list[str]) -> None:
        best: list[str] | None = None
        for option in options:
            trial: list[str] = []
            self.check(value, option, path, trial)
            if not trial:
                return
            # The options of the value's own type explain the problem best; the closest wins.
            if self._of_type(value, option) and (best is None or len(trial) < len(best)):
                best = trial
        if best is not None:
            errors.extend(best)
            return
        kinds = [str(self._resolve(o).get("type", self._resolve(o).get("enum", "?"))) for o in options]
        errors.append(f"{path}: expected one of {', '.join(kinds)}, got {json_type(value)} {value!r:.60}")

    def _of_type(self, value: Any, option: Mapping[str, Any]) -> bool:
        """Whether ``option`` is for values of ``value``'s JSON type (an enum: of one of its values)."""
        resolved = self._resolve(option)
        option_type = resolved.get("type")
        if isinstance(option_type, str):
            return _type_matches(value, option_type)
        options: Sequence[Any] = resolved.get("enum", ())
        return any(_type_matches(value, json_type(item)) for item in options)

    def _resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
            return self.defs.get(ref[len(_REF_PREFIX) :], {})
        return schema

    def _array(self, items: list[Any], schema: Mapping[str, Any], path: str, errors: list[str]) -> None:
        prefix = schema.get("prefixItems")
        if prefix is not None:
            if len(items) != len(prefix):
                errors.append(f"{path}: expected {len(prefix)} items, got {len(items)}")
                return
            for index, (item, item_schema) in enumerate(zip(items, prefix, strict=True)):
                self.check(item, item_schema, f"{path}[{index}]", errors)
        elif "items" in schema:
            for index, item in enumerate(items):
                self.check(item, schema["items"], f"{path}[{index}]", errors)

    def check_object(
        self, value: Mapping[str, Any], schema: Mapping[str, Any], path: str, errors: list[str]
    ) -> None:
        properties: Mapping[str, Any] = schema.get("properties", {})
        prefix = f"{path}." if path else ""
        noun = "argument" if not path else "field"
        for name in schema.get("required", ()):
            if name not in value:
                errors.append(f"{prefix}{name}: missing required {noun}")
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if key in properties:
                self.check(item, properties[key], f"{prefix}{key}", errors)
            elif extra is False:
                known = ", ".join(sorted(properties)) or "none"
                errors.append(f"{prefix}{key}: unexpected {noun} (accepted: {known})")
            elif isinstance(extra, Mapping):
                self.check(item, extra, f"{prefix}{key}", errors)  # pyright: ignore[reportUnknownArgumentType]


def matches_schema(value: Any, schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> bool:
    """Whether ``value`` satisfies ``schema`` (``$ref`` resolved in ``defs`` or the schema's ``$defs``)."""
    errors: list[str] = []
    _Validator(defs if defs is not None else schema.get("$defs", {})).check(value, schema, "value", errors)
    return not errors


def validate_arguments(tool_name: str, args: Any, schema: Mapping[str, Any]) -> dict[str, Any]:
    """Check ``args`` against an object ``schema``; return them as a dict.

    Raises:
        ToolArgumentsError: ``args`` is not an object or breaks the schema; every problem
            is listed with its argument path.
    """
    if not isinstance(args, Mapping):
        raise ToolArgumentsError(tool_name, [f"arguments must be a JSON object, got {json_type(args)}"])
    arguments: dict[str, Any] = dict(args)  # pyright: ignore[reportUnknownArgumentType]
    errors: list[str] = []
    _Validator(schema.get("$defs", {})).check_object(arguments, schema, "", errors)
    if errors:
        raise ToolArgumentsError(tool_name, errors)
    return arguments

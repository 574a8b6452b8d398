"""Converting validated JSON arguments to the annotated Python values, through cattrs.

:func:`~harness.tools.schema.validate_arguments` has already checked the JSON when these
run, so conversion only builds values: ``2.0`` for an ``int`` becomes ``2``, ``3`` for a
``float`` becomes ``3.0``, a string becomes its ``Enum`` member (also inside ``X | None``,
lists and structures), a list becomes a ``tuple`` or a ``set``, and an object becomes the
dataclass, attrs class or ``TypedDict`` of the annotation. A union converts to its first
member whose schema the value satisfies, the same choice the validation made.

What a structure's own code refuses (``__post_init__``, attrs validators) and what cattrs
reports are translated by :func:`conversion_problems` into the validation's form, one line
per problem with its argument path, so the model gets one retry prompt either way.
"""

from __future__ import annotations

__all__ = ["argument_converter", "conversion_problems", "needs_conversion"]

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union, get_args, get_origin

import cattrs
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)

from harness.tools.schema import (
    MAPPING_ORIGINS,
    SEQUENCE_ORIGINS,
    json_type,
    matches_schema,
    schema_for_annotation,
    structure_fields,
)

# --------------------------------------------------------------------------- strict scalars


def _subclass(value: Any, cls: type) -> Any:
    """An ``IntEnum`` or ``StrEnum`` reaches the ``int`` / ``str`` hooks; build the member."""
    return cls(value)


def _int(value: Any, cls: type) -> Any:
    if cls is not int:
        return _subclass(value, cls)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected integer, got {json_type(value)} {value!r:.60}")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError(f"expected integer, got {value!r}")
        return int(value)
    return value


def _float(value: Any, cls: type) -> Any:
    if cls is not float:
        return _subclass(value, cls)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected number, got {json_type(value)} {value!r:.60}")
    return float(value)


def _str(value: Any, cls: type) -> Any:
    if cls is not str:
        return _subclass(value, cls)
    if not isinstance(value, str):
        raise TypeError(f"expected string, got {json_type(value)} {value!r:.60}")
    return value


def _bool(value: Any, cls: type) -> Any:
    if not isinstance(value, bool):
        raise TypeError(f"expected boolean, got {json_type(value)} {value!r:.60}")
    return value


# --------------------------------------------------------------------------- unions, literals, TypedDicts


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def _union_hook(converter: cattrs.Converter, annotation: Any) -> Callable[[Any, Any], Any]:
    members = get_args(annotation)
    schemas = [schema_for_annotation(member) for member in members]

    def structure(value: Any, _: Any) -> Any:
        for member, schema in zip(members, schemas, strict=True):
            if matches_schema(value, schema):
                return None if value is None else converter.structure(value, member)
        names = ", ".join(getattr(m, "__name__", str(m)) for m in members)
        raise TypeError(f"expected one of {names}, got {json_type(value)} {value!r:.60}")

    return structure


def _is_literal(annotation: Any) -> bool:
    return get_origin(annotation) is Literal


def _literal(value: Any, annotation: Any) -> Any:
    for option in get_args(annotation):
        if option == value and isinstance(option, bool) == isinstance(value, bool):
            return option  # the declared value itself: 1 for Literal[1] when 1.0 was sent
    raise ValueError(f"{value!r:.60} is not one of {list(get_args(annotation))!r}")


def _typeddict_hook(converter: cattrs.Converter, cls: Any) -> Callable[[Any, Any], Any]:
    # cattrs reads ``__required_keys__``, which Python 3.11 gets wrong for ``NotRequired``
    # under ``from __future__ import annotations``; the schema's reading is used instead.
    fields = structure_fields(cls)
    annotations = {field.name: field.annotation for field in fields or ()}
    required = [field.name for field in fields or () if field.required]

    def note(exc: Exception, key: str) -> Exception:
        exc.add_note(
            AttributeValidationNote(f"Structuring typeddict {cls.__name__} @ attribute {key}", key, Any)
        )
        return exc

    def structure(value: Any, _: Any) -> Any:
        if not isinstance(value, Mapping):
            raise TypeError(f"expected object, got {json_type(value)} {value!r:.60}")
        items = typing.cast("Mapping[str, Any]", value)
        errors: list[Exception] = [note(KeyError(key), key) for key in required if key not in items]
        extra = {key for key in items if key not in annotations}
        if extra:
            errors.append(ForbiddenExtraKeysError("", cls, extra))
        result: dict[str, Any] = {}
        for key, item in items.items():
            if key in annotations:
                try:
                    result[key] = converter.structure(item, annotations[key])
                except Exception as exc:
                    errors.append(note(exc, key))
        if errors:
            # cattrs' own signature (message, exceptions, class); ExceptionGroup's stub says two.
            raise ClassValidationError(f"While structuring {cls.__name__}", errors, cls)  # pyright: ignore[reportCallIssue]
        return result

    return structure


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(int, _int)
    converter.register_structure_hook(float, _float)
    converter.register_structure_hook(str, _str)
    converter.register_structure_hook(bool, _bool)
    converter.register_structure_hook_func(_is_literal, _literal)
    converter.register_structure_hook_factory(_is_union, functools.partial(_union_hook, converter))
    converter.register_structure_hook_factory(
        typing.is_typeddict, functools.partial(_typeddict_hook, converter)
    )
    return converter


_CONVERTER = _make_converter()


# --------------------------------------------------------------------------- public


def needs_conversion(annotation: Any) -> bool:
    """Whether validated JSON for ``annotation`` may differ from the Python value the function expects."""
    if (
        annotation is inspect.Parameter.empty
        or annotation is Any
        or annotation in (None, type(None), str, bool)
    ):
        return False
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is typing.Annotated:
        return needs_conversion(args[0])
    if origin is Literal:
        return not all(arg is None or isinstance(arg, str | bool) for arg in args)
    if origin in (Union, types.UnionType):
        return any(needs_conversion(arg) for arg in args)
    if origin in SEQUENCE_ORIGINS or annotation is list:
        return bool(args) and needs_conversion(args[0])
    if origin in MAPPING_ORIGINS or annotation is dict:
        return len(args) == 2 and needs_conversion(args[1])
    return True


def argument_converter(annotation: Any) -> Callable[[Any], Any]:
    """A function turning validated JSON into a value of ``annotation``.

    Its errors are cattrs' (or the structure's own); :func:`conversion_problems` reads them.
    """
    hook = _CONVERTER.get_structure_hook(annotation)

    def convert(value: Any) -> Any:
        return hook(value, annotation)

    return convert


def _key_path(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}"


def _walk(exc: BaseException, path: str, problems: list[str]) -> None:
    if isinstance(exc, ClassValidationError):
        fields, others = exc.group_exceptions()
        for sub, note in fields:
            _walk(sub, f"{path}.{note.name}", problems)
        for sub in others:
            _walk(sub, path, problems)
    elif isinstance(exc, IterableValidationError):
        items, others = exc.group_exceptions()
        for sub, note in items:
            _walk(sub, _key_path(path, note.index), problems)
        for sub in others:
            _walk(sub, path, problems)
    elif isinstance(exc, ForbiddenExtraKeysError):
        problems.extend(f"{path}.{key}: unexpected field" for key in sorted(exc.extra_fields))
    elif isinstance(exc, KeyError):
        problems.append(f"{path}: missing required field")
    elif isinstance(exc, ValueError | TypeError) and str(exc):
        problems.append(f"{path}: {exc}")
    else:
        detail = f": {exc}" if str(exc) else ""
        problems.append(f"{path}: {type(exc).__name__}{detail}")


def conversion_problems(exc: BaseException, path: str) -> list[str]:
    """The problems of a failed conversion, one line each, with its argument path.

    Args:
        exc: What :func:`argument_converter`'s function (or a custom converter) raised:
            cattrs' validation errors are unfolded into one line per problem.
        path: The argument's name, the root of every path (``point.x``, ``items[2]``).
    """
    problems: list[str] = []
    _walk(exc, path, problems)
    return problems or [f"{path}: {type(exc).__name__}"]

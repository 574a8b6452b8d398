"""What a capability constructor parameter accepts, and converting configured values to it.

Pure (annotations in, values out); the stack builder of :mod:`harness.hooks.stacks` uses it.
"""

from __future__ import annotations

__all__ = [
    "ANY_SHAPE",
    "MismatchError",
    "Shape",
    "convert",
    "shape_of",
]

import ast
import builtins
import collections.abc
import difflib
import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

import attrs

from harness.capabilities._stack_entries import FALSE_WORDS, FLOAT_RE, INT_RE, TRUE_WORDS
from harness.core.model import Model
from harness.errors import HarnessError

# --------------------------------------------------------------------------------------
# Annotations: what a parameter accepts
# --------------------------------------------------------------------------------------

_SCALARS: Final[Mapping[str, type]] = {"int": int, "float": float, "bool": bool, "str": str}
_SEQUENCE_ORIGINS: Final[Mapping[object, str]] = {
    list: "list",
    tuple: "tuple",
    set: "frozenset",
    frozenset: "frozenset",
    collections.abc.Sequence: "list",
    collections.abc.MutableSequence: "list",
    collections.abc.Iterable: "list",
    collections.abc.Collection: "list",
    collections.abc.Set: "frozenset",
}
_SEQUENCE_NAMES: Final[Mapping[str, str]] = {
    "list": "list",
    "tuple": "tuple",
    "set": "frozenset",
    "frozenset": "frozenset",
    "Sequence": "list",
    "MutableSequence": "list",
    "Iterable": "list",
    "Collection": "list",
    "Set": "frozenset",
    "AbstractSet": "frozenset",
    "List": "list",
    "Tuple": "tuple",
    "FrozenSet": "frozenset",
}


@attrs.frozen
class Shape:
    """What a parameter accepts, reduced to what configuration values can be.

    ``model``: the parameter takes a harness :class:`~harness.core.model.Model`, so a
    string is a model string (``"openai:gpt-4o"``) for :func:`convert`'s ``resolve_model``.
    """

    text: str
    nullable: bool = False
    scalars: tuple[type, ...] = ()
    literals: tuple[object, ...] = ()
    sequence: tuple[str, Shape] | None = None
    anything: bool = False
    model: bool = False


ANY_SHAPE: Final = Shape("any", nullable=True, anything=True)


def _merge(text: str, shapes: Sequence[Shape]) -> Shape:
    sequence = next((s.sequence for s in shapes if s.sequence is not None), None)
    return Shape(
        text,
        nullable=any(s.nullable for s in shapes),
        scalars=tuple(t for s in shapes for t in s.scalars),
        literals=tuple(v for s in shapes for v in s.literals),
        sequence=sequence,
        anything=any(s.anything for s in shapes),
        model=any(s.model for s in shapes),
    )


def _split_top(text: str, separator: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        if char in "[(":
            depth += 1
        elif char in "])":
            depth -= 1
        elif char == separator and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return parts


def _shape_from_text(text: str) -> Shape:
    """Read an annotation that could not be evaluated (names imported for type checking only)."""
    text = text.strip()
    alternatives = _split_top(text, "|")
    if len(alternatives) > 1:
        return _merge(text, [_shape_from_text(a) for a in alternatives])
    head, bracket, rest = text.partition("[")
    head = head.strip().removeprefix("typing.").removeprefix("collections.abc.")
    inner = rest[:-1] if bracket and rest.endswith("]") else ""
    if head in ("None", "NoneType"):
        return Shape(text, nullable=True)
    if head in _SCALARS and not bracket:
        return Shape(text, scalars=(_SCALARS[head],))
    if head in ("Model", "harness.Model", "harness.core.Model", "harness.core.model.Model") and not bracket:
        return Shape(text, model=True)
    if head == "Optional" and inner:
        return _merge(text, [_shape_from_text(inner), Shape("None", nullable=True)])
    if head == "Union" and inner:
        return _merge(text, [_shape_from_text(a) for a in _split_top(inner, ",")])
    if head == "Literal" and inner:
        try:
            values: object = ast.literal_eval(f"({inner},)")
        except (ValueError, SyntaxError):
            return Shape(text, anything=True)
        return Shape(text, literals=tuple(cast("tuple[object, ...]", values)))
    if head in _SEQUENCE_NAMES:
        items = _split_top(inner, ",") if inner else []
        if len(items) == 2 and items[1] == "...":
            items = items[:1]
        item = _shape_from_text(items[0]) if len(items) == 1 else ANY_SHAPE
        return Shape(text, sequence=(_SEQUENCE_NAMES[head], item))
    return Shape(text, anything=True)


def _shape_from_type(annotation: object, text: str) -> Shape:
    if annotation is None or annotation is type(None):
        return Shape(text, nullable=True)
    if annotation is Any:
        return ANY_SHAPE
    if isinstance(annotation, type) and annotation in _SCALARS.values():
        return Shape(text, scalars=(annotation,))
    if annotation is Model:
        return Shape(text, model=True)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return _merge(text, [_shape_from_type(arg, _describe(arg)) for arg in args])
    if origin is typing.Literal:
        return Shape(text, literals=tuple(args))
    container = _SEQUENCE_ORIGINS.get(origin if origin is not None else annotation)
    if container is not None:
        items = [arg for arg in args if arg is not Ellipsis]
        item = _shape_from_type(items[0], _describe(items[0])) if len(items) == 1 else ANY_SHAPE
        return Shape(text, sequence=(container, item))
    return Shape(text, anything=True)


def _describe(annotation: object) -> str:
    if isinstance(annotation, str):
        return annotation
    if annotation is None or annotation is type(None):
        return "None"
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("collections.abc.", "")


def shape_of(parameter: inspect.Parameter, namespace: Mapping[str, Any]) -> Shape:
    annotation: object = parameter.annotation
    if annotation is inspect.Parameter.empty:
        return ANY_SHAPE
    if isinstance(annotation, str):
        try:
            evaluated: object = eval(annotation, {"__builtins__": builtins, **namespace})
        except Exception:
            return _shape_from_text(annotation)
        if isinstance(evaluated, str):
            return _shape_from_text(evaluated)
        return _shape_from_type(evaluated, annotation)
    return _shape_from_type(annotation, _describe(annotation))


# --------------------------------------------------------------------------------------
# Values: conversion by shape
# --------------------------------------------------------------------------------------


class MismatchError(Exception):
    """A value does not fit a shape; ``args[0]`` says why."""


def _show(value: object) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool) or value is None:
        return str(value).lower() if value is not None else "none"
    return repr(value)


def _same_literal(value: object, literal: object) -> bool:
    return type(value) is type(literal) and value == literal


def convert(value: object, shape: Shape, *, resolve_model: Callable[[str], object] | None = None) -> Any:
    """Convert a configuration value to what ``shape`` accepts, or raise :class:`MismatchError`.

    Args:
        value: The configured value.
        shape: What the parameter accepts.
        resolve_model: Turns a model string into a model, for a parameter taking a
            :class:`~harness.core.model.Model` (``summarizing:model=openai:gpt-4o``); without
            it such a string is refused with a message saying so.
    """
    if isinstance(value, str) and shape.model and str not in shape.scalars:
        return _model_from_string(value, shape, resolve_model)
    if value is None:
        if shape.nullable or shape.anything:
            return None
        raise MismatchError(f"expected {shape.text}, got none")
    if shape.literals:
        for literal in shape.literals:
            if _same_literal(value, literal):
                return literal
        if isinstance(value, str):
            for literal in shape.literals:
                if not isinstance(literal, str) and str(literal).lower() == value.lower():
                    return literal
    if isinstance(value, bool):
        if bool in shape.scalars:
            return value
    elif isinstance(value, int):
        if int in shape.scalars:
            return value
        if float in shape.scalars:
            return float(value)
        if str in shape.scalars:
            return str(value)
    elif isinstance(value, float):
        if float in shape.scalars:
            return value
        if str in shape.scalars:
            return repr(value)
    elif isinstance(value, str):
        if str in shape.scalars:
            return value
        converted = _from_text(value, shape)
        if converted is not None:
            return converted
    elif _is_list(value) and shape.sequence is not None:
        container, item_shape = shape.sequence
        items = [
            convert(item, item_shape, resolve_model=resolve_model) for item in cast("Sequence[Any]", value)
        ]
        if container == "tuple":
            return tuple(items)
        return frozenset(items) if container == "frozenset" else items
    return _fallback(value, shape, resolve_model)


def _model_from_string(text: str, shape: Shape, resolve_model: Callable[[str], object] | None) -> Any:
    for literal in shape.literals:
        if _same_literal(text, literal):
            return literal
    if resolve_model is None:
        raise MismatchError(
            f"expected {shape.text}; the model string {text!r} is resolved when the stack is built by "
            "harness.config (build_stack, resolve_stack, the --stack option) or Agent(capabilities=...)"
        )
    try:
        return resolve_model(text)
    except HarnessError as exc:
        raise MismatchError(f"model string {text!r}: {exc}") from exc


def _is_list(value: object) -> bool:
    return isinstance(value, list | tuple)


def _fallback(value: object, shape: Shape, resolve_model: Callable[[str], object] | None) -> Any:
    if shape.sequence is not None and not _is_list(value):
        # a single value for a list parameter: the one-item list (``models=openai:gpt-4o``)
        return convert([value], shape, resolve_model=resolve_model)
    if shape.anything:
        return value
    if shape.literals:
        accepted = [_show(v) for v in shape.literals]
        close = difflib.get_close_matches(str(value), [str(v) for v in shape.literals], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise MismatchError(f"expected one of {', '.join(accepted)}, got {_show(value)}{hint}")
    raise MismatchError(f"expected {shape.text}, got {_show(value)}")


def _from_text(text: str, shape: Shape) -> Any:
    """Read a string as an int, float or bool parameter, or ``None`` when it is neither."""
    stripped = text.strip()
    try:
        if int in shape.scalars and INT_RE.fullmatch(stripped):
            return int(stripped)
        if float in shape.scalars and (FLOAT_RE.fullmatch(stripped) or INT_RE.fullmatch(stripped)):
            return float(stripped)
    except ValueError:  # more digits than int() converts
        return None
    if bool in shape.scalars:
        if stripped.lower() in TRUE_WORDS:
            return True
        if stripped.lower() in FALSE_WORDS:
            return False
    return None

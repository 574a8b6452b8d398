"""Fast constructors for the frozen message classes.

Loading a history and the first pass of a capability build thousands of parts, so the
constructor's cost is the cost of those operations. ``attrs`` generates an ``__init__``
that sets each field through a bound ``object.__setattr__`` and calls each converter,
even for a default value. :func:`install` compiles, once per class, an ``__init__`` that
does the same work with less of it: it writes each slot through its descriptor, and for
the converters it knows (:func:`~harness.core.frozen.freeze_mapping`, the ``metadata``
converter, ``tuple``) it tests inline whether there is anything to convert, so a value
that is already frozen (a default, or a field carried over by ``replace``) costs one type
check. Validators run after every field is set, as with ``attrs``; unlike ``attrs``,
``attrs.validators.disabled()`` does not switch them off (nothing in harness uses it).
Before them, each field whose spec (:data:`harness.core.fields.PART_FIELDS`) names the
types it accepts is checked inline: one ``isinstance`` per field, so what constructs also
loads.
"""

from __future__ import annotations

__all__ = ["install"]

from collections.abc import Callable, Sequence
from typing import Any, Final, NoReturn, cast

import attrs

from harness.core.frozen import FrozenDict, freeze, freeze_mapping
from harness.errors import PartFieldError, WireFormatError

_FACTORY: Final = cast("type", type(attrs.Factory(tuple)))

_INLINE: Final[dict[object, str]] = {
    freeze_mapping: "{v} if type({v}) is FrozenDict else freeze_mapping({v})",
    freeze: "{v} if {v} is None else freeze({v})",
    tuple: "{v} if type({v}) is tuple else tuple({v})",
}
"""Inline forms of known converters (``{v}`` is the argument's name)."""


def _failure(cls: type, spec: Any) -> Callable[[Any], NoReturn]:
    """What the compiled ``__init__`` calls when ``spec``'s inline check fails: raise the reason."""
    check = spec.typed or spec.check
    part = cls.__name__

    def fail(value: Any) -> NoReturn:
        reason = f"must be one of {', '.join(t.__name__ for t in spec.types or ())}"
        if value is None:
            reason = "is required"
        if spec.non_empty and isinstance(value, str) and not value:
            reason = "must be a non-empty string"
        elif check is not None:
            try:
                check(value, spec.key)
            except WireFormatError as exc:
                reason = exc.reason
        raise PartFieldError(part, spec.key, reason)

    return fail


def _condition(arg: str, spec: Any, index: int) -> str:
    """The inline test that ``arg`` breaks ``spec`` (``{arg}`` is set, ``_t{index}`` its types)."""
    if spec.types == (str,):
        bad = f"type({arg}) is not str and not isinstance({arg}, str)"
    else:
        bad = f"not isinstance({arg}, _t{index})"
    if spec.non_empty:
        bad = f"{bad} or not {arg}"
    return bad if spec.required else f"{arg} is not None and ({bad})"


def install(cls: type, fields: Sequence[Any] = ()) -> None:
    """Replace the ``attrs`` ``__init__`` of the slotted class ``cls`` by a compiled one.

    Keyword-only fields (``attrs.field(kw_only=True)``) stay keyword-only. Each field with
    a spec in ``fields`` that names its ``types`` is checked inline, after every field is
    set and before the validators: a value outside them raises
    :class:`~harness.errors.PartFieldError` naming the class and the field.

    Args:
        cls: An ``attrs`` class with slots; every field must be an init field with a
            plain default or none.
        fields: The field specs of ``cls`` (:class:`harness.core.fields.Field`, from
            :data:`~harness.core.fields.PART_FIELDS`; not imported here, which
            :mod:`harness.core.fields` would make a cycle through ``usage``).

    Raises:
        TypeError: A field is not an init field or has a factory default.
    """
    namespace: dict[str, Any] = {"FrozenDict": FrozenDict, "freeze": freeze, "freeze_mapping": freeze_mapping}
    specs = {spec.key: spec for spec in fields}
    params: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    checks: list[str] = []
    for index, field in enumerate(attrs.fields(cls)):
        if not field.init or isinstance(field.default, _FACTORY):
            raise TypeError(f"{cls.__name__}.{field.name}: only plain init fields are supported")
        arg = field.alias or field.name
        if field.default is attrs.NOTHING:
            param = arg
        else:
            namespace[f"_d{index}"] = field.default
            param = f"{arg}=_d{index}"
        (keyword if field.kw_only else params).append(param)
        value = arg
        if field.converter is not None:
            template = _INLINE.get(field.converter)
            if template is None:
                namespace[f"_c{index}"] = field.converter
                value = f"_c{index}({arg})"
            else:
                value = template.format(v=arg)
        namespace[f"_s{index}"] = cls.__dict__[field.name].__set__
        body.append(f"    _s{index}(self, {value})")
        spec = specs.get(field.name)
        if spec is not None and spec.types is not None:
            namespace[f"_t{index}"] = spec.types
            namespace[f"_f{index}"] = _failure(cls, spec)
            checks.append(
                f"    if {_condition(f'self.{field.name}', spec, index)}: _f{index}(self.{field.name})"
            )
        if field.validator is not None:
            namespace[f"_v{index}"] = field.validator
            namespace[f"_a{index}"] = field
            checks.append(f"    _v{index}(self, _a{index}, self.{field.name})")
    signature = ", ".join(["self", *params, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({signature}):\n" + "\n".join(body + checks) + "\n"
    exec(source, namespace)  # field names are identifiers, as attrs itself generates code
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]

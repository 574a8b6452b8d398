"""Render the capability template into a new distribution (standard library only).

Usage::

    python examples/plugin-template/render.py --name my-capability --dest ~/src
    # -> ~/src/harness-my-capability/ (pyproject.toml, harness_my_capability/, tests/, README.md)

Every file under ``template/`` is copied; in files ending in ``.tmpl`` (the suffix is
dropped) and in file and folder names, these placeholders are replaced:

==========================  ===============================  =========================
placeholder                 meaning                          for ``--name my-capability``
==========================  ===============================  =========================
``{{ project_name }}``      distribution name                ``harness-my-capability``
``{{ package }}``           import package                   ``harness_my_capability``
``{{ entry_point }}``       entry-point and capability name  ``my_capability``
``{{ class_name }}``        capability class                 ``MyCapability``
==========================  ===============================  =========================

Exit status 2 with a message on bad input (a malformed name, an existing destination).
"""

from __future__ import annotations

__all__ = ["TEMPLATE_DIR", "RenderError", "main", "names_for", "render"]

import argparse
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

TEMPLATE_DIR = Path(__file__).resolve().parent / "template"
"""The template's files."""

_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_CLASS = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_PLACEHOLDER = re.compile(r"\{\{\s*(\w+)\s*\}\}")


class RenderError(Exception):
    """The template cannot be rendered with the given names or destination."""


def names_for(name: str, *, class_name: str | None = None) -> dict[str, str]:
    """The placeholder values for a capability called ``name`` (``harness-`` prefix optional).

    Raises:
        RenderError: ``name`` is not lowercase words separated by ``-``, or ``class_name``
            is not a CamelCase identifier.
    """
    base = name.removeprefix("harness-")
    if not _NAME.match(base):
        raise RenderError(
            f"--name {name!r}: use lowercase letters and digits in words separated by '-', e.g. 'trim-logs'"
        )
    words = base.split("-")
    cls = class_name or "".join(word.capitalize() for word in words)
    if not _CLASS.match(cls):
        raise RenderError(f"--class-name {cls!r}: use a CamelCase identifier, e.g. 'TrimLogs'")
    return {
        "project_name": f"harness-{base}",
        "package": "harness_" + "_".join(words),
        "entry_point": "_".join(words),
        "class_name": cls,
    }


def _substitute(text: str, values: Mapping[str, str], where: str) -> str:
    def value(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise RenderError(f"{where}: unknown placeholder {match.group(0)!r}")
        return values[key]

    return _PLACEHOLDER.sub(value, text)


def render(
    name: str,
    dest: Path,
    *,
    class_name: str | None = None,
    template: Path = TEMPLATE_DIR,
    force: bool = False,
) -> Path:
    """Render the template for ``name`` into ``dest/<project_name>`` and return that folder.

    Raises:
        RenderError: A bad name, an unknown placeholder in the template, or the target
            folder exists (without ``force``).
    """
    values = names_for(name, class_name=class_name)
    target = dest / values["project_name"]
    if target.exists():
        if not force:
            raise RenderError(f"{target} already exists (pass --force to replace it)")
        shutil.rmtree(target)
    for source in sorted(template.rglob("*")):
        if source.is_dir() or "__pycache__" in source.parts:
            continue
        relative = source.relative_to(template).as_posix()
        out_name = _substitute(relative, values, relative)
        out = target / out_name.removesuffix(".tmpl")
        out.parent.mkdir(parents=True, exist_ok=True)
        if source.name.endswith(".tmpl"):
            out.write_text(
                _substitute(source.read_text(encoding="utf-8"), values, relative), encoding="utf-8"
            )
        else:
            shutil.copyfile(source, out)
    return target


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(description="Render the harness capability template.")
    parser.add_argument("--name", required=True, help="capability name, e.g. trim-logs")
    parser.add_argument("--dest", required=True, type=Path, help="folder to create the project in")
    parser.add_argument("--class-name", help="capability class name (default: from --name)")
    parser.add_argument("--force", action="store_true", help="replace an existing project folder")
    args = parser.parse_args(argv)
    try:
        target = render(args.name, args.dest, class_name=args.class_name, force=args.force)
    except RenderError as exc:
        print(f"render.py: error: {exc}", file=sys.stderr)
        return 2
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

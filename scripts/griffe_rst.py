"""A griffe extension that renders idaudit's numpydoc (reStructuredText) docstrings on the site.

idaudit's docstrings follow numpydoc, so ``help()``, IDEs and Sphinx read them as written. The
documentation site renders them with mkdocstrings, which reads the numpydoc sections but treats
the text as Markdown; this extension rewrites what Markdown would print literally:

* Sphinx roles (``:func:`~idaudit.audit_pairs```, ``:class:``, ``:meth:``, ``:attr:``,
  ``:mod:``, ``:data:``, ``:obj:``, ``:exc:``) become links to the object's page when the target
  is an idaudit object (an optional cross-reference: code text where the site has no anchor for
  it), and code text otherwise (numpy, scipy, torch);
* ``:math:`...``` becomes inline maths and ``.. math::`` blocks display maths (arithmatex);
* simple tables (rows between ``=====  =====`` rules) become Markdown tables.

Loaded by ``mkdocs.yml`` (``extensions: [scripts/griffe_rst.py]``); nothing here runs at import
time of idaudit.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(func|class|meth|attr|mod|data|obj|exc):`([^`]+)`")
_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_RULE = re.compile(r"^( *)(=+)( +=+)+ *$")
_EXPLICIT = re.compile(r"^(.*?)\s*<([^<>]+)>$")  # :func:`title <target>`


class RstToMarkdown(griffe.Extension):
    """Rewrite every docstring of the loaded package once all of it is known."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Convert the docstrings of ``pkg`` and every object below it."""
        seen: set[str] = set()
        for obj in _walk(pkg, seen):
            if obj.docstring is not None:
                obj.docstring.value = convert(obj.docstring.value, obj)


def _walk(obj: griffe.Object, seen: set[str]) -> Any:
    if obj.path in seen:
        return
    seen.add(obj.path)
    yield obj
    for member in obj.members.values():
        if isinstance(member, griffe.Alias):
            continue  # converted where it is defined
        yield from _walk(member, seen)


def convert(text: str, obj: griffe.Object) -> str:
    """Return ``text`` with roles, maths and simple tables in Markdown."""
    text = _math_blocks(text)
    text = _tables(text)
    text = _MATH_ROLE.sub(lambda m: f"${m.group(1)}$", text)
    return _ROLE.sub(lambda m: _reference(m.group(1), m.group(2), obj), text)


def _reference(role: str, body: str, obj: griffe.Object) -> str:
    explicit = _EXPLICIT.match(body)
    title, target = (explicit.group(1), explicit.group(2)) if explicit else (None, body)
    short = target.startswith("~")
    target = target.lstrip("~.").removesuffix("()")
    shown = title or (target.rsplit(".", 1)[-1] if short else target)
    if role in ("func", "meth"):
        shown = shown if shown.endswith(")") or title else f"{shown}()"
    code = f"<code>{shown}</code>"
    path = _resolve(target, role, obj)
    if path is None:
        return code
    return f'<autoref identifier="{path}" optional>{code}</autoref>'


def _resolve(target: str, role: str, obj: griffe.Object) -> str | None:
    """Return the idaudit path ``target`` names from ``obj``, or None outside idaudit."""
    collection = obj.modules_collection
    candidates = []
    if target.startswith("idaudit"):
        candidates.append(target)
    else:
        if role in ("meth", "attr") or "." not in target:
            owner = obj if obj.is_class else obj.parent
            while owner is not None and not owner.is_class:
                owner = owner.parent
            if owner is not None:
                candidates.append(f"{owner.path}.{target}")
        module = obj if obj.is_module else obj.module
        parts = module.path.split(".")
        for end in range(len(parts), 0, -1):
            candidates.append(".".join([*parts[:end], target]))
    for path in candidates:
        try:
            found = collection[path]
        except (KeyError, ValueError, griffe.AliasResolutionError, griffe.CyclicAliasError):
            continue
        public = ".".join(p for p in path.split(".") if not p.startswith("_"))
        if public.startswith("idaudit") and found is not None:
            return public if public.count(".") == path.count(".") else path
    return None


def _math_blocks(text: str) -> str:
    """``.. math:: x`` (inline or as an indented block) → a ``$$`` display block."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if not stripped.startswith(".. math::"):
            out.append(line)
            i += 1
            continue
        indent = line[: len(line) - len(stripped)]
        body = [stripped[len(".. math::") :].strip()]
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(indent + " ")):
            body.append(lines[i].strip())
            i += 1
        while body and not body[-1]:
            body.pop()
        out.extend([f"{indent}$$", *[f"{indent}{b}" for b in body if b], f"{indent}$$", ""])
    return "\n".join(out)


def _tables(text: str) -> str:
    """Rewrite simple reStructuredText tables as Markdown tables (continuation lines joined)."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _RULE.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = match.group(1)
        spans = [m.start() for m in re.finditer(r"=+", lines[i])]
        rows: list[list[str]] = []
        header_rows = 0
        i += 1
        while i < len(lines):
            if _RULE.match(lines[i]):
                if header_rows or not _rows_follow(lines, i + 1):
                    break  # the closing rule
                header_rows = len(rows)  # the rule under the header
            else:
                cells = _cells(lines[i], spans)
                if rows and not cells[0] and any(cells[1:]):  # continues the row above
                    rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells, strict=True)]
                elif any(cells):
                    rows.append(cells)
            i += 1
        i += 1  # past the closing rule
        if header_rows:
            header = [
                " ".join(c for c in col if c) for col in zip(*rows[:header_rows], strict=True)
            ]
            body = rows[header_rows:]
        else:
            header, body = ["&nbsp;"] * len(spans), rows
        out.append(indent + "| " + " | ".join(header) + " |")
        out.append(indent + "|" + "---|" * len(spans))
        out.extend(indent + "| " + " | ".join(_escape(c) for c in row) + " |" for row in body)
        out.append("")
    return "\n".join(out)


def _rows_follow(lines: list[str], i: int) -> bool:
    """Whether table rows, then another rule, follow line ``i`` (so a rule at i-1 is a header's)."""
    while i < len(lines) and lines[i].strip():
        if _RULE.match(lines[i]):
            return True
        i += 1
    return False


def _cells(line: str, starts: list[int]) -> list[str]:
    """Cut a table row at the columns' start positions (the last cell runs to the line's end)."""
    bounds = [*starts[1:], len(line)]
    return [line[a:b].strip() for a, b in zip(starts, bounds, strict=True)]


def _escape(cell: str) -> str:
    return cell.replace("|", "\\|")

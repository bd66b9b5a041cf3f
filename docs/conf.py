"""Sphinx configuration of the structattn site (why Sphinx + furo + MyST: docs/README.md).

Build (what ``.ci/run`` runs; warnings are errors)::

    python -m sphinx -W -b html docs docs/_build/html
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
import typing
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from pygments import token
from pygments.lexer import RegexLexer
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's structattn, also when it is not installed editable

project = "structattn"
author = "structattn contributors"
copyright = "2026, structattn contributors"
release = version = importlib.import_module("structattn").__version__
Registry = importlib.import_module("structattn.registry").Registry

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
root_doc = "index"
# README.md is the docs' maintenance note (why this toolchain, how to build); the landing page (index.md)
# includes the repository's README.md instead
exclude_patterns = ["_build", "README.md"]

# MyST: the pages are plain GitHub Markdown. Heading anchors are slugged as GitHub slugs them, so the pages'
# `page.md#anchor` links (checked by tests/test_readme_front_door.py) resolve on the site too.
myst_heading_anchors = 6
myst_enable_extensions = ["colon_fence"]  # ::: directives, which tests/test_docs_snippets.py never runs
myst_fence_as_directive = []

# autodoc + napoleon: Google-style docstrings, members in source order, annotations in the signature
autodoc_default_options = {"members": True, "member-order": "bysource", "show-inheritance": True}
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# "Class attributes:" (our base classes' name for it) reads as napoleon's Attributes section; attributes become
# :ivar: fields, so a documented attribute is not described twice (field list and autodoc member)
napoleon_custom_sections = [("Shapes", "notes_style"), ("Class attributes", "Attributes")]
napoleon_use_ivar = True

# Warnings are errors (-W), every kind: no page skips a heading level (## straight to ####).

html_theme = "furo"
html_title = "structattn"
html_static_path = ["_static"]
html_css_files = ["structattn.css"]  # table cells read from the top (see the file)
html_show_sourcelink = False
pygments_style = "friendly"
pygments_dark_style = "monokai"

logger = logging.getLogger("structattn.docs")

# The registries whose entries (one class per module, registry key = module name) get a reference entry each,
# so a new variant, provider or task needs no edit of the docs (STYLE.md: one file, one decorator, one test).
REGISTRIES = {
    "attention": ("structattn.attention", "ATTENTION"),
    "providers": ("structattn.structures", "PROVIDERS"),
    "tasks": ("structattn.tasks", "TASKS"),
}


def _parse(directive: SphinxDirective, rst: list[str]) -> list[nodes.Node]:
    """``rst`` parsed in place of ``directive``; autodoc writes reStructuredText, which MyST reads only inside an
    ``eval-rst`` block."""
    container = nodes.container()
    text = ["````{eval-rst}", *rst, "````"]
    directive.state.nested_parse(StringList(text, source=directive.get_source_info()[0]), directive.content_offset,
                                 container)
    return container.children


def _entry(path: str, obj: object) -> list[str]:
    """The autodoc directive documenting ``obj`` under ``path`` (the name a user imports)."""
    if inspect.isclass(obj):
        return [f".. autoclass:: {path}", ""]
    if inspect.isroutine(obj):
        return [f".. autofunction:: {path}", ""]
    return _data_entry(path, obj)  # constants, registries and type aliases (``Item = Union[...]``)


MODULE_PATH = re.compile(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_])")  # "typing.Union[a.b.C" -> "Union[C"


def _data_entry(path: str, obj: object) -> list[str]:
    """A constant or a registry: its type, its value where short, and its ``#:`` comment from the module that
    defines it (autodoc reads comments of the module named in the path only, here the package's __init__)."""
    package, _, name = path.rpartition(".")
    value = repr(obj)
    lines = [f".. autodata:: {path}"]
    if typing.get_origin(obj) is not None:  # a type alias: its value without module paths
        lines += ["   :no-value:", "   :annotation: = " + MODULE_PATH.sub("", value)]
    elif len(value) > 80 or " at 0x" in value:  # a dict of functions, a registry object
        kind = type(obj).__qualname__ if type(obj).__module__ == "builtins" else f"{type(obj).__module__}.{type(obj).__qualname__}"
        lines += ["   :no-value:", f"   :annotation: : {kind}"]
    lines.append("")
    doc = _doc_comment(package, name, obj)
    if doc is None and isinstance(obj, Registry):
        doc = [f"The registry of each {obj.kind} by name (:class:`structattn.registry.Registry`)."]
    return lines + [f"   {line}" for line in doc or []] + [""]


def _doc_comment(package: str, name: str, obj: object) -> list[str] | None:
    """The ``#:`` comment above ``name = ...`` in whichever imported module of ``package`` holds ``obj``."""
    for module_name, module in sorted(sys.modules.items()):
        if module_name.startswith(package + ".") and vars(module).get(name) is obj:
            try:
                docs = ModuleAnalyzer.for_module(module_name).find_attr_docs()
            except PycodeError:
                continue
            if ("", name) in docs:
                return [line for line in docs["", name] if line.strip()]
    return None


class PublicNames(SphinxDirective):
    """``:::{public-names} structattn.encoders`` -> one autodoc entry per name of the package's ``__all__``,
    classes first, then functions, then constants and registries. The packages import their names lazily
    (PEP 562), which ``automodule`` does not see, so the names are listed from ``__all__`` here."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        package = importlib.import_module(self.arguments[0])
        if not hasattr(package, "__all__"):
            raise self.error(f"{self.arguments[0]} has no __all__")
        groups: dict[str, list[str]] = {"Classes": [], "Functions": [], "Constants, registries and types": []}
        for name in package.__all__:
            obj = getattr(package, name)
            group = ("Classes" if inspect.isclass(obj) else "Functions" if inspect.isroutine(obj)
                     else "Constants, registries and types")
            groups[group] += _entry(f"{package.__name__}.{name}", obj)
        text = []
        for title, entries in groups.items():
            if entries:
                text += [f".. rubric:: {title}", "", *entries]
        return _parse(self, text)


class ModuleReference(SphinxDirective):
    """``:::{module-reference} structattn.probes.structural`` -> ``automodule`` with its public members (those
    named by ``:members: a, b``, else every public name defined in the module)."""

    required_arguments = 1
    option_spec = {"members": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        members = self.options.get("members")
        return _parse(self, [f".. automodule:: {self.arguments[0]}", f"   :members: {members}" if members else "", ""])


class RegistryEntries(SphinxDirective):
    """``:::{registry-entries} attention`` -> an ``autoclass`` entry per registered name, in name order."""

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        if self.arguments[0] not in REGISTRIES:
            raise self.error(f"unknown registry {self.arguments[0]!r}; known: {sorted(REGISTRIES)}")
        module, attribute = REGISTRIES[self.arguments[0]]
        registry = getattr(importlib.import_module(module), attribute)
        text = []
        for name in registry.names():
            cls = registry.get(name)
            text += [f".. rubric:: ``{name}``", "", *_entry(f"{cls.__module__}.{cls.__qualname__}", cls)]
        return _parse(self, text)


def _no_inherited_data_docstring(app, what: str, name: str, obj: object, options, lines: list[str]) -> None:
    """A constant or a registry object (``FIELDS``, ``ATTENTION``) would show its type's docstring (``tuple``'s,
    ``Registry``'s): drop it; its entry shows its type or value and its own ``#:`` comment (``_data_entry``)."""
    if what == "data" and getattr(obj, "__doc__", None) == getattr(type(obj), "__doc__", None):
        lines.clear()


class GinLexer(RegexLexer):
    """gin-config files (``.gin``): bindings, ``@references``, ``%MACROS``, ``include``/``import`` lines."""

    name = "gin"
    aliases = ["gin"]
    filenames = ["*.gin"]
    tokens = {"root": [
        (r"#.*?$", token.Comment.Single),
        (r"^(include|import)\b", token.Keyword.Namespace),
        (r"'[^'\n]*'|\"[^\"\n]*\"", token.String),
        (r"@[\w./]+(\(\))?", token.Name.Function),
        (r"%[\w.]+", token.Name.Constant),
        (r"\b(True|False|None)\b", token.Keyword.Constant),
        (r"-?\d+(\.\d*)?([eE][-+]?\d+)?", token.Number),
        (r"[\w.]+(?=\s*=)", token.Name.Attribute),
        (r"[\w.]+", token.Name),
        (r"[=\[\](){},:*/+\-]", token.Punctuation),
        (r"\s+", token.Whitespace),
        (r".", token.Text),
    ]}


PROSE_CELL_CHARS = 150  # a table with a cell this long holds sentences, not figures


def _mark_prose_tables(app, doctree: nodes.document, docname: str) -> None:
    """Tables whose cells hold sentences (README's "What the comparisons show") get the class ``prose``:
    _static/structattn.css lays them out over the page's width in equal columns, where the browser's automatic
    layout squeezed one column to a few words a line."""
    for table in doctree.findall(nodes.table):
        if not any(len(entry.astext()) >= PROSE_CELL_CHARS for entry in table.findall(nodes.entry)):
            continue
        table["classes"] = [name for name in table["classes"] if name != "colwidths-auto"] + ["prose", "colwidths-given"]
        for tgroup in table.findall(nodes.tgroup):  # each column as wide as its cells' mean length says
            columns: dict[int, list[str]] = {}
            for row in tgroup.findall(nodes.row):
                for k, entry in enumerate(row.findall(nodes.entry)):
                    columns.setdefault(k, []).append(entry.astext())
            for k, colspec in enumerate(tgroup.findall(nodes.colspec)):
                cells = columns.get(k, [""])
                mean = sum(map(len, cells)) // len(cells)
                longest_word = max((len(word) for cell in cells for word in cell.split()), default=0)
                colspec["colwidth"] = max(12, 3 * longest_word, min(120, mean))


def _resolves(target: str) -> bool:
    """Whether ``structattn.a.b.C.method`` names something that exists: the longest importable module prefix,
    then attributes."""
    parts = target.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        try:
            for name in parts[k:]:
                obj = getattr(obj, name)
        except AttributeError:
            return False
        return True
    return False


def _broken_structattn_reference(app, env, node, contnode) -> None:
    """A docstring's ``:class:`~structattn.x.Y``` to a name that does not exist (renamed, moved, misspelt) is a
    warning, so -W fails. References to private modules that exist stay plain text: the reference documents
    public names only, and nitpicky mode would also demand entries for torch's and the standard library's."""
    target = node.get("reftarget", "")
    if node.get("refdomain") == "py" and target.startswith("structattn.") and not _resolves(target):
        logger.warning("cross-reference to %s, which does not exist", target, location=node,
                       type="structattn", subtype="reference")


def setup(app):
    app.connect("missing-reference", _broken_structattn_reference)
    app.connect("doctree-resolved", _mark_prose_tables)
    app.add_lexer("gin", GinLexer)
    app.connect("autodoc-process-docstring", _no_inherited_data_docstring)
    app.add_directive("module-reference", ModuleReference)
    app.add_directive("public-names", PublicNames)
    app.add_directive("registry-entries", RegistryEntries)
    return {"parallel_read_safe": True}

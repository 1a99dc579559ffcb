"""docs/layout.md draws the layers as they are: its drawing lists, for every package, the packages it
imports (at the top of a module or inside a function), and this test compares the drawing with the code.
When it fails it prints the drawing to paste in its place."""

from __future__ import annotations

import ast
import re

from tests.unit.test_import_boundaries import LAYERS, PACKAGE, _imports_of, _module_name, layer_key

LAYOUT = PACKAGE.parent / "docs" / "layout.md"
START, END = "<!-- layers: start -->", "<!-- layers: end -->"
# `evident/__init__.py` (the package's lazy `graph`) has no name of its own in LAYERS.
TOP = "evident"


def _package(module: str) -> str:
    return layer_key(module) or TOP


def _layer(package: str) -> int:
    return LAYERS["" if package == TOP else package]


def package_imports() -> dict[str, set[str]]:
    """Each package (a LAYERS key) with the other packages its modules import."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    found: dict[str, set[str]] = {}
    for name, path in paths.items():
        source = _package(name)
        targets = {_package(t) for t in _imports_of(ast.parse(path.read_text(encoding="utf-8")), modules)}
        found.setdefault(source, set()).update(targets - {source})
    return found


def render(imports: dict[str, set[str]]) -> str:
    """The drawing: layers from the top, one line per package with what it imports, highest layer first."""
    order = sorted(imports, key=lambda p: (-_layer(p), p))
    width = max(len(p) for p in order)
    lines: list[str] = []
    previous: int | None = None
    for package in order:
        layer = _layer(package)
        head, previous = (f"layer {layer}" if layer != previous else ""), layer
        targets = ", ".join(sorted(imports[package], key=lambda p: (-_layer(p), p))) or "(nothing of evident)"
        lines.append(f"{head:8} {package:{width}}  → {targets}")
    return "\n".join(lines)


def _drawing(text: str) -> str:
    match = re.search(re.escape(START) + r"\s*```text\n(.*?)\n```\s*" + re.escape(END), text, re.S)
    assert match, f"docs/layout.md: no drawing between {START} and {END}"
    return match.group(1)


def test_the_drawing_reads_its_block() -> None:
    text = f"before\n{START}\n```text\nlayer 0  models  → alignment.models\n```\n{END}\nafter"
    assert _drawing(text) == "layer 0  models  → alignment.models"


def test_the_rendering_changes_with_the_imports() -> None:
    # A drawing that could not tell two import graphs apart could not fail.
    one = {"nodes": {"offline"}, "offline": {"alignment"}, "alignment": set()}
    two = {"nodes": {"offline", "alignment"}, "offline": {"alignment"}, "alignment": set()}
    assert render(one) != render(two)
    assert render(one).splitlines()[0].startswith("layer 3  nodes")


def test_docs_layout_draws_the_layers_as_they_are() -> None:
    expected = render(package_imports())
    assert _drawing(LAYOUT.read_text(encoding="utf-8")) == expected, (
        f"docs/layout.md's drawing is out of date; between {START} and {END} it should read:\n{expected}")

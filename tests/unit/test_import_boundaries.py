"""What the package may import: framework-free modules stay free of LangGraph, and nothing in
evident/ reaches into a private module of LangGraph or LangChain (issue 15)."""

from __future__ import annotations

import ast
import io
import subprocess
import sys
import tokenize
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "evident"
FRAMEWORKS = ("langgraph", "langchain")


def _private_imports(tree: ast.AST) -> list[str]:
    """Every `langgraph…`/`langchain…` import naming a private module or name (a part starting with `_`)."""
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0].startswith(FRAMEWORKS) and any(part.startswith("_") for part in parts[1:]):
                found.append(f"{getattr(node, 'lineno', '?')}: {target}")
    return found


def test_the_scan_finds_private_imports() -> None:
    source = (
        "import langgraph._internal._config\n"
        "from langgraph._internal._constants import CONF\n"
        "from langchain_core.runnables import _private\n"
        "import langgraph.graph\n"
        "from langchain_core.messages import AIMessage\n"
        "from ._local import x\n"
    )
    assert _private_imports(ast.parse(source)) == [
        "1: langgraph._internal._config",
        "2: langgraph._internal._constants.CONF",
        "3: langchain_core.runnables._private",
    ]


def test_the_package_imports_no_private_framework_module() -> None:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50
    private = {
        str(path.relative_to(PACKAGE.parent)): hits
        for path in modules
        if (hits := _private_imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))))
    }
    assert private == {}


def _loaded_with(module: str, names: tuple[str, ...]) -> list[str]:
    """The modules among `names` (and their submodules) that importing `module` loads, in a fresh process."""
    probe = (
        "import sys\n"
        f"import {module}\n"
        f"names = {names!r}\n"
        "print('LOADED', sorted(m for m in sys.modules if any(m == n or m.startswith(n + '.') for n in names)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.split("\n")[0]
    assert line.startswith("LOADED "), proc.stdout
    return list(ast.literal_eval(line.removeprefix("LOADED ")))


def test_tracing_imports_without_langgraph() -> None:
    # The CLI imports tracing for its progress lines; `evident.graph` must not load the builder with it.
    assert _loaded_with("evident.graph.tracing", ("langgraph", "langchain_core", "langchain")) == []


def test_opening_the_index_does_not_load_the_file_readers() -> None:
    # An unchanged corpus is only walked (every `evident ask`); the readers, an HTML parser among them,
    # load with the first file that changed.
    readers = ("selectolax", "pypdf", "evident.connectors.index.formats", "evident.connectors.index.jsonl")
    assert _loaded_with("evident.connectors.index.retriever", readers) == []


def test_the_graph_still_loads_from_the_package() -> None:
    from evident.graph import build_graph, builder, graph

    assert graph is builder.graph and build_graph is builder.build_graph


def _environment_reads(tree: ast.AST) -> list[int]:
    """Lines that touch the process environment: `os.environ`, `os.getenv`, `os.putenv`."""
    return sorted(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                  and isinstance(node.value, ast.Name) and node.value.id == "os"
                  and node.attr in ("environ", "getenv", "putenv", "unsetenv"))


def test_the_scan_finds_environment_reads() -> None:
    tree = ast.parse("import os\nx = os.environ.get('A')\ny = os.getenv('B')\nz = os.path.join('a')\n")
    assert _environment_reads(tree) == [2, 3]


def test_only_the_settings_read_the_environment() -> None:
    """Settings have one home: every environment variable is read through `evident.settings`."""
    found = {str(path.relative_to(PACKAGE)): lines for path in sorted(PACKAGE.rglob("*.py"))
             if (lines := _environment_reads(ast.parse(path.read_text(encoding="utf-8"))))}
    assert set(found) == {"settings.py"}, found


def _imports_of(tree: ast.AST, modules: set[str]) -> set[str]:
    """The package modules a module imports when it runs, at the top or inside a function (imports under
    `if TYPE_CHECKING:` are for the type checker only, and left out). `from package import submodule` is an
    import of the submodule, not of the package's `__init__`."""
    typing_only = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                   for n in ast.walk(node)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{alias.name}" for alias in node.names} & modules
            found.update(subs)
            if len(subs) < len(node.names) and node.module in modules:
                found.add(node.module)
    return found


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_the_cycle_scan_finds_a_cycle_through_a_function_level_import() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from p import q\n"
                     "def f():\n    from p import r\n")
    assert _imports_of(tree, {"p", "p.q", "p.r"}) == {"p.r"}


def test_no_import_cycles_in_the_package() -> None:
    """No module imports itself back, counting imports inside functions: a deferred import is for start-up
    time or an optional dependency, never to hide a cycle."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    graph = {name: _imports_of(ast.parse(path.read_text(encoding="utf-8")), modules) - {name}
             for name, path in paths.items()}
    assert _cycles(graph) == []


# The layers, lowest first; a module may import its own layer and the ones below (docs/layout.md).
# `alignment.models` holds the pure types every layer shares, so it sits with `models` at the bottom.
LAYERS: dict[str, int] = {
    "models": 0, "state": 0, "settings": 0, "context": 0, "request_settings": 0, "alignment.models": 0,
    "alignment": 1,
    "connectors": 2, "llm": 2, "offline": 2, "citations": 2, "conversation": 2, "embeddings": 2, "prompts": 2,
    "nodes": 3,
    "graph": 4,
    "commands": 5, "web": 5, "eval": 5, "cli": 5, "agent": 5, "": 5,
}

def layer_key(module: str) -> str:
    """The LAYERS key a module belongs to ("" for the package's `__init__`)."""
    rest = module.removeprefix("evident").removeprefix(".")
    for key in (".".join(rest.split(".")[:2]), rest.split(".")[0]):
        if key in LAYERS:
            return key
    raise AssertionError(f"{module}: no layer (add its package to LAYERS)")


def _layer(module: str) -> int:
    return LAYERS[layer_key(module)]


def test_no_module_imports_a_layer_above_its_own() -> None:
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(paths)
    upward = {(name, target) for name, path in paths.items()
              for target in _imports_of(ast.parse(path.read_text(encoding="utf-8")), modules)
              if _layer(target) > _layer(name)}
    assert upward == set()


def _unexplained_deferred_imports(source: str) -> list[int]:
    """Lines of the imports inside a function (sync or async) that no comment explains: one on its own line
    directly above it, or above the first of the consecutive imports it stands with (blank lines between them
    allowed), or one at its line end. Imports under a module-level `if TYPE_CHECKING:` are in no function."""
    lines = source.splitlines()
    comments: set[int] = set()
    own_line: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments.add(tok.start[0])
            if not lines[tok.start[0] - 1][:tok.start[1]].strip():
                own_line.add(tok.start[0])
    tree = ast.parse(source)
    in_function = {id(node) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for node in ast.walk(fn) if isinstance(node, (ast.Import, ast.ImportFrom))}
    found: list[int] = []
    for parent in ast.walk(tree):
        for block in (getattr(parent, name, None) for name in ("body", "orelse", "finalbody")):
            if not isinstance(block, list):
                continue
            previous: ast.stmt | None = None
            group_explained = False  # a comment above the first import of the group this one belongs to
            for stmt in block:
                if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    previous = None
                    continue
                end = stmt.end_lineno or stmt.lineno
                follows = previous is not None and not any(
                    lines[i].strip() for i in range((previous.end_lineno or previous.lineno), stmt.lineno - 1))
                if not follows:
                    group_explained = stmt.lineno - 1 in own_line
                at_line_end = any(line in comments for line in range(stmt.lineno, end + 1))
                if id(stmt) in in_function and not group_explained and not at_line_end:
                    found.append(stmt.lineno)
                previous = stmt
    return sorted(found)


def test_the_scan_finds_unexplained_deferred_imports() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import numpy\n"
        "def f():\n"
        "    import json\n"  # 5: no comment
        "    # start-up time: a heavy module\n"
        "    import a\n"
        "\n"
        "    from b import c\n"  # 9: the group's comment, above line 7
        "    x = 1\n"
        "    import d  # optional dependency\n"
        "    import e\n"  # 12: a line-end comment explains its own line only
        "async def g():\n"
        "    if True:\n"
        "        from h import (\n"  # 15: nested in a block of an async function
        "            i,\n"
        "        )\n"
    )
    assert _unexplained_deferred_imports(source) == [5, 12, 15]


def test_every_deferred_import_says_why() -> None:
    """An import inside a function is there for start-up time or an optional dependency (never to hide a
    cycle: see above), and a comment says which."""
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in sorted(PACKAGE.rglob("*.py"))
             for line in _unexplained_deferred_imports(path.read_text(encoding="utf-8"))]
    assert found == []


# -- tests reach evident through its public API (issue 28) ---------------------------------------------

TESTS = PACKAGE.parent / "tests"
# tests/support may use its own classes' privates; these reach the code under test.
SCANNED = ("unit", "integration")
# Read where no public API says it: LangGraph's `Auth` keeps the handlers a module registered in these
# slots, which its server reads; a test that langgraph.json's auth module registers any can only look there.
PRIVATE_ALLOWED = {
    ("tests/unit/test_serving.py", "_authenticate_handler"),
    ("tests/unit/test_serving.py", "_global_handlers"),
}


def _private(name: str) -> bool:
    return len(name) > 1 and name.startswith("_") and not name.startswith("__")


def _private_reach(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every `x._name` read or written (x neither `self` nor `cls`), of every private
    name imported from evident, and of every `<patcher>.setattr(target, "NAME", ...)` or
    `.setattr("a.b.NAME", ...)` that patches a constant (an upper-case name) or a private."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "evident":
            found.extend((node.lineno, alias.name) for alias in node.names if _private(alias.name))
        elif isinstance(node, ast.Attribute) and _private(node.attr) and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "setattr":
            strings = [a.value for a in node.args[:2] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if len(node.args) >= 2 and strings and isinstance(node.args[0], ast.Constant):
                name = strings[0].rsplit(".", 1)[-1]  # the dotted form: ("a.b.NAME", value)
            elif len(node.args) >= 3 and isinstance(node.args[1], ast.Constant) and strings:
                name = strings[-1]
            else:
                continue
            if name.isupper() or _private(name):
                found.append((node.lineno, name))
    return sorted(found)


def test_the_scan_finds_privates_and_patched_constants() -> None:
    source = (
        "index._mirror.marker()\n"
        "self._lock, cls._cache, x.__name__, x.public\n"
        "monkeypatch.setattr(extractor, 'SECONDARY_SCORE_RATIO', 0.95)\n"
        "monkeypatch.setattr('evident.llm.batching._encodings', {})\n"
        "m.setattr(LocalIndex, '_mirror_hits', None)\n"
        "monkeypatch.setattr(gate, 'server_settings', lambda: None)\n"
        "monkeypatch.setattr('evident.web.auth.server_settings', lambda: None)\n"
        "retriever._session = {}\n"
        "from evident.context import EvidentContext, _toml_cache\n"
        "from tests.support.wiki_servers import _ROUTER\n"
    )
    assert _private_reach(ast.parse(source)) == [
        (1, "_mirror"), (3, "SECONDARY_SCORE_RATIO"), (4, "_encodings"), (5, "_mirror_hits"), (8, "_session"),
        (9, "_toml_cache"),
    ]


def test_tests_use_public_functions_and_settings_not_privates_or_patched_constants() -> None:
    paths = sorted(p for folder in SCANNED for p in (TESTS / folder).rglob("*.py"))
    assert len(paths) > 50
    found = [
        f"{name}:{line}: {attr}"
        for path in paths
        for name in [str(path.relative_to(PACKAGE.parent))]
        for line, attr in _private_reach(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        if (name, attr) not in PRIVATE_ALLOWED
    ]
    assert found == []

"""The shape of the package: no import cycle, units that fit on a screen.

Both checks read the source (its ASTs), not the imported modules, so an import under
``TYPE_CHECKING`` or inside a function counts as much as one at the top.

The allow-lists name today's offenders in modules being reshaped on other branches
(issue 14); the lead empties them after merging, and from then on the tests guard
every module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ctxcli"
MAX_LINES = 60
MAX_COMPLEXITY = 15
MAX_CLASS_LINES = 250

#: Modules in an import cycle today (each module of a cycle, by dotted name).
CYCLES_ALLOWED: set[str] = set()

#: Units over a bound today, as ``module:qualified name``.
SIZES_ALLOWED: set[str] = {}


def module_name(path: Path) -> str:
    """``ctxcli/stages/window.py`` -> ``ctxcli.stages.window``; a package's
    ``__init__.py`` is the package."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
TREES = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in MODULES.items()}


def imported(name: str, tree: ast.Module) -> set[str]:
    """The package's modules that module ``name`` imports anywhere in ``tree``
    (``from ctxcli import x`` is module ``ctxcli.x`` when there is one, else
    ``ctxcli``)."""
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            found.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            )
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: imported(name, tree) for name, tree in TREES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def complexity(node: ast.AST) -> int:
    """Cyclomatic complexity as radon counts it: 1, plus one per ``if`` (and
    conditional expression), loop, ``except``, ``with``, ``assert``, comprehension and
    its ``if``s, ``match`` case, and each extra operand of ``and``/``or``; nested
    functions count in their enclosing one."""
    count = 1
    for sub in ast.walk(node):
        if isinstance(
            sub,
            ast.If
            | ast.IfExp
            | ast.For
            | ast.AsyncFor
            | ast.While
            | ast.ExceptHandler
            | ast.With
            | ast.AsyncWith
            | ast.Assert
            | ast.match_case,
        ):
            count += 1
        elif isinstance(sub, ast.BoolOp):
            count += len(sub.values) - 1
        elif isinstance(sub, ast.comprehension):
            count += 1 + len(sub.ifs)
    return count


def units(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    """Every function and class in ``tree`` by qualified name (``Class.method``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield prefix + node.name, node
            yield from units(node, prefix + node.name + ".")
        else:
            yield from units(node, prefix)


def oversized() -> dict[str, str]:
    """``module:unit`` -> what is too big about it, for every unit over a bound."""
    found: dict[str, str] = {}
    for name, tree in TREES.items():
        for qualified, node in units(tree):
            assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if isinstance(node, ast.ClassDef):
                if lines > MAX_CLASS_LINES:
                    found[f"{name}:{qualified}"] = f"class of {lines} lines"
            elif lines > MAX_LINES or complexity(node) > MAX_COMPLEXITY:
                found[f"{name}:{qualified}"] = f"{lines} lines, complexity {complexity(node)}"
    return found


def test_the_import_walk_sees_imports_in_functions_and_under_type_checking() -> None:
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ctxcli.model import Message\n"
        "def f():\n    from . import jsonio\n    import ctxcli.tokens\n"
    )
    assert imported("ctxcli.cli", tree) == {"ctxcli.model", "ctxcli.jsonio", "ctxcli.tokens"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_complexity_counts_as_radon_does() -> None:
    source = (
        "def f(x):\n"
        "    if x and x > 1 or x < -1:\n        return [y for y in x if y]\n"
        "    for y in x:\n        with open(y):\n            pass\n"
        "    try:\n        pass\n    except ValueError:\n        pass\n"
        "    return 1 if x else 2\n"
    )
    function = ast.parse(source).body[0]
    # 1 + if + and/or (2) + comprehension and its if (2) + for + with + except + ifexp
    assert complexity(function) == 10


def test_no_import_cycle() -> None:
    found = [c for c in cycles(GRAPH) if not set(c) <= CYCLES_ALLOWED]
    assert not found, found


def test_no_unit_over_its_bounds() -> None:
    found = {unit: why for unit, why in oversized().items() if unit not in SIZES_ALLOWED}
    assert not found, found


@pytest.mark.parametrize("allowed", sorted(SIZES_ALLOWED))
def test_the_allow_list_names_units_that_exist(allowed: str) -> None:
    module, _, qualified = allowed.partition(":")
    assert module in TREES, allowed
    assert qualified in dict(units(TREES[module])), allowed


def rebound(tree: ast.Module) -> list[str]:
    """The names a module's top level assigns (or defines) more than once, outside an
    ``if`` or ``try`` (where one of two branches is taken)."""
    seen: set[str] = set()
    twice = []
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id] if node.value is not None else []
        for name in names:
            if name in seen:
                twice.append(name)
            seen.add(name)
    return twice


def test_no_module_binds_a_name_twice() -> None:
    # extractive.py defined _ID_WORD twice, 1,000 lines apart: the second, made for
    # another use, replaced the first in _by_money_word, which read 'voucher 2024'.
    found = {module: names for module, tree in TREES.items() if (names := rebound(tree))}
    assert not found, found
    assert rebound(ast.parse("A = 1\ndef f(): pass\nA = 2\n")) == ["A"]

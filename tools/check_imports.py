"""Check the import layout of ``src/fks`` (issue 16): no circle across packages, no private import.

Run: ``python tools/check_imports.py [src]``. It parses every module with :mod:`ast` (imports
at any depth, lazy ones included; ``if TYPE_CHECKING:`` blocks skipped, since they never run),
builds the module import graph with networkx, and prints

* every strongly connected component whose modules do not all sit in one package (a circle
  through more than one package);
* every ``from X import _name`` where ``X`` lies in another package than the importer (the
  exit code counts these), and, for information, every import from a ``_private`` module of
  another package.

Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``; the graph records only the
named module, because a package ``__init__`` that imports nothing heavy (the rule here) adds no
edge of its own. Exit code 0 when both lists are empty, else 1.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import networkx as nx


def _modules(src: Path) -> dict[str, Path]:
    out = {}
    for path in sorted((src / "fks").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, module: str, is_pkg: bool):
    """Yield (target module, imported names) for every runtime import in ``tree``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - node.level + 1]
                base = ".".join(pkg + ([base] if base else []))
            yield base, [a.name for a in node.names]
        stack.extend(ast.iter_child_nodes(node))


def _package(module: str, modules: dict[str, Path]) -> str:
    path = modules[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def check(src: Path) -> tuple[list[list[str]], list[str], list[str]]:
    """Return the cross-package circles, private-name imports and private-module imports."""
    modules = _modules(src)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    private = []
    private_modules = []
    for module, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for target, names in _imports(ast.parse(path.read_text()), module, is_pkg):
            if not target.startswith("fks"):
                continue
            # ``from pkg import sub``: the edge goes to the submodule when it is one
            resolved = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
            if target in modules and (not names or len(resolved) < len(names)):
                resolved.append(target)
            for dest in resolved:
                if dest != module:
                    graph.add_edge(module, dest)
            if target in modules and _package(target, modules) != _package(module, modules):
                names_ = [n for n in names
                          if n.startswith("_") and not (n.startswith("__") and n.endswith("__"))]
                if names_:
                    private.append(f"{module} imports private name(s) {', '.join(names_)} "
                                   f"from {target}")
                elif any(p.startswith("_") and not p.startswith("__") for p in target.split(".")):
                    private_modules.append(f"{module} imports from private module {target}")
    circles = [sorted(c) for c in nx.strongly_connected_components(graph)
               if len(c) > 1 and len({_package(m, modules) for m in c}) > 1]
    return circles, private, private_modules


def main() -> int:
    """Print the findings; exit 1 when a circle or a private-name import remains."""
    src = Path(sys.argv[1] if len(sys.argv) > 1 else "src")
    circles, private, private_modules = check(src)
    modules = len(_modules(src))
    print(f"{modules} modules; {len(circles)} cross-package import circle(s); "
          f"{len(private)} cross-package import(s) of a _private name; "
          f"{len(private_modules)} cross-package import(s) from a _private module")
    for c in circles:
        print(f"circle ({len(c)} modules): {' '.join(c)}")
    for line in private + private_modules:
        print(f"private: {line}")
    return 1 if circles or private else 0


if __name__ == "__main__":
    sys.exit(main())

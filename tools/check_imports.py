"""Check polygemm's imports: no cycles between its modules, and no private name (a leading
underscore) imported from another module. Exit status 1 and a list when either is found.

    python tools/check_imports.py [package_dir]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def main(root: Path) -> int:
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    private: list[str] = []
    for mod, path in modules.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[tuple[str, str | None]] = []
            if isinstance(node, ast.ImportFrom):
                src = resolve(mod, is_pkg, node)
                for alias in node.names:
                    sub = f"{src}.{alias.name}"
                    targets.append((sub, None) if sub in modules else (src, alias.name))
            elif isinstance(node, ast.Import):
                targets = [(alias.name, None) for alias in node.names]
            for target, name in targets:
                if target not in modules or target == mod:
                    continue
                graph[mod].add(target)
                if name and name.startswith("_") and not name.startswith("__"):
                    private.append(f"{path}: imports {name} from {target}")
    cycles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    for c in cycles:
        print("cycle: " + " -> ".join(c))
    for p in private:
        print("private import: " + p)
    return 1 if cycles or private else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "polygemm").resolve()))

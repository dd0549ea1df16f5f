#!/usr/bin/env python3
"""Fails when a module of any crate imports another that imports it back, directly or
through others. A module is a source file; an import is any `crate::`, `super::` or
`self::` path (grouped imports included) outside comments and `#[cfg(test)] mod tests`.
Paths to a module's own ancestors (a child naming its parent's items) are not edges:
the parent declares the child, so those would make every crate one cycle.

Usage: scripts/module-cycles.py [workspace root]"""

import os
import re
import sys

PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
GROUP = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^}]*)\}")


def modules_of(src):
    """Module path (a tuple) -> file, for one crate's `src/`."""
    modules = {}
    for folder, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, src)[:-3].split(os.sep)
            if parts[0] == "bin":
                continue
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            modules[tuple(parts)] = path
    return modules


def imports(module, text):
    """The paths a module names, as (base module, rest of the path)."""
    text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
    text = re.sub(r"//[^\n]*", "", text)
    found = [(m.group(1), m.group(2).split("::")[1:]) for m in PATH.finditer(text)]
    for m in GROUP.finditer(text):
        prefix = m.group(2).split("::")[1:]
        for item in m.group(3).split(","):
            item = item.strip().split(" as ")[0].strip()
            if item:
                found.append((m.group(1), prefix + item.split("::")))
    for kind, parts in found:
        base = [] if kind == "crate" else list(module) if kind == "self" else list(module[:-1])
        parts = [p for p in parts if p and p != "self"]
        while parts and parts[0] == "super":
            base, parts = base[:-1], parts[1:]
        yield base + parts


def cycles(modules):
    edges = {m: set() for m in modules}
    for module, path in modules.items():
        with open(path) as f:
            text = f.read()
        for target in imports(module, text):
            for n in range(len(target), -1, -1):
                hit = tuple(target[:n])
                if hit in modules:
                    ancestor = len(hit) < len(module) and module[: len(hit)] == hit
                    if hit != module and not ancestor:
                        edges[module].add(hit)
                    break
    # Tarjan's strongly connected components.
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    sys.setrecursionlimit(10_000)
    for v in modules:
        if v not in index:
            visit(v)
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    failed = False
    for crate in sorted(os.listdir(root)):
        src = os.path.join(root, crate, "src")
        if not (os.path.isfile(os.path.join(root, crate, "Cargo.toml")) and os.path.isdir(src)):
            continue
        for component in cycles(modules_of(src)):
            failed = True
            names = ", ".join("/".join(m) or "lib" for m in sorted(component))
            print(f"{crate}: modules that import each other: {names}")
    if failed:
        sys.exit(1)
    print("no module imports one that imports it back")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Print the import loops in a package (default: sparktui), one per line; exit 1 when there is one.

A loop is a strongly connected group of modules in the import graph grimp builds from the source
(function-level imports count, imports under TYPE_CHECKING do not: they are type-only).
Usage: scripts/import_cycles.py [PACKAGE]
"""

from __future__ import annotations

import sys

import grimp


def import_loops(package: str) -> list[list[str]]:
    graph = grimp.build_graph(package, exclude_type_checking_imports=True, cache_dir=None)
    # Tarjan's strongly connected components, iterative (a deep package must not hit the recursion limit)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == module:
                        break
                if len(group) > 1:
                    loops.append(sorted(group))
    return sorted(loops)


def main(argv: list[str]) -> int:
    loops = import_loops(argv[1] if len(argv) > 1 else "sparktui")
    for loop in loops:
        print(" <-> ".join(loop))
    return 1 if loops else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

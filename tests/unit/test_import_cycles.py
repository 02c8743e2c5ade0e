"""No import cycle inside ``src/streamwire`` (issue 30), type-only imports counted, since a
reader follows them too. The graph is grimp's (the library under import-linter); the cycles
are its strongly connected components, found here by Tarjan's algorithm (grimp 3.20 has no
cycle finder: ``nominate_cycle_breakers`` suggests imports to cut between the children of
one package, it does not list cycles)."""

from __future__ import annotations

import grimp


def cycles(graph: grimp.ImportGraph) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if low[node] == index[node]:
                component = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.add(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.add(frozenset(component))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return found


def test_no_import_cycle() -> None:
    graph = grimp.build_graph("streamwire", exclude_type_checking_imports=False, cache_dir=None)
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)


def test_the_cycle_finder_finds_cycles() -> None:
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    graph.add_import(importer="p.c", imported="p.a")
    graph.add_import(importer="p.c", imported="p.d")
    assert cycles(graph) == {frozenset({"p.a", "p.b", "p.c"})}

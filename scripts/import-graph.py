#!/usr/bin/env python3
"""Import graph of a Rust crate's src/ between files, and its cycles.

    scripts/import-graph.py [host/scalebench/src]          # cycles, then a summary
    scripts/import-graph.py host/scalebench/src --edges    # every edge too
    scripts/import-graph.py host/scalebench/src --layers docs/architecture.md

With --layers, the file's ```layers block gives the layer order, from the
top: one line per layer, `N name: module module …` (top-level modules of
src/). Every module must be in one layer, and every edge must point to
its own layer or one below: an upward edge fails, named. Edges between a
parent and its children (a folder and its files) are counted here too;
they stay inside one layer.

An edge A -> B is a `crate::…` path in A (a `use` or an inline path) that
names B's module, or a `super::…` path that names a sibling. A child naming
its own parent (`super::X` where X is the parent's item) is not an edge: a
module's children always see it, and that is how a folder shares its types.
Exit status 1 when there is a cycle, an upward edge or a module in no layer.
"""
import os
import re
import sys


def module_of(src, path):
    rel = os.path.relpath(path, src)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def read_layers(doc):
    """Top-level module -> (layer number, layer name), from the doc's ```layers block."""
    text = open(doc, encoding="utf-8").read()
    m = re.search(r"```layers\n(.*?)```", text, re.S)
    if not m:
        sys.exit(f"{doc}: no ```layers block")
    layers = {}
    for line in m.group(1).splitlines():
        if not line.strip():
            continue
        head, mods = line.split(":", 1)
        number, name = head.split(" ", 1)
        for mod in mods.split():
            if mod in layers:
                sys.exit(f"{doc}: {mod} is in two layers")
            layers[mod] = (int(number), name.strip())
    return layers


def main():
    argv = sys.argv[1:]
    layers_doc = None
    if "--layers" in argv:
        i = argv.index("--layers")
        layers_doc = argv[i + 1]
        del argv[i : i + 2]
    args = [a for a in argv if not a.startswith("--")]
    src = args[0] if args else "host/scalebench/src"
    files = {}
    for root, _, names in os.walk(src):
        for n in names:
            if n.endswith(".rs"):
                p = os.path.join(root, n)
                files[module_of(src, p)] = p
    mods = set(files)

    def resolve(parts):
        # Longest prefix that is a module file.
        for k in range(len(parts), 0, -1):
            if tuple(parts[:k]) in mods:
                return tuple(parts[:k])
        return None

    edges = {m: set() for m in mods}
    family_edges = set()
    path_re = re.compile(r"\b(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
    group_re = re.compile(r"\buse\s+(crate|super)((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\}", re.S)
    for m, p in files.items():
        text = open(p, encoding="utf-8").read()
        text = re.sub(r"(?m)^\s*//.*$", "", text)
        found = []
        for root, rest, inner in group_re.findall(text):
            for item in re.split(r",", inner):
                item = item.strip().split(" as ")[0].split("::{")[0]
                if item and item not in ("self", "*"):
                    found.append((root, rest.strip(":").split("::") + item.split("::") if rest else item.split("::")))
        for root, rest in path_re.findall(text):
            found.append((root, rest.strip(":").split("::")))
        for root, parts in found:
            parts = [x for x in parts if x]
            if root == "crate":
                target = resolve(parts)
            else:
                # In a/b.rs (module a::b) and in a/b/mod.rs alike, `super` is a.
                base = list(m[:-1])
                target = resolve(base + parts)
                # `super::X` naming the parent's own item: not an edge for
                # cycles, but one for layers.
                if target == tuple(base):
                    if target:
                        family_edges.add((m, target))
                    continue
            if target and target != m and target != tuple():
                edges[m].add(target)

    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(mods):
        if v not in index:
            strong(v)

    name = lambda m: "::".join(m) or "crate"
    if "--edges" in sys.argv:
        for m in sorted(edges):
            for t in sorted(edges[m]):
                print(f"{name(m)} -> {name(t)}")
    for i, comp in enumerate(sccs, 1):
        print(f"cycle {i}: " + ", ".join(sorted(name(c) for c in comp)))
        for a in sorted(comp):
            for b in sorted(edges[a]):
                if b in comp:
                    print(f"  {name(a)} -> {name(b)}")
    print(f"{len(mods)} modules, {sum(len(e) for e in edges.values())} edges, {len(sccs)} cycles")
    broken = 0
    if layers_doc:
        layers = read_layers(layers_doc)
        top = lambda mod: mod[0] if mod else None
        for mod in sorted({top(m) for m in mods if m}):
            if mod not in layers:
                print(f"layers: `{mod}` is in no layer of {layers_doc}: add it to the ```layers block")
                broken += 1
        all_edges = {(a, b) for a in edges for b in edges[a]} | family_edges
        up = []
        for a, b in sorted(all_edges):
            la, lb = layers.get(top(a)), layers.get(top(b))
            if la and lb and lb[0] < la[0]:
                up.append((a, b, la, lb))
        for a, b, la, lb in up:
            print(f"upward: {name(a)} (layer {la[0]}, {la[1]}) -> {name(b)} (layer {lb[0]}, {lb[1]})")
        broken += len(up)
        print(f"layers: {len(set(v[0] for v in layers.values()))} layers, {len(up)} upward edges")
    sys.exit(1 if sccs or broken else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Import graph between the files of scalebench's crates, and its cycles.

    scripts/import-graph.py [CRATE_DIR ...]            # cycles, then a summary
    scripts/import-graph.py CRATE_DIR ... --edges      # every edge too
    scripts/import-graph.py CRATE_DIR ... --layers docs/architecture.md

Each CRATE_DIR holds a Cargo.toml and src/ (default: host/scalebench,
host/engine, host/report, host/results). A crate sees its own modules and,
by re-export, those of the listed crates it depends on (its Cargo.toml's
`path = "../X"` dependencies, searched in the order given), so `crate::results`
in the engine is the results crate's `results`; a path through a crate's
name (`scalebench_results::study::record`) names that crate's module.

With --layers, the file's ```layers block gives the layer order, from the
top: one line per layer, `N name: module module …` (top-level modules;
`crate/module` names one crate's module where two crates have a module of
that name, e.g. `report/study`). Every module must be in one layer, and
every edge must point to its own layer or one below: an upward edge fails,
named. Edges between a parent and its children (a folder and its files)
are counted here too; they stay inside one layer.

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
    crate_dirs = args or ["host/scalebench", "host/engine", "host/report", "host/results"]
    crates = {}  # short name (the dir's name) -> (src, package ident, deps)
    for d in crate_dirs:
        d = d.rstrip("/")
        short = os.path.basename(d)
        toml = open(os.path.join(d, "Cargo.toml"), encoding="utf-8").read()
        package = re.search(r'(?m)^name\s*=\s*"([^"]+)"', toml).group(1).replace("-", "_")
        deps = re.findall(r'path\s*=\s*"\.\./([A-Za-z0-9_-]+)"', toml)
        crates[short] = (os.path.join(d, "src"), package, deps)
    by_ident = {ident: short for short, (_, ident, _) in crates.items()}

    files = {}
    for short, (src, _, _) in crates.items():
        for root, _, names in os.walk(src):
            for n in names:
                if n.endswith(".rs"):
                    p = os.path.join(root, n)
                    files[(short,) + module_of(src, p)] = p
    mods = set(files)

    def resolve_in(crate, parts):
        # Longest prefix that is a module file of this crate.
        for k in range(len(parts), 0, -1):
            if (crate,) + tuple(parts[:k]) in mods:
                return (crate,) + tuple(parts[:k])
        return None

    def resolve(crate, parts):
        # The crate's own modules, then those it re-exports from the crates it depends on.
        found = resolve_in(crate, parts)
        if found:
            return found
        for dep in crates[crate][2]:
            if dep in crates:
                found = resolve(dep, parts)
                if found:
                    return found
        return None

    edges = {m: set() for m in mods}
    family_edges = set()
    idents = "|".join(["crate", "super"] + sorted(by_ident))
    path_re = re.compile(r"\b(" + idents + r")((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
    group_re = re.compile(r"\buse\s+(" + idents + r")((?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{([^;]*)\}", re.S)
    for m, p in files.items():
        crate = m[0]
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
                target = resolve(crate, parts)
            elif root in by_ident:
                target = resolve(by_ident[root], parts)
            else:
                # In a/b.rs (module a::b) and in a/b/mod.rs alike, `super` is a.
                base = list(m[1:-1])
                target = resolve(crate, base + parts)
                # `super::X` naming the parent's own item: not an edge for
                # cycles, but one for layers.
                if target == (crate,) + tuple(base):
                    if base:
                        family_edges.add((m, target))
                    continue
            if target and target != m and len(target) > 1:
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

    top_crate = os.path.basename(crate_dirs[0].rstrip("/"))
    # The binary's modules by their path; another crate's with its name first.
    name = lambda m: "::".join(m[1:] if m[0] == top_crate else (crates[m[0]][1],) + m[1:])
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
        top = lambda mod: mod[:2] if len(mod) > 1 else None
        layer = lambda t: layers.get(f"{t[0]}/{t[1]}") or layers.get(t[1])
        for t in sorted({top(m) for m in mods if top(m)}):
            if not layer(t):
                print(f"layers: `{t[1]}` ({t[0]}) is in no layer of {layers_doc}: add it to the ```layers block")
                broken += 1
        all_edges = {(a, b) for a in edges for b in edges[a]} | family_edges
        up = []
        for a, b in sorted(all_edges):
            if not top(a) or not top(b):
                continue
            la, lb = layer(top(a)), layer(top(b))
            if la and lb and lb[0] < la[0]:
                up.append((a, b, la, lb))
        for a, b, la, lb in up:
            print(f"upward: {name(a)} (layer {la[0]}, {la[1]}) -> {name(b)} (layer {lb[0]}, {lb[1]})")
        broken += len(up)
        print(f"layers: {len(set(v[0] for v in layers.values()))} layers, {len(up)} upward edges")
    sys.exit(1 if sccs or broken else 0)


if __name__ == "__main__":
    main()

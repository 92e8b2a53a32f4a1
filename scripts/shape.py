#!/usr/bin/env python3
"""Counts the shape of a crate's code: functions over a line limit, module
cycles (between files, and between the crate's top-level modules), and the
signatures a type name appears in.

    python3 scripts/shape.py [--limit 100] [--type BuildOptions] CRATE_SRC...

Test code (`tests.rs` files and `#[cfg(test)]` modules) is left out. The
parser is a brace counter that skips strings, chars and comments: good
enough for rustfmt-formatted code, not a Rust parser.
"""

import argparse
import os
import re
import sys

FN = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+(\w+)")


def strip(text):
    """The text with string, char and comment contents blanked (lines kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 8]) and not (i and (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('"' + re.sub(r"[^\n]", " ", text[i + 1:j]) + '"')
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def test_ranges(lines):
    """Line ranges of `#[cfg(test)] mod … { }` blocks."""
    ranges = []
    for k, line in enumerate(lines):
        if line.strip() == "#[cfg(test)]" and k + 1 < len(lines) and re.match(r"\s*(pub\s+)?mod\s+\w+\s*\{", lines[k + 1]):
            ranges.append((k, block_end(lines, k + 1)))
    return ranges


def block_end(lines, start):
    depth, opened = 0, False
    for k in range(start, len(lines)):
        for ch in lines[k]:
            if ch == "{":
                depth += 1
                opened = True
            elif ch == "}":
                depth -= 1
        if opened and depth <= 0:
            return k
        if not opened and lines[k].rstrip().endswith(";"):
            return k
    return len(lines) - 1


def rust_files(roots):
    for root in roots:
        for d, _, files in os.walk(root):
            for f in sorted(files):
                if f.endswith(".rs") and f != "tests.rs":
                    yield os.path.join(d, f)


def module_of(path, root):
    rel = os.path.relpath(path, root)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib", "main"):
        rel = rel[:-1]
    return tuple(rel)


def long_functions(path, lines, limit):
    skip = test_ranges(lines)
    found = []
    for k, line in enumerate(lines):
        if any(a <= k <= b for a, b in skip):
            continue
        m = FN.match(line)
        if not m:
            continue
        end = block_end(lines, k)
        length = end - k + 1
        if length > limit:
            found.append((length, f"{path}:{m.group(1)} ({k + 1})"))
    return found


def refs(text, me, modules):
    """Modules of this crate a file names (`crate::a::b`, `super::x`)."""
    out = set()
    for m in re.finditer(r"\buse\s+crate::\{([^;]*)\}", text, re.S):
        for part in re.split(r",", re.sub(r"\{[^{}]*\}", "", m.group(1))):
            out.add(resolve(tuple(p for p in part.strip().split("::") if p), modules))
    for m in re.finditer(r"\bcrate((?:::\w+)+)", text):
        out.add(resolve(tuple(m.group(1).split("::")[1:]), modules))
    for m in re.finditer(r"\b((?:super::)+)(\w+)", text):
        up = m.group(1).count("super::")
        base = me[: len(me) - up] if up <= len(me) else ()
        out.add(resolve(base + (m.group(2),), modules))
    out.discard(None)
    return out


def resolve(path, modules):
    for k in range(len(path), 0, -1):
        if path[:k] in modules:
            return path[:k]
    return None


def cycles(edges):
    """Strongly connected components of more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--type", action="append", default=[])
    ap.add_argument("srcs", nargs="+")
    a = ap.parse_args()
    long, file_edges, top_edges, reach = [], {}, {}, {t: 0 for t in a.type}
    for src in a.srcs:
        files = list(rust_files([src]))
        modules = {module_of(f, src) for f in files}
        for f in files:
            raw = open(f, encoding="utf-8").read()
            text = strip(raw)
            lines = text.split("\n")
            long += long_functions(f, lines, a.limit)
            me = module_of(f, src)
            skip = test_ranges(lines)
            kept = "\n".join(l for k, l in enumerate(lines) if not any(x <= k <= y for x, y in skip))
            for t in a.type:
                reach[t] += len(re.findall(r"&(?:'\w+\s+)?(?:mut\s+)?" + re.escape(t) + r"\b", kept))
            for r in refs(kept, me, modules):
                # a module and its own ancestors or children are one unit
                if r[: len(me)] == me or me[: len(r)] == r:
                    continue
                file_edges.setdefault((src, me), set()).add((src, r))
                if me and r and me[0] != r[0]:
                    top_edges.setdefault((src, me[0]), set()).add((src, r[0]))
    name = lambda n: f"{os.path.basename(os.path.dirname(n[0].rstrip('/')))}::{'::'.join(n[1]) if isinstance(n[1], tuple) else n[1]}"
    print(f"functions over {a.limit} lines: {len(long)}")
    for length, where in sorted(long, reverse=True):
        print(f"  {length:4d}  {where}")
    fc, tc = cycles(file_edges), cycles(top_edges)
    print(f"module cycles between files: {len(fc)}")
    for c in fc:
        print("  " + " <-> ".join(name(n) for n in c))
    print(f"cycles between top-level modules: {len(tc)}")
    for c in tc:
        print("  " + " <-> ".join(name(n) for n in c))
    for t, n in reach.items():
        print(f"places `&{t}` appears: {n}")


if __name__ == "__main__":
    main()

"""Which names of a script may share an object (alias classes: a change through one is a
change of all), and which statements must run on one worker (groups: the global random
generator, matplotlib's current figure, the standard input, values that cannot be pickled,
functions and classes that keep state, mutated aliases), both by union-find.
"""

from __future__ import annotations

from collections import defaultdict


class UnionFind:
    """Disjoint sets of ``0 .. n-1``; the representative of a set is its smallest member."""

    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        """The representative of the set of ``i``."""
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def union(self, a: int, b: int) -> None:
        """Join the sets of ``a`` and ``b``."""
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def alias_classes(raw, ctx, names: list[str], ids: dict[str, int]):
    """``(union-find, members of each class, the classes a statement mutates)`` of the
    names that may share an object: what a statement binds and the values it is bound
    from (numbers and strings never change; a function or class of the script counts only
    if it keeps state: ``ctx.stateful``), and a function or class that keeps state with
    the objects it holds from its definition (``ctx.held_by``)."""
    alias = UnionFind(len(names))
    for _, s in raw:
        for targets, sources in s.aliases:
            for t in targets:
                for src in sources:
                    if src in ctx.immutables or t in ctx.immutables:
                        continue   # a number or a string is never changed in place
                    if (src in ctx.user_callables and src not in ctx.stateful) or \
                            (t in ctx.user_callables and t not in ctx.stateful):
                        continue   # a function or class that keeps no state
                    if t in ids and src in ids and t != src:
                        alias.union(ids[t], ids[src])
    for c, held in ctx.held_by.items():
        if c in ctx.stateful and c in ids:
            for h in held:
                if h in ids and h not in ctx.immutables:
                    alias.union(ids[c], ids[h])
    members: dict[int, set[str]] = defaultdict(set)
    for n in names:
        members[alias.find(ids[n])].add(n)
    mutated_classes: set[int] = set()
    for _, s in raw:
        for m in s.mutates:
            if m in ids:
                mutated_classes.add(alias.find(ids[m]))
    return alias, members, mutated_classes


def worker_groups(info, ctx, members, alias, ids, mutated_classes, stateful):
    """Tasks that must run on one worker: union-find over tasks. Besides shared effects
    (the random state, the current figure) and mutated aliases, a value that cannot be
    pickled and a function or class of the script that keeps state between statements
    (``stateful``: a mutable default argument, attributes set on it, a class attribute
    changed through its objects, a decorator's closure) pin every statement that uses
    them, or names that may hold them, to one worker: a function or class is defined by
    reference on each process, so its state cannot move."""
    n = len(info)
    uf = UnionFind(n)
    reasons: dict[int, str] = {}
    flagged: dict[int, str] = {}
    first_of: dict[str, int] = {}

    def join(i: int, key: str, reason: str) -> None:
        flagged.setdefault(i, reason)
        if key in first_of:
            uf.union(first_of[key], i)
        else:
            first_of[key] = i

    pinned_names: set[str] = set(stateful)
    for _, s, _, _ in info:
        pinned_names |= s.unpicklable
    pinned_classes = {alias.find(ids[v]) for v in pinned_names if v in ids}
    class_reason: dict[str, str] = {}

    def reason_of(key: str, c: int) -> str:
        if key not in class_reason:
            keeping = sorted(members[c] & set(stateful))
            if key.startswith("pin:") and keeping:
                class_reason[key] = "state kept between statements: " + "; ".join(
                    stateful[k] for k in keeping)
            elif key.startswith("pin:"):
                class_reason[key] = "values that cannot be pickled: " + ", ".join(
                    sorted(members[c] & pinned_names))
            else:
                names = sorted(members[c])
                more = f" and {len(names) - 8} more" if len(names) > 8 else ""
                class_reason[key] = "mutated aliases: " + ", ".join(names[:8]) + more
        return class_reason[key]

    for i, (_, s, uses, defines) in enumerate(info):
        kinds = {e.kind for e in s.effects}
        if "random" in kinds:
            join(i, "random", "the global random generator state")
        if "figure" in kinds:
            join(i, "figure", "matplotlib's current figure")
        if "stdin" in kinds:
            join(i, "stdin", "the standard input, read in program order by one process (the "
                             "script runs serially when it is a terminal)")
        for v in sorted(uses | defines):
            if v not in ids:
                continue
            c = alias.find(ids[v])
            if c in pinned_classes:
                join(i, f"pin:{c}", reason_of(f"pin:{c}", c))
            elif c in mutated_classes and len(members[c]) > 1 and v in defines:
                # a statement that changes or binds an alias joins the others; one that
                # only reads them may take copies (its edges order it with the changes)
                join(i, f"alias:{c}", reason_of(f"alias:{c}", c))
    # a value made inside a group is mutated there too (a figure's axes, a file's writer)
    owner: dict[str, int] = {}
    for i, (_, s, _uses, defines) in enumerate(info):
        for v in sorted(s.mutates):
            if v in owner:
                flagged.setdefault(i, flagged[owner[v]])
                uf.union(owner[v], i)
        if i in flagged:
            for v in defines:
                owner[v] = i
        else:
            for v in defines:
                if v not in s.mutates:
                    owner.pop(v, None)
    groups: list[int | None] = [None] * n
    sizes: dict[int, int] = defaultdict(int)
    for i in flagged:
        sizes[uf.find(i)] += 1
    for i in flagged:
        root = uf.find(i)
        if sizes[root] > 1:
            groups[i] = root
            reasons.setdefault(root, flagged[root] if root in flagged else flagged[i])
    for i in flagged:  # a lone task holding an unpicklable value still stays where it is
        if groups[i] is None and flagged[i].startswith(("values that cannot",
                                                         "state kept between")):
            groups[i] = i
            reasons[i] = flagged[i]
    return groups, reasons

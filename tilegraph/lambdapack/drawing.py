"""Showing an implicit LambdaPACK DAG: the methods of
:class:`~tilegraph.lambdapack.program.DAG` that explain it (tasks per statement, flops,
the critical path) and draw it with Graphviz.
"""

from __future__ import annotations

from collections.abc import Callable


class DAGDrawing:
    """Mixed into :class:`~tilegraph.lambdapack.program.DAG`: its drawing and explanation."""

    def explain(self, shape_of: Callable | None = None) -> str:
        """Statements, nodes per statement, flops (with ``shape_of``, tile shapes) and the
        critical path (in tasks; computed for DAGs of up to a million nodes)."""
        lines = [f"{self!r}"]
        total = 0
        for s in self.statements:
            n = self.count_statement(s.id)
            total += n
            lines.append(f"  line {s.line:4d}  {n:>12,d} tasks  {s.text}")
        lines.append(f"  {total:,d} tasks in all")
        if shape_of is not None:
            flops = 0.0
            for node in self.nodes():
                k = self.program.kernels[self.statements[node[0]].kernel]
                shapes = [shape_of(*v[:2]) for w, v in self.inputs(node) if w == "tile"]
                if k.flops is not None and shapes and None not in shapes:
                    flops += k.flops(*shapes)
            lines.append(f"  {flops:.4g} flops")
        if total <= 1_000_000:
            lines.append(f"  critical path: {self.critical_path()} tasks")
        return "\n".join(lines)

    def critical_path(self) -> int:
        """The number of tasks on the longest path (expands the DAG)."""
        nodes = list(self.nodes())
        indeg = {n: len(self.parents(n)) for n in nodes}
        depth = dict.fromkeys(nodes, 1)
        ready = [n for n in nodes if indeg[n] == 0]
        best = 0
        while ready:
            n = ready.pop()
            best = max(best, depth[n])
            for c in self.children(n):
                depth[c] = max(depth[c], depth[n] + 1)
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        return best

    def to_dot(self, max_nodes: int = 2000) -> str:
        """The expanded DAG in Graphviz's dot language (for small DAGs)."""
        nodes = []
        for n in self.nodes():
            nodes.append(n)
            if len(nodes) > max_nodes:
                raise ValueError(f"to_dot: the DAG has more than {max_nodes} nodes; draw a "
                                 "smaller binding")
        ids = {n: f"n{i}" for i, n in enumerate(nodes)}
        out = [f'digraph "{self.program.name}" {{', "  rankdir=TB;",
               '  node [shape=box, fontname="Helvetica", fontsize=10];']
        for n in nodes:
            s = self.statements[n[0]]
            label = f"{s.kernel}{list(n[1])}"
            out.append(f'  {ids[n]} [label="{label}"];')
        for n in nodes:
            for c in self.children(n):
                out.append(f"  {ids[n]} -> {ids[c]};")
        out.append("}")
        return "\n".join(out)

    def draw(self, path: str, max_nodes: int = 2000) -> str:
        """Write a drawing of the DAG to ``path`` (``.svg``, ``.png`` or ``.pdf``) with
        Graphviz's ``dot``; returns the path."""
        import shutil
        import subprocess

        dot = shutil.which("dot")
        if dot is None:
            raise RuntimeError("draw: Graphviz's 'dot' is not installed (apt-get install "
                               "graphviz); to_dot() gives the text")
        fmt = str(path).rsplit(".", 1)[-1].lower()
        if fmt not in ("svg", "png", "pdf"):
            raise ValueError(f"draw: {path!r} must end in .svg, .png or .pdf")
        subprocess.run([dot, f"-T{fmt}", "-o", str(path)], input=self.to_dot(max_nodes),
                       text=True, check=True, capture_output=True)
        return str(path)

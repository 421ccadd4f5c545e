"""The record of what one top-level statement, or the body of one of the script's functions,
does to the script's global state: the names it reads, binds and changes, its effects and
barriers, the aliases it makes, and what a function does to its parameters.
:class:`~tilegraph.autopar.collector.Collector` fills one in; the analysis merges those of
the functions a statement calls into the statement's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tilegraph.autopar.effects import Effect


@dataclass
class Summary:
    """What a statement, or the body of a function, does to global state."""

    reads: set[str] = field(default_factory=set)
    writes: set[str] = field(default_factory=set)
    mutates: set[str] = field(default_factory=set)
    effects: set[Effect] = field(default_factory=set)
    barriers: list[str] = field(default_factory=list)
    refs: set[str] = field(default_factory=set)        # user functions/classes referenced
    methods: set[str] = field(default_factory=set)     # attribute names called
    aliases: list[tuple[set[str], set[str]]] = field(default_factory=list)
    unpicklable: set[str] = field(default_factory=set)
    file_vars: set[str] = field(default_factory=set)
    mutated_params: bool = False
    mutated_param_names: set[str] = field(default_factory=set)
    stored_param_names: set[str] = field(default_factory=set)   # attributes/items stored
    called_param_names: set[str] = field(default_factory=set)   # called as functions
    calls_mutating: list[tuple[str, list[str]]] = field(default_factory=list)

    def merge(self, other: Summary) -> None:
        """Add what ``other`` reads, binds, changes, its effects and its barriers (not its
        references, methods, aliases or what it does to parameters)."""
        self.reads |= other.reads
        self.writes |= other.writes
        self.mutates |= other.mutates
        self.effects |= other.effects
        self.barriers += [b for b in other.barriers if b not in self.barriers]

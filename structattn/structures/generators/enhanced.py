"""Enhanced UD edges derived from a basic tree (the subset of the UD enhanced conventions the grammar needs).

Starting from every basic edge (the root as ``-1 -> root``):

1. *Augmented labels*: ``nmod``/``obl`` take their case marker (``obl:near``), ``conj`` its conjunction
   (``conj:and``).
2. *Conjunct propagation*: a verb conjunct without a subject of its own gets the subject of the first
   conjunct (``nsubj``); a nominal conjunct gets the governor of the first conjunct with the same label
   (``chases the cat and the dogs`` adds ``chases -obj-> dogs``).
3. *Relative clauses*: the relative pronoun's incoming edges move to its antecedent (the noun the clause
   modifies, so the antecedent becomes the clause verb's ``nsubj``/``obj``) and the antecedent gets a
   ``ref`` edge to the pronoun. This replaces the pronoun's basic edge, as in UD (step 3 runs after step 2,
   so a subject propagated from a relative pronoun is the antecedent too).
"""

from __future__ import annotations

from structattn.structures.sentence import SemanticEdge

RELATIVE_XPOS = ("WDT", "WP")


def _first_conjunct(i: int, heads: list[int], deprels: list[str]) -> int:
    while deprels[i] == "conj":
        i = heads[i]
    return i


def enhanced_edges(
    words: list[str], heads: list[int], deprels: list[str], upos: list[str], xpos: list[str]
) -> list[SemanticEdge]:
    """Enhanced dependency edges of a basic tree (see the module docstring), sorted by (dependent, head)."""
    n = len(words)
    children: list[list[int]] = [[] for _ in range(n)]
    for i, h in enumerate(heads):
        if h >= 0:
            children[h].append(i)

    def marker(i: int, relation: str) -> str | None:
        return next((words[c] for c in children[i] if deprels[c] == relation), None)

    def label(i: int) -> str:
        relation = deprels[i]
        extra = {"nmod": "case", "obl": "case", "conj": "cc"}.get(relation)
        word = marker(i, extra) if extra else None
        return f"{relation}:{word}" if word else relation

    edges = {(heads[i], i, label(i)) for i in range(n)}
    for c in range(n):
        if deprels[c] != "conj":
            continue
        first = _first_conjunct(c, heads, deprels)
        if upos[first] == "VERB":
            if not any(deprels[s] == "nsubj" for s in children[c]):
                edges |= {(c, s, "nsubj") for s in children[first] if deprels[s] == "nsubj"}
        else:
            edges.add((heads[first], c, label(first)))
    for r in range(n):
        if xpos[r] in RELATIVE_XPOS and heads[r] >= 0 and deprels[heads[r]] == "acl:relcl":
            antecedent = heads[heads[r]]
            moved = {(h, antecedent, rel) for h, d, rel in edges if d == r}
            edges = {e for e in edges if e[1] != r} | moved | {(antecedent, r, "ref")}
    return [SemanticEdge(h, d, rel) for h, d, rel in sorted(edges, key=lambda e: (e[1], e[0], e[2]))]

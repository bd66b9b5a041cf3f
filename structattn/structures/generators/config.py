"""Options of the synthetic grammar, validated once."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class GrammarConfig:
    """Rule probabilities of :class:`GrammarGenerator` (each drawn independently at every opportunity).

    Args:
        max_depth: most nested embeddings (PPs, relative clauses, coordinations) below the main clause.
        p_relative: an NP takes a relative clause.
        p_object_relative: a relative clause is an object relative (``that the cats chase``).
        p_pp: an NP takes a PP (``nmod``) / a VP takes a PP (``obl``).
        p_coord: a VP is coordinated (``V ... and V ...``) / a non-subject NP is coordinated.
        p_adj: an NP takes an adjective.
        p_transitive: a verb is transitive (takes an object NP).
        p_plural: a new NP is plural.
        p_pronoun: (documents) a main-clause subject/object is a pronoun for an earlier entity.
        p_repeat: (documents) a main-clause subject/object is a definite NP repeating an earlier entity.

    Raises:
        ValueError: naming the option when a probability lies outside ``[0, 1]`` or ``max_depth < 0``.
    """

    max_depth: int = 3
    p_relative: float = 0.2
    p_object_relative: float = 0.4
    p_pp: float = 0.3
    p_coord: float = 0.15
    p_adj: float = 0.3
    p_transitive: float = 0.6
    p_plural: float = 0.5
    p_pronoun: float = 0.4
    p_repeat: float = 0.3

    def __post_init__(self) -> None:
        if not isinstance(self.max_depth, int) or isinstance(self.max_depth, bool) or self.max_depth < 0:
            raise ValueError(f"GrammarGenerator: max_depth must be an integer >= 0, got {self.max_depth!r}")
        for option in fields(self):
            value = getattr(self, option.name)
            if option.name.startswith("p_") and not 0.0 <= value <= 1.0:
                raise ValueError(f"GrammarGenerator: {option.name}={value!r} is not a probability in [0, 1]")
        if self.p_pronoun + self.p_repeat > 1.0:
            raise ValueError(
                f"GrammarGenerator: p_pronoun + p_repeat = {self.p_pronoun + self.p_repeat} exceeds 1"
            )

"""Built-in data generators with gold structure: a synthetic English-like grammar and ListOps."""

from structattn.structures.generators.config import GrammarConfig
from structattn.structures.generators.grammar import GrammarGenerator
from structattn.structures.generators.listops import ListOpsGenerator, evaluate_listops

__all__ = ["GrammarConfig", "GrammarGenerator", "ListOpsGenerator", "evaluate_listops"]

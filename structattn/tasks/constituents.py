"""Reading bracketed constituency trees (stanza's tree reader) for the top-constituent and depth probes."""

from __future__ import annotations

from typing import Any

from structattn.structures.sentence import Sentence


def constituency_tree(sentence: Sentence) -> Any:
    """The sentence's ``constituency`` string parsed by stanza (``stanza.models.constituency.tree``).

    Raises:
        ValueError: naming the sentence when it has no tree, the bracketing does not parse, or the
            tree's words are not the sentence's words.
    """
    if sentence.constituency is None:
        raise ValueError(f"sentence {sentence.id!r} has no constituency tree")
    from stanza.models.constituency.tree_reader import read_trees  # heavy import, only when needed

    try:
        trees = read_trees(sentence.constituency)
    except Exception as err:  # stanza raises several of its own error types
        raise ValueError(f"sentence {sentence.id!r}: constituency tree does not parse: {err}") from None
    if len(trees) != 1:
        raise ValueError(f"sentence {sentence.id!r}: constituency string holds {len(trees)} trees, expected 1")
    leaves = trees[0].leaf_labels()
    if list(leaves) != list(sentence.words):  # a Sentence stores its words as a tuple
        raise ValueError(
            f"sentence {sentence.id!r}: constituency tree has {len(leaves)} words {leaves[:5]}..., the sentence "
            f"has {len(sentence)} {sentence.words[:5]}..."
        )
    return trees[0]


def top_constituents(sentence: Sentence) -> tuple[str, ...]:
    """Labels of the constituents right below the sentence node (Conneau et al. 2018, "TopConst").

    Starting at the top bracket, unary phrasal chains are descended first (``(ROOT (S ...))`` -> ``S``);
    the labels of that node's children follow in surface order, a preterminal giving its tag:
    ``(S (NP ...) (VP ...) (. .))`` -> ``("NP", "VP", ".")``.
    """
    node = constituency_tree(sentence)
    while len(node.children) == 1 and not node.children[0].is_preterminal() and not node.children[0].is_leaf():
        node = node.children[0]
    return tuple(child.label for child in node.children)


def constituency_depth(sentence: Sentence) -> int:
    """Depth of the constituency tree: edges from the top bracket down to the deepest word (stanza's
    ``Tree.depth``; ``(S (NP (DT the) (NN dog)) (VP (VBZ barks)))`` has depth 3)."""
    return int(constituency_tree(sentence).depth())

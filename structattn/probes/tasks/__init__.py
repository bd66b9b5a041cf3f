"""Built-in tasks; importing this package registers them."""

from structattn.probes.tasks import (  # noqa: F401  (registration)
    agreement,
    depth_tagging,
    doc_agreement,
    grammar_depth,
    head_selection,
    listops,
    ssan_bigram_shift,
    ssan_top_constituents,
    ssan_tree_depth,
    ssan_word_reordering,
)

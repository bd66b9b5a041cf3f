"""The built-in tasks: importing this module registers them (``get_task`` and ``task_names`` do so first)."""

from structattn.tasks import (  # noqa: F401  (registration)
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
    translation,
    translation_multi30k,
    upos_tagging,
)

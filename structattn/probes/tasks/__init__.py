"""Built-in tasks; importing this package registers them."""

from structattn.probes.tasks import (  # noqa: F401  (registration)
    depth_tagging,
    head_selection,
    ssan_bigram_shift,
    ssan_top_constituents,
    ssan_tree_depth,
    ssan_word_reordering,
)

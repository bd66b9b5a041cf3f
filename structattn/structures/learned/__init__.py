"""A parser-free structure: tree distances predicted from words, decoded into a tree (issue 6).

A :class:`DistancePredictor` (BiLSTM over word features + a structural probe) is trained on parser or gold
trees with the structural-probe L1 loss (:func:`train_predictor`), saved to one file, and read back by the
``learned_dependency`` provider, whose minimum-spanning-tree output has the fields of ``dependency``::

    import structattn.structures.learned          # registers "learned_dependency"
    from structattn.structures import get_provider
    model, history = train_predictor(train_sentences, dev=dev_sentences)
    model.save("predictor.pt")
    tree = get_provider("learned_dependency", path="predictor.pt")(Sentence(["The", "cat", "sat", "."]))

It lives in ``structures/`` (not ``probes/``): it reads words, not encoder states, and imports nothing from
``attention``, ``encoders`` or ``probes``. Importing this package registers the provider; a gin config does
it with the line ``import structattn.structures.learned``.
"""

from structattn.structures.learned.decode import mst_heads, tree_uuas, undirected_edges
from structattn.structures.learned.predictor import DistancePredictor, PredictorConfig
from structattn.structures.learned.provider import LearnedDependencyProvider
from structattn.structures.learned.training import evaluate_uuas, predicted_heads, probe_loss, train_predictor
from structattn.structures.learned.words import FEATURES, WordFeatures, word_features

__all__ = [
    "FEATURES",
    "DistancePredictor",
    "LearnedDependencyProvider",
    "PredictorConfig",
    "WordFeatures",
    "evaluate_uuas",
    "mst_heads",
    "predicted_heads",
    "probe_loss",
    "train_predictor",
    "tree_uuas",
    "undirected_edges",
    "word_features",
]

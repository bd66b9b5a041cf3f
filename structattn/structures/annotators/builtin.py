"""The built-in parsers (spaCy, stanza). Importing this module registers them; the registry
(``structattn.structures.annotators.base.ANNOTATORS``) imports it before its first lookup. The parsers
themselves (spacy, stanza) are imported only when a model is first used."""

from structattn.structures.annotators import spacy_annotator, stanza_annotator  # noqa: F401  (registration)

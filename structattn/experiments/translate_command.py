"""``structattn translate CHECKPOINT INPUT --out OUT [--beam 5]``: translate a file with a trained model.

INPUT is raw text (one sentence per line) or CoNLL-U (``.conllu``, or ``--format conllu``). Raw text is
tokenised and, when the model's encoder plan reads a structure, parsed with the parser recorded with the model
(``meta["parser"]``, a spaCy model; ``--parser`` overrides it); a model without a recorded parser (the
synthetic task: its trees are gold) reads whitespace-tokenised text when its plan needs no structure, and
CoNLL-U otherwise. Translations are written one per line, in input order.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from structattn import plugins
from structattn.command_line import check_not_an_input
from structattn.experiments.spec import make_providers
from structattn.encoders import EncoderConfig, Vocab
from structattn.progress import progress_disabled
from structattn.seq2seq import PairExample, Seq2SeqModel, Seq2SeqOptions, build_seq2seq, translate_examples
from structattn.seq2seq.pud import one_tree
from structattn.seq2seq.subword import vocab_from_dict
from structattn.seq2seq.metrics import detokenize_words
from structattn.seq2seq.vocab import detokenize, special_ids
from structattn.structures import Sentence, read_conllu
from structattn.structures.providers.base import StructureProvider
from structattn.training import load_checkpoint
from structattn.training.data import encode_inputs


@dataclass
class Translator:
    """A translation checkpoint ready to translate: the model, its ``meta``, its structure providers, and the
    source and target vocabularies it was trained with (``source``: a :class:`Vocab`, or for an HF encoder
    (meta kind ``"hf_translation"``) its tokenizer as an :class:`~structattn.experiments.hf_models.HFVocab`)."""

    model: Seq2SeqModel
    meta: dict[str, Any]
    providers: dict[str, StructureProvider]
    source: Any
    target: Vocab


def load_translator(path: str | Path) -> Translator:
    """The model, ``meta``, providers and vocabularies of a translation checkpoint (each built once).

    Raises:
        ValueError: the checkpoint holds no translation model.
    """
    return translator_from(load_checkpoint(path), repr(str(path)))


def translator_from(data: Mapping[str, Any], where: str = "the checkpoint") -> Translator:
    """:func:`load_translator` for a checkpoint already loaded (``where`` names it in errors); the vocabularies
    are rebuilt with :func:`~structattn.seq2seq.subword.vocab_from_dict` (a trained subword vocabulary or a
    plain one, whichever the checkpoint holds); an HF encoder's source side is its tokenizer
    (:func:`~structattn.experiments.hf_models.saved_vocab`: the installed model's own, or the stored WordPiece
    of a ``config=`` model)."""
    meta = data.get("meta") or {}
    if meta.get("kind") not in ("translation", "hf_translation"):
        raise ValueError(f"{where} is not a translation checkpoint (meta kind {meta.get('kind')!r})")
    plugins.replay(meta.get("plugins"), recorded_by=f"run {meta.get('run_id', '?')}")
    providers = make_providers(meta["structures"], meta["structures"])
    target = vocab_from_dict(meta["target_vocab"])
    if meta["kind"] == "hf_translation":  # an HF encoder under our decoder: its own tokenizer, stored or installed
        from structattn.experiments.hf_models import saved_vocab
        from structattn.experiments.runners.hf_seq2seq import build_hf_translation_model
        from structattn.hf.loading import transformers_quiet

        with transformers_quiet():
            source: Any = saved_vocab(meta["plan"], meta["vocab"].get("tokenizer"))
            model = build_hf_translation_model(meta["plan"], len(source), len(target), EncoderConfig(**meta["model"]),
                                               Seq2SeqOptions(**meta["seq2seq"]), providers)
    else:
        source = vocab_from_dict(meta["vocab"])
        bos, eos = special_ids(target)
        model = build_seq2seq(EncoderConfig(**meta["model"]), Seq2SeqOptions(**meta["seq2seq"]), meta["plan"],
                              len(source), len(target), {n: p.provides for n, p in providers.items()}, bos, eos)
    model.load_state_dict(data["model"])
    return Translator(model.eval(), meta, providers, source, target)


def read_input(path: str | Path, fmt: str, parser: str | None, needs_trees: bool) -> list[Sentence]:
    """Sentences of INPUT: CoNLL-U as it is; raw text lines parsed (or split on whitespace)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such input file: {str(path)!r}")
    if fmt == "conllu" or (fmt == "auto" and path.suffix == ".conllu"):
        return read_conllu(path)
    lines = [(k, " ".join(line.split())) for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]
    lines = [(k, text) for k, text in lines if text]
    if parser is None:
        if needs_trees:
            raise ValueError("the model's encoder reads a tree but records no parser: give CoNLL-U input, or "
                             "name a spaCy model with --parser")
        return [Sentence(words=text.split(), id=f"{path.name}:{k}") for k, text in lines]
    from structattn.structures.annotators.spacy_annotator import SpacyAnnotator

    parsed = SpacyAnnotator(parser).parse([text for _, text in lines])
    return [one_tree(parts, f"{path.name}:{k}") for parts, (k, _) in zip(parsed, lines)]


def encode(sentences: Sequence[Sentence], vocab: Vocab, providers: dict[str, StructureProvider],
           quiet: bool = True) -> list[PairExample]:
    """Token ids and structures of ``sentences``, encoded as training encodes sources
    (:func:`~structattn.training.data.encode_inputs`: structures aligned to subword tokens, position-based
    ones built on the tokens); no targets."""
    encoded = encode_inputs(sentences, [s.words for s in sentences], vocab, providers, quiet=quiet)
    return [PairExample(ids, structures, [], s.id) for (ids, _, structures), s in zip(encoded, sentences)]


def run(args: argparse.Namespace) -> int:
    """Translate the input named by parsed ``args``."""
    if args.beam is not None and args.beam < 1:
        raise ValueError(f"--beam must be >= 1, got {args.beam}")
    check_not_an_input(args.out, [args.input, args.checkpoint])
    loaded = load_translator(args.checkpoint)
    needs_trees = any(p.requires for p in loaded.providers.values())  # a window needs no parse
    sentences = read_input(args.input, args.format, args.parser or loaded.meta.get("parser"), needs_trees)
    quiet = progress_disabled(args.quiet)
    ids = translate_examples(loaded.model, encode(sentences, loaded.source, loaded.providers, quiet=quiet),
                             Seq2SeqOptions(**loaded.meta["seq2seq"]), beam=args.beam, batch_size=args.batch_size,
                             quiet=quiet)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    language = loaded.meta.get("target_language")  # a run scored on raw text (Multi30k): write text, not tokens
    lines = [detokenize(h, loaded.target) for h in ids]
    if language:
        lines = [detokenize_words(line.split(), language) for line in lines]
    out.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    print(f"translated {len(ids)} sentences -> {out}")
    return 0

"""Encoder-decoder translation: a structattn encoder (any plan) and a pre-LN decoder (causal self-attention,
cross-attention), greedy and cached beam search, BLEU / chrF, and translation data with gold trees."""

from structattn.seq2seq.batch import Seq2SeqBatch
from structattn.seq2seq.builder import build_seq2seq
from structattn.seq2seq.cache import DecoderCache, LayerCache
from structattn.seq2seq.collate import PairExample, pair_batch, source_batch
from structattn.seq2seq.config import Seq2SeqOptions
from structattn.seq2seq.decoder import Decoder
from structattn.seq2seq.layer import DecoderLayer
from structattn.seq2seq.model import Seq2SeqModel
from structattn.seq2seq.search import beam_search, greedy_search, length_penalty
from structattn.seq2seq.steppers import CachedStepper, RecomputeStepper
from structattn.seq2seq.translate import translate_examples

__all__ = [
    "CachedStepper",
    "Decoder",
    "DecoderCache",
    "DecoderLayer",
    "LayerCache",
    "PairExample",
    "RecomputeStepper",
    "Seq2SeqBatch",
    "Seq2SeqModel",
    "Seq2SeqOptions",
    "beam_search",
    "build_seq2seq",
    "greedy_search",
    "length_penalty",
    "pair_batch",
    "source_batch",
    "translate_examples",
]

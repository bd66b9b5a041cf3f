"""Wiring a :class:`Seq2SeqModel` from encoder sizes, the seq2seq options and the plan."""

from __future__ import annotations

from typing import Mapping

from torch import nn

from structattn.encoders.builder import build_encoder
from structattn.encoders.config import EncoderConfig
from structattn.encoders.positions import make_positions
from structattn.seq2seq.config import Seq2SeqOptions
from structattn.seq2seq.decoder import Decoder
from structattn.seq2seq.layer import DecoderLayer
from structattn.seq2seq.model import Seq2SeqModel


def build_seq2seq(config: EncoderConfig, options: Seq2SeqOptions, plan: str, source_vocab_size: int,
                  target_vocab_size: int, structure_fields: Mapping[str, frozenset[str] | set[str]],
                  bos_id: int, eos_id: int) -> Seq2SeqModel:
    """Build encoder (plan checked against the structures' fields) and decoder.

    With ``options.shared_vocab`` the two vocabulary sizes must agree and encoder and decoder share one
    embedding; with ``tie_embeddings`` too, the output projection is that same matrix (all three tied).

    Raises:
        ValueError: as :func:`build_encoder`, or shared vocabularies of different sizes.
    """
    if options.shared_vocab and source_vocab_size != target_vocab_size:
        raise ValueError(f"shared_vocab needs one vocabulary, got sizes {source_vocab_size} and {target_vocab_size}")
    encoder = build_encoder(config, plan, source_vocab_size, structure_fields)
    if options.shared_vocab:
        embedding = encoder.embedding
    else:
        embedding = nn.Embedding(target_vocab_size, config.d_model, padding_idx=0)
        nn.init.normal_(embedding.weight, std=config.d_model**-0.5)
    depth = options.decoder_layers or config.num_layers
    layers = [DecoderLayer(config.d_model, config.num_heads, config.ffn_dim, config.dropout) for _ in range(depth)]
    positions = make_positions(config.positions, config.d_model, config.max_len)
    decoder = Decoder(embedding, positions, layers, config.dropout, options.tie_embeddings)
    return Seq2SeqModel(encoder, decoder, bos_id, eos_id)

"""Structured Transformer encoders: per-layer attention plans, positions, task heads, vocabularies."""

from structattn.encoders.batch import Batch
from structattn.encoders.builder import build_encoder
from structattn.calls import CallSpec, parse_call
from structattn.encoders.config import EncoderConfig
from structattn.encoders.dropout import Dropout
from structattn.encoders.encoder import Encoder, EncoderOutput
from structattn.encoders.heads import HEAD_KINDS, PairScorer, SentenceClassifier, TokenTagger, make_head
from structattn.encoders.layer import EncoderLayer
from structattn.encoders.model import TaskModel
from structattn.encoders.plan import HeadGroup, parse_plan
from structattn.encoders.positions import LearnedPositions, SinusoidalPositions, make_positions
from structattn.encoders.self_attention import StructuredSelfAttention
from structattn.encoders.vocab import ChunkSplitter, Vocab

__all__ = [
    "HEAD_KINDS",
    "Batch",
    "CallSpec",
    "ChunkSplitter",
    "Dropout",
    "Encoder",
    "EncoderConfig",
    "EncoderLayer",
    "EncoderOutput",
    "HeadGroup",
    "LearnedPositions",
    "PairScorer",
    "SentenceClassifier",
    "SinusoidalPositions",
    "StructuredSelfAttention",
    "TaskModel",
    "TokenTagger",
    "Vocab",
    "build_encoder",
    "make_head",
    "make_positions",
    "parse_call",
    "parse_plan",
]

"""Training: bucketed batches, warmup + inverse-sqrt schedule, early stopping, checkpoints, data parallel."""

from structattn.training.batching import LengthBucketSampler
from structattn.training.checkpoints import load_checkpoint, save_checkpoint
from structattn.training.config import TrainConfig
from structattn.training.data import Example, encode_items, make_batch
from structattn.training.distributed import Distributed, setup, teardown
from structattn.training.evaluation import evaluate, item_accuracy, task_loss
from structattn.training.schedule import make_scheduler, warmup_inverse_sqrt
from structattn.training.seeding import seed_everything
from structattn.training.trainer import Trainer, TrainResult

__all__ = [
    "Distributed",
    "Example",
    "LengthBucketSampler",
    "TrainConfig",
    "TrainResult",
    "Trainer",
    "encode_items",
    "evaluate",
    "item_accuracy",
    "load_checkpoint",
    "make_batch",
    "make_scheduler",
    "save_checkpoint",
    "seed_everything",
    "setup",
    "task_loss",
    "teardown",
    "warmup_inverse_sqrt",
]

"""Data-parallel processes through ``torch.distributed`` (``torchrun``: gloo on CPU, NCCL on GPUs)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    """Where this process stands: ``rank`` of ``world_size`` processes, and its device."""

    rank: int = 0
    world_size: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes files and shows progress bars."""
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def setup(device: str = "auto") -> Distributed:
    """Join the process group described by ``torchrun``'s environment (``RANK``, ``WORLD_SIZE``, ...).

    A single process (no ``WORLD_SIZE`` or ``WORLD_SIZE=1``) gets ``Distributed()`` on ``device``. With CUDA
    each process takes ``cuda:LOCAL_RANK`` and the NCCL backend; on CPU the gloo backend.

    Args:
        device: ``"auto"`` (CUDA when available), ``"cpu"`` or ``"cuda"``.
    """
    use_cuda = torch.cuda.is_available() if device == "auto" else device.startswith("cuda")
    if use_cuda and not torch.cuda.is_available():
        raise ValueError("device 'cuda' asked for, but torch sees no CUDA device")
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Distributed(device=torch.device("cuda" if use_cuda else "cpu"))
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if use_cuda:
        torch.cuda.set_device(local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    return Distributed(rank, world_size, torch.device(f"cuda:{local_rank}" if use_cuda else "cpu"))


def teardown() -> None:
    """Leave the process group, if this process joined one.

    A barrier first drains the gloo worker threads: a worker still releasing the tensors of a finished
    all-reduce needs the GIL, and the process group's destructor (run with the GIL held when the last DDP
    reducer goes away) waits for the workers, which deadlocked now and then at the end of a run.
    """
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def all_reduce_sum(values: torch.Tensor, context: Distributed) -> torch.Tensor:
    """Sum of ``values`` over all processes (``values`` itself when alone)."""
    if not context.enabled:
        return values
    out = values.clone().to(context.device)
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out.cpu()


def barrier(context: Distributed) -> None:
    """Wait until every process gets here (nothing when alone), e.g. so that all have checked an output
    folder before the main process writes into it."""
    if context.enabled and dist.is_initialized():
        dist.barrier()

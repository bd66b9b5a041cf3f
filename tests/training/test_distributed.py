"""Data-parallel training with two gloo processes (torch.multiprocessing spawn, as torchrun would start them)."""

import os
import socket
import time

import torch
import torch.multiprocessing as mp

from structattn.training import TrainConfig, Trainer, seed_everything, setup, teardown
from tests.training.util import encoded, model


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world_size),
                      LOCAL_RANK=str(rank))
    context = setup("cpu")
    try:
        task, vocab, examples = encoded()
        seed_everything(0)  # same initial weights on both ranks (DDP also broadcasts rank 0's)
        net = model(len(vocab))
        initial = {k: v.clone() for k, v in net.state_dict().items()}
        trainer = Trainer(net, TrainConfig(lr=3e-3, max_steps=8, batch_size=4, eval_every=4, warmup_steps=2, patience=0),
                          task.output, seed=0, context=context, quiet=True)
        seed_everything(100 + rank)  # different dropout noise per rank: only DDP keeps the weights equal
        result = trainer.fit(examples["train"], examples["dev"])
        torch.save({"initial": initial, "final": trainer.model.state_dict(), "history": result.history,
                    "rank": context.rank, "world": context.world_size}, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        teardown()


def test_two_gloo_processes_end_with_identical_parameters(tmp_path):
    processes = mp.spawn(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=False)
    deadline = time.monotonic() + 300
    while not processes.join(timeout=5):
        if time.monotonic() > deadline:
            for p in processes.processes:
                p.kill()
            raise AssertionError("the two gloo processes did not finish within 300 s (hang in training or teardown)")
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]
    assert [(r["rank"], r["world"]) for r in ranks] == [(0, 2), (1, 2)]
    changed = False
    for name, value in ranks[0]["final"].items():
        assert torch.equal(value, ranks[1]["final"][name]), name
        changed |= not torch.equal(value, ranks[0]["initial"][name])
    assert changed
    assert ranks[0]["history"] == ranks[1]["history"]  # dev scores and train loss are all-reduced

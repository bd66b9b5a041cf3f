"""Linear warmup then inverse-square-root decay."""

import math

import torch

from structattn.training import make_scheduler, warmup_inverse_sqrt


def test_shape_of_the_schedule():
    w = 4
    values = [warmup_inverse_sqrt(step, w) for step in range(12)]
    assert values[:4] == [0.25, 0.5, 0.75, 1.0]  # linear up to the peak at step w - 1
    assert all(math.isclose(values[s], math.sqrt(w / (s + 1))) for s in range(3, 12))
    assert all(a > b for a, b in zip(values[3:], values[4:]))
    assert warmup_inverse_sqrt(0, 0) == 1.0 and math.isclose(warmup_inverse_sqrt(3, 0), 0.5)


def test_scheduler_drives_the_optimizer():
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.AdamW([param], lr=0.1)
    scheduler = make_scheduler(optimizer, warmup_steps=2)
    seen = []
    for _ in range(4):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert [round(x, 6) for x in seen] == [0.05, 0.1, round(0.1 * math.sqrt(2 / 3), 6), round(0.1 * math.sqrt(2 / 4), 6)]

"""A checkpoint write that is cut short (an interrupt, a full disk) leaves the previous ``last.pt`` and no
temporary file; a finished write reaches the disk before it replaces the old file (a machine that crashes right
after the rename must not leave an empty ``last.pt`` for ``--resume``)."""

from __future__ import annotations

import os

import pytest
import torch

from structattn.training import load_checkpoint, save_checkpoint


def test_an_interrupted_write_leaves_the_old_checkpoint_and_no_temporary_file(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "last.pt", model={"w": torch.ones(3)}, config="step = 1")
    real_save = torch.save

    def cut_short(obj, target, *args, **kwargs):
        real_save(obj, target, *args, **kwargs)
        raise KeyboardInterrupt  # the interrupt arrives once part of the file is written

    monkeypatch.setattr(torch, "save", cut_short)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, model={"w": torch.zeros(3)}, config="step = 2")
    assert load_checkpoint(path)["config"] == "step = 1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]


def test_the_new_file_is_on_disk_before_it_replaces_the_old_one(tmp_path, monkeypatch):
    path = save_checkpoint(tmp_path / "last.pt", model={"w": torch.ones(3)}, config="step = 1")
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append((os.fstat(fd).st_size, load_checkpoint(path)["config"]))  # the old file is still in place
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    save_checkpoint(path, model={"w": torch.zeros(3)}, config="step = 2")
    assert len(synced) == 1 and synced[0][0] > 0 and synced[0][1] == "step = 1"
    assert load_checkpoint(path)["config"] == "step = 2"

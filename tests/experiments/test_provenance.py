"""Provenance: versions, commit, CPU, threads, command, data checksum and plugins in every record and folder;
eval warns when the data changed since training."""

import json
import platform
import subprocess
from pathlib import Path

import pytest
import torch

from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, evaluate_checkpoint, make_task, run_comparison
from structattn.experiments.provenance import data_checksum, environment, git_commit
from structattn.structures import Sentence
from structattn.training import TrainConfig, load_checkpoint

TASK = "depth_tagging(limit=16, max_depth=3)"
SETUP = Setup(EncoderConfig(d_model=8, num_layers=1, num_heads=2, ffn_dim=8, dropout=0.0),
              TrainConfig(lr=3e-3, warmup_steps=1, max_steps=2, batch_size=8, eval_every=2, patience=0))
ENVIRONMENT = {"structattn_version", "git_commit", "torch_version", "python_version", "torch_threads", "cpu",
               "hostname", "command", "plugins"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("prov")
    run_comparison(Comparison.declare({"depth": TASK}, ["full"], [0], SETUP), out, quiet=True, plots=False)
    return out


def test_every_record_and_the_folder_carry_provenance(folder):
    record = json.loads((folder / "runs" / "000_depth_full_s0.json").read_text())
    prov = record["provenance"]
    assert ENVIRONMENT | {"start_time", "wall_time_s", "data"} <= set(prov)
    assert prov["torch_version"] == torch.__version__ and prov["python_version"] == platform.python_version()
    assert isinstance(prov["torch_threads"], int) and prov["torch_threads"] >= 1 and prov["cpu"] and prov["wall_time_s"] > 0
    items = make_task(TASK).splits()
    assert prov["data"] == {"task": TASK, "items": {k: len(v) for k, v in items.items()}, "sha256": data_checksum(items)}
    whole = json.loads((folder / "provenance.json").read_text())
    assert ENVIRONMENT | {"start_time", "wall_time_s"} <= set(whole) and whole["finished"] is True
    assert whole["data_sha256"] == {"depth": data_checksum(items)}
    meta = load_checkpoint(folder / "runs" / "000_depth_full_s0" / "checkpoints" / "best.pt")["meta"]
    assert meta["data_sha256"] == data_checksum(items) and meta["plugins"] == []


def test_git_commit_of_this_checkout_and_outside_git(tmp_path):
    package = Path(__file__).resolve().parents[2] / "structattn"
    head = subprocess.run(["git", "-C", str(package), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("the package is not in a git checkout here (an installed copy)")
    assert git_commit().removesuffix("-dirty") == head.stdout.strip()
    (tmp_path / "__init__.py").write_text("")
    assert git_commit.__wrapped__(str(tmp_path)) == "unknown"
    assert environment()["git_commit"] == git_commit()


def test_data_checksum_sees_every_annotation():
    def item(heads=(1, -1, 1), words=("a", "b", "c"), deprels=None):
        return Sentence(words=list(words), heads=list(heads), deprels=deprels, id="s1")

    base = data_checksum({"train": [item()], "test": [item()]})
    assert base == data_checksum({"test": [item()], "train": [item()]})  # split order does not matter
    assert base != data_checksum({"train": [item(words=("a", "b", "d"))], "test": [item()]})
    assert base != data_checksum({"train": [item(heads=(-1, 0, 1))], "test": [item()]})
    assert base != data_checksum({"train": [item(deprels=["x", "root", "y"])], "test": [item()]})
    assert base != data_checksum({"train": [item()], "dev": [item()]})


def test_eval_warns_when_the_data_changed(folder, capsys):
    data = load_checkpoint(folder / "runs" / "000_depth_full_s0" / "checkpoints" / "best.pt")
    evaluate_checkpoint(data, "test", quiet=True)
    assert capsys.readouterr().err == ""
    changed = {**data, "meta": {**data["meta"], "data_sha256": "0" * 64}}
    evaluate_checkpoint(changed, "test", quiet=True)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "warning: the data of task" in err
    assert "0" * 16 in err and data["meta"]["data_sha256"][:16] in err

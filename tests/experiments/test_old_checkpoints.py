"""Checkpoints written before the runners existed (commit 0778697, the last before experiments/ was split into
one runner per kind) still load, evaluate and keep their run ids.

The old package is taken from git history (``git archive``) and run in a subprocess, so no binary checkpoint is
kept in the repository; outside a git checkout with that history the test is skipped, saying so.
"""

import json
import subprocess
import sys
import tarfile
import io
from pathlib import Path

import pytest

from structattn.experiments import evaluate_checkpoint
from structattn.training import load_checkpoint

ROOT = Path(__file__).resolve().parents[2]
BEFORE_RUNNERS = "0778697"
WRITE = """
import json, sys
from pathlib import Path
import structattn
assert structattn.__file__.startswith(sys.argv[1]), structattn.__file__
from structattn.encoders import EncoderConfig
from structattn.experiments import RunSpec, Setup, execute, make_providers, make_task, prepare_data
from structattn.experiments.translation import prepare_translation
from structattn.training import TrainConfig
out = Path(sys.argv[2])
setup = Setup(EncoderConfig(d_model=16, num_layers=2, num_heads=2, ffn_dim=24, dropout=0.0),
              TrainConfig(batch_size=8, max_steps=4, eval_every=2, patience=5, warmup_steps=2))
providers = make_providers({"dependency"}, {})
runs = {}
for name, spec, prepare in [("enc", "depth_tagging(limit=20)", prepare_data),
                            ("tr", "translation_synthetic(train=30, dev=6, test=6)", prepare_translation)]:
    data = prepare(make_task(spec), providers, {}, quiet=True)
    record = execute(RunSpec(0, name, spec, "soft", "soft_bias(dependency)@0; full", 0), setup, data,
                     out_dir=out / name, quiet=True)
    runs[name] = {"run_id": record["run_id"], "metrics": record["metrics"]}
(out / "runs.json").write_text(json.dumps(runs))
"""


@pytest.fixture(scope="module")
def old_runs(tmp_path_factory):
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", BEFORE_RUNNERS, "structattn"], capture_output=True)
    if archive.returncode != 0:
        pytest.skip(f"commit {BEFORE_RUNNERS} is not in this checkout's git history (a shallow or installed copy)")
    old = tmp_path_factory.mktemp("old_code")
    tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(old, filter="data")
    out = tmp_path_factory.mktemp("old_runs")
    done = subprocess.run([sys.executable, "-c", WRITE, str(old), str(out)], cwd=old, capture_output=True, text=True,
                          env={"PYTHONPATH": str(old), "PATH": "/usr/bin:/bin", "CI": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads((out / "runs.json").read_text())


@pytest.mark.parametrize("name", ["enc", "tr"])
def test_a_checkpoint_of_the_code_before_runners_loads_and_scores_the_same(old_runs, name):
    out, runs = old_runs
    checkpoint = load_checkpoint(out / name / "checkpoints" / "best.pt")
    assert checkpoint["meta"]["run_id"] == runs[name]["run_id"] == f"000_{name}_soft_s0"
    scores = evaluate_checkpoint(checkpoint, "test", quiet=True)
    recorded = runs[name]["metrics"]
    assert scores["accuracy"] == pytest.approx(recorded["test_accuracy"], abs=1e-6)
    if name == "tr":
        assert scores["bleu"] == pytest.approx(recorded["bleu"], abs=1e-6)

"""Used output folders are refused unless asked (--resume / --overwrite); merge rejects stray records."""

import json
import shutil

import pytest

import structattn.experiments.compare as compare_module
from structattn.encoders import EncoderConfig
from structattn.experiments import Comparison, Setup, merge, run_comparison
from structattn.experiments.outputs import check_output_folder
from structattn.training import TrainConfig

TASK = "depth_tagging(limit=24, max_depth=3)"
SETUP = Setup(EncoderConfig(d_model=8, num_layers=1, num_heads=2, ffn_dim=8, dropout=0.0),
              TrainConfig(lr=3e-3, warmup_steps=1, max_steps=2, batch_size=8, eval_every=2, patience=0))


def comparison(seeds=(0,)):
    return Comparison.declare({"depth": TASK}, {"full": "full", "mask": "hard_mask(dependency)"}, list(seeds), SETUP)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("done")
    run_comparison(comparison(), out, quiet=True, plots=False)
    return out


@pytest.fixture
def counted(monkeypatch):
    """Count the runs that are actually trained."""
    trained = []
    real = compare_module.execute

    def execute(spec, *args, **kwargs):
        trained.append((spec.run_id, kwargs.get("resume")))
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(compare_module, "execute", execute)
    return trained


def copy(finished, tmp_path, name="copy"):
    return shutil.copytree(finished, tmp_path / name)


def test_a_used_folder_is_refused(finished, tmp_path, counted):
    out = copy(finished, tmp_path)
    before = (out / "results.csv").read_text()
    with pytest.raises(ValueError, match=r"already holds structattn outputs \(comparison.json, provenance.json, config.gin, results.csv, "
                                         r"significance.csv, results.md, runs\); pass --resume .* --overwrite"):
        run_comparison(comparison(), out, quiet=True, plots=False)
    assert not counted and (out / "results.csv").read_text() == before
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("mine")  # not a structattn output: the folder is not "used"
    assert check_output_folder(tmp_path / "empty", ["runs"]) == []


def test_overwrite_removes_the_old_outputs_and_says_so(finished, tmp_path, counted, capsys):
    out = copy(finished, tmp_path)
    stray = out / "runs" / "009_depth_full_s3.json"
    stray.write_text(json.dumps({"index": 9, "run_id": "009_depth_full_s3", "seed": 3, "metrics": {}}))
    (out / "notes.txt").write_text("not ours")
    records = run_comparison(comparison(), out, quiet=True, plots=False, mode="overwrite")
    err = capsys.readouterr().err
    assert err.startswith("structattn compare: --overwrite: removing ") and f"{out / 'runs'}" in err
    assert len(counted) == 2 and [r["index"] for r in records] == [0, 1]
    assert not stray.exists() and (out / "notes.txt").read_text() == "not ours"
    assert sorted(p.name for p in (out / "runs").glob("*.json")) == [f"{r['run_id']}.json" for r in records]


def test_resume_keeps_finished_runs_and_continues_the_rest(finished, tmp_path, counted):
    out = copy(finished, tmp_path)
    kept = json.loads((out / "runs" / "000_depth_full_s0.json").read_text())
    (out / "runs" / "001_depth_mask_s0.json").unlink()  # run 1 was interrupted: only its checkpoints remain
    records = run_comparison(comparison(), out, quiet=True, plots=False, mode="resume")
    assert [(run_id, resume.name) for run_id, resume in counted] == [("001_depth_mask_s0", "last.pt")]
    assert records[0] == kept and records[1]["run_id"] == "001_depth_mask_s0"
    # a folder of another comparison cannot be resumed
    with pytest.raises(ValueError, match="--resume: .* holds another comparison"):
        run_comparison(comparison(seeds=(0, 1)), out, quiet=True, plots=False, mode="resume")


def test_resume_rejects_a_stray_record_naming_it(finished, tmp_path, counted):
    out = copy(finished, tmp_path)
    record = json.loads((out / "runs" / "000_depth_full_s0.json").read_text())
    stray = out / "runs" / "002_depth_full_s1.json"
    stray.write_text(json.dumps({**record, "index": 2, "run_id": "002_depth_full_s1", "seed": 1}))
    with pytest.raises(ValueError, match=f"{stray.name}' does not belong to this comparison: run index 2"):
        run_comparison(comparison(), out, quiet=True, plots=False, mode="resume")
    assert not counted


@pytest.mark.parametrize("change, message", [
    ({"index": 5, "run_id": "005_depth_full_s0"}, "run index 5 is not one of this folder's runs"),
    ({"seed": 3}, r"seed 3 is not among the declared seeds \[0\]"),
    ({"fingerprint": "f" * 16}, "it belongs to comparison ffff"),
    ({"run_id": "000_depth_other_s0"}, "run 0 is '000_depth_full_s0' in comparison.json"),
])
def test_merge_rejects_strays_naming_the_file(finished, tmp_path, change, message):
    out = copy(finished, tmp_path)
    record = json.loads((out / "runs" / "000_depth_full_s0.json").read_text())
    name = change.get("run_id", "000_depth_full_s0")
    (out / "runs" / "000_depth_full_s0.json").unlink()
    (out / "runs" / f"{name}.json").write_text(json.dumps({**record, **change}))
    with pytest.raises(ValueError, match=f"{name}.json' does not belong to this comparison: {message}"):
        merge([out], tmp_path / "merged", plots=False)


def test_merge_checks_its_own_output_folder(finished, tmp_path):
    with pytest.raises(ValueError, match="is one of the directories being merged"):
        merge([finished], finished, plots=False)
    out = copy(finished, tmp_path, "other")
    with pytest.raises(ValueError, match="run 0 is in both"):
        merge([finished, out], tmp_path / "m", plots=False)
    merge([finished], tmp_path / "m2", plots=False)
    with pytest.raises(ValueError, match="already holds structattn outputs .*; pass --overwrite to replace them"):
        merge([finished], tmp_path / "m2", plots=False)
    assert len(merge([finished], tmp_path / "m2", plots=False, mode="overwrite")) == 2


def test_a_file_as_output_folder_fails_before_training(tmp_path, counted):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="--out .*f' is a file, not a folder"):
        run_comparison(comparison(), tmp_path / "f", quiet=True, plots=False)
    assert not counted

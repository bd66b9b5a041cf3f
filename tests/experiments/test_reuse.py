"""``compare --reuse FOLDER`` / ``compare(reuse=...)``: a run identical to a finished run of another comparison
(same run key: task spec, plan, seed, setup; labels aside) is copied in, relabelled, instead of being trained;
mismatches are refused naming both files, before anything is trained."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import pytest

from structattn import api, cli
from structattn.experiments import Comparison, gin_setup, merge
from structattn.experiments.keep import keep
from structattn.experiments.record_checks import write_record_file
from structattn.experiments.records import load_records
from structattn.experiments.reuse import add_run_keys

ROOT = Path(__file__).resolve().parents[2]
BASE = """
include 'runs/defaults.gin'
include 'models/tiny.gin'
training.max_steps = 6
training.eval_every = 3
training.warmup_steps = 1
compare.seeds = [0]
"""
X = BASE + """
compare.tasks = {'depth': 'depth_tagging(limit=20)'}
compare.settings = {'full': 'full', 'soft': 'soft_bias(dependency)'}
"""
# X's 'full' run under other labels, beside a run X does not have
Y = BASE + """
compare.tasks = {'tree depth': 'depth_tagging(limit=20)'}
compare.settings = {'baseline': 'full', 'mask': 'hard_mask(dependency)'}
"""
# both of X's runs under other labels: nothing to train
Y_ALL = BASE + """
compare.tasks = {'tree depth': 'depth_tagging(limit=20)'}
compare.settings = {'baseline': 'full', 'bias': 'soft_bias(dependency)'}
"""
X_FULL = "000_depth_full_s0"


def run(config, out, **options):
    return api.compare(config, out, quiet=True, plots=False, threads=1, **options)


@pytest.fixture(scope="module")
def x(tmp_path_factory):
    out = tmp_path_factory.mktemp("x") / "out"
    run(X, out)
    return out


def record(folder: Path, run_id: str) -> dict:
    return json.loads((folder / "runs" / f"{run_id}.json").read_text())


def edited_copy(x: Path, dest: Path, run_id: str, change) -> Path:
    """A copy of ``x`` whose record ``run_id`` is changed and stamped again."""
    shutil.copytree(x, dest)
    path = dest / "runs" / f"{run_id}.json"
    edited = json.loads(path.read_text())
    change(edited)
    write_record_file(path, edited)
    return path


def test_an_identical_run_is_copied_in_relabelled_and_the_others_are_trained(x, tmp_path, trained, capsys):
    out = tmp_path / "y"
    records = run(Y, out, reuse=[x])
    assert trained == ["001_tree-depth_mask_s0"]
    reused, original = records[0], record(x, X_FULL)
    assert reused == record(out, "000_tree-depth_baseline_s0") | {"checksum": reused["checksum"]}
    for name in ("metrics", "predictions", "history", "run_key", "task", "plan", "seed", "precision", "steps"):
        assert reused[name] == original[name], name
    assert (reused["index"], reused["task_label"], reused["setting"], reused["run_id"]) == (
        0, "tree depth", "baseline", "000_tree-depth_baseline_s0")
    fingerprint = json.loads((out / "comparison.json").read_text())["fingerprint"]
    assert reused["fingerprint"] == records[1]["fingerprint"] == fingerprint != original["fingerprint"]
    assert reused["provenance"]["reused_from"] == {"folder": str(x), "run_id": X_FULL,
                                                   "fingerprint": original["fingerprint"]}
    assert reused["provenance"]["data"] == original["provenance"]["data"]
    assert (out / "runs" / "000_tree-depth_baseline_s0" / "log.jsonl").read_text() == \
        (x / "runs" / X_FULL / "log.jsonl").read_text()
    assert json.loads((out / "provenance.json").read_text())["reused_runs"] == [0]
    assert "| baseline |" in (out / "results.md").read_text() and "| mask |" in (out / "results.md").read_text()
    assert "baseline" in (out / "results.csv").read_text()
    # an ordinary record of this comparison: resumed, kept and merged like any other
    assert [r["run_id"] for r in run(Y, out, mode="resume")] == ["000_tree-depth_baseline_s0", "001_tree-depth_mask_s0"]
    assert trained == ["001_tree-depth_mask_s0"]
    assert json.loads((out / "provenance.json").read_text())["reused_runs"] == [0]
    assert keep(out, tmp_path / "kept")[0]["provenance"]["reused_from"]["run_id"] == X_FULL
    assert [r["metrics"] for r in merge([tmp_path / "kept"], tmp_path / "merged", plots=False)] == \
        [r["metrics"] for r in records]


def test_a_run_whose_setup_differs_is_trained(x, tmp_path, trained):
    tuned = Y_ALL + "compare.training_by_setting = {'baseline': {'lr': 2e-3}}\n"
    records = run(tuned, tmp_path / "y", reuse=[x])
    assert trained == ["000_tree-depth_baseline_s0"]  # another lr: another run; 'bias' is X's 'soft'
    assert "reused_from" not in records[0]["provenance"] and "reused_from" in records[1]["provenance"]
    assert records[0]["run_key"] != record(x, X_FULL)["run_key"]


def test_records_without_a_run_key_never_match(x, tmp_path, trained):
    old = tmp_path / "old"
    edited_copy(x, old, X_FULL, lambda r: r.pop("run_key"))
    run(Y_ALL, tmp_path / "y", reuse=[old])
    assert trained == ["000_tree-depth_baseline_s0"]


@pytest.mark.parametrize("folder, message", [
    ("missing", "--reuse '{folder}': no such folder"),
    ("empty", "--reuse '{folder}': '{folder}' is not a compare output directory"),
])
def test_a_reuse_folder_that_is_not_a_compare_folder_is_refused(tmp_path, trained, folder, message):
    (tmp_path / "empty").mkdir()
    given = tmp_path / folder
    with pytest.raises(ValueError, match=re.escape(message.format(folder=given))):
        run(Y, tmp_path / "y", reuse=[given])
    assert trained == [] and not (tmp_path / "y").exists()


def test_a_match_of_another_precision_is_refused_naming_both(x, tmp_path, trained):
    path = edited_copy(x, tmp_path / "bf16", X_FULL, lambda r: r.update(precision="bf16"))
    target = tmp_path / "y" / "runs" / "000_tree-depth_baseline_s0.json"
    with pytest.raises(ValueError, match=re.escape(f"--reuse: {str(path)!r} trained in bf16, but this comparison's "
                                                   f"training.precision means fp32 here, so it cannot be {str(target)!r}")):
        run(Y, tmp_path / "y", reuse=[tmp_path / "bf16"])
    assert trained == [] and not list((tmp_path / "y").glob("runs/*.json"))


def test_matches_with_different_metrics_are_refused_and_identical_ones_reused(x, tmp_path, trained):
    other = edited_copy(x, tmp_path / "other", X_FULL, lambda r: r["metrics"].update(test_loss=9.0))
    with pytest.raises(ValueError, match=re.escape(f"run 000_tree-depth_baseline_s0 matches both "
                                                   f"{str(x / 'runs' / X_FULL) + '.json'!r} and {str(other)!r}, whose "
                                                   "metrics differ")):
        run(Y_ALL, tmp_path / "y", reuse=[x, tmp_path / "other"])
    shutil.copytree(x, tmp_path / "same")
    records = run(Y_ALL, tmp_path / "y2", reuse=[x, tmp_path / "same"])
    assert trained == [] and {r["provenance"]["reused_from"]["folder"] for r in records} == {str(x)}


def test_matches_trained_on_different_data_are_refused_naming_both(x, tmp_path, trained):
    path = edited_copy(x, tmp_path / "x2", "001_depth_soft_s0",
                       lambda r: r["provenance"]["data"].update(sha256="0" * 64))
    first = str(tmp_path / "x2" / "runs" / X_FULL) + ".json"
    with pytest.raises(ValueError, match=re.escape(f"--reuse: {str(path)!r} trained task 'tree depth' on data sha256 "
                                                   f"0000000000000000 but {first!r}")):
        run(Y_ALL, tmp_path / "y", reuse=[tmp_path / "x2"])
    assert trained == []
    # a run trained now reads data other than its reused neighbour's: refused before it trains
    edited_copy(x, tmp_path / "x3", X_FULL, lambda r: r["provenance"]["data"].update(sha256="0" * 64))
    with pytest.raises(ValueError, match=r"the data of task 'tree depth' changed since the runs kept in .* \(or reused "
                                         r"into it with --reuse\) were trained \(sha256 0000000000000000 then"):
        run(Y, tmp_path / "y3", reuse=[tmp_path / "x3"])
    assert trained == []


def test_reuse_from_a_kept_folder_and_from_a_folder_of_shards(x, tmp_path, trained):
    keep(x, tmp_path / "kept")
    records = run(Y_ALL, tmp_path / "y", reuse=[tmp_path / "kept"])
    assert trained == [] and [r["provenance"]["reused_from"]["folder"] for r in records] == [str(tmp_path / "kept")] * 2
    assert (tmp_path / "y" / "runs" / "001_tree-depth_bias_s0" / "log.jsonl").is_file()
    assert [r["metrics"] for r in load_records(tmp_path / "y")] == [r["metrics"] for r in load_records(x)]
    shutil.copytree(x, tmp_path / "sharded" / "shard-0-of-1")
    records = run(Y_ALL, tmp_path / "y2", reuse=[tmp_path / "sharded"])
    assert {r["provenance"]["reused_from"]["folder"] for r in records} == {str(tmp_path / "sharded" / "shard-0-of-1")}


def test_the_command_passes_reuse_through(x, tmp_path, trained, capsys, monkeypatch):
    monkeypatch.delenv("CI", raising=False)  # CI (and STRUCTATTN_QUIET) make the command quiet: no per-run lines
    monkeypatch.delenv("STRUCTATTN_QUIET", raising=False)
    config = tmp_path / "y.gin"
    config.write_text(Y_ALL)
    argv = ["compare", str(config), "--out", str(tmp_path / "y"), "--threads", "1", "--no-plots"]
    assert cli.main([*argv, "--reuse", str(x), "--reuse", str(x)]) == 0
    printed = capsys.readouterr().out
    assert f"[1/2] 000_tree-depth_baseline_s0: reused from {x / 'runs' / X_FULL}.json" in printed
    assert f"[2/2] 001_tree-depth_bias_s0: reused from {x / 'runs' / '001_depth_soft_s0'}.json" in printed
    assert trained == [] and "| baseline |" in printed
    assert cli.main([*argv[:3], str(tmp_path / "z"), *argv[4:], "--reuse", str(tmp_path / "nowhere")]) == 1
    assert f"--reuse {str(tmp_path / 'nowhere')!r}: no such folder" in capsys.readouterr().err


def declared(config: str, tmp_path: Path, bindings: tuple[str, ...] = ()) -> Comparison:
    """The comparison ``config`` (plus ``bindings``) declares, dry-run."""
    (tmp_path / "declared.gin").write_text(config)
    gin_setup.parse(tmp_path / "declared.gin", list(bindings))
    return gin_setup.compare(dry_run=True)


def test_the_run_key_ignores_labels_and_other_runs_but_not_seed_plan_or_setup(tmp_path):
    two_seeds = ("compare.seeds = [0, 1]",)
    first, y = declared(X, tmp_path, two_seeds), declared(Y, tmp_path, two_seeds)
    (x_full, _, x_soft, _), (y_full, y_full1, y_mask, _) = first.runs(), y.runs()
    assert first.run_key(x_full) == y.run_key(y_full) and first.fingerprint() != y.fingerprint()
    assert len({first.run_key(x_full), y.run_key(y_full1), y.run_key(y_mask), first.run_key(x_soft)}) == 4
    tuned = declared(Y + "compare.training_by_setting = {'mask': {'lr': 2e-3}}\n", tmp_path, two_seeds)
    assert tuned.run_key(tuned.runs()[0]) == y.run_key(y_full)  # another setting's options do not count
    assert tuned.run_key(tuned.runs()[2]) != y.run_key(y_mask)


LR = "compare.training_by_setting = {'soft_bias(dep)': {'lr': 2e-3}}"


def shipped(name: str, monkeypatch: pytest.MonkeyPatch, bindings: tuple[str, ...] = (LR,)) -> Comparison:
    """The comparison ``structattn compare configs/experiments/NAME --gin-param LR`` declares (no data read)."""
    monkeypatch.setattr(Comparison, "dry_run", lambda self, items_per_task=2: None)
    gin_setup.parse(ROOT / "configs" / "experiments" / name, list(bindings))
    return gin_setup.compare(dry_run=True)


def test_the_shipped_low_resource_and_parser_noise_configs_share_their_10k_soft_bias_runs(monkeypatch):
    def run_of(comparison: Comparison, task: str, seed: int, setting: str = "soft_bias(dep)"):
        return next(r for r in comparison.runs() if (r.task_label, r.setting, r.seed) == (task, setting, seed))

    low, noise = shipped("multi30k_low_resource.gin", monkeypatch), shipped("multi30k_parser_noise.gin", monkeypatch)
    key = low.run_key(run_of(low, "en->de 10k", 0))
    assert key == noise.run_key(run_of(noise, "spaCy trees 10k", 0))
    assert key != noise.run_key(run_of(noise, "spaCy trees 10k", 1))  # another seed
    assert key != noise.run_key(run_of(noise, "spaCy trees 10k", 0, "hard_mask(dep)"))  # another plan
    assert key != low.run_key(run_of(low, "en->de 10k", 0, "full"))
    assert key != noise.run_key(run_of(noise, "20% heads wrong 10k", 0))  # another task spec



def test_the_ssan_soft_follow_up_declares_the_full_runs_of_comparison_a(monkeypatch):
    """``multi30k_ssan_soft.gin`` trains only its ssan(soft) runs with ``--reuse results/plan/a``: its full runs
    are (a)'s, by run key."""
    def keys(comparison: Comparison, setting: str) -> dict[int, str]:
        return {r.seed: comparison.run_key(r) for r in comparison.runs() if r.setting == setting}

    priors, follow_up = shipped("multi30k_priors.gin", monkeypatch), shipped("multi30k_ssan_soft.gin", monkeypatch, ())
    assert keys(follow_up, "full") == keys(priors, "full") and len(keys(priors, "full")) == 3
    assert set(keys(follow_up, "ssan(soft)").values()).isdisjoint(keys(priors, "ssan").values())
    assert follow_up.fingerprint() != priors.fingerprint()
    kept = {json.loads(path.read_text()).get("run_key"): path.name
            for path in (ROOT / "results" / "plan" / "a").glob("shard-*-of-12/runs/*.json")}
    for seed, key in keys(priors, "full").items():  # the plan keeps (a)'s full runs from the start of the plan
        assert key in kept, f"(a)'s kept full run of seed {seed} carries no run key {key} (scripts/add_run_keys.py)"


def keyless_copy(x: Path, dest: Path) -> Path:
    """A copy of ``x`` whose full record was written as before records carried a run key."""
    edited_copy(x, dest, X_FULL, lambda record: record.pop("run_key"))
    return dest


def test_a_record_without_a_run_key_is_not_reused_until_its_key_is_added(x, tmp_path, trained):
    old = keyless_copy(x, tmp_path / "old")
    before = record(old, X_FULL)
    run(Y, tmp_path / "y1", reuse=[old])
    assert trained == ["000_tree-depth_baseline_s0", "001_tree-depth_mask_s0"]  # nothing matched

    assert add_run_keys(old, declared(X, tmp_path)) == [old / "runs" / f"{X_FULL}.json"]
    after = record(old, X_FULL)
    assert after["run_key"] == record(x, X_FULL)["run_key"]  # the key compare itself wrote
    assert {k: v for k, v in after.items() if k not in ("run_key", "checksum")} == \
        {k: v for k, v in before.items() if k != "checksum"}  # nothing else changed
    load_records(old)  # the new checksum holds
    assert add_run_keys(old, declared(X, tmp_path)) == []  # a second call changes nothing

    trained.clear()
    run(Y, tmp_path / "y2", reuse=[old])
    assert trained == ["001_tree-depth_mask_s0"]  # the full run is found now


def test_adding_run_keys_refuses_a_config_the_folder_was_not_run_with(x, tmp_path):
    old = keyless_copy(x, tmp_path / "old")
    stored = (old / "runs" / f"{X_FULL}.json").read_text()
    with pytest.raises(ValueError, match=rf"{X_FULL}\.json.*another comparison.*fingerprint"):
        add_run_keys(old, declared(X + "training.lr = 5e-4\n", tmp_path))
    assert (old / "runs" / f"{X_FULL}.json").read_text() == stored  # nothing written


def test_adding_run_keys_refuses_a_record_whose_key_disagrees(x, tmp_path):
    other = edited_copy(x, tmp_path / "other", X_FULL, lambda record: record.update(run_key="0" * 16)).parent.parent
    with pytest.raises(ValueError, match=rf"{X_FULL}\.json.*carries run key '0{{16}}'"):
        add_run_keys(other, declared(X, tmp_path))


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_add_run_keys_script_names_what_it_changed(x, tmp_path, capsys):
    script = load_script("add_run_keys")
    old = keyless_copy(x, tmp_path / "old")
    (tmp_path / "x.gin").write_text(X)
    assert script.main([str(old), str(tmp_path / "x.gin")]) == 0
    out = capsys.readouterr().out
    assert f"added run key to {old / 'runs' / (X_FULL + '.json')}" in out and "1 record(s)" in out
    assert script.main([str(old), str(tmp_path / "missing.gin")]) == 2
    (tmp_path / "wrong.gin").write_text(X + "training.lr = 5e-4\n")
    assert script.main([str(old), str(tmp_path / "wrong.gin")]) == 2
    assert "another comparison" in capsys.readouterr().err

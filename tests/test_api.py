"""The Python API (structattn.compare / train / probe) against the commands it shares its code with: the same
files, the same errors, plugins through ``imports=``, config text as well as files; ``import structattn`` light."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import structattn
from structattn import cli, plugins
from structattn.attention.base import ATTENTION

ROOT = Path(__file__).resolve().parents[1]
TREEBANK = ROOT / "tests" / "fixtures" / "ud_small.conllu"
TINY = ["model.d_model = 16", "model.ffn_dim = 16", "model.num_heads = 2", "model.num_layers = 1",
        "training.max_steps = 4", "training.eval_every = 2", "training.batch_size = 8"]
COMPARE = [*TINY, "compare.seeds = [0]", "compare.tasks = ['depth_tagging(limit=20)']",
           "compare.settings = ['full', 'hard_mask(dependency)']"]
TRAIN = [*TINY, "train.task = 'head_selection(limit=30)'"]
PLUGIN = '''
from structattn.attention.base import register_attention
from structattn.attention.full import FullAttention


@register_attention("api_plugin")
class ApiPlugin(FullAttention):
    """Full attention under another name."""
'''


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("STRUCTATTN_QUIET", raising=False)  # a user's or a leaked setting
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def gin_params(bindings):
    return [arg for binding in bindings for arg in ("--gin-param", binding)]


def cli_error(argv, capsys):
    """The one line the command prints for a failure (without its 'structattn CMD: error: ' prefix)."""
    capsys.readouterr()
    assert cli.main(argv) == 1
    err = capsys.readouterr().err.strip()
    prefix = f"structattn {argv[0]}: error: "
    assert err.startswith(prefix) and "\n" not in err, err
    return err[len(prefix):]


def api_error(call, *args, **kwargs):
    """The message of the error ``call`` raises, on one line (as is: gin's 'In call to configurable' suffix, which
    the command cuts, must not be there)."""
    with pytest.raises(Exception) as info:
        call(*args, **kwargs)
    return " ".join(str(info.value).split())


def test_compare_writes_the_same_tables_as_the_command(tmp_path, capsys):
    argv = ["compare", "configs/quickstart.gin", *gin_params(COMPARE), "--quiet", "--no-plots", "--threads", "1"]
    assert cli.main([*argv, "--out", str(tmp_path / "cli")]) == 0
    records = structattn.compare("configs/quickstart.gin", tmp_path / "api", overrides=COMPARE, quiet=True,
                                 plots=False, threads=1)
    for name in ("results.csv", "significance.csv", "results.md", "config.gin"):
        assert (tmp_path / "api" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    assert [r["run_id"] for r in records] == sorted(p.stem for p in (tmp_path / "cli" / "runs").glob("*.json"))
    for record in records:  # every run folder has its metrics log
        log = [json.loads(line) for line in (tmp_path / "api" / "runs" / record["run_id"] / "log.jsonl").open()]
        assert [row["step"] for row in log] == [h["step"] for h in record["history"]] == [2, 4]
    # the same refusal of a used folder, with the same words
    assert api_error(structattn.compare, "configs/quickstart.gin", tmp_path / "api", overrides=COMPARE) == \
        cli_error([*argv, "--out", str(tmp_path / "api")], capsys)
    assert "already holds structattn outputs" in cli_error([*argv, "--out", str(tmp_path / "api")], capsys)
    # shards: "i/N" or (i, N); a bad one is the command's error
    part = structattn.compare("configs/quickstart.gin", tmp_path / "s1", overrides=COMPARE, shard=(1, 2),
                              quiet=True, plots=False)
    assert [r["run_id"] for r in part] == [records[1]["run_id"]]
    assert api_error(structattn.compare, "configs/quickstart.gin", tmp_path / "x", overrides=COMPARE, shard="2/2") \
        == cli_error([*argv, "--out", str(tmp_path / "x"), "--shard", "2/2"], capsys)
    assert not (tmp_path / "x").exists()


def test_train_resume_and_overwrite_as_the_command(tmp_path, capsys):
    argv = ["train", "configs/train_example.gin", *gin_params(TRAIN), "--quiet", "--threads", "1"]
    assert cli.main([*argv, "--out", str(tmp_path / "cli")]) == 0
    record = structattn.train("configs/train_example.gin", tmp_path / "api", overrides=TRAIN, quiet=True, threads=1)
    expected = json.loads((tmp_path / "cli" / "record.json").read_text())
    assert record["metrics"] == expected["metrics"] and record["history"] == expected["history"]
    assert (tmp_path / "api" / "results.csv").read_bytes() == (tmp_path / "cli" / "results.csv").read_bytes()
    assert api_error(structattn.train, "configs/train_example.gin", tmp_path / "api", overrides=TRAIN) == \
        cli_error([*argv, "--out", str(tmp_path / "api")], capsys)
    longer = [*TRAIN, "training.max_steps = 6"]
    resumed = structattn.train("configs/train_example.gin", tmp_path / "api", overrides=longer, mode="resume",
                               quiet=True)
    assert [h["step"] for h in resumed["history"]] == [2, 4, 6] and resumed["history"][:2] == record["history"]
    log = [json.loads(line) for line in (tmp_path / "api" / "log.jsonl").open()]
    assert [row["step"] for row in log] == [2, 4, 6]
    structattn.train("configs/train_example.gin", tmp_path / "api", overrides=[*TRAIN, "train.seed = 1"],
                     mode="overwrite", quiet=True)
    err = capsys.readouterr().err
    assert "structattn train: --overwrite: removing" in err and str(tmp_path / "api" / "log.jsonl") in err, err
    assert [json.loads(line)["step"] for line in (tmp_path / "api" / "log.jsonl").open()] == [2, 4]
    assert "output mode must be one of" in api_error(structattn.train, "configs/train_example.gin", tmp_path / "y",
                                                     mode="again")


def test_config_text_resolves_includes_from_configs(tmp_path, capsys):
    text = "include 'train_example.gin'\n" + "\n".join(TRAIN) + "\n"
    record = structattn.train(text, tmp_path / "text", quiet=True, threads=1)
    from_file = structattn.train("configs/train_example.gin", tmp_path / "file", overrides=TRAIN, quiet=True,
                                 threads=1)
    assert record["metrics"] == from_file["metrics"]
    assert (tmp_path / "text" / "config.gin").read_text() == (tmp_path / "file" / "config.gin").read_text()
    message = api_error(structattn.train, "include 'models/tiny.gin'\ntraining.max_steps = [4\n", tmp_path / "z")
    assert message.startswith("cannot parse the config text") and "/tmp" not in message.split(":")[0], message
    missing = api_error(structattn.train, "include 'models/none.gin'\n", tmp_path / "z")
    assert "gin include 'models/none.gin' not found; looked in" in missing and str(ROOT / "configs") in missing
    assert api_error(structattn.train, "configs/none.gin", tmp_path / "z") == \
        cli_error(["train", "configs/none.gin", "--out", str(tmp_path / "z")], capsys)
    assert not (tmp_path / "z").exists()


def count_threads_inside(monkeypatch, module, name):
    """Wrap ``module.name`` so that it records torch's thread count at the end of each call."""
    inside, real = [], getattr(module, name)

    def wrapped(*args, **kwargs):
        result = real(*args, **kwargs)
        inside.append(torch.get_num_threads())
        return result

    monkeypatch.setattr(module, name, wrapped)
    return inside


def test_threads_win_over_the_config_and_the_callers_count_comes_back(tmp_path, monkeypatch):
    from structattn.experiments import gin_setup

    torch.set_num_threads(2)
    inside = count_threads_inside(monkeypatch, gin_setup, "train")
    structattn.train("configs/train_example.gin", tmp_path / "dry", overrides=TRAIN, threads=1, dry_run=True)
    assert inside == [1] and torch.get_num_threads() == 2 and not (tmp_path / "dry").exists()
    with pytest.raises(ValueError, match="train.threads must be >= 1, got 0"):
        structattn.train("configs/train_example.gin", tmp_path / "dry", overrides=TRAIN, threads=0, dry_run=True)


@pytest.mark.parametrize("load, expected", [(0.0, 2), (1.2, 1), (5.0, 1)])
def test_without_threads_the_entry_points_use_only_the_cores_not_busy(tmp_path, monkeypatch, load, expected):
    """A busy 2-core machine: threads=None caps torch's count at the free cores (as the commands' default),
    never above the caller's own count, and gives the caller's count back afterwards."""
    from structattn.experiments import gin_setup, probe_cli

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    torch.set_num_threads(2)
    inside = count_threads_inside(monkeypatch, gin_setup, "train")
    structattn.train("configs/train_example.gin", tmp_path / "dry", overrides=TRAIN, dry_run=True)
    probed = []
    monkeypatch.setattr(probe_cli, "probe", lambda *a, **k: probed.append(torch.get_num_threads()) or [])
    structattn.probe("models/none", "none.conllu", tmp_path / "p")
    assert inside == [expected] and probed == [expected] and torch.get_num_threads() == 2
    torch.set_num_threads(1)  # the caller's own lower count is kept
    structattn.train("configs/train_example.gin", tmp_path / "dry", overrides=TRAIN, dry_run=True)
    assert inside[-1] == 1 and torch.get_num_threads() == 1


def test_plugins_through_imports_are_loaded_and_recorded(tmp_path, monkeypatch):
    ATTENTION.names()  # built-ins register on first lookup: before the copy
    monkeypatch.setattr(ATTENTION, "_entries", dict(ATTENTION._entries))
    monkeypatch.setattr(plugins, "_LOADED", [])
    source = tmp_path / "api_plugin_file.py"
    source.write_text(PLUGIN)
    try:
        records = structattn.compare("configs/quickstart.gin", tmp_path / "out", quiet=True, plots=False,
                                     overrides=[*COMPARE, "compare.settings = {'plug': 'api_plugin'}"],
                                     imports=[str(source)])
    finally:
        sys.modules.pop("api_plugin_file", None)
    digest = plugins.sha256_of(source)
    assert [(p["module"], p["kind"], p["sha256"]) for p in records[0]["provenance"]["plugins"]] == \
        [("api_plugin_file", "file", digest)]
    folder = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert [p["module"] for p in folder["plugins"]] == ["api_plugin_file"]
    message = api_error(structattn.compare, "configs/quickstart.gin", tmp_path / "o2", overrides=COMPARE,
                        imports=["no_such_api_plugin"])
    assert message.startswith("plugin module 'no_such_api_plugin' not found"), message


def test_probe_writes_the_same_rows_as_the_command(tmp_path, capsys):
    assert cli.main(["train", "configs/train_example.gin", *gin_params(TRAIN), "--quiet", "--out",
                     str(tmp_path / "run")]) == 0
    checkpoint = str(tmp_path / "run" / "checkpoints" / "best.pt")
    options = ["--treebank", str(TREEBANK), "--probes", "structural_depth", "--layers", "0-1", "--no-control",
               "--limit", "12", "--epochs", "2", "--quiet"]
    assert cli.main(["probe", checkpoint, *options, "--out", str(tmp_path / "cli")]) == 0
    rows = structattn.probe(checkpoint, TREEBANK, tmp_path / "api", probes=["structural_depth"], layers=[0, 1],
                            control=False, limit=12, epochs=2, quiet=True)
    assert (tmp_path / "api" / "probe.csv").read_bytes() == (tmp_path / "cli" / "probe.csv").read_bytes()
    assert {row["layer"] for row in rows} == {0, 1} and {row["probe"] for row in rows} == {"structural_depth"}
    assert api_error(structattn.probe, checkpoint, TREEBANK, tmp_path / "api") == \
        cli_error(["probe", checkpoint, *options, "--out", str(tmp_path / "api")], capsys)
    structattn.probe(checkpoint, TREEBANK, tmp_path / "api", probes="structural_depth", layers="1", control=False,
                     limit=12, epochs=1, overwrite=True, quiet=True)
    assert {line.split(",")[1] for line in (tmp_path / "api" / "probe.csv").read_text().splitlines()[1:]} == {"1"}


def test_import_structattn_stays_light():
    code = ("import sys, structattn; names = (structattn.compare, structattn.train, structattn.probe); "
            "print(' '.join(m for m in ('torch', 'gin', 'transformers') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == ""
    assert structattn.compare.__module__ == "structattn.api" and "compare" in dir(structattn)

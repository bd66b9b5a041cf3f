"""The ``structattn`` command: help, one-line errors, train / eval / resume, sharded compare and merge."""

import json

import pytest
import torch

from structattn import cli

TINY = ["--gin-param", "model.d_model = 16", "--gin-param", "model.ffn_dim = 16", "--gin-param", "model.num_heads = 2",
        "--gin-param", "training.max_steps = 4", "--gin-param", "training.eval_every = 2",
        "--gin-param", "training.batch_size = 8"]


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("STRUCTATTN_QUIET", raising=False)  # a user's or a leaked setting
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize("command", [[], ["train"], ["compare"], ["merge"], ["eval"], ["structures"], ["parse"]])
def test_help_on_every_command(command, capsys):
    try:
        code = cli.main([*command, "--help"])
    except SystemExit as exit_info:  # argparse exits after printing help; pass-through commands may return
        code = exit_info.code
    assert code == 0
    assert "usage: structattn" in capsys.readouterr().out


def one_line_error(argv, capsys, match):
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"structattn {argv[0]}: error:") and match in err, err


def test_errors_are_one_clear_line(capsys, tmp_path):
    one_line_error(["compare", "configs/missing.gin", "--out", str(tmp_path)], capsys, "no such config file")
    one_line_error(["compare", "configs/quickstart.gin", "--out", str(tmp_path), "--gin-param", "modle.d_model = 3"],
                   capsys, "No configurable matching 'modle'")
    one_line_error(["compare", "configs/quickstart.gin", "--out", str(tmp_path), "--gin-param", "training.foo = 3"],
                   capsys, "doesn't have a parameter named 'foo'")
    one_line_error(["compare", "configs/quickstart.gin", "--out", str(tmp_path), "--gin-param",
                    "compare.settings = ['sparse(dependency)']"], capsys, "unknown attention variant 'sparse'")
    one_line_error(["compare", "configs/quickstart.gin", "--out", str(tmp_path), "--gin-param", "compare.seeds = [0"],
                   capsys, "cannot parse")
    one_line_error(["compare", "configs/models/tiny.gin", "--out", str(tmp_path)], capsys,
                   "Required bindings for `compare` not provided in config: ['tasks', 'settings']")
    one_line_error(["compare", "configs/quickstart.gin", "--out", str(tmp_path), "--shard", "2/2"], capsys, "need 0 <= i < N")
    one_line_error(["eval", str(tmp_path / "none.pt")], capsys, "no such checkpoint")
    one_line_error(["merge", str(tmp_path)], capsys, "not a compare output directory")
    assert not any(tmp_path.iterdir())  # nothing trained or written


def test_missing_pass_through_module_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(cli.PASS_THROUGH, "parse", ("structattn.not_there", "x"))
    one_line_error(["parse", "--help"], capsys, "`structattn parse` is not available: module 'structattn.not_there' is missing")


def test_train_eval_and_resume(capsys, tmp_path):
    out = tmp_path / "run"
    argv = ["train", "configs/train_example.gin", "--out", str(out), *TINY, "--gin-param",
            "train.task = 'head_selection(limit=30)'"]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "train" in captured.err  # the progress bar
    record = json.loads((out / "record.json").read_text())
    assert record["steps"] == 4 and "train.task = 'head_selection(limit=30)'" in (out / "config.gin").read_text()
    assert "training.max_steps = 4" in (out / "config.gin").read_text()
    assert cli.main(["eval", str(out / "checkpoints" / "best.pt"), "--quiet"]) == 0
    scores = json.loads(capsys.readouterr().out)
    assert scores["accuracy"] == pytest.approx(record["metrics"]["test_accuracy"], abs=1e-9)
    assert cli.main([*argv, "--resume", "--quiet", "--gin-param", "training.max_steps = 6"]) == 0
    resumed = json.loads((out / "record.json").read_text())
    assert [h["step"] for h in resumed["history"]] == [2, 4, 6]
    assert resumed["history"][:2] == record["history"]
    assert capsys.readouterr().err == ""  # --quiet: no progress bars


def test_sharded_compare_and_merge(capsys, tmp_path):
    base = ["configs/quickstart.gin", *TINY, "--quiet", "--no-plots", "--gin-param", "compare.seeds = [0]",
            "--gin-param", "compare.tasks = ['depth_tagging(limit=30)']",
            "--gin-param", "compare.settings = ['full', 'hard_mask(dependency)']"]
    for k in range(2):
        assert cli.main(["compare", *base, "--out", str(tmp_path / f"s{k}"), "--shard", f"{k}/2"]) == 0
    assert cli.main(["merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "merged 2 runs from 2 shard folders" in out and str(tmp_path / "merged") in out
    lines = (tmp_path / "merged" / "results.csv").read_text().splitlines()
    assert {line.split(",")[3] for line in lines[1:]} == {"full", "hard_mask(dependency)"}
    assert cli.main(["compare", *base, "--out", str(tmp_path / "dry"), "--dry-run"]) == 0
    assert "config OK: 2 runs" in capsys.readouterr().out and not (tmp_path / "dry").exists()


def test_train_refuses_used_folders_and_files_before_training(capsys, tmp_path, monkeypatch):
    import structattn.experiments.compare as compare_module

    out = tmp_path / "run"
    argv = ["train", "configs/train_example.gin", "--out", str(out), *TINY, "--quiet",
            "--gin-param", "train.task = 'head_selection(limit=30)'"]
    assert cli.main(argv) == 0
    first = (out / "record.json").read_text()
    provenance = json.loads(first)["provenance"]
    assert provenance["command"].startswith("structattn train configs/train_example.gin --out ")
    assert provenance["data"]["task"] == "head_selection(limit=30)" and len(provenance["data"]["sha256"]) == 64
    capsys.readouterr()
    one_line_error(argv, capsys, "already holds structattn outputs (record.json, config.gin, results.csv, "
                                 "significance.csv, results.md, checkpoints, log.jsonl, log.csv")
    assert (out / "record.json").read_text() == first
    # resuming with another learning rate or seed is refused, naming both values
    one_line_error([*argv, "--resume", "--gin-param", "training.lr = 0.5", "--gin-param", "train.seed = 3"], capsys,
                   "training.lr: checkpoint 0.003, config 0.5; seed: checkpoint 0, config 3")
    one_line_error([*argv, "--resume", "--overwrite"], capsys, "give --resume or --overwrite, not both")
    assert cli.main([*argv, "--overwrite", "--gin-param", "train.seed = 1"]) == 0
    assert f"structattn train: --overwrite: removing {out / 'record.json'}" in capsys.readouterr().err
    assert json.loads((out / "record.json").read_text())["seed"] == 1
    # a file as --out fails before any data is prepared or any step is trained
    monkeypatch.setattr(compare_module, "_data_for", lambda *a, **k: pytest.fail("prepared data for a file --out"))
    (tmp_path / "file").write_text("x")
    one_line_error([*argv[:3], str(tmp_path / "file"), *argv[4:]], capsys, "is a file, not a folder")


def test_compare_refuses_a_used_folder(capsys, tmp_path):
    base = ["compare", "configs/quickstart.gin", *TINY, "--quiet", "--no-plots", "--gin-param", "compare.seeds = [0]",
            "--gin-param", "compare.tasks = ['depth_tagging(limit=20)']", "--gin-param", "compare.settings = ['full']",
            "--out", str(tmp_path)]
    assert cli.main(base) == 0
    capsys.readouterr()
    one_line_error(base, capsys, "already holds structattn outputs")
    assert cli.main([*base, "--resume"]) == 0
    assert "results.md" in capsys.readouterr().out


COMMANDS = (["train"], ["compare"], ["merge"], ["eval"], ["structures", "demo"], ["structures", "cache"], ["parse"],
            ["translate"], ["pretrain"], ["probe"])


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_shows_the_shared_flags(command, capsys):
    try:
        status = cli.main([*command, "--help"])
    except SystemExit as exit_:
        status = exit_.code
    assert status in (0, None)
    text = capsys.readouterr().out
    for flag in ("--import", "--quiet", "--threads"):
        assert flag in text, f"`structattn {' '.join(command)} --help` lacks {flag}"


@pytest.mark.parametrize("command", [["structures", "demo", "--threads", "0"], ["parse", "x.txt", "--out", "y",
                                     "--batch-size", "0"], ["translate", "c.pt", "in.txt", "--out", "o.txt", "--beam", "0"],
                                     ["probe", "m", "--treebank", "t", "--out", "o", "--epochs", "-1"]], ids=" ".join)
def test_non_positive_counts_are_one_clear_line(command, capsys):
    try:
        status = cli.main(command)
    except SystemExit as exit_:
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "must be >= 1" in err, err

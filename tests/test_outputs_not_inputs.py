"""No command writes over its own input: an output that is an input (the same path, a hard link or a symlink
to it), or an --out folder whose outputs would replace the config being run, is refused before any work."""

import os

import pytest

from structattn import cli


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "input.conllu"
    path.write_text("1\tHi\t_\t_\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    return path


def refused(argv, capsys, victim, before):
    status = cli.main(argv)
    err = capsys.readouterr().err
    assert status in (1, 2) and "would overwrite the input" in err and err.count("\n") == 1, err
    assert victim.read_text(encoding="utf-8") == before


@pytest.mark.parametrize("alias", ["same", "hardlink", "symlink"])
def test_translate_refuses_writing_over_its_input(text, tmp_path, capsys, alias):
    out = {"same": text, "hardlink": tmp_path / "hard.conllu", "symlink": tmp_path / "soft.conllu"}[alias]
    if alias == "hardlink":
        os.link(text, out)
    elif alias == "symlink":
        out.symlink_to(text)
    refused(["translate", str(tmp_path / "model.pt"), str(text), "--out", str(out)], capsys, text, text.read_text())


def test_parse_refuses_writing_over_its_input(tmp_path, capsys):
    raw = tmp_path / "raw.txt"
    raw.write_text("A sentence.\n", encoding="utf-8")
    refused(["parse", str(raw), "--out", str(raw)], capsys, raw, "A sentence.\n")


def test_probe_refuses_an_out_folder_whose_outputs_are_its_inputs(tmp_path, capsys):
    treebank = tmp_path / "probe.csv"  # an input named like an output, in the --out folder
    treebank.write_text("x\n")
    refused(["probe", str(tmp_path / "model"), "--treebank", str(treebank), "--out", str(tmp_path), "--overwrite"],
            capsys, treebank, "x\n")


def test_pretrain_refuses_an_out_folder_holding_its_text(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("some text\n")
    refused(["pretrain", "--text", str(corpus), "--out", str(tmp_path), "--overwrite"], capsys, corpus, "some text\n")


@pytest.mark.parametrize("command", ["compare", "train"])
def test_compare_and_train_refuse_to_clear_the_config_they_run(tmp_path, capsys, command):
    config = tmp_path / "config.gin"  # a copy of a run's operative config, run again into the same folder
    config.write_text("include 'configs/quickstart.gin'\n")
    refused([command, str(config), "--out", str(tmp_path), "--overwrite"], capsys, config,
            "include 'configs/quickstart.gin'\n")

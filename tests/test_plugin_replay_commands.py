"""The issue's scenario end to end: runs made with ``--import my_plugin`` (a module name) from the folder that
holds ``my_plugin.py``, then read from another folder by ``eval``, ``translate``, ``probe`` and ``merge``: each
replays the plugin from its recorded file; with the file changed each warns; with the file gone each exits 1
naming the module, the recorded path and ``--import PATH``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from structattn import cli
from tests.experiments.test_plugins import PLUGIN, QUICKSTART, ROOT, TINY, isolated  # noqa: F401
from tests.experiments.test_plugins import unregister as forget_registrations

COPIES = ("moved", "renamed")  # the module names --import gives the copies below

TREEBANK = str(ROOT / "structattn" / "structures" / "data" / "en_pud-ud-test.conllu")
TRANSLATION = ["--gin-param", "compare.tasks = {'syn': 'translation_synthetic(train=60, dev=8, test=8, grammar_depth=1, "
               "max_words=8, beam=1)'}"]
SOURCE = "1\tthe\t_\t_\t_\t_\t2\tdet\t_\t_\n2\tdog\t_\t_\t_\t_\t3\tnsubj\t_\t_\n3\truns\t_\t_\t_\t_\t0\troot\t_\t_\n\n"


@pytest.fixture
def made_from_the_plugins_folder(tmp_path, monkeypatch, capsys):
    """Two shards of a tagging comparison and a translation run, made with ``--import my_plugin`` from the
    folder holding the file; then a fresh process in another folder (the plugin's folder not on sys.path)."""
    source = tmp_path / "src" / "my_plugin.py"
    source.parent.mkdir()
    source.write_text(PLUGIN)
    monkeypatch.chdir(source.parent)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(source.parent))])
    plan = ["--gin-param", "compare.settings = {'full': 'full', 'plug': 'half_plugin(chain_plugin)'}"]
    for shard in ("0/2", "1/2"):
        argv = ["compare", QUICKSTART, "--import", "my_plugin", *TINY, *plan, "--out", str(tmp_path / "tag"),
                "--shard", shard]
        assert cli.main(argv) == 0, capsys.readouterr().err
    plan = ["--gin-param", "compare.settings = {'plug': 'half_plugin(chain_plugin)'}"]
    argv = ["compare", QUICKSTART, "--import", "my_plugin", *TINY, *TRANSLATION, *plan, "--out", str(tmp_path / "tr")]
    assert cli.main(argv) == 0, capsys.readouterr().err
    (tmp_path / "input.conllu").write_text(SOURCE)
    unregister(monkeypatch)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(source.parent))])
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    capsys.readouterr()
    return tmp_path, source


def unregister(monkeypatch) -> None:
    """What a fresh process would know: no plugin registrations and no plugin module, copies included."""
    forget_registrations(monkeypatch)
    for name in COPIES:
        sys.modules.pop(name, None)


@pytest.fixture(autouse=True)
def no_copies_left():
    yield
    for name in COPIES:
        sys.modules.pop(name, None)


def commands(root: Path) -> dict[str, list[str]]:
    tagger = root / "tag" / "shard-1-of-2" / "runs" / "001_depth_plug_s0" / "checkpoints" / "best.pt"
    translator = root / "tr" / "runs" / "000_syn_plug_s0" / "checkpoints" / "best.pt"
    return {
        "eval": ["eval", str(tagger), "--quiet"],
        "translate": ["translate", str(translator), str(root / "input.conllu"), "--out", str(root / "out.txt"),
                      "--quiet"],
        "probe": ["probe", str(tagger), "--treebank", TREEBANK, "--limit", "12", "--epochs", "1", "--no-control",
                  "--probes", "structural_depth", "--out", str(root / "probe"), "--overwrite", "--quiet"],
        "merge": ["merge", str(root / "tag"), "--out", str(root / "merged"), "--no-plots", "--overwrite", "--quiet"],
    }


@pytest.mark.parametrize("command", ["eval", "translate", "probe", "merge"])
def test_each_command_replays_a_module_plugin_from_another_folder(made_from_the_plugins_folder, monkeypatch,
                                                                  capsys, command):
    root, source = made_from_the_plugins_folder
    argv = commands(root)[command]
    assert cli.main(argv) == 0, capsys.readouterr().err
    assert sys.modules["my_plugin"].__file__ == str(source) and "plugin" not in capsys.readouterr().err

    unregister(monkeypatch)  # the file changed since: still replayed, with one warning
    source.write_text(PLUGIN + "\nCHANGED = True\n")
    assert cli.main(argv) == 0
    warning = f"warning: plugin 'my_plugin' ({source}) changed since "
    assert warning in capsys.readouterr().err

    unregister(monkeypatch)  # the file is gone: refused by name, with the way out
    source.rename(root / "moved.py")
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert "plugin 'my_plugin', recorded by " in err and f"the recorded file {str(source)!r} no longer exists" in err
    assert "pass --import PATH" in err, err
    def imported(path: Path) -> list[str]:
        unregister(monkeypatch)
        return [*argv[:1], "--import", str(path), *argv[1:]]

    assert cli.main(imported(root / "moved.py")) == 1  # a changed copy under another name: which name it needs
    err = capsys.readouterr().err
    assert "this command imported 'moved' (" in err, err
    assert "to replay a changed copy, import it under the recorded name (a file named my_plugin.py)" in err, err
    (root / "copy").mkdir(exist_ok=True)
    (root / "copy" / "my_plugin.py").write_text((root / "moved.py").read_text())
    assert cli.main(imported(root / "copy" / "my_plugin.py")) == 0  # under its name: replayed, with the warning
    assert f"warning: plugin 'my_plugin' ({root / 'copy' / 'my_plugin.py'}) changed since " in capsys.readouterr().err
    (root / "renamed.py").write_text(PLUGIN)  # the recorded file itself, renamed: replayed silently
    assert cli.main(imported(root / "renamed.py")) == 0
    out, err = capsys.readouterr()
    assert "plugin" not in err, err
    if command == "eval":
        record = json.loads((root / "tag" / "shard-1-of-2" / "runs" / "001_depth_plug_s0.json").read_text())
        assert json.loads(out.splitlines()[-1])["accuracy"] == pytest.approx(record["metrics"]["test_accuracy"])

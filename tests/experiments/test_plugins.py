"""Plugins: --import of a file or module, gin imports, entry points; recorded in runs and replayed by eval and
merge from another working folder; a missing plugin is a clear error."""

import importlib.metadata
import json
import sys
from pathlib import Path

import pytest
import torch

from structattn import cli, plugins
from structattn.attention.base import ATTENTION
from structattn.experiments import gin_setup
from structattn.structures.providers.base import PROVIDERS
from structattn.tasks.base import task_names

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "configs" / "quickstart.gin")
PLUGIN = '''
"""A test plugin: a provider (a chain over the words) and a variant (full attention on halved queries)."""
from structattn.attention.base import register_attention
from structattn.attention.full import FullAttention
from structattn.structures.providers.base import GraphProvider, register_provider


@register_provider("chain_plugin")
class ChainPlugin(GraphProvider):
    def graph_edges(self, item):
        return [(i, i + 1) for i in range(len(item) - 1)]


@register_attention("half_plugin")
class HalfPlugin(FullAttention):
    requires = frozenset({"distance"})

    def attend(self, q, k, v, structure, *, hidden, return_weights):
        return super().attend(q * 0.5, k, v, structure, hidden=hidden, return_weights=return_weights)
'''
TINY = ["--gin-param", "model.d_model = 8", "--gin-param", "model.ffn_dim = 8", "--gin-param", "model.num_heads = 2",
        "--gin-param", "model.num_layers = 1", "--gin-param", "training.max_steps = 2",
        "--gin-param", "training.eval_every = 2", "--gin-param", "training.batch_size = 8", "--quiet", "--no-plots",
        "--gin-param", "compare.seeds = [0]", "--gin-param", "compare.tasks = {'depth': 'depth_tagging(limit=16)'}"]


def forget_plugins(names=("my_plugin", "gin_plugin", "ep_plugin")):
    """What a fresh process would know: no plugin modules, registries as before, nothing loaded."""
    for name in names:
        sys.modules.pop(name, None)
    plugins._LOADED.clear()


@pytest.fixture(autouse=True)
def isolated(monkeypatch):
    ATTENTION.names(), PROVIDERS.names(), task_names()  # built-ins register on first lookup: before the copy
    monkeypatch.setattr(ATTENTION, "_entries", dict(ATTENTION._entries))
    monkeypatch.setattr(PROVIDERS, "_entries", dict(PROVIDERS._entries))
    monkeypatch.setattr(plugins, "_LOADED", [])
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("STRUCTATTN_QUIET", raising=False)  # a user's or a leaked setting
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    forget_plugins()


def unregister(monkeypatch):
    monkeypatch.setattr(ATTENTION, "_entries", {k: v for k, v in ATTENTION._entries.items() if k != "half_plugin"})
    monkeypatch.setattr(PROVIDERS, "_entries", {k: v for k, v in PROVIDERS._entries.items() if k != "chain_plugin"})
    forget_plugins()


def test_a_plugin_file_through_compare_eval_and_merge(tmp_path, monkeypatch, capsys):
    source = tmp_path / "src" / "my_plugin.py"
    source.parent.mkdir()
    source.write_text(PLUGIN)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    out = tmp_path / "out"
    argv = ["compare", QUICKSTART, "--import", str(source), *TINY, "--out", str(out),
            "--gin-param", "compare.settings = {'full': 'full', 'plug': 'half_plugin(chain_plugin)'}"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    digest = plugins.sha256_of(source)
    expected = {"module": "my_plugin", "kind": "file", "path": str(source.resolve()), "sha256": digest}
    folder = json.loads((out / "provenance.json").read_text())
    assert [{k: r[k] for k in expected} for r in folder["plugins"]] == [expected]
    assert "--import" in folder["command"] and str(source) in folder["command"]
    record = json.loads((out / "runs" / "001_depth_plug_s0.json").read_text())
    assert record["provenance"]["plugins"][0]["sha256"] == digest
    checkpoint = out / "runs" / "001_depth_plug_s0" / "checkpoints" / "best.pt"

    # a fresh process, elsewhere: eval and merge replay the recorded plugin before rebuilding anything
    unregister(monkeypatch)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    capsys.readouterr()
    assert cli.main(["eval", str(checkpoint), "--quiet"]) == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["accuracy"] == pytest.approx(record["metrics"]["test_accuracy"])
    unregister(monkeypatch)
    assert cli.main(["merge", str(out), "--out", str(tmp_path / "merged"), "--no-plots"]) == 0
    assert "merged 2 runs" in capsys.readouterr().out and "my_plugin" in sys.modules

    # the plugin file is gone: a clear error naming the module and the run that recorded it
    unregister(monkeypatch)
    source.rename(tmp_path / "moved.py")
    assert cli.main(["eval", str(checkpoint)]) == 1
    err = capsys.readouterr().err
    assert "plugin 'my_plugin' (file " in err and "recorded by run 001_depth_plug_s0, cannot be imported" in err, err


def test_import_a_module_from_the_working_folder_and_pass_through_commands(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_plugin.py").write_text(PLUGIN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    received = []
    fake = type(sys)("fake_commands")
    fake.main = lambda argv: received.append(argv) or 0
    monkeypatch.setitem(sys.modules, "fake_commands", fake)
    monkeypatch.setitem(cli.PASS_THROUGH, "fake", ("fake_commands", "a pass-through command"))
    assert cli.main(["fake", "--import", "my_plugin", "demo", "--x", "1"]) == 0
    assert received == [["demo", "--x", "1"]] and "half_plugin" in ATTENTION
    assert plugins.loaded()[0]["kind"] == "module" and plugins.loaded()[0]["path"] == str(tmp_path / "my_plugin.py")
    assert cli.main(["fake", "--import", "not_a_plugin_anywhere"]) == 1
    err = capsys.readouterr().err
    assert "plugin module 'not_a_plugin_anywhere' not found (looked in the working folder" in err, err


def test_gin_import_lines_resolve_from_the_working_folder_and_are_recorded(tmp_path, monkeypatch):
    (tmp_path / "gin_plugin.py").write_text(PLUGIN)
    config = tmp_path / "exp.gin"
    config.write_text(f"import gin_plugin\ninclude '{QUICKSTART}'\n"
                      "compare.settings = {'plug': 'half_plugin(chain_plugin)'}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    records = gin_setup.parse(config)
    assert [(r["module"], r["source"]) for r in records] == [("gin_plugin", f"gin import in {str(config)!r}")]
    assert [r["module"] for r in plugins.loaded()] == ["gin_plugin"]
    assert gin_setup.compare(dry_run=True).runs()
    config.write_text("import no_such_gin_plugin\n")
    with pytest.raises(ValueError, match="imports module 'no_such_gin_plugin', which is not found"):
        gin_setup.parse(config)


def test_entry_points_are_loaded_and_recorded(tmp_path, monkeypatch):
    (tmp_path / "ep_plugin.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    point = importlib.metadata.EntryPoint("mine", "ep_plugin", plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points",
                        lambda group: [point] if group == plugins.ENTRY_POINT_GROUP else [])
    records = plugins.load_entry_points()
    assert [(r["module"], r["kind"]) for r in records] == [("ep_plugin", "entry_point")] and "chain_plugin" in PROVIDERS
    broken = importlib.metadata.EntryPoint("broken", "no_such_ep_module", plugins.ENTRY_POINT_GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [broken])
    with pytest.raises(ValueError, match="entry point 'broken' .* failed to load"):
        plugins.load_entry_points()


def test_file_names_give_stable_module_names(tmp_path):
    assert plugins.module_name_for("a/b/my-variant.v2.py") == "my_variant_v2"
    assert plugins.module_name_for("3d.py") == "_3d"
    other = tmp_path / "json.py"
    other.write_text("x = 1\n")
    with pytest.raises(ValueError, match="would be module 'json', but a module of that name is already imported"):
        plugins.load_plugins([str(other)])
    with pytest.raises(ValueError, match="does not exist"):
        plugins.load_plugins([str(tmp_path / "missing.py")])

"""Replaying a plugin imported by module name (``--import replay_plug``) from another working folder: the record
keeps the file it was loaded from and its sha256, and replay falls back to that file (a changed file warns, a
missing one is an error naming the recorded path and ``--import``)."""

import sys

import pytest

from structattn import plugins
from structattn.structures.providers.base import PROVIDERS

NAME = "replay_plug"
PLUGIN = '''
"""A test plugin: a chain over the words."""
from structattn.structures.providers.base import GraphProvider, register_provider


@register_provider("replay_chain")
class ReplayChain(GraphProvider):
    def graph_edges(self, item):
        return [(i, i + 1) for i in range(len(item) - 1)]
'''


def forget(monkeypatch):
    """What a fresh process would know: no plugin module, no plugin provider, nothing loaded."""
    sys.modules.pop(NAME, None)
    monkeypatch.setattr(PROVIDERS, "_entries", {k: v for k, v in PROVIDERS._entries.items() if k != "replay_chain"})
    plugins._LOADED.clear()


@pytest.fixture
def recorded(tmp_path, monkeypatch):
    """The record of ``--import replay_plug`` run from the folder holding the file, then a fresh process in
    another folder (the first folder is not on ``sys.path`` any more)."""
    PROVIDERS.names()  # built-ins register on first lookup: before the copy
    monkeypatch.setattr(PROVIDERS, "_entries", dict(PROVIDERS._entries))
    monkeypatch.setattr(plugins, "_LOADED", [])
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != ""])
    source = tmp_path / "src" / f"{NAME}.py"
    source.parent.mkdir()
    source.write_text(PLUGIN)
    monkeypatch.chdir(source.parent)
    [record] = plugins.load_plugins([NAME])
    assert (record["kind"], record["path"], record["sha256"]) == ("module", str(source), plugins.sha256_of(source))
    forget(monkeypatch)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(source.parent)])
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    yield record, source
    sys.modules.pop(NAME, None)


def test_a_module_plugin_replays_from_its_recorded_file(recorded, capsys):
    record, source = recorded
    [now] = plugins.replay([record], recorded_by="run r1")
    assert "replay_chain" in PROVIDERS and sys.modules[NAME].__file__ == str(source)
    assert (now["module"], now["path"], now["sha256"]) == (NAME, str(source), record["sha256"])
    assert capsys.readouterr().err == ""


def test_a_changed_plugin_file_still_loads_with_a_warning(recorded, capsys):
    record, source = recorded
    source.write_text(PLUGIN + "\nCHANGED = True\n")
    plugins.replay([record], recorded_by="run r1")
    assert "replay_chain" in PROVIDERS and sys.modules[NAME].CHANGED
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1, err
    assert f"plugin {NAME!r} ({source}) changed since run r1 recorded it" in err[0]


def test_a_missing_plugin_file_names_the_recorded_path_and_import(recorded):
    record, source = recorded
    source.unlink()
    with pytest.raises(ValueError) as caught:
        plugins.replay([record], recorded_by="run r1")
    message = str(caught.value)
    assert f"plugin {NAME!r}, recorded by run r1, cannot be imported" in message
    assert f"the recorded file {str(source)!r} no longer exists" in message and "pass --import PATH" in message


def test_an_old_record_without_a_path_fails_by_name_as_before(recorded):
    record, _ = recorded
    old = {k: v for k, v in record.items() if k not in ("path", "sha256")}
    with pytest.raises(ValueError, match=rf"plugin module {NAME!r} not found \(looked in the working folder"):
        plugins.replay([old], recorded_by="run r1")

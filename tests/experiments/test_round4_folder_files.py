"""Proposed with the round-4 report: a damaged shard provenance.json is refused by file name, and compare
writes its manifest, config and provenance atomically (a kill leaves the old file or the new one)."""

import json
import os
import re

import pytest

from structattn.experiments import merge
from structattn.experiments.compare import write_provenance
from structattn.experiments.provenance import Stopwatch
from tests.experiments.test_record_integrity import copied, shards  # noqa: F401


def test_merge_names_a_truncated_provenance_file(copied, tmp_path):  # noqa: F811
    path = copied / "shard-0-of-2" / "provenance.json"
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match=re.escape(f"{str(path)!r} is not valid JSON (")):
        merge([copied], tmp_path / "merged", plots=False)


def test_a_kill_while_writing_provenance_leaves_the_old_file(tmp_path, monkeypatch):
    write_provenance(tmp_path, Stopwatch(), {}, finished=False)
    before = (tmp_path / "provenance.json").read_text()

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", killed)  # the kill lands between the write and the rename
    with pytest.raises(KeyboardInterrupt):
        write_provenance(tmp_path, Stopwatch(), {"t": "x" * 64}, finished=True)
    assert (tmp_path / "provenance.json").read_text() == before and json.loads(before)["finished"] is False


def test_a_busy_folder_with_outputs_says_it_is_in_use_before_suggesting_resume(tmp_path):
    """A second time-limited call on a folder the first one is writing: told the folder is in use (not "pass
    --resume", which the next try then refuses as in use)."""
    from structattn.experiments.compare import FolderLock, run_comparison
    from tests.experiments.test_misuse_round4 import comparison

    out = tmp_path / "busy"
    out.mkdir()
    (out / "comparison.json").write_text("{}")  # what the first call has written so far
    with FolderLock(out):
        for mode in ("refuse", "resume", "overwrite"):
            with pytest.raises(ValueError, match="in use by another structattn compare"):
                run_comparison(comparison(), out, quiet=True, plots=False, time_limit=3600, mode=mode)

"""gin includes keep working when a folder named like a config folder shadows it on sys.path."""

from __future__ import annotations

import importlib
from pathlib import Path

from structattn.experiments import gin_setup

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.gin"


def test_output_folder_named_runs_does_not_break_includes(tmp_path, monkeypatch) -> None:
    # `structattn compare ... --out runs/quickstart` leaves a plain folder `runs/` in the working directory,
    # which Python then sees as a namespace package `runs` (no __file__): gin's package-resource reader used
    # to crash on it while resolving `include 'runs/defaults.gin'`.
    (tmp_path / "runs" / "quickstart").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    importlib.invalidate_caches()
    assert importlib.util.find_spec("runs") is not None and importlib.util.find_spec("runs").origin is None
    gin_setup.parse(QUICKSTART)
    assert "compare.seeds" in gin_setup.gin.config_str()

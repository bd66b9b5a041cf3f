"""gin includes: resolved from the including file's folder, then configs/, then the working folder; and they keep
working when a folder named like a config folder shadows it on sys.path."""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

import pytest

from structattn.experiments import gin_setup

QUICKSTART = Path(__file__).resolve().parents[1] / "configs" / "quickstart.gin"


def _user_config(folder: Path, include: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "mine.gin"
    path.write_text(f"include '{include}'\ncompare.seeds = [7]\n")
    return path


def test_a_user_file_elsewhere_can_include_the_quickstart(tmp_path, monkeypatch) -> None:
    # quickstart.gin includes 'runs/defaults.gin' relative to configs/: that used to fail from another folder
    # with "Unable to open file: runs/defaults.gin" (gin searched the user's folder and the working folder only)
    work, user = tmp_path / "work", tmp_path / "elsewhere" / "configs_of_mine"
    work.mkdir()
    monkeypatch.chdir(work)
    for include in [str(QUICKSTART), os.path.relpath(QUICKSTART, user)]:
        gin_setup.parse(_user_config(user, include))
        config = gin_setup.gin.config_str()
        assert "compare.seeds = [7]" in config and "model.d_model" in config and "training.max_steps = 600" in config
    monkeypatch.chdir(QUICKSTART.parents[1])  # a path relative to the working folder is the last resort
    gin_setup.parse(_user_config(user, "configs/quickstart.gin"))
    assert "compare.seeds = [7]" in gin_setup.gin.config_str()


def test_the_including_file_s_folder_comes_before_configs_and_the_working_folder(tmp_path, monkeypatch) -> None:
    user = tmp_path / "user"
    (user / "models").mkdir(parents=True)
    (user / "models" / "tiny.gin").write_text("include 'models/base.gin'\nmodel.d_model = 24\n")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny.gin").write_text("model.d_model = 999\n")
    monkeypatch.chdir(tmp_path)  # the working folder's models/tiny.gin must not win
    gin_setup.parse(_user_config(user, "models/tiny.gin"))
    config = gin_setup.gin.config_str()
    assert "model.d_model = 24" in config  # user/models/tiny.gin, which itself found configs/models/base.gin
    assert "model.num_layers" in config


def test_a_missing_include_names_every_folder_looked_in(tmp_path, monkeypatch) -> None:
    work, user = tmp_path / "work", tmp_path / "user"
    work.mkdir()
    monkeypatch.chdir(work)
    looked = [user, tmp_path, tmp_path.parent, QUICKSTART.parent, work]
    with pytest.raises(FileNotFoundError, match=rf"^gin include 'runs/nowhere\.gin' not found; looked in "
                                                rf"{re.escape(', '.join(map(str, looked)))}$"):
        gin_setup.parse(_user_config(user, "runs/nowhere.gin"))
    with pytest.raises(FileNotFoundError, match=r"^gin include '/nowhere/x\.gin' not found; it is an absolute path$"):
        gin_setup.parse(_user_config(user, "/nowhere/x.gin"))


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

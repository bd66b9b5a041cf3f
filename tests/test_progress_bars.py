"""Long loops show a progress bar by default, and none when asked to be quiet or under CI (``$CI`` set):
``structattn.progress.progress_disabled`` decides for every bar, Python entry points included."""

from __future__ import annotations

import pytest
import torch

from structattn.probes.structural import DistanceProbe, fit_probe
from structattn.structures.readers.bundled import load_bundled
from structattn.structures.providers.base import lengths_token_mask


def train_distance_predictor(**options):
    # imported here, not at collection: importing the package registers "learned_dependency", which the
    # provider contract test would then parametrize over (see tests/structures/test_learned_provider.py)
    from structattn.structures.learned import train_predictor

    train_predictor(load_bundled(12), epochs=2, **options)
    return "train distance predictor"


def fit_distance_probe(**options):
    sentences = load_bundled(12)
    token_mask = lengths_token_mask([len(s) for s in sentences])
    n = token_mask.shape[1]
    hidden = torch.randn(len(sentences), n, 8, generator=torch.Generator().manual_seed(0))
    fit_probe(DistanceProbe(8, 4), hidden, token_mask, sentences, epochs=2, patience=1, **options)
    return "fit DistanceProbe"


LOOPS = [train_distance_predictor, fit_distance_probe]


@pytest.mark.parametrize("loop", LOOPS, ids=lambda f: f.__name__)
def test_a_long_loop_shows_its_bar_by_default(loop, capsys, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("STRUCTATTN_QUIET", raising=False)  # a user's or a leaked setting
    label = loop()
    assert label in capsys.readouterr().err


@pytest.mark.parametrize("loop", LOOPS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("how", ["progress=False", "CI=true"])
def test_a_long_loop_is_quiet_when_asked_or_under_ci(loop, how, capsys, monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("STRUCTATTN_QUIET", raising=False)  # a user's or a leaked setting
    if how == "CI=true":
        monkeypatch.setenv("CI", "true")
        label = loop()
    else:
        label = loop(progress=False)
    assert label not in capsys.readouterr().err


def test_quiet_reaches_bars_no_argument_reaches_for_the_command_only(capsys, monkeypatch, tmp_path):
    """A task's data preparation makes its bar where no ``quiet`` argument reaches (Multi30k's parse bar):
    ``--quiet`` hides it through ``$STRUCTATTN_QUIET``, set while the command runs and restored after."""
    import os
    from pathlib import Path

    from structattn import cli
    from structattn.progress import QUIET_ENV, progress_disabled

    root = Path(__file__).resolve().parents[1]
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(QUIET_ENV, raising=False)
    monkeypatch.setenv("STRUCTATTN_MULTI30K", str(root / "tests" / "fixtures" / "multi30k_small"))
    monkeypatch.setenv("STRUCTATTN_CACHE", str(tmp_path / "cache"))
    argv = ["compare", str(root / "configs" / "experiments" / "multi30k_quick.gin"), "--out", str(tmp_path / "dry"),
            "--dry-run", "--threads", "1"]
    assert cli.main([*argv, "--quiet"]) == 0
    assert "English parses" not in capsys.readouterr().err
    assert QUIET_ENV not in os.environ and not progress_disabled()  # for this command only
    assert cli.main(argv) == 0
    assert "English parses" in capsys.readouterr().err  # the same command, not quiet: the bar shows
    monkeypatch.setenv(QUIET_ENV, "1")
    assert progress_disabled() and cli.main(argv) == 0 and os.environ[QUIET_ENV] == "1"  # a user's setting stays
    assert "English parses" not in capsys.readouterr().err

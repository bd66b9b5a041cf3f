"""`structattn structures demo` and `structattn structures cache`."""

from __future__ import annotations

from pathlib import Path

from structattn.structures import get_provider, read_conllu
from structattn.structures.cache import StructureCache
from structattn.structures.commands import main
from structattn.structures.readers.bundled import load_bundled

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ud_small.conllu"


def test_demo_writes_table_and_heatmap(tmp_path, capsys) -> None:
    assert main(["demo", "--limit", "12", "--out", str(tmp_path), "--quiet"]) == 0
    table = (tmp_path / "structures.md").read_text()
    tokens = sum(len(s) for s in load_bundled(12))
    for name in ("dependency", "semantic", "window"):
        row = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
        assert f"| 12 | {tokens} |" in row
    assert (tmp_path / "distances.png").stat().st_size > 10_000
    assert "structures.md" in capsys.readouterr().out


def test_cache_precompute_fills_the_cache(tmp_path) -> None:
    cache_dir = tmp_path / "cache"
    assert main(["cache", str(FIXTURE), "--provider", "window", "--option", "radius=2", "--cache", str(cache_dir), "--quiet"]) == 0
    sentences = read_conllu(FIXTURE)
    cache = StructureCache(cache_dir)
    cache.get_or_compute(sentences, get_provider("window", radius=2))
    assert cache.stats()["hits"] == len(sentences) and cache.stats()["misses"] == 0


def test_errors_are_one_line(tmp_path, capsys) -> None:
    assert main(["cache", str(tmp_path / "missing.conllu"), "--cache", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("structattn structures: error:") and "missing.conllu" in err and "\n" not in err
    assert main(["cache", str(FIXTURE), "--option", "radius", "--cache", str(tmp_path)]) == 2
    assert "not key=value" in capsys.readouterr().err
    assert main(["cache", str(FIXTURE), "--provider", "syntax", "--cache", str(tmp_path)]) == 2
    assert "unknown structure provider 'syntax'" in capsys.readouterr().err


def test_demo_states_and_sets_its_thread_count(capsys) -> None:
    import torch

    before = torch.get_num_threads()
    try:
        assert main(["demo", "--limit", "4", "--quiet", "--threads", "1"]) == 0
        assert "timed on 1 torch thread(s)" in capsys.readouterr().out
        assert main(["demo", "--limit", "4", "--quiet", "--threads", "0"]) == 2
        assert "--threads: must be >= 1" in capsys.readouterr().err
    finally:
        torch.set_num_threads(before)

"""Sharded parsing on a local Dask cluster (2 worker processes) merges back byte-identical to one process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from structattn.structures.annotators import SpacyAnnotator
from structattn.structures.annotators.dask_sharding import import_distributed, parse_sharded_dask
from structattn.structures.annotators.sharding import find_shards, merge_shards
from structattn.structures.readers import read_conllu, write_conllu

try:
    import dask.distributed as distributed
except ImportError:
    distributed = None
try:
    import spacy
except ImportError:
    spacy = None
needs_cluster = pytest.mark.skipif(
    distributed is None or spacy is None,
    reason="dask and spaCy are needed: pip install 'structattn[dask,spacy]'",
)

SENTENCES = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "pud_en_sentences.txt"


@pytest.fixture(scope="module")
def texts() -> list[str]:
    lines = [line for line in SENTENCES.read_text(encoding="utf-8").splitlines() if line.strip()]
    return lines[:23]  # odd count: shards of unequal size


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as c:
            yield c


@pytest.fixture(scope="module")
def annotator() -> SpacyAnnotator:  # built only by tests that need the cluster (and spaCy)
    return SpacyAnnotator()


@needs_cluster
def test_merged_output_equals_single_process(client, annotator, texts, tmp_path):
    ids = [f"L{k + 1}" for k in range(len(texts))]
    expected = write_conllu(annotator.annotate(texts, ids)).encode("utf-8")
    out = tmp_path / "parsed.conllu"
    results = parse_sharded_dask(client, SpacyAnnotator(), texts, out, text_ids=ids, num_shards=5)
    shards = find_shards(out)
    assert [r.path for r in results] == shards and len(shards) == 5
    assert sum(r.texts for r in results) == len(texts)
    merge_shards(shards, out=out)
    assert out.read_bytes() == expected
    assert [s.id for s in read_conllu(out)][:2] == ["L1-0", "L2-0"]


@needs_cluster
def test_shared_cache_makes_a_rerun_parse_nothing(client, texts, tmp_path):
    cache = tmp_path / "cache"
    first = parse_sharded_dask(client, SpacyAnnotator(), texts, tmp_path / "a.conllu", cache_dir=cache)
    assert len(first) == 2  # default: one shard per worker
    again = parse_sharded_dask(client, SpacyAnnotator(), texts, tmp_path / "b.conllu", num_shards=3, cache_dir=cache)
    assert sum(r.cache_misses for r in first) == len(texts) and sum(r.cache_hits for r in first) == 0
    assert sum(r.cache_hits for r in again) == len(texts) and sum(r.cache_misses for r in again) == 0
    assert merge_shards(find_shards(tmp_path / "a.conllu")) == merge_shards(find_shards(tmp_path / "b.conllu"))


@needs_cluster
def test_worker_error_reaches_the_caller(client, tmp_path):
    with pytest.raises(ValueError, match="text 'bad' is empty"):
        parse_sharded_dask(client, SpacyAnnotator(), ["A fine text.", "   "], tmp_path / "x.conllu", text_ids=["ok", "bad"])


@needs_cluster
def test_mismatched_ids_are_rejected(client, tmp_path):
    with pytest.raises(ValueError, match="1 text ids for 2 texts"):
        parse_sharded_dask(client, SpacyAnnotator(), ["One.", "Two."], tmp_path / "x.conllu", text_ids=["a"])


def test_missing_dask_is_a_clear_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # what an environment without dask sees
    with pytest.raises(ImportError, match=r"pip install 'structattn\[dask\]'"):
        import_distributed()

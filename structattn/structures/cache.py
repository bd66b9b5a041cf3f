"""Disk caches for structures and for parsed annotations.

An entry is one item (a sentence or document for :class:`StructureCache`, one raw text for
:class:`AnnotationCache`). Its key is the sha256 of a canonical JSON serialisation of

* the item's content (words and every annotation, *not* its id: two sentences with the same content share
  an entry, and the returned structure carries the id of the item asked for),
* the producer (provider or parser) name, class, sorted options and versions,
* ``structattn.__version__`` and the cache format version.

Entries are written atomically (a temporary file in the same directory, then ``os.replace``), so several
processes may share one cache directory: a reader sees an old complete entry, a new complete entry, or
none. Each entry stores its key and a checksum of its content and is verified when read; a truncated,
corrupt, foreign or otherwise invalid entry is logged as a warning, recomputed and overwritten, never
trusted. Entries are not fsync'ed: after a power loss an entry may be empty, which is detected as corrupt.

Layout: ``ROOT/structures/<provider>/<k[:2]>/<k>.safetensors`` and ``ROOT/annotations/<parser>/<k[:2]>/<k>.json``.
Structures are stored with safetensors (safe to load, ~40 us per entry; ``torch.load`` takes ~550 us, which
made a warm cache too slow): distances in the collate dtype (int16), adjacency only when it is not derivable
from the distance.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import tempfile
from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Protocol, Sequence

import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors

import structattn
from structattn.structures.collate import collate
from structattn.structures.sentence import Document, Sentence
from structattn.structures.structure import Structure

FORMAT_VERSION = 1
logger = logging.getLogger(__name__)
_TENSORS = ("distance", "adjacency", "token_mask", "is_global")
_EXCLUDED = ("id", "doc_id")  # ids are not content: entries are shared between equal items


def _jsonable(obj: Any) -> Any:
    """JSON hook for canonical keys: dataclasses by field (ids dropped), tensors and sets as lists."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {"__type__": type(obj).__name__, **{f.name: getattr(obj, f.name) for f in fields(obj) if f.name not in _EXCLUDED}}
    if isinstance(obj, torch.Tensor):
        return {"__tensor__": str(obj.dtype), "shape": list(obj.shape), "values": obj.tolist()}
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, Path):
        return str(obj)
    raise ValueError(f"cache key: cannot serialise a {type(obj).__name__} ({obj!r:.60}); use plain values")


def canonical(obj: Any) -> str:
    """Deterministic JSON text of ``obj`` (sorted keys, dataclasses by field, ids dropped)."""
    return json.dumps(obj, sort_keys=True, default=_jsonable, ensure_ascii=False, separators=(",", ":"))


def digest(*parts: Any) -> str:
    """sha256 hex digest of the canonical serialisation of ``parts``."""
    return hashlib.sha256(canonical(parts).encode("utf-8")).hexdigest()


def producer_key(producer: Any) -> dict[str, Any]:
    """What identifies a provider or a parser in a key: name, class, options, library version."""
    cls = type(producer)
    return {
        "name": getattr(producer, "name", cls.__name__),
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "options": producer.options(),
        "structattn": structattn.__version__,
        "format": FORMAT_VERSION,
    }


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers never see a partial file (temporary file + ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class _DiskCache:
    """Shared mechanics: entry paths, atomic writes, counters and rejection of invalid entries."""

    kind = ""
    suffix = ""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.hits = 0
        self.misses = 0
        self.invalid = 0

    def stats(self) -> dict[str, int]:
        """Counters since construction: ``hits``, ``misses`` (invalid entries included) and ``invalid``."""
        return {"hits": self.hits, "misses": self.misses, "invalid": self.invalid}

    def path(self, producer_name: str, key: str) -> Path:
        """Where the entry ``key`` of ``producer_name`` lives."""
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in producer_name) or "_"
        return self.root / self.kind / safe / key[:2] / f"{key}{self.suffix}"

    def _read(self, path: Path) -> bytes | None:
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def _reject(self, path: Path, why: str) -> None:
        self.invalid += 1
        logger.warning("structattn cache: ignoring invalid entry %s (%s); recomputing it", path, why)


class StructureCache(_DiskCache):
    """Structures of sentences / documents on disk, keyed by content + provider.

    Args:
        root: cache directory (created on first write; may be shared with other runs and processes).

    Example::

        cache = StructureCache("~/.cache/structattn")
        structures = cache.get_or_compute(sentences, get_provider("dependency"))
    """

    kind = "structures"
    suffix = ".safetensors"

    def key(self, item: Sentence | Document, provider: Any) -> str:
        """Cache key of ``item`` under ``provider``."""
        return digest("structure", producer_key(provider), item)

    def get_or_compute(self, items: Sequence[Sentence | Document], provider: Any) -> list[Structure]:
        """Unbatched structures of ``items``: hits are read from disk, all misses are computed in one
        ``provider.batch`` call and written.

        Shapes:
            returns one ``(n_k, n_k)`` structure per item, in order, with ``ids == [item.id]``.
        """
        producer = producer_key(provider)
        keys = [digest("structure", producer, x) for x in items]
        out: list[Structure | None] = [self.get(x, k, provider) for x, k in zip(items, keys)]
        missing = _first_of_each_key(keys, out)
        if missing:
            computed = provider.many([items[i] for i in missing])
            done = {keys[i]: s for i, s in zip(missing, computed)}
            for i, structure in zip(missing, computed):
                self.put(keys[i], structure, provider)
            out = [done[k] if s is None else s for s, k in zip(out, keys)]
        return [replace(s, ids=[x.id]) for s, x in zip(out, items)]  # type: ignore[arg-type]

    def batch(self, items: Sequence[Sentence | Document], provider: Any) -> Structure:
        """Cached equivalent of ``provider.batch(items)`` (per-item structures, collated)."""
        return collate(self.get_or_compute(items, provider))

    def get(self, item: Sentence | Document, key: str, provider: Any) -> Structure | None:
        """The verified entry, or ``None`` (counted as a miss) when absent or invalid."""
        path = self.path(provider.name, key)
        data = self._read(path)
        structure = None if data is None else self._decode(path, data, key, len(item))
        if structure is None:
            self.misses += 1
        else:
            self.hits += 1
        return structure

    def put(self, key: str, structure: Structure, provider: Any) -> None:
        """Write ``structure`` (unbatched) as the entry ``key`` of ``provider``."""
        tensors = {name: getattr(structure, name).contiguous() for name in _TENSORS if getattr(structure, name) is not None}
        derived = "adjacency" in tensors and "distance" in tensors and torch.equal(
            tensors["adjacency"], replace(structure, adjacency=None).dense_adjacency()
        )
        if derived:
            del tensors["adjacency"]
        meta = {"window_radius": structure.window_radius, "dilation": structure.dilation, "directed": structure.directed,
                "source": structure.source, "adjacency_from_distance": derived}
        header = {"key": key, "meta": canonical(meta), "checksum": _checksum(key, meta, tensors)}
        write_atomic(self.path(provider.name, key), save_tensors(tensors, metadata=header))

    def _decode(self, path: Path, data: bytes, key: str, n: int) -> Structure | None:
        try:
            (size,) = struct.unpack("<Q", data[:8])
            header = json.loads(data[8:8 + size])["__metadata__"]
            tensors = load_tensors(data)
            meta = json.loads(header["meta"])
        except Exception as error:  # noqa: BLE001  (any failure to parse means a corrupt entry)
            self._reject(path, f"unreadable: {type(error).__name__}: {error}")
            return None
        if header.get("key") != key:
            self._reject(path, "stored key differs from its name")
            return None
        if header.get("checksum") != _checksum(key, meta, tensors):
            self._reject(path, "checksum mismatch")
            return None
        try:
            structure = Structure(**tensors, window_radius=meta["window_radius"], dilation=meta["dilation"],
                                  directed=meta["directed"], source=meta["source"])
            if meta["adjacency_from_distance"]:
                structure.adjacency = structure.dense_adjacency()
        except (KeyError, ValueError, TypeError) as error:
            self._reject(path, f"invalid structure: {error}")
            return None
        if structure.is_batched or structure.num_tokens != n:
            self._reject(path, f"has {structure.num_tokens} tokens, the item has {n}")
            return None
        return structure


def _first_of_each_key(keys: list[str], found: list[Any]) -> list[int]:
    """Indices of the misses to compute: the first item of each missing key (duplicates computed once)."""
    first: dict[str, int] = {}
    for i, (k, value) in enumerate(zip(keys, found)):
        if value is None:
            first.setdefault(k, i)
    return list(first.values())


def _checksum(key: str, meta: dict[str, Any], tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256(canonical([key, meta]).encode("utf-8"))
    for name in sorted(tensors):
        t = tensors[name]
        h.update(f"|{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


class Parser(Protocol):
    """What :class:`AnnotationCache` needs from an annotator."""

    name: str

    def options(self) -> dict[str, Any]: ...

    def parse(self, texts: Sequence[str]) -> list[list[Sentence]]: ...


class AnnotationCache(_DiskCache):
    """Parsed sentences of raw texts on disk, keyed by text + parser name / versions / model / options.

    Args:
        root: cache directory (may be the same as a :class:`StructureCache`'s).
    """

    kind = "annotations"
    suffix = ".json"

    def key(self, text: str, parser: Parser) -> str:
        """Cache key of ``text`` under ``parser``."""
        return digest("annotation", producer_key(parser), text)

    def get_or_parse(self, texts: Sequence[str], parser: Parser) -> list[list[Sentence]]:
        """Sentences of each text (without ids): hits from disk, all misses parsed in one ``parser.parse``."""
        producer = producer_key(parser)
        keys = [digest("annotation", producer, t) for t in texts]
        out: list[list[Sentence] | None] = [self.get(parser.name, k) for k in keys]
        missing = _first_of_each_key(keys, out)
        if missing:
            parsed = parser.parse([texts[i] for i in missing])
            if len(parsed) != len(missing):
                raise ValueError(f"parser {parser.name!r} returned {len(parsed)} results for {len(missing)} texts")
            done = {keys[i]: s for i, s in zip(missing, parsed)}
            for i, sentences in zip(missing, parsed):
                self.put(parser.name, keys[i], sentences)
            out = [done[k] if s is None else s for s, k in zip(out, keys)]
        return out  # type: ignore[return-value]

    def get(self, parser_name: str, key: str) -> list[Sentence] | None:
        """The verified entry, or ``None`` (counted as a miss) when absent or invalid."""
        path = self.path(parser_name, key)
        data = self._read(path)
        sentences = None if data is None else self._decode(path, data, key)
        if sentences is None:
            self.misses += 1
        else:
            self.hits += 1
        return sentences

    def put(self, parser_name: str, key: str, sentences: Sequence[Sentence]) -> None:
        """Write the sentences of one text as the entry ``key``."""
        payload = canonical([_sentence_fields(s) for s in sentences])
        entry = {"key": key, "checksum": hashlib.sha256(payload.encode("utf-8")).hexdigest(), "sentences": payload}
        write_atomic(self.path(parser_name, key), json.dumps(entry, ensure_ascii=False).encode("utf-8"))

    def _decode(self, path: Path, data: bytes, key: str) -> list[Sentence] | None:
        try:
            entry = json.loads(data.decode("utf-8"))
            payload = entry["sentences"]
            if entry["key"] != key:
                self._reject(path, "stored key differs from its name")
                return None
            if entry["checksum"] != hashlib.sha256(payload.encode("utf-8")).hexdigest():
                self._reject(path, "checksum mismatch")
                return None
            return [_sentence_from_fields(d) for d in json.loads(payload)]
        except Exception as error:  # noqa: BLE001  (undecodable or failing Sentence validation)
            self._reject(path, f"unreadable: {type(error).__name__}: {error}")
            return None


def _sentence_fields(sentence: Sentence) -> dict[str, Any]:
    """JSON-ready fields of a sentence (id and doc_id dropped; unset ones skipped)."""
    out = json.loads(canonical(sentence))
    del out["__type__"]
    unset = {"multiword": [], "meta": {}}
    return {k: v for k, v in out.items() if v is not None and unset.get(k, None) != v}


def _sentence_from_fields(data: dict[str, Any]) -> Sentence:
    data = dict(data)
    if "edges" in data:
        data["edges"] = [(e["head"], e["dependent"], e["label"]) for e in data["edges"]]
    if "coref" in data:
        data["coref"] = [[(m["start"], m["end"], m["head"]) for m in cluster] for cluster in data["coref"]]
    if "multiword" in data:
        data["multiword"] = [tuple(m) for m in data["multiword"]]
    return Sentence(**data)

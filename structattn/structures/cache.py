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
trusted; so is an entry whose tensors are intact but not an unbatched structure of the item (a shape
other than the item's length, or a ``token_mask`` that is missing or has a ``False``: an entry holds one
unpadded item). An entry path that is a directory (or lies under a file, or cannot be read) is not something the
cache made or may delete: it raises ``ValueError`` naming the path. Entries are not fsync'ed: after a power loss an entry may be empty, which is detected as corrupt.

Layout: ``ROOT/structures/<provider>/<k[:2]>/<k>.structure`` and
``ROOT/annotations/<parser>/<k[:2]>/<k>.annotation``. An entry file is a line with the sha256 (hex) of the
rest of the file, a JSON line ``{"key", "meta"}``, then the body: the checksum covers the key, the metadata
and every byte of the body. A structure's body is the raw bytes of its tensors (name, numpy dtype and shape
listed in the metadata; distances in the collate dtype, int16), read back with ``numpy.frombuffer``: nothing
in an entry is executed or unpickled, and reading one costs ~15 us, where ``torch.load(weights_only=True)``
costs ~550 us and safetensors ~40 us per small entry (too slow for a warm cache to beat parsing by 20x).
An annotation's body is canonical JSON.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import math
import os
import sys
import tempfile
from dataclasses import fields, is_dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

import structattn
from structattn.structures.sentence import Document, Sentence

if TYPE_CHECKING:  # torch and numpy are imported where structures are read or written, not for annotations
    from structattn.structures.structure import Structure

FORMAT_VERSION = 2  # 1: safetensors entries (never released)
logger = logging.getLogger(__name__)
_TENSORS = ("distance", "adjacency", "token_mask", "is_global")
_EXCLUDED = ("id", "doc_id")  # ids are not content: entries are shared between equal items


@functools.lru_cache(maxsize=None)
def _content_fields(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.name not in _EXCLUDED)


def _jsonable(obj: Any) -> Any:
    """JSON hook for canonical keys: dataclasses by field (ids dropped), tensors and sets as lists."""
    if is_dataclass(obj) and not isinstance(obj, type):
        return {"__type__": type(obj).__name__, **{name: getattr(obj, name) for name in _content_fields(type(obj))}}
    torch = sys.modules.get("torch")  # a tensor exists only if torch was imported: no import for text keys
    if torch is not None and isinstance(obj, torch.Tensor):
        return {"__tensor__": str(obj.dtype), "shape": list(obj.shape), "values": obj.tolist()}
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, Path):
        return str(obj)
    raise ValueError(f"cache key: cannot serialise a {type(obj).__name__} ({obj!r:.60}); use plain values")


def canonical(obj: Any) -> str:
    """Deterministic JSON text of ``obj`` (sorted keys, dataclasses by field, ids dropped)."""
    return json.dumps(obj, sort_keys=True, default=_jsonable, ensure_ascii=False, separators=(",", ":"))


def _keyer(kind: str, producer: Any) -> Callable[[Any], str]:
    """``content -> key`` for one producer: sha256 of ``canonical([kind, producer_key(producer)])`` (serialised
    once; a JSON array, so it cannot run into what follows) then ``canonical(content)``."""
    prefix = canonical([kind, producer_key(producer)]).encode("utf-8")

    def key(content: Any) -> str:
        h = hashlib.sha256(prefix)
        h.update(canonical(content).encode("utf-8"))
        return h.hexdigest()

    return key


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
    """Shared mechanics: entry paths, counters and rejection of invalid entries."""

    kind = ""
    suffix = ""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).expanduser()
        self.hits = 0
        self.misses = 0
        self.invalid = 0

    def stats(self) -> dict[str, int]:
        """Counters since construction: ``hits``, ``misses`` (invalid entries included) and ``invalid``."""
        return {"hits": self.hits, "misses": self.misses, "invalid": self.invalid}

    def _folder(self, producer_name: str) -> str:
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in producer_name) or "_"
        return os.path.join(self.root, self.kind, safe)

    def _file(self, folder: str, key: str) -> str:
        return os.path.join(folder, key[:2], key + self.suffix)

    def path(self, producer_name: str, key: str) -> Path:
        """Where the entry ``key`` of ``producer_name`` lives."""
        return Path(self._file(self._folder(producer_name), key))

    def _lookup(self, file: str, decode: Callable[[bytes], Any]) -> Any:
        """The decoded entry, or ``None`` (a miss) when absent or rejected by ``decode``."""
        try:
            with open(file, "rb") as handle:
                data = handle.read()
        except FileNotFoundError:
            data = None
        except (IsADirectoryError, NotADirectoryError, PermissionError) as error:
            raise _unusable(file, error) from None
        value = None
        if data is not None:
            try:
                value = decode(data)
            except Exception as error:  # noqa: BLE001  (whatever fails to decode or verify is not trusted)
                self.invalid += 1
                logger.warning("structattn cache: ignoring invalid entry %s (%s); recomputing it", file, error)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value


def _unusable(file: str, error: OSError) -> ValueError:
    """The error for an entry path the cache can neither read nor replace (a directory, say)."""
    if isinstance(error, IsADirectoryError):
        problem = "is a directory, not a cache entry"
    elif isinstance(error, NotADirectoryError):
        problem = "lies under a file where the cache expects a folder"
    else:
        problem = f"cannot be read ({error.strerror})"
    return ValueError(f"structattn cache: {file} {problem}; the cache cannot read or rewrite it. Remove it (or "
                      "the whole cache folder: entries are recomputed) or use another cache folder")


class InvalidEntry(ValueError):
    """An entry that failed verification (raised and caught inside the caches, then recomputed)."""


class StructureCache(_DiskCache):
    """Structures of sentences / documents on disk, keyed by content + provider.

    Args:
        root: cache directory (created on first write; may be shared with other runs and processes).

    Example::

        cache = StructureCache("~/.cache/structattn")
        structures = cache.get_or_compute(sentences, get_provider("dependency"))
    """

    kind = "structures"
    suffix = ".structure"

    def key(self, item: Sentence | Document, provider: Any) -> str:
        """Cache key of ``item`` under ``provider``."""
        return _keyer("structure", provider)(item)

    def get_or_compute(self, items: Sequence[Sentence | Document], provider: Any) -> list[Structure]:
        """Unbatched structures of ``items``: hits are read from disk, all misses are computed in one
        ``provider.batch`` call and written.

        Shapes:
            returns one ``(n_k, n_k)`` structure per item, in order, with ``ids == [item.id]``.
        """
        keyer, folder = _keyer("structure", provider), self._folder(provider.name)
        keys = [keyer(x) for x in items]
        out: list[Structure | None] = [
            self._lookup(self._file(folder, k), lambda data, k=k, x=x: _decode_structure(data, k, x)) for k, x in zip(keys, items)
        ]
        missing = _first_of_each_key(keys, out)
        if missing:
            computed = provider.many([items[i] for i in missing])
            done = {keys[i]: s for i, s in zip(missing, computed)}
            for i, structure in zip(missing, computed):
                self.put(keys[i], structure, provider)
            out = [replace(done[k], ids=[x.id]) if s is None else s for s, k, x in zip(out, keys, items)]
        return out  # type: ignore[return-value]

    def batch(self, items: Sequence[Sentence | Document], provider: Any) -> Structure:
        """Cached equivalent of ``provider.batch(items)`` (per-item structures, collated)."""
        from structattn.structures.collate import collate

        return collate(self.get_or_compute(items, provider))

    def put(self, key: str, structure: Structure, provider: Any) -> None:
        """Write ``structure`` (unbatched) as the entry ``key`` of ``provider``."""
        arrays = {name: getattr(structure, name).contiguous().numpy() for name in _TENSORS if getattr(structure, name) is not None}
        meta = {"window_radius": structure.window_radius, "dilation": structure.dilation,
                "directed": structure.directed, "source": structure.source,
                "tensors": [[name, a.dtype.str, list(a.shape)] for name, a in arrays.items()]}
        body = b"".join(a.tobytes() for a in arrays.values())
        write_atomic(self.path(provider.name, key), _pack(key, meta, body))


def _decode_structure(data: bytes, key: str, item: Sentence | Document) -> Structure:
    """Verify and rebuild one entry; raise :class:`InvalidEntry` (or any parse error) when it is not sound."""
    import numpy
    import torch

    from structattn.structures.structure import Structure

    meta, body = _unpack(data, key)
    buffer, offset, n = bytearray(body), 0, len(item)  # writable: torch.from_numpy warns on read-only memory
    tensors = {}
    for name, dtype, shape in meta.pop("tensors"):
        if name not in _TENSORS or tuple(shape) != ((n,) if name in ("token_mask", "is_global") else (n, n)):
            raise InvalidEntry(f"{name} has shape {tuple(shape)}, the item has {n} tokens")
        dtype = numpy.dtype(dtype)
        tensors[name] = torch.from_numpy(numpy.frombuffer(buffer, dtype, math.prod(shape), offset).reshape(shape))
        offset += math.prod(shape) * dtype.itemsize
    if offset != len(buffer):
        raise InvalidEntry(f"body has {len(buffer)} bytes, the tensors {offset}")
    mask = tensors.get("token_mask")
    if mask is None or mask.dtype != torch.bool or not bool(mask.all()):
        # an entry is one unpadded item: every token is real (a False would drop a word from attention)
        raise InvalidEntry("token_mask is missing, not bool or has padding (False) in an unbatched entry")
    return Structure(**tensors, **meta, ids=[item.id])


def _first_of_each_key(keys: list[str], found: list[Any]) -> list[int]:
    """Indices of the misses to compute: the first item of each missing key (duplicates computed once)."""
    first: dict[str, int] = {}
    for i, (k, value) in enumerate(zip(keys, found)):
        if value is None:
            first.setdefault(k, i)
    return list(first.values())


def _pack(key: str, meta: Any, body: bytes) -> bytes:
    """An entry: the sha256 (hex) of everything after it, then a JSON line ``{"key", "meta"}``, then the body."""
    content = canonical({"key": key, "meta": meta}).encode("utf-8") + b"\n" + body
    return hashlib.sha256(content).hexdigest().encode("ascii") + b"\n" + content


def _unpack(data: bytes, key: str) -> tuple[Any, bytes]:
    """``(meta, body)`` of a verified entry; :class:`InvalidEntry` when it is not the intact entry ``key``."""
    checksum, content = data[:64], data[65:]
    if len(data) < 65 or data[64:65] != b"\n" or checksum != hashlib.sha256(content).hexdigest().encode("ascii"):
        raise InvalidEntry("checksum mismatch (truncated, damaged or not an entry)")
    line, _, body = content.partition(b"\n")
    header = json.loads(line)
    if header["key"] != key:
        raise InvalidEntry("stored key differs from its name")
    return header["meta"], body


class Parser(Protocol):
    """What :class:`AnnotationCache` needs from an annotator."""

    name: str

    def options(self) -> dict[str, Any]: ...

    def parse(self, texts: Sequence[str]) -> list[list[Sentence]]: ...


class AnnotationCache(_DiskCache):
    """Parsed sentences of raw texts on disk, keyed by text + parser name / versions / model / options.

    An entry is a JSON line ``{"key", "checksum"}`` followed by the canonical JSON of the sentences (every
    field but the ids, which the annotator assigns).

    Args:
        root: cache directory (may be the same as a :class:`StructureCache`'s).
    """

    kind = "annotations"
    suffix = ".annotation"

    def key(self, text: str, parser: Parser) -> str:
        """Cache key of ``text`` under ``parser``."""
        return _keyer("annotation", parser)(text)

    def get_or_parse(self, texts: Sequence[str], parser: Parser) -> list[list[Sentence]]:
        """Sentences of each text (without ids): hits from disk, all misses parsed in one ``parser.parse``.

        Every returned sentence is a distinct object the caller may modify (repeated texts included)."""
        keyer, folder = _keyer("annotation", parser), self._folder(parser.name)
        keys = [keyer(t) for t in texts]
        out: list[list[Sentence] | None] = [
            self._lookup(self._file(folder, k), lambda data, k=k: _decode_sentences(data, k)) for k in keys
        ]
        missing = _first_of_each_key(keys, out)
        if missing:
            parsed = parser.parse([texts[i] for i in missing])
            if len(parsed) != len(missing):
                raise ValueError(f"parser {parser.name!r} returned {len(parsed)} results for {len(missing)} texts")
            done = {keys[i]: s for i, s in zip(missing, parsed)}
            for i, sentences in zip(missing, parsed):
                self.put(parser.name, keys[i], sentences)
            first = set(missing)
            out = [s if s is not None else done[k] if i in first else [copy.copy(x) for x in done[k]]
                   for i, (s, k) in enumerate(zip(out, keys))]
        return out  # type: ignore[return-value]

    def put(self, parser_name: str, key: str, sentences: Sequence[Sentence]) -> None:
        """Write the sentences of one text as the entry ``key``."""
        payload = canonical([_sentence_fields(s) for s in sentences]).encode("utf-8")
        write_atomic(self.path(parser_name, key), _pack(key, None, payload))


def _decode_sentences(data: bytes, key: str) -> list[Sentence]:
    _, payload = _unpack(data, key)
    return [_sentence_from_fields(d) for d in json.loads(payload)]


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

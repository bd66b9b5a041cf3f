"""Throughput of raw text -> parsed sentences -> dependency structures, against parsing alone.

Pipelines over the 1000 English PUD sentences (``benchmarks/data/pud_en_sentences.txt``), run side by side
in this process, interleaved, ``--repeats`` times each; the best wall time and the best CPU time of this
process are reported for each (the machine may be shared: the CPU time shows the ratios without the noise
of other processes):

* parse only: ``annotator.annotate(texts)``;
* parse + structures: the same, then ``get_provider("dependency").batch`` over batches of ``--batch``;
* warm annotation cache + structures: parsed sentences read from a filled :class:`AnnotationCache`, the
  dependency structures computed;
* warm annotation + structure caches: both read from disk (every entry read and verified each time).

Targets (issues 2 and 6): parse + structures >= 0.9 x parse-only throughput; a warm cache >= 20 x.
torch runs with ``--torch-threads`` intra-op threads (default 1: the tensors are per-sentence small, and on
a busy 2-core machine OpenMP threads spin and multiply the provider's time several-fold).

A second table shows where the structure cache itself pays: computing structures against reading them
from a warm :class:`StructureCache`, for sentences and for 465-token documents (25 sentences each) of the
bundled UD Czech PUD treebank, whose enhanced graphs make the ``semantic`` provider a batched BFS.

Run: ``python benchmarks/parsing.py [--parser spacy] [--repeats 5] [--limit N]``.

Start-up (``--startup``, issue 7): fresh processes, timed side by side in interleaved rounds (best wall
time, and best CPU time of the child process): ``structattn parse`` on the 1000 sentences against a bare
spaCy script doing the same parse (same model and excluded components) and writing CoNLL-U, and every
``--help`` of the structures commands. Targets: parse <= 1.15 x the bare script, each ``--help`` < 0.3 s.
``python benchmarks/parsing.py --startup [--repeats 5] [--limit N]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from structattn.structures import get_provider
from structattn.structures.annotators import get_annotator
from structattn.structures.cache import AnnotationCache, StructureCache

DATA = Path(__file__).resolve().parent / "data" / "pud_en_sentences.txt"
TARGETS = {"parse + dependency structures": 0.90, "warm annotation cache + structures": 20.0,
           "warm annotation + structure caches": 20.0}


def chunks(items: list, size: int) -> list[list]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def timed(run: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of one run."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


BARE_SPACY = r"""
import sys
import spacy

source, out, model, exclude = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(",")
nlp = spacy.load(model, exclude=exclude)
lines = [(n, line) for n, line in enumerate(open(source, encoding="utf-8").read().splitlines(), 1) if line.strip()]
with open(out, "w", encoding="utf-8") as handle:
    docs = nlp.pipe([" ".join(line.split()) for _, line in lines], batch_size=256)
    for (n, _), doc in zip(lines, docs):
        for k, sent in enumerate(doc.sents):
            handle.write(f"# sent_id = L{n}-{k}\n# text = {sent.text}\n")
            for t in sent:
                head = 0 if t.head.i == t.i else t.head.i - sent.start + 1
                handle.write(f"{t.i - sent.start + 1}\t{t.text}\t_\t{t.pos_ or '_'}\t_\t_\t{head}\t{t.dep_}\t_\t_\n")
            handle.write("\n")
"""
STARTUP_TARGET, HELP_TARGET = 1.15, 0.3


def run_child(command: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one fresh process; it must succeed."""
    import resource
    import subprocess

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def startup(repeats: int, limit: int | None) -> None:
    """``structattn parse`` vs a bare spaCy script, and the ``--help`` of each structures command."""
    import sys

    from structattn.structures.annotators.spacy_annotator import UNNEEDED, SpacyAnnotator

    model = SpacyAnnotator().model
    cli = [sys.executable, "-m", "structattn.cli"]
    with tempfile.TemporaryDirectory(prefix="structattn-startup-") as root:
        source = Path(root) / "texts.txt"
        lines = DATA.read_text(encoding="utf-8").splitlines()[:limit]
        source.write_text("\n".join(lines) + "\n", encoding="utf-8")
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "bare spaCy script (parse + write)": [sys.executable, "-c", BARE_SPACY, str(source),
                                                  str(Path(root) / "bare.conllu"), model, ",".join(UNNEEDED)],
            "structattn parse": cli + ["parse", str(source), "--out", str(Path(root) / "out.conllu"), "--quiet"],
            "structattn parse --help": cli + ["parse", "--help"],
            "structattn structures --help": cli + ["structures", "--help"],
            "structattn structures demo --help": cli + ["structures", "demo", "--help"],
            "python -m ...annotators.commands --help": [sys.executable, "-m", "structattn.structures.annotators.commands", "--help"],
            "python -m ...structures.commands --help": [sys.executable, "-m", "structattn.structures.commands", "--help"],
        }
        best = {name: (float("inf"), float("inf")) for name in commands}
        for _ in range(repeats):
            for name, command in commands.items():
                wall, cpu = run_child(command)
                best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    print(f"# start-up: {len(lines)} lines, best of {repeats} interleaved rounds, fresh processes\n")
    print("| command | wall s | child CPU s | target |")
    print("|---|---:|---:|---|")
    for name, (wall, cpu) in best.items():
        target = f"< {HELP_TARGET} s" if name.endswith("--help") else ""
        print(f"| {name} | {wall:.3f} | {cpu:.3f} | {target} |")
    bare, ours = best["bare spaCy script (parse + write)"], best["structattn parse"]
    print(f"\nstructattn parse / bare spaCy script: {ours[0] / bare[0]:.2f}x wall, {ours[1] / bare[1]:.2f}x CPU "
          f"(target <= {STARTUP_TARGET}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parser", default="spacy", choices=["spacy", "stanza"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=256, help="sentences per provider.batch call")
    parser.add_argument("--limit", type=int, default=None, help="first N sentences only")
    parser.add_argument("--torch-threads", type=int, default=1)
    parser.add_argument("--startup", action="store_true", help="start-up table only (fresh processes)")
    args = parser.parse_args()
    if args.startup:
        startup(args.repeats, args.limit)
        return
    torch.set_num_threads(args.torch_threads)

    texts = [line for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()][: args.limit]
    annotator = get_annotator(args.parser)
    provider = get_provider("dependency")
    provider.batch(annotator.annotate(texts[:20]))  # load the model before timing

    def structures(sentences: list) -> list:
        return [provider.batch(batch) for batch in chunks(sentences, args.batch)]

    with tempfile.TemporaryDirectory(prefix="structattn-bench-") as root:
        def warm_annotations() -> object:
            return structures(annotator.annotate(texts, cache=AnnotationCache(root)))

        def warm_both() -> object:
            sentences = annotator.annotate(texts, cache=AnnotationCache(root))
            cache = StructureCache(root)
            return [cache.batch(batch, provider) for batch in chunks(sentences, args.batch)]

        warm_both()  # fill both caches
        annotations, structure_cache = AnnotationCache(root), StructureCache(root)
        structure_cache.get_or_compute(annotator.annotate(texts, cache=annotations), provider)
        assert annotations.misses == 0 and structure_cache.misses == 0, "caches should be full before timing"

        modes = {
            "parse only": lambda: annotator.annotate(texts),
            "parse + dependency structures": lambda: structures(annotator.annotate(texts)),
            "warm annotation cache + structures": warm_annotations,
            "warm annotation + structure caches": warm_both,
        }
        best = {name: (float("inf"), float("inf")) for name in modes}
        for _ in range(args.repeats):  # interleaved, so that background load hits every mode alike
            for name, run in modes.items():
                wall, cpu = timed(run)
                best[name] = (min(best[name][0], wall), min(best[name][1], cpu))

    base_wall, base_cpu = best["parse only"]
    print(f"{len(texts)} English PUD sentences, parser {args.parser} {annotator.options().get('model', '')}, "
          f"best of {args.repeats}, provider batch {args.batch}, torch threads {args.torch_threads}\n")
    print("| pipeline | wall s | sentences/s | x parse-only | CPU s | x parse-only (CPU) | target | met (wall / CPU) |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for name, (wall, cpu) in best.items():
        target = TARGETS.get(name)
        met = "" if target is None else " / ".join("yes" if r >= target else "NO" for r in (base_wall / wall, base_cpu / cpu))
        print(f"| {name} | {wall:.3f} | {len(texts) / wall:,.0f} | {base_wall / wall:.2f} | {cpu:.3f} | "
              f"{base_cpu / cpu:.2f} | {'' if target is None else f'>= {target:g}'} | {met} |")

    print()
    structure_cache_table(args.repeats)


def structure_cache_table(repeats: int) -> None:
    """Computing structures vs reading them from a warm StructureCache, on the bundled Czech treebank."""
    from structattn.structures import Document
    from structattn.structures.readers.bundled import load_bundled

    sentences = load_bundled()
    documents = [Document(sentences[i:i + 25], id=f"doc{i // 25}") for i in range(0, len(sentences), 25)]
    print("| items (UD Czech PUD) | provider | compute s (CPU) | warm cache s (CPU) | cache speed-up |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="structattn-bench-") as root:
        for label, items, size in [("1000 sentences", sentences, 256), (f"{len(documents)} documents", documents, 8)]:
            batches = chunks(items, size)
            for name in ("dependency", "semantic"):
                provider = get_provider(name)
                for batch in batches:
                    StructureCache(root).batch(batch, provider)  # fill
                compute = min(timed(lambda: [provider.batch(b) for b in batches])[1] for _ in range(repeats))
                cached = min(timed(lambda: [StructureCache(root).batch(b, provider) for b in batches])[1]
                             for _ in range(repeats))
                print(f"| {label} | {name} | {compute:.3f} | {cached:.3f} | {compute / cached:.1f} |")


if __name__ == "__main__":
    main()

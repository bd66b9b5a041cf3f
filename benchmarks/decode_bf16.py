"""bf16 decoding against fp32 on a trained translation checkpoint: the share of test sentences whose output is
the same token for token, sacreBLEU of both, and the time of each, measured in one process.

    python benchmarks/decode_bf16.py CHECKPOINT SOURCES REFERENCES [--limit N] [--threads T]

SOURCES / REFERENCES: one sentence a line (``.gz`` read as gzip), e.g. Multi30k's test_2016_flickr.en.gz and
.de.gz. Decodes greedy and beam 5 (the model's beam), through the ``structattn translate`` path
(:func:`structattn.experiments.translate_command.load_translator`, the recorded parser), in fp32 and under
bfloat16 autocast (``translate_examples(precision='bf16')``). Prints one table; the CPU is named.
"""

from __future__ import annotations

import argparse
import gzip
import tempfile
import time
from pathlib import Path

import sacrebleu
import torch

from structattn.experiments.provenance import cpu_model
from structattn.experiments.translate_command import encode, load_translator, read_input
from structattn.seq2seq import Seq2SeqOptions, translate_examples
from structattn.seq2seq.vocab import detokenize
from structattn.seq2seq.metrics import detokenize_words


def read_lines(path: str) -> list[str]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint")
    parser.add_argument("sources")
    parser.add_argument("references")
    parser.add_argument("--limit", type=int, default=None, help="first N sentences only")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    sources, references = read_lines(args.sources), read_lines(args.references)
    if len(sources) != len(references):
        raise SystemExit(f"{args.sources} has {len(sources)} lines, {args.references} {len(references)}")
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    loaded = load_translator(args.checkpoint)
    needs_trees = any(p.requires for p in loaded.providers.values())
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "sources.txt"
        text.write_text("".join(s + "\n" for s in sources), encoding="utf-8")
        sentences = read_input(text, "text", loaded.meta.get("parser"), needs_trees)
    examples = encode(sentences, loaded.source, loaded.providers)
    options = Seq2SeqOptions(**loaded.meta["seq2seq"])
    language = loaded.meta.get("target_language")

    def text_of(ids):
        line = detokenize(ids, loaded.target)
        return detokenize_words(line.split(), language) if language else line

    print(f"{cpu_model()}, {args.threads} thread(s), torch {torch.__version__}, {len(examples)} sentences, "
          f"{args.checkpoint}")
    print("| search | fp32 s | bf16 s | speed-up | same output | fp32 BLEU | bf16 BLEU |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for beam in (1, options.beam):
        outputs, seconds = {}, {}
        for precision in ("fp32", "bf16"):
            start = time.perf_counter()
            outputs[precision] = translate_examples(loaded.model, examples, options, beam=beam, precision=precision)
            seconds[precision] = time.perf_counter() - start
        same = sum(a == b for a, b in zip(outputs["fp32"], outputs["bf16"])) / len(examples)
        bleu = {p: sacrebleu.corpus_bleu([text_of(h) for h in outputs[p]], [references]).score for p in outputs}
        name = "greedy" if beam == 1 else f"beam {beam}"
        print(f"| {name} | {seconds['fp32']:.1f} | {seconds['bf16']:.1f} | {seconds['fp32'] / seconds['bf16']:.2f}x "
              f"| {same:.1%} | {bleu['fp32']:.2f} | {bleu['bf16']:.2f} |")


if __name__ == "__main__":
    main()

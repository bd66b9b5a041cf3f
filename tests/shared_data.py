"""Where the tests find the shared data that is not bundled (UD English PUD), and a tiny gold CoNLL-U sentence
for parser-accuracy tests."""

import os
from pathlib import Path

#: folders that may hold ``data/``: $STRUCTATTN_SHARED, the folder beside the checkout, this VM's
SHARED = ([Path(os.environ["STRUCTATTN_SHARED"])] if os.environ.get("STRUCTATTN_SHARED") else []) + [
    Path(__file__).resolve().parents[2] / "shared", Path("/work/shared")]
_PUD = Path("data") / "ud_english" / "en_pud-ud-test.conllu"
#: UD English PUD's gold file: the first candidate that exists, else the last (for the skip message)
EN_PUD = next((s / _PUD for s in SHARED if (s / _PUD).is_file()), SHARED[-1] / _PUD)

#: "The dog barks ." with the dot's gold head a format field (3: the verb, as spaCy attaches it; 1: "The")
GOLD = """# sent_id = a
1	The	the	DET	DT	_	2	det	_	_
2	dog	dog	NOUN	NN	_	3	nsubj	_	_
3	barks	bark	VERB	VBZ	_	0	root	_	_
4	.	.	PUNCT	.	_	{dot}	punct	_	_

"""

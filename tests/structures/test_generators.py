"""GrammarGenerator: determinism, valid gold trees (networkx oracle), constituency consistent with the words
and the dependency tree, agreement records recounted from the tree, enhanced edges, document coreference."""

from __future__ import annotations

from collections import Counter

import networkx as nx
import pytest

from structattn.structures import Document, GrammarGenerator, Sentence, get_provider
from tests.structures._brackets import phrase_spans, preterminals, read_brackets

UD_BASIC = {"nsubj", "obj", "det", "amod", "case", "nmod", "obl", "acl:relcl", "conj", "cc", "punct", "root"}
PRONOUNS = {"Sing": {"he", "him", "she", "her", "it"}, "Plur": {"they", "them"}}


def sample(seeds=range(12), per_seed=15, **options) -> list[Sentence]:
    out = []
    for seed in seeds:
        out += GrammarGenerator(seed, **options).sentences(per_seed)
    return out


SENTENCES = sample() + sample(range(100, 104), p_relative=0.6, p_coord=0.5, p_pp=0.5, max_depth=4)


def children(s: Sentence, head: int) -> list[int]:
    return [i for i, h in enumerate(s.heads) if h == head]


def head_graph(s: Sentence) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(range(len(s)))
    g.add_edges_from((h, i) for i, h in enumerate(s.heads) if h >= 0)
    return g


def fingerprint(s: Sentence) -> tuple:
    return (s.words, s.heads, s.deprels, s.edges, s.upos, s.constituency, s.coref, s.meta, s.id)


def test_same_seed_same_output_and_seeds_differ():
    a, b, c = GrammarGenerator(7), GrammarGenerator(7), GrammarGenerator(8)
    assert [fingerprint(s) for s in a.sentences(20)] == [fingerprint(s) for s in b.sentences(20)]
    assert [fingerprint(s) for s in a.agreement_sentences(8)] == [fingerprint(s) for s in b.agreement_sentences(8)]
    da, db = a.document(5), b.document(5)
    assert [fingerprint(s) for s in da.sentences] == [fingerprint(s) for s in db.sentences] and da.coref == db.coref
    assert [s.words for s in GrammarGenerator(7).sentences(20)] != [s.words for s in c.sentences(20)]


def test_every_sentence_is_one_tree_with_ud_labels():
    for s in SENTENCES:
        assert nx.is_arborescence(head_graph(s)), s.id
        assert set(s.deprels) <= UD_BASIC, s.id
        assert s.deprels[s.heads.index(-1)] == "root" and s.upos[s.heads.index(-1)] == "VERB"
        assert s.words[-1] == "." and s.heads[-1] == s.heads.index(-1)


def test_rules_all_fire_and_max_depth_zero_embeds_nothing():
    labels = Counter(d for s in SENTENCES for d in s.deprels)
    for relation in ("nmod", "obl", "acl:relcl", "conj", "amod", "obj"):
        assert labels[relation] > 0, f"no {relation} in the sample: the checks below would be vacuous"
    flat = sample(range(5), max_depth=0)
    assert not {d for s in flat for d in s.deprels} & {"nmod", "obl", "acl:relcl", "conj", "cc", "case"}


def test_constituency_leaves_are_the_words_and_phrases_are_subtrees():
    for s in SENTENCES:
        tree = read_brackets(s.constituency)
        assert tree[0] == "S"
        assert [w for _, w in preterminals(tree)] == list(s.words)
        assert [t for t, _ in preterminals(tree)] == s.meta["xpos"]
        for label, start, end in phrase_spans(tree):
            outside = [i for i in range(start, end) if not start <= s.heads[i] < end]
            assert len(outside) == 1, f"{s.id}: phrase {label} [{start}, {end}) has external heads {outside}"


def recount_attractors(s: Sentence) -> tuple[int, int, int]:
    verb = s.heads.index(-1)
    (subject,) = [i for i in children(s, verb) if s.deprels[i] == "nsubj"]
    number = s.meta["feats"][subject]
    count = sum(1 for k in range(subject + 1, verb) if s.upos[k] == "NOUN" and s.meta["feats"][k] != number)
    return subject, verb, count


@pytest.mark.parametrize("attractors", [0, 1, 2, 4])
def test_agreement_sentences_have_the_requested_attractors(attractors):
    gen = GrammarGenerator(attractors)
    for s in gen.agreement_sentences(25, attractors=attractors):
        subject, verb, count = recount_attractors(s)
        assert (s.meta["subject_index"], s.meta["verb_index"], s.meta["num_attractors"]) == (subject, verb, count)
        assert count == attractors
        subtree = nx.descendants(head_graph(s), subject) | {subject}
        assert set(range(subject, verb)) <= subtree, f"{s.id}: a word between subject and verb is outside the subject"


def test_verb_agrees_with_subject_and_wrong_form_is_the_other_number():
    sentences = SENTENCES + GrammarGenerator(3).agreement_sentences(40, attractors=range(4))
    numbers = Counter()
    for s in sentences:
        subject, verb, count = recount_attractors(s)
        number = s.meta["verb_number"]
        numbers[number] += 1
        assert s.meta["feats"][subject] == s.meta["feats"][verb] == f"Number={number}"
        assert s.words[verb].endswith("s") == (number == "Sing"), f"{s.id}: {s.words[verb]!r} vs {number}"
        wrong = s.meta["wrong_verb_form"]
        assert wrong != s.words[verb] and wrong.endswith("s") == (number == "Plur")
        assert s.meta["num_attractors"] == count
        for k, rel in enumerate(s.deprels):  # every verb agrees with its own subject (a relative's antecedent)
            if rel == "nsubj":
                assert not [c for c in children(s, k) if s.deprels[c] == "conj"], f"{s.id}: coordinated subject {k}"
                verb_k = s.heads[k]
                subject_k = s.heads[verb_k] if k in relative_pronouns(s) else k
                assert s.meta["feats"][subject_k] == s.meta["feats"][verb_k], f"{s.id}: token {k}"
    assert numbers["Sing"] > 0 and numbers["Plur"] > 0
    assert Counter(s.meta["num_attractors"] for s in sentences)[3] > 0


def edge_set(s: Sentence) -> set[tuple[int, int, str]]:
    return {(e.head, e.dependent, e.label) for e in s.edges}


def relative_pronouns(s: Sentence) -> list[int]:
    return [i for i, x in enumerate(s.meta["xpos"]) if x in ("WDT", "WP")]


def test_enhanced_graph_keeps_basic_edges_except_relative_pronouns_and_reaches_every_word():
    for s in SENTENCES:
        edges = edge_set(s)
        rel_prons = set(relative_pronouns(s))
        for i, (h, rel) in enumerate(zip(s.heads, s.deprels)):
            if i not in rel_prons:
                assert any(e[:2] == (h, i) and e[2].split(":")[0] == rel.split(":")[0] for e in edges), (s.id, i)
        g = nx.DiGraph([(h, d) for h, d, _ in edges])
        assert nx.descendants(g, -1) == set(range(len(s))), s.id
    structure = get_provider("semantic").batch(SENTENCES[:10])  # the library's view of the same graphs
    assert ((structure.distance >= 0) == (structure.token_mask[:, :, None] & structure.token_mask[:, None, :])).all()


def test_subject_propagates_to_coordinated_verbs():
    gen = GrammarGenerator(11, max_depth=1, p_coord=1.0, p_relative=0.0, p_pp=0.0)
    for s in gen.sentences(10):
        root = s.heads.index(-1)
        (subject,) = [i for i in children(s, root) if s.deprels[i] == "nsubj"]
        (second,) = [i for i in children(s, root) if s.deprels[i] == "conj"]
        (cc,) = [i for i in children(s, second) if s.deprels[i] == "cc"]
        edges = edge_set(s)
        assert (second, subject, "nsubj") in edges
        assert (root, second, f"conj:{s.words[cc]}") in edges
        assert s.words[second].endswith("s") == s.words[root].endswith("s")  # both verbs agree with the subject


def test_object_conjuncts_share_their_governor():
    gen = GrammarGenerator(5, max_depth=2, p_coord=1.0, p_transitive=1.0, p_relative=0.0, p_pp=0.0)
    seen = 0
    for s in gen.sentences(10):
        for c, rel in enumerate(s.deprels):
            first = s.heads[c]
            if rel == "conj" and s.upos[c] == "NOUN" and s.deprels[first] == "obj":
                assert (s.heads[first], c, "obj") in edge_set(s)
                seen += 1
    assert seen > 0


@pytest.mark.parametrize("p_object_relative,role", [(0.0, "nsubj"), (1.0, "obj")])
def test_relative_pronoun_links_to_its_antecedent(p_object_relative, role):
    gen = GrammarGenerator(2, max_depth=1, p_relative=1.0, p_object_relative=p_object_relative, p_pp=0.0, p_coord=0.0)
    for s in gen.sentences(10):
        prons = relative_pronouns(s)
        assert prons, f"{s.id}: p_relative=1 gave no relative clause"
        edges = edge_set(s)
        for r in prons:
            verb = s.heads[r]
            antecedent = s.heads[verb]
            assert s.deprels[r] == role and s.deprels[verb] == "acl:relcl" and s.upos[antecedent] == "NOUN"
            assert [e for e in edges if e[1] == r] == [(antecedent, r, "ref")]
            assert (verb, antecedent, role) in edges and (antecedent, verb, "acl:relcl") in edges


def test_documents_have_valid_agreeing_coreference_chains():
    pronoun_links = 0
    for seed in range(15):
        doc = GrammarGenerator(seed).document(6)
        assert isinstance(doc, Document) and len(doc.sentences) == 6
        words, upos = doc.words, [u for s in doc.sentences for u in s.upos]
        feats = [f for s in doc.sentences for f in s.meta["feats"]]
        sentence_of = [k for k, s in enumerate(doc.sentences) for _ in s.words]
        for s, off in zip(doc.sentences, doc.offsets):
            assert s.doc_id == doc.id and s.coref == ()
            assert nx.is_arborescence(head_graph(s))
        for cluster in doc.coref:
            assert len(cluster) >= 2
            assert len({sentence_of[m.head] for m in cluster}) == len(cluster), "two mentions in one sentence"
            first = cluster[0]
            assert upos[first.head] == "NOUN", "a chain starts with a full NP"
            for m in cluster:
                assert 0 <= m.start <= m.head < m.end <= len(words)
                assert feats[m.head] == feats[first.head], f"{doc.id}: mention {m} disagrees in number"
                if upos[m.head] == "PRON":
                    pronoun_links += 1
                    assert m.end - m.start == 1
                    assert words[m.head] in PRONOUNS[feats[first.head].split("=")[1]]
                else:
                    assert words[m.head] == words[first.head]
        assert get_provider("coreference")(doc).distance.shape == (len(doc), len(doc))
    assert pronoun_links > 5


def test_bad_options_raise_naming_the_option():
    with pytest.raises(ValueError, match="p_pp"):
        GrammarGenerator(0, p_pp=1.5)
    with pytest.raises(ValueError, match="max_depth"):
        GrammarGenerator(0, max_depth=-1)
    with pytest.raises(ValueError, match="attractor"):
        GrammarGenerator(0).agreement_sentences(3, attractors=[-1])
    with pytest.raises(ValueError, match="num_sentences"):
        GrammarGenerator(0).document(0)

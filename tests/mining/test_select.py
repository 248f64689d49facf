import json

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_sciner.mining.dictionary import TermDictionary
from spacy_sciner.mining.select import Relevance, select_sentences, write_corpus

LINES = [
    "A random forest and a support vector machine (SVM) beat gene expression baselines.",
    "A random forest is used here today.",
    "Nothing to see in this one at all.",
    "Gene expression of cells.",
    "ok",
]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "aux.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf8")
    return str(path)


@pytest.fixture
def dictionary():
    d = TermDictionary()
    d.add("random forest", "dict")
    d.add("gene expression", "phrase")
    return d


def texts(items):
    return [" ".join(i["words"]) for i in items]


def test_top_bottom_random(corpus, dictionary):
    top, report = select_sentences([corpus], dictionary, n=2, mode="top", progress=False)
    assert [i["score"] for i in top] == [3.0, 1.0]
    assert texts(top)[0].startswith("A random forest and") and top[0]["source"] == f"{corpus}:1"
    # Longest first: the whole definition "support vector machine ( SVM )" wins over
    # its long and short forms.
    assert top[0]["spans"] == [(1, 3, "dict"), (5, 11, "pattern"), (12, 14, "phrase")]
    assert report["skipped_too_short"] == 1 and report["sentences_seen"] == 5
    bottom, _ = select_sentences([corpus], dictionary, n=1, mode="bottom", progress=False)
    assert texts(bottom) == ["Nothing to see in this one at all ."]
    draws = {tuple(texts(select_sentences([corpus], dictionary, n=2, mode="random", seed=s,
                                          progress=False)[0])) for s in range(8)}
    assert len(draws) > 2 and all(len(d) == 2 for d in draws)


def test_relevance_weighting(corpus, dictionary):
    entity = Relevance("entity", entities=["gene expression"])
    items, _ = select_sentences([corpus], dictionary, n=4, relevance=entity, progress=False)
    # "Gene expression of cells" (1 candidate, all relevant) ties with the random forest one
    # (1 candidate, none relevant) without weighting, and wins with it.
    assert [round(i["score"], 2) for i in items] == [4.0, 2.0, 1.0, 0.0]
    assert texts(items)[1] == "Gene expression of cells ."
    tfidf = Relevance("tfidf", sentences=[["random", "forest", "classifiers"]])
    items, _ = select_sentences([corpus], dictionary, n=2, relevance=tfidf,
                                relevance_weight=10, progress=False)
    assert texts(items)[1] == "A random forest is used here today ."
    with pytest.raises(ValueError, match="needs training"):
        Relevance("tfidf")


def test_outputs_docbin_and_jsonl(tmp_path, corpus, dictionary):
    items, _ = select_sentences([corpus], dictionary, n=3, progress=False)
    write_corpus(items, str(tmp_path / "pft.jsonl"))
    records = [json.loads(line) for line in (tmp_path / "pft.jsonl").read_text().splitlines()]
    assert set(records[0]) == {"text", "tokens", "candidates"}
    assert records[0]["text"] == LINES[0]
    assert records[0]["candidates"][1] == [5, 11, "pattern"]
    write_corpus(items, str(tmp_path / "pft.spacy"))
    nlp = spacy.blank("en")
    docs = list(DocBin().from_disk(tmp_path / "pft.spacy").get_docs(nlp.vocab))
    assert [d.text for d in docs] == [r["text"] for r in records]
    assert [(s.start, s.end, s.label_) for s in docs[0].spans["candidates"]] == [
        tuple(c) for c in records[0]["candidates"]]
    with pytest.raises(ValueError, match="must end in"):
        write_corpus(items, str(tmp_path / "pft.txt"))


def test_two_processes_select_the_same_sentences(tmp_path, dictionary):
    path = tmp_path / "many.txt"
    path.write_text("\n".join(f"{line} Line {i} ." for i in range(12) for line in LINES[:4]) + "\n")
    for mode in ("top", "random"):
        one, _ = select_sentences([str(path)], dictionary, n=10, mode=mode, batch_lines=5,
                                  progress=False)
        two, report = select_sentences([str(path)], dictionary, n=10, mode=mode, batch_lines=5,
                                       n_process=2, progress=False)
        assert report["n_process"] == 2 and report["sentences_seen"] == 96  # each line is split in two
        assert [(i["source"], i["spans"]) for i in one] == [(i["source"], i["spans"]) for i in two]


def test_docbin_input(tmp_path, dictionary):
    nlp = spacy.blank("en")
    docs = [nlp("A random forest (RF) works. The RF is fast."), nlp("Nothing here."), nlp(" ")]
    DocBin(docs=docs).to_disk(tmp_path / "aux.spacy")
    items, report = select_sentences([str(tmp_path / "aux.spacy")], dictionary, n=5,
                                     tokenizer="whitespace", progress=False)
    assert report["read"]["lines"] == 3 and report["read"]["empty_lines_skipped"] == 1
    # One document: the acronym defined in its first sentence is found in the second.
    assert [(" ".join(i["words"]), i["spans"]) for i in items][:2] == [
        ("A random forest ( RF ) works .", [(1, 6, "pattern")]),
        ("The RF is fast .", [(1, 2, "pattern")])]
    assert items[0]["source"] == f"{tmp_path / 'aux.spacy'}:1"

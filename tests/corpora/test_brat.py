import pytest
import spacy

from spacy_sciner.corpora import CorpusFormatError, read_brat
from spacy_sciner.corpora.common import ConversionStats, count_docs

TEXT = "Mutations in BRCA1 cause breast and ovarian cancer.\nTP53 is mutated in lymphoma."


def offsets(text, sub, start=0):
    begin = text.index(sub, start)
    return begin, begin + len(sub)


def ann_lines(text):
    brca1 = offsets(text, "BRCA1")
    breast = offsets(text, "breast")
    cancer = offsets(text, "cancer")
    ovarian = offsets(text, "ovarian cancer")
    tp53 = offsets(text, "TP53")
    mutat = offsets(text, "Mutation")  # not a token boundary: "Mutations"
    return [
        f"T1\tGene_or_gene_product {brca1[0]} {brca1[1]}\tBRCA1",
        f"T2\tCancer {breast[0]} {breast[1]};{cancer[0]} {cancer[1]}\tbreast cancer",
        f"T3\tCancer {ovarian[0]} {ovarian[1]}\tovarian cancer",
        f"T4\tGene_or_gene_product {tp53[0]} {tp53[1]}\tTP53",
        f"T5\tMutation {mutat[0]} {mutat[1]}\tMutation",
        "E1\tDevelopment:T3 Theme:T1",
        "R1\tAssoc Arg1:T1 Arg2:T3",
        "A1\tNegation E1",
        "M1\tSpeculation E1",
        "#1\tAnnotatorNotes T1\ta note",
        "N1\tReference T1 HGNC:1100\tBRCA1",
        "*\tEquiv T1 T4",
        "",
    ]


@pytest.fixture
def nlp():
    return spacy.blank("en")


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "brat"
    (root / "sub").mkdir(parents=True)
    (root / "doc1.txt").write_text(TEXT, encoding="utf8")
    (root / "doc1.ann").write_text("\n".join(ann_lines(TEXT)), encoding="utf8")
    (root / "sub" / "doc2.txt").write_text("No entities here.", encoding="utf8")
    (root / "sub" / "doc2.ann").write_text("", encoding="utf8")
    return root


def read(path, nlp, **kwargs):
    stats = ConversionStats()
    docs = list(count_docs(read_brat(path, nlp, stats=stats, **kwargs), "sc", stats))
    return docs, stats


def test_brat_directory_merge_default(corpus, nlp):
    with pytest.warns(UserWarning, match="1 mentions expanded to token boundaries"):
        docs, stats = read(corpus, nlp)
    assert [d.user_data["doc_key"] for d in docs] == ["doc1", "sub/doc2"]
    doc = docs[0]
    assert doc.text == TEXT
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [
        ("Mutations", "Mutation"),
        ("BRCA1", "Gene_or_gene_product"),
        ("breast and ovarian cancer", "Cancer"),
        ("ovarian cancer", "Cancer"),
        ("TP53", "Gene_or_gene_product"),
    ]
    # Overlap: the longer merged mention wins doc.ents, the nested one stays in spans.
    assert [e.text for e in doc.ents] == ["Mutations", "BRCA1", "breast and ovarian cancer", "TP53"]
    assert (stats.discontinuous, stats.misaligned, stats.ents_dropped, stats.nested_pairs) == (1, 1, 1, 1)
    assert "'Mutation' expanded to 'Mutations'" in stats.notes[0]
    assert "doc1.ann:5:" in stats.notes[0]
    assert dict(stats.ignored_lines) == {
        "events": 1, "relations": 1, "attributes": 1, "modifications": 1,
        "notes": 1, "normalizations": 1, "equivalences": 1,
    }
    assert len(docs[1].spans["sc"]) == 0 and stats.docs == 2 and stats.entities == 5
    # Tokenizer only: no sentence boundaries are invented.
    assert (stats.sentences, stats.unsplit_docs) == (0, 2)


def test_brat_discontinuous_options(corpus, nlp):
    with pytest.warns(UserWarning):
        docs, stats = read(corpus / "doc1.ann", nlp, discontinuous="fragments")
    spans = [(s.text, s.label_) for s in docs[0].spans["sc"]]
    assert ("breast", "Cancer") in spans and ("cancer", "Cancer") in spans
    assert ("breast and ovarian cancer", "Cancer") not in spans
    assert stats.discontinuous == 1 and len(spans) == 6
    with pytest.raises(CorpusFormatError, match=r"doc1.ann:2: T2 is discontinuous"):
        read(corpus / "doc1.txt", nlp, discontinuous="error")
    with pytest.raises(ValueError, match="discontinuous"):
        read(corpus, nlp, discontinuous="drop")


def test_brat_accepts_tokenizer_and_crlf(tmp_path, nlp):
    text = "Line one.\r\nThe p53 protein."
    (tmp_path / "a.txt").write_bytes(text.encode("utf8"))
    start, end = offsets(text, "p53")
    (tmp_path / "a.ann").write_bytes(f"T1\tGene {start} {end}\tp53\r\n".encode("utf8"))
    (doc,), stats = read(tmp_path / "a.txt", nlp.tokenizer)
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [("p53", "Gene")]
    assert stats.misaligned == 0


@pytest.mark.parametrize(
    "line,message",
    [
        ("T9\tCancer 25 31\tbreast!", "annotated text 'breast!' differs from the .txt"),
        ("T9\tCancer 70 999\tx", "outside the text"),
        ("T9\tCancer 31 25\tx", "end <= start"),
        ("T9\tCancer a b\tx", "bad offsets"),
        ("T9\tCancer 25 31", "malformed line"),
        ("X9\tfoo", "malformed line"),
    ],
)
def test_brat_bad_annotation_lines(corpus, nlp, line, message):
    lines = ann_lines(TEXT)
    lines.insert(2, line)
    (corpus / "doc1.ann").write_text("\n".join(lines), encoding="utf8")
    with pytest.raises(CorpusFormatError, match=message) as info:
        read(corpus, nlp)
    assert str(info.value).startswith(f"{corpus / 'doc1.ann'}:3: ")


def test_brat_missing_or_empty_files(tmp_path, nlp):
    with pytest.raises(CorpusFormatError, match="no .txt files"):
        read(tmp_path, nlp)
    (tmp_path / "a.txt").write_text("Some text.", encoding="utf8")
    with pytest.raises(CorpusFormatError, match="no annotation file a.ann"):
        read(tmp_path, nlp)
    (tmp_path / "a.ann").write_text("", encoding="utf8")
    (tmp_path / "b.ann").write_text("", encoding="utf8")
    with pytest.raises(CorpusFormatError, match="no text file b.txt"):
        read(tmp_path / "b.ann", nlp)
    (tmp_path / "a.txt").write_text("  \n", encoding="utf8")
    with pytest.raises(CorpusFormatError, match="empty text file"):
        read(tmp_path / "a.txt", nlp)
    # A span over whitespace only cannot be aligned to any token.
    (tmp_path / "a.txt").write_text("x  y", encoding="utf8")
    (tmp_path / "a.ann").write_text("T1\tX 1 2\t ", encoding="utf8")
    with pytest.raises(CorpusFormatError, match=r"a.ann:1: T1: characters 1..2 cover no token"):
        read(tmp_path / "a.txt", nlp)


def test_line_docs_one_per_sentence_with_offsets_shifted(tmp_path):
    import spacy
    from spacy_sciner.corpora.brat import read_brat

    text = "We use SVM here.\n\nCRF models tag words.\n"
    (tmp_path / "a.txt").write_text(text)
    (tmp_path / "a.ann").write_text("T1\tMethod 7 10\tSVM\nT2\tMethod 18 21\tCRF\n")
    docs = list(read_brat(tmp_path, spacy.blank("en"), doc_unit="line"))
    assert [d.text for d in docs] == ["We use SVM here.", "CRF models tag words."]
    assert [[(s.text, s.label_) for s in d.spans["sc"]] for d in docs] == [[("SVM", "Method")], [("CRF", "Method")]]
    assert [d.user_data["doc_key"] for d in docs] == ["a#L1", "a#L3"]


def test_line_docs_mention_across_lines_is_an_error(tmp_path):
    import pytest
    import spacy
    from spacy_sciner.corpora.brat import read_brat
    from spacy_sciner.corpora.common import CorpusFormatError

    (tmp_path / "a.txt").write_text("deep\nlearning\n")
    (tmp_path / "a.ann").write_text("T1\tMethod 0 13\tdeep\nlearning\n".replace("deep\nlearning", "deep learning"))
    with pytest.raises(CorpusFormatError, match=r"a.ann:1.*crosses a line break"):
        list(read_brat(tmp_path, spacy.blank("en"), doc_unit="line"))

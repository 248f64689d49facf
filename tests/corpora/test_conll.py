import os

import pytest
import spacy

from spacy_sciner.corpora import CorpusFormatError, read_conll
from spacy_sciner.corpora.common import ConversionStats, count_docs

# From the READMEs in /work/shared/data: (sentences, tokens, entities) per split.
SCIERC_CONLL = {"train": (1861, 45412, 5572), "dev": (275, 6521, 808), "test": (551, 13401, 1683)}
BIONLP13CG = {"train": (3033, 83467, 10826), "dev": (1003, 27599, 3616), "test": (1906, 52771, 6881)}
SCIERC_CONLL_TRAIN_TYPES = {
    "Generic": 950, "Material": 541, "Method": 1436, "Metric": 231, "OtherScientificTerm": 1527, "Task": 887,
}


@pytest.fixture(scope="module")
def vocab():
    return spacy.blank("en").vocab


def convert(path, vocab, **kwargs):
    stats = ConversionStats()
    docs = list(count_docs(read_conll(path, vocab, stats=stats, **kwargs), kwargs.get("spans_key", "sc"), stats))
    return docs, stats


def spans_of(docs):
    return [[(s.start, s.end, s.label_) for s in doc.spans["sc"]] for doc in docs]


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_scierc_conll_iob1_counts(shared_data, vocab, split):
    path = os.path.join(shared_data, "scierc", "conll", f"{split}.txt")
    docs, stats = convert(path, vocab)
    assert stats.schemes == {path: "iob1"}
    assert (stats.sentences, stats.tokens, stats.entities) == SCIERC_CONLL[split]
    assert stats.ents_dropped == 0 and stats.repairs == 0 and stats.unsplit_docs == 0
    assert all(len(list(doc.sents)) == 1 for doc in docs[:50])
    # One -DOCSTART- per abstract: 350/50/100 documents.
    assert docs[-1].user_data["doc_index"] + 1 == {"train": 350, "dev": 50, "test": 100}[split]
    if split == "train":
        assert dict(stats.labels) == SCIERC_CONLL_TRAIN_TYPES
        # IOB1 B- separates two adjacent chunks of one type (4 B- tags in train).
        adjacent = [
            (a, b) for doc in docs for a, b in zip(doc.spans["sc"], list(doc.spans["sc"])[1:])
            if a.end == b.start and a.label_ == b.label_
        ]
        assert len(adjacent) == 4
        # Read as IOB2 the same file is an error: it has chunks starting with I-.
        with pytest.raises(CorpusFormatError, match=r"train.txt:\d+: I-\w+ does not continue"):
            convert(path, vocab, scheme="iob2")


@pytest.mark.parametrize("split", ["train", "dev", "test"])
def test_bionlp13cg_iob2_and_iobes_identical(shared_data, vocab, split):
    iob_path = os.path.join(shared_data, "BioNLP13CG", f"{split}.tsv")
    iobes_path = os.path.join(shared_data, "BioNLP13CG", "iobes", f"{split}.tsv")
    iob_docs, iob_stats = convert(iob_path, vocab)
    iobes_docs, iobes_stats = convert(iobes_path, vocab)
    assert iob_stats.schemes == {iob_path: "iob2"}
    assert iobes_stats.schemes == {iobes_path: "iobes"}
    assert (iob_stats.sentences, iob_stats.tokens, iob_stats.entities) == BIONLP13CG[split]
    assert spans_of(iob_docs) == spans_of(iobes_docs)
    assert [d.text for d in iob_docs] == [d.text for d in iobes_docs]
    if split == "dev":
        assert iob_stats.labels["Gene_or_gene_product"] == 1360
        assert iob_stats.labels["Cancer"] == 432


def write(tmp_path, text, name="x.tsv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf8")
    return path


def test_layouts_docstart_and_schemes(tmp_path, vocab):
    text = (
        "-DOCSTART- -X- O O\n\n"
        "EU NNP B-NP I-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP I-MISC\ncall NN I-NP O\n\n"
        "-DOCSTART- -X- O O\n\n"
        "Peter NNP B-NP I-PER\nBlackburn NNP I-NP I-PER\nMary NNP I-NP B-PER\n"
    )
    docs, stats = convert(write(tmp_path, text, "x.txt"), vocab)
    assert next(iter(stats.schemes.values())) == "iob1"
    assert [d.user_data["doc_index"] for d in docs] == [0, 1]
    assert [[(s.text, s.label_) for s in d.spans["sc"]] for d in docs] == [
        [("EU", "ORG"), ("German", "MISC")],
        [("Peter Blackburn", "PER"), ("Mary", "PER")],
    ]
    assert [e.text for e in docs[1].ents] == ["Peter Blackburn", "Mary"]

    tab = "IL\tB-Gene\n-\tI-Gene\n2\tE-Gene\ncells\tS-Cell\n\nT\tS-Cell\nlymph\tB-Tissue\nnode\tE-Tissue\nx\tO\n"
    docs, stats = convert(write(tmp_path, tab), vocab)
    assert next(iter(stats.schemes.values())) == "iobes"
    assert [[(s.text, s.label_) for s in d.spans["sc"]] for d in docs] == [
        [("IL - 2", "Gene"), ("cells", "Cell")],
        [("T", "Cell"), ("lymph node", "Tissue")],
    ]
    iob2 = "IL\tB-Gene\n-\tI-Gene\n2\tI-Gene\ncells\tB-Cell\n"
    (doc,), stats = convert(write(tmp_path, iob2, "y.tsv"), vocab)
    assert next(iter(stats.schemes.values())) == "iob2"
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [("IL - 2", "Gene"), ("cells", "Cell")]
    bilou = "a\tU-X\nb\tB-Y\nc\tL-Y\n"
    (doc,), _ = convert(write(tmp_path, bilou, "z.tsv"), vocab)
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [("a", "X"), ("b c", "Y")]


def test_iob1_and_iob2_read_the_same_tags_differently(tmp_path, vocab):
    path = write(tmp_path, "a\tI-X\nb\tB-X\nc\tI-X\n")
    (iob1,), _ = convert(path, vocab, scheme="iob1")
    assert [(s.start, s.end) for s in iob1.spans["sc"]] == [(0, 1), (1, 3)]
    with pytest.raises(CorpusFormatError) as info:
        convert(path, vocab, scheme="iob2")
    assert f"{path}:1: I-X does not continue a X chunk (IOB2)" in str(info.value)
    assert "--repair" in str(info.value)


def test_iob2_repair_is_counted_and_warned(tmp_path, vocab):
    path = write(tmp_path, "a\tO\nb\tI-X\nc\tI-X\nd\tB-Y\ne\tI-Z\n")
    with pytest.warns(UserWarning, match="2 tag sequences repaired"):
        (doc,), stats = convert(path, vocab, scheme="iob2", repair=True)
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [("b c", "X"), ("d", "Y"), ("e", "Z")]
    assert stats.repairs == 2
    assert stats.notes[0] == f"{path}:2: I-X does not continue a X chunk: start a chunk (B-X)"


@pytest.mark.parametrize(
    "tags,line,message,repaired",
    [
        (["B-X", "O"], 1, "B-X is not closed by E-X", [(0, 1, "X")]),
        (["B-X", "I-X"], 2, "I-X at sentence end is not closed", [(0, 2, "X")]),
        (["O", "E-X"], 2, "E-X does not continue", [(1, 2, "X")]),
        (["O", "I-X", "E-X"], 2, "I-X does not continue", [(1, 3, "X")]),
        (["B-X", "E-Y"], 1, "B-X is not closed by E-X", [(0, 1, "X"), (1, 2, "Y")]),
        (["B-X", "S-X"], 1, "B-X is not closed by E-X", [(0, 1, "X"), (1, 2, "X")]),
    ],
)
def test_iobes_inconsistencies(tmp_path, vocab, tags, line, message, repaired):
    path = write(tmp_path, "".join(f"w{i}\t{t}\n" for i, t in enumerate(tags)))
    with pytest.raises(CorpusFormatError, match=message) as info:
        convert(path, vocab, scheme="iobes")
    assert f"{path}:{line}:" in str(info.value)
    with pytest.warns(UserWarning, match="repaired"):
        (doc,), stats = convert(path, vocab, scheme="iobes", repair=True)
    assert [(s.start, s.end, s.label_) for s in doc.spans["sc"]] == repaired
    assert stats.repairs >= 1


@pytest.mark.parametrize(
    "text,line,message",
    [
        ("a\tO\nb\tX-Foo\n", 2, "unknown tag 'X-Foo'"),
        ("a\tO\nb\tB-\n", 2, "unknown tag 'B-'"),
        ("a\tO\n\nlonely\n", 3, "malformed line 'lonely'"),
        ("a O\nb\n", 2, "malformed line"),
        ("a\tO\nb\tE-X\n", 2, "E-X is not valid in IOB2"),
    ],
)
def test_bad_lines(tmp_path, vocab, text, line, message):
    path = write(tmp_path, text)
    scheme = "iob2" if "E-X" in text else "auto"
    with pytest.raises(CorpusFormatError, match=message) as info:
        convert(path, vocab, scheme=scheme)
    assert str(info.value).startswith(f"{path}:{line}: ")


@pytest.mark.parametrize("text", ["", "\n\n", "   \n"])
def test_empty_file(tmp_path, vocab, text):
    with pytest.raises(CorpusFormatError, match="empty file"):
        convert(write(tmp_path, text), vocab)


def test_bad_scheme_name(tmp_path, vocab):
    with pytest.raises(ValueError, match="scheme"):
        convert(write(tmp_path, "a\tO\n"), vocab, scheme="bio")


def test_unusual_whitespace_keeps_tokens_and_line_numbers(tmp_path, vocab):
    # NBSP inside a token and U+2028 in a token must not split columns or lines.
    path = write(tmp_path, "10\u00a0mg\tB-Dose\na\u2028b\tO\nc\tX-Foo\n")
    with pytest.raises(CorpusFormatError) as info:
        convert(path, vocab)
    assert str(info.value).startswith(f"{path}:3: unknown tag")
    path = write(tmp_path, "10\u00a0mg B-Dose\nx O\n", "space.txt")
    (doc,), _ = convert(path, vocab)
    assert [t.text for t in doc] == ["10\u00a0mg", "x"]
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [("10\u00a0mg", "Dose")]

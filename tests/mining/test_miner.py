import pytest

from spacy_sciner.mining.candidates import CandidateTable
from spacy_sciner.mining.dictionary import TermDictionary
from spacy_sciner.mining.miner import MinerConfig, mine
from spacy_sciner.mining.text import read_documents, split_sentences, tokenize, tokenize_with_spaces

SENTENCES = [
    "We train a support vector machine (SVM) on gene expression data.",
    "The SVM is compared with a random forest on gene expression profiles.",
    "Deep belief networks learn gene expression features.",
]


def write_corpus(tmp_path, lines, name="corpus.txt"):
    path = tmp_path / name
    path.write_bytes(b"\n".join(line if isinstance(line, bytes) else line.encode("utf8")
                                for line in lines) + b"\n")
    return str(path)


def test_tokenizers():
    assert tokenize("IL-2 (p<0.05), e.g. Fe-S.") == [
        "IL-2", "(", "p", "<", "0.05", ")", ",", "e.g", ".", "Fe-S", "."]
    assert tokenize("a  b\tc", "whitespace") == ["a", "b", "c"]
    words, spaces = tokenize_with_spaces("SVM (a).")
    assert words == ["SVM", "(", "a", ")", "."] and spaces == [True, False, False, False, False]
    assert split_sentences("We use it . It works , et al . 2 were .".split()) == [
        ["We", "use", "it", "."], ["It", "works", ",", "et", "al", ".", "2", "were", "."]]
    with pytest.raises(ValueError, match="Unknown tokenizer"):
        tokenize("x", "spacy")


def test_mine_each_source_on_known_sentences(tmp_path):
    path = write_corpus(tmp_path, SENTENCES * 4)
    dictionary = TermDictionary()
    dictionary.add("random forest")
    table, report = mine([path], dictionary, MinerConfig(min_count=3, threshold=0.0),
                         progress=False)
    rows = table.rows
    assert rows["random forest"].sources.startswith("dict") and rows["random forest"].freq == 4
    assert rows["support vector machine"].sources in ("pattern", "pattern|phrase")
    # Each line is a document: "The SVM" of the next line is not a use of the definition.
    assert rows["SVM"].sources == "pattern" and rows["SVM"].freq == 4
    assert "phrase" in rows["gene expression"].sources and rows["gene expression"].freq == 12
    assert rows["gene expression"].quality is not None
    assert report["lines"] == 12 and report["by_source"]["pattern"] == 3
    assert [r.freq for r in table.sorted()] == sorted((r.freq for r in table.sorted()), reverse=True)
    top = table.top_percent(50)
    assert len(top) == -(-len(table) // 2) and min(r.freq for r in top.rows.values()) >= max(
        r.freq for r in table.rows.values() if r.text not in top.rows)


def test_two_processes_give_the_same_table(tmp_path):
    path = write_corpus(tmp_path, SENTENCES * 30)
    cfg = MinerConfig(min_count=3)
    one, _ = mine([path], None, cfg, n_process=1, batch_lines=7, progress=False)
    two, report = mine([path], None, cfg, n_process=2, batch_lines=7, progress=False)
    assert report["n_process"] == 2
    assert [(r.text, r.sources, r.freq) for r in one.sorted()] == [
        (r.text, r.sources, r.freq) for r in two.sorted()]


def test_bad_input_is_repaired_or_skipped_and_counted(tmp_path):
    long_line = ("support vector machine ( SVM ) " * 4000)[:100_000]
    lines = ["", "   ", b"bad \xff\xfe bytes in a support vector machine ( SVM )",
             "control\x00chars\x07 here", long_line, SENTENCES[0]]
    path = write_corpus(tmp_path, lines)
    table, report = mine([path], None, MinerConfig(min_count=2), progress=False)
    read = report["read"]
    assert (read["lines"], read["empty_lines_skipped"], read["lines_with_invalid_utf8_replaced"],
            read["lines_with_control_chars_replaced"]) == (6, 2, 1, 1)
    assert f"{path}:3: invalid UTF-8 replaced by U+FFFD" in read["examples"]
    assert report["lines"] == 4 and report["tokens"] > 19000
    # The 100k-character line is mined like any other: every "( SVM )" is a definition.
    assert table.rows["SVM"].freq >= 2000
    docs = list(read_documents([path]))
    assert [line for doc in docs for _, line, _ in doc] == [3, 4, 5, 6]
    assert "\ufffd" in docs[0][0][2] and "\x00" not in docs[1][0][2]


def test_empty_corpus_gives_an_empty_table(tmp_path):
    path = write_corpus(tmp_path, ["", ""])
    table, report = mine([path], None, MinerConfig(), progress=False)
    assert len(table) == 0 and report["lines"] == 0 and report["read"]["empty_lines_skipped"] == 2
    out = tmp_path / "empty.tsv"
    table.write(str(out))
    assert len(CandidateTable.read(str(out))) == 0


def test_table_round_trip_and_bad_row(tmp_path):
    table = CandidateTable()
    table.add("SVM", "pattern", 3)
    table.add("gene expression", "phrase", 5, 0.9)
    table.add("SVM", "dict", 2)
    path = tmp_path / "c.tsv"
    table.write(str(path))
    assert path.read_text().splitlines() == [
        "text\tsources\tfreq\tquality", "SVM\tdict|pattern\t5\t", "gene expression\tphrase\t5\t0.9000"]
    assert CandidateTable.read(str(path)).rows == table.rows
    path.write_text("text\tsources\tfreq\tquality\nSVM\tdict\tmany\t\n")
    with pytest.raises(ValueError, match=r"c\.tsv:2: bad candidate row"):
        CandidateTable.read(str(path))


def test_blank_line_documents_share_acronyms(tmp_path):
    path = write_corpus(tmp_path, ["A hidden Markov model (HMM) is used.", "The HMM works.",
                                   "", "An HMM again."])
    table, _ = mine([path], None, MinerConfig(sources=("pattern",), doc_boundary="blank"),
                    progress=False)
    # Two uses in the defining document; the HMM of the next document is not a candidate.
    assert table.rows["HMM"].freq == 2

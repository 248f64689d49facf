"""``sciner label-weak``: label sources, conflict rules, CLI, bad input, determinism, noise."""
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest
from spacy.tokens import Doc, DocBin, Span
from spacy.vocab import Vocab
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.weak.labeling import AMBIGUOUS, Labeler
from spacy_sciner.weak.noise import noise_report
from spacy_sciner.weak.sources import LabelSources, TypeMapError, read_type_map

SENTENCES = ["Breast cancer cells resist aspirin .",
             "The cancerous tissue took up cold water .",
             "A common cold and the BRCA1 gene ."]


@pytest.fixture
def gazetteers(tmp_path):
    """Plain list, BEL file and term<TAB>label list, with a type map naming them."""
    (tmp_path / "diseases.txt").write_text("breast cancer\ncancer\ncommon cold\ncold\n...\n")
    (tmp_path / "chem.belns").write_text(
        "[Namespace]\nKeyword=CHEM\n\n[Values]\naspirin|A\ncold|A\nwater|A\n")
    (tmp_path / "typed.tsv").write_text("BRCA1\tGene\nbreast cancer cells\tCell\n")
    (tmp_path / "map.tsv").write_text(
        "# comment\nfile\tlabel\ndiseases.txt\tDisease\nchem.belns\tChemical\ntyped.tsv\t*\n")
    return tmp_path


def make_labeler(directory, conflict="priority"):
    sources = LabelSources()
    sources.add_type_map(read_type_map(directory / "map.tsv"))
    return Labeler(sources, conflict)


def label(labeler, sentences=SENTENCES):
    counts = Counter()
    spans = labeler.label_tokens([s.split() for s in sentences], counts)
    return [[(" ".join(s.split()[a:b]), lab, kb) for a, b, lab, kb in found] for s, found in
            zip(sentences, spans)], counts


def test_type_map_sources_longest_match_and_priority(gazetteers):
    labeled, counts = label(make_labeler(gazetteers))
    # Longest match wins across files ("breast cancer cells" over "breast cancer");
    # "cancerous" holds "cancer" inside a word: no match.
    assert labeled[0] == [("Breast cancer cells", "Cell", "typed.tsv"),
                          ("aspirin", "Chemical", "chem.belns")]
    # "cold" is a Disease and a Chemical: the first type-map row has priority.
    assert labeled[1] == [("cold", "Disease", "diseases.txt"), ("water", "Chemical", "chem.belns")]
    assert labeled[2] == [("common cold", "Disease", "diseases.txt"), ("BRCA1", "Gene", "typed.tsv")]
    assert counts["conflict:Chemical/Disease"] == 1
    assert counts["label:Disease"] == 2


def test_conflict_ambiguous_marks_and_keeps_every_type(gazetteers):
    labeled, counts = label(make_labeler(gazetteers, "ambiguous"))
    assert labeled[1][0] == ("cold", AMBIGUOUS, "Disease:diseases.txt|Chemical:chem.belns")
    assert counts["label:" + AMBIGUOUS] == 1
    sources = make_labeler(gazetteers).sources
    assert sources.conflicting_terms() == (1, ["'cold': Chemical/Disease"])
    # The "..." line has no letter: skipped and counted with its file and line.
    assert sources.loading["diseases.txt"]["no_letter"] == 1
    assert sources.loading["diseases.txt"]["examples"][0].endswith("diseases.txt:5: no_letter")


def test_training_entities_and_mined_candidates(gazetteers):
    sources = LabelSources()
    # "aspirin" is a Drug twice and a Chemical once: the majority label is kept.
    multi = sources.add_training_entities(
        [("aspirin", "Drug"), ("aspirin", "Chemical"), ("aspirin", "Drug"), ("cold water", "Thing")],
        "train")
    sources.add_type_map(read_type_map(gazetteers / "map.tsv"))
    sources.add_terms(["cancer cells", "cold water", "took up"], "ENTITY", "mined")
    labeled, counts = label(Labeler(sources))
    assert multi == 1 and sources.loading["train"]["texts_with_several_labels"] == 1
    with pytest.raises(TypeMapError, match="t.spacy: label 'two words' holds whitespace"):
        LabelSources().add_training_entities([("x y", "two words")], "train", "t.spacy")
    assert ("aspirin", "Drug", "train") in labeled[0]
    # Training data outranks the gazetteers; a typed source outranks the untyped ENTITY.
    assert ("cold water", "Thing", "train") in labeled[1]
    assert ("took up", "ENTITY", "mined") in labeled[1]
    assert "conflict:ENTITY/Thing" not in counts


def write_corpus(path, lines):
    path.write_bytes(b"\n".join(line.encode("utf8") if isinstance(line, str) else line
                                for line in lines) + b"\n")
    return path


def invoke(*args):
    return CliRunner().invoke(sciner_cli, ["label-weak", *map(str, args), "--no-progress"])


def make_doc(text):
    return Doc(Vocab(), words=text.split())


def read_docs(path):
    return list(DocBin().from_disk(path).get_docs(Vocab()))


def test_cli_two_column_list_under_a_fixed_label(gazetteers, tmp_path):
    # typed.tsv ("term<TAB>label") named with a fixed label instead of '*': its first
    # column are the terms, all labelled Gene, and the CLI says how it read the file.
    (gazetteers / "fixed.tsv").write_text("file\tlabel\ntyped.tsv\tGene\n")
    out = tmp_path / "fixed.spacy"
    result = invoke(write_corpus(tmp_path / "t.txt", SENTENCES), "-o", out, "-t", gazetteers / "fixed.tsv")
    assert result.exit_code == 0, result.output
    assert re.search(r"source typed.tsv: 2 lines hold TAB-separated columns; their first column "
                     r"was taken as the term \(for a 'term<TAB>label' list, give it label '\*'", result.output)
    labelled = [(s.text, s.label_) for doc in read_docs(out) for s in doc.spans["weak"]]
    assert labelled == [("Breast cancer cells", "Gene"), ("BRCA1", "Gene")]


def test_cli_happy_path_with_report(gazetteers, tmp_path):
    corpus = write_corpus(tmp_path / "text.txt", SENTENCES[:2] + ["", b"bad \xff byte cold"])
    with open(gazetteers / "diseases.txt", "ab") as handle:
        handle.write(b"bad \xff term\n")  # an undecodable gazetteer line: skipped, counted
    out, report = tmp_path / "out" / "weak.spacy", tmp_path / "run.json"
    result = invoke(corpus, "-o", out, "-t", gazetteers / "map.tsv", "--report", report)
    assert result.exit_code == 0, result.output
    assert "4 lines (1 empty skipped, 1 with invalid UTF-8 repaired" in result.output
    assert "1 terms have several types" in result.output
    assert re.search(r"source diseases.txt: 4 terms added;.* 1 no letter, 1 malformed "
                     r"\(e\.g\. \S+diseases.txt:5: no_letter\)", result.output)
    docs = read_docs(out)
    assert [d.text for d in docs][:2] == SENTENCES[:2]
    spans = [(s.text, s.label_, s.kb_id_) for s in docs[0].spans["weak"]]
    assert spans == [("Breast cancer cells", "Cell", "typed.tsv"),
                     ("aspirin", "Chemical", "chem.belns")]
    assert [s.label_ for s in docs[2].spans["weak"]] == ["Disease"]
    run = json.loads(report.read_text())
    assert run["labeling"]["labels"] == {"Cell": 1, "Chemical": 2, "Disease": 2}
    assert run["labeling"]["type_conflicts"] == {"Chemical/Disease": 2}
    assert run["sources"]["chem.belns"]["added"] == 3


def test_output_identical_for_one_and_two_processes(gazetteers, tmp_path):
    corpus = write_corpus(tmp_path / "text.txt", [SENTENCES[i % 3] + f" {i}" for i in range(500)])
    outputs = []
    for n in (1, 2):
        out = tmp_path / f"weak{n}.spacy"
        result = invoke(corpus, "-o", out, "-t", gazetteers / "map.tsv", "--n-process", n,
                        "--batch-lines", 37)
        assert result.exit_code == 0, result.output
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    docs = read_docs(tmp_path / "weak1.spacy")
    assert len(docs) == 500 and docs[499].text == SENTENCES[499 % 3] + " 499"


def test_cli_train_source_and_empty_train(tmp_path, assert_cli_error):
    doc = make_doc(SENTENCES[0])
    doc.spans["sc"] = [Span(doc, 4, 5, label="Drug")]
    DocBin(docs=[doc]).to_disk(tmp_path / "train.spacy")
    DocBin(docs=[make_doc("no spans here")]).to_disk(tmp_path / "empty.spacy")
    corpus = write_corpus(tmp_path / "text.txt", ["Take aspirin daily ."])
    out = tmp_path / "weak.spacy"
    result = invoke(corpus, "-o", out, "--train", tmp_path / "train.spacy")
    assert result.exit_code == 0, result.output
    labeled = read_docs(out)[0]
    assert [(s.text, s.label_, s.kb_id_) for s in labeled.spans["weak"]] == [
        ("aspirin", "Drug", "train")]
    assert_cli_error(invoke(corpus, "-o", out, "--train", tmp_path / "empty.spacy"),
                     "no usable term")


def test_cli_mined_candidates_source(gazetteers, tmp_path, assert_cli_error):
    table = tmp_path / "candidates.tsv"
    table.write_text("text\tsources\tfreq\tquality\ncancer cells\tphrase\t3\t0.9\n"
                     "aspirin\tdict\t2\t\n")
    corpus = write_corpus(tmp_path / "text.txt", ["Cancer cells and aspirin ."])
    out = tmp_path / "weak.spacy"
    result = invoke(corpus, "-o", out, "-t", gazetteers / "map.tsv", "-c", table)
    assert result.exit_code == 0, result.output
    doc = read_docs(out)[0]
    # "aspirin" is typed by chem.belns, so the untyped candidate does not override it.
    assert [(s.text, s.label_, s.kb_id_) for s in doc.spans["weak"]] == [
        ("Cancer cells", "ENTITY", "mined"), ("aspirin", "Chemical", "chem.belns")]
    table.write_text("text\tsources\tfreq\tquality\nbad\trow\n")
    assert_cli_error(invoke(corpus, "-o", out, "-c", table), "candidates.tsv:2", "bad candidate row")


ABBREVIATED = ["Breast cancer ( BC ) is common ; BC and bc .", "A common cold ( CC ) .", "No CC here ."]


def test_abbreviations_take_the_long_form_label(gazetteers):
    plain, _ = label(make_labeler(gazetteers), ABBREVIATED)
    labeler = make_labeler(gazetteers)
    labeler.abbreviations = True
    labeled, counts = label(labeler, ABBREVIATED)
    # The short form and its other uses in the same document (exact case) get the long form's
    # label; the long form's own match is unchanged; another document is not touched.
    assert labeled[0] == [("Breast cancer", "Disease", "diseases.txt"),
                          ("BC", "Disease", "abbreviation:diseases.txt"),
                          ("BC", "Disease", "abbreviation:diseases.txt")]
    assert labeled[1] == plain[1] + [("CC", "Disease", "abbreviation:diseases.txt")]
    assert labeled[2] == plain[2] == []
    assert counts["abbreviation_spans"] == 3 and counts["label:Disease"] == 5


def test_cli_abbreviations_option_and_gold_report(gazetteers, tmp_path):
    corpus = write_corpus(tmp_path / "text.txt", ABBREVIATED)
    doc = make_doc(ABBREVIATED[0])
    doc.spans["sc"] = [Span(doc, 0, 2, label="Disease"), Span(doc, 3, 4, label="Disease"),
                       Span(doc, 8, 9, label="Disease")]
    DocBin(docs=[doc]).to_disk(tmp_path / "gold.spacy")
    runs = {}
    for flag in ("--no-abbreviations", "--abbreviations"):
        out, report = tmp_path / f"{flag}.spacy", tmp_path / f"{flag}.json"
        result = invoke(corpus, "-o", out, "-t", gazetteers / "map.tsv", flag, "--report", report,
                        "--gold", tmp_path / "gold.spacy")
        assert result.exit_code == 0, result.output
        runs[flag] = json.loads(report.read_text())
    assert "(3 of them short forms)" in result.output
    assert runs["--abbreviations"]["abbreviations"] is True
    assert runs["--abbreviations"]["labeling"]["abbreviation_spans"] == 3
    assert runs["--no-abbreviations"]["labeling"]["abbreviation_spans"] == 0
    assert runs["--abbreviations"]["labeling"]["spans"] == runs["--no-abbreviations"]["labeling"]["spans"] + 3
    # The noise report labels the gold text with the same rule: both "BC" are found.
    assert runs["--no-abbreviations"]["noise"]["Disease"]["r_exact"] == 33.33
    assert runs["--abbreviations"]["noise"]["Disease"]["r_exact"] == 100.0


def test_docbin_input_keeps_tokens(gazetteers, tmp_path):
    DocBin(docs=[make_doc(s) for s in SENTENCES]).to_disk(tmp_path / "in.spacy")
    result = invoke(tmp_path / "in.spacy", "-o", tmp_path / "out.spacy", "-t", gazetteers / "map.tsv")
    assert result.exit_code == 0, result.output
    docs = read_docs(tmp_path / "out.spacy")
    assert [(s.text, s.label_) for s in docs[2].spans["weak"]] == [("common cold", "Disease"),
                                                                  ("BRCA1", "Gene")]


def test_noise_report_numbers():
    # Doc 1: one exact hit, one wrong type, one boundary error; doc 2: one missed gold span.
    weak = [(0, 2, "Disease"), (3, 4, "Chemical"), (5, 7, "Disease")]
    gold = [(0, 2, "Disease"), (3, 4, "Disease"), (5, 6, "Disease")]
    report = noise_report([(weak, gold), ([], [(1, 2, "Chemical")])])
    disease = report["Disease"]
    assert (disease["weak"], disease["gold"]) == (2, 3)
    assert (disease["p_exact"], disease["r_exact"]) == (50.0, 33.33)
    assert (disease["p_overlap"], disease["r_overlap"]) == (100.0, 66.67)
    assert report["Chemical"]["p_exact"] == 0.0 and report["Chemical"]["gold"] == 1
    assert report["ALL"]["weak_exact"] == 1 and report["ALL"]["gold"] == 4
    assert report["ANY_TYPE"]["weak_exact"] == 2  # (3, 4) has the right boundaries
    assert list(report)[-2:] == ["ALL", "ANY_TYPE"]


def test_cli_gold_noise_report(gazetteers, tmp_path):
    doc = make_doc(SENTENCES[0])
    doc.spans["sc"] = [Span(doc, 0, 2, label="Disease"), Span(doc, 4, 5, label="Chemical")]
    DocBin(docs=[doc]).to_disk(tmp_path / "gold.spacy")
    result = invoke("-t", gazetteers / "map.tsv", "--gold", tmp_path / "gold.spacy",
                    "--report", tmp_path / "noise.json")
    assert result.exit_code == 0, result.output
    noise = json.loads((tmp_path / "noise.json").read_text())["noise"]
    assert noise["Chemical"]["p_exact"] == 100.0 and noise["Chemical"]["r_exact"] == 100.0
    # "Breast cancer" lies inside the longer weak span "Breast cancer cells" (Cell): the
    # Disease is missed even by overlap, but its boundaries overlap a weak span.
    assert noise["Disease"]["r_exact"] == 0.0 and noise["Disease"]["r_overlap"] == 0.0
    assert noise["ANY_TYPE"]["r_overlap"] == 100.0 and noise["ANY_TYPE"]["r_exact"] == 50.0
    assert re.search(r"^Chemical\s+1\s+1\s+100\.0", result.output, re.M)


@pytest.mark.parametrize("map_text,fragments", [
    ("file\tlabel\nmissing.txt\tDisease\n", ["map.tsv:2", "gazetteer file not found", "missing.txt"]),
    ("file\tlable\ndiseases.txt\tDisease\n", ["map.tsv:1", "unknown columns: ['lable']"]),
    ("file\tlabel\ndiseases.txt\tDi sease\n", ["map.tsv:2", "'Di sease' holds whitespace"]),
    ("file\tlabel\ndiseases.txt\t\n", ["map.tsv:2", "empty label"]),
    ("file\tlabel\n\xff\n", ["map.tsv:2", "invalid UTF-8"]),
    ("# only a comment\n", ["names no gazetteer file"]),
])
def test_bad_type_maps_fail_with_file_and_line(gazetteers, tmp_path, assert_cli_error,
                                               map_text, fragments):
    (gazetteers / "map.tsv").write_bytes(map_text.encode("utf8").replace(b"\xc3\xbf", b"\xff"))
    corpus = write_corpus(tmp_path / "text.txt", SENTENCES)
    out = tmp_path / "weak.spacy"
    assert_cli_error(invoke(corpus, "-o", out, "-t", gazetteers / "map.tsv"), *fragments)
    assert not out.exists()


def test_bad_typed_list_and_corpora(gazetteers, tmp_path, assert_cli_error):
    the_map = gazetteers / "map.tsv"
    out = tmp_path / "weak.spacy"
    corpus = write_corpus(tmp_path / "text.txt", SENTENCES)
    (gazetteers / "typed.tsv").write_text("BRCA1\tGene\nTP53\t\n")
    assert_cli_error(invoke(corpus, "-o", out, "-t", the_map), "typed.tsv:2", "empty label")
    (gazetteers / "typed.tsv").write_text("BRCA1\tGene\nTP53\n")
    assert_cli_error(invoke(corpus, "-o", out, "-t", the_map), "typed.tsv:2", "term<TAB>label")
    (gazetteers / "typed.tsv").write_text("BRCA1\tGene\n")
    empty = write_corpus(tmp_path / "empty.txt", ["", "  "])
    assert_cli_error(invoke(empty, "-o", out, "-t", the_map), "empty corpus", "empty.txt",
                     "2 lines, 2 empty")
    assert_cli_error(invoke(tmp_path / "nope.txt", "-o", out, "-t", the_map), "nope.txt", "not found")
    assert_cli_error(invoke(corpus, "-o", out), "no label source")
    (tmp_path / "bad.spacy").write_bytes(b"not a docbin")
    assert_cli_error(invoke(tmp_path / "bad.spacy", "-o", out, "-t", the_map), "bad.spacy",
                     "not a readable spaCy DocBin")
    assert_cli_error(invoke("-t", the_map, "--gold", tmp_path / "bad.spacy"), "--gold",
                     "bad.spacy", "not a readable")
    assert not out.exists()
    # Nothing matches: the output is written, with a warning, not silently empty.
    plain = write_corpus(tmp_path / "plain.txt", ["Nothing to see here ."])
    result = invoke(plain, "-o", out, "-t", the_map)
    assert result.exit_code == 0 and "warning: nothing matched in 1 docs" in result.output
    assert len(read_docs(out)) == 1


def test_type_map_errors_are_raised_before_loading(gazetteers):
    (gazetteers / "map.tsv").write_text("file\tlabel\ndiseases.txt\tDisease\nnope.txt\tX\n")
    with pytest.raises(TypeMapError, match="map.tsv:3: gazetteer file not found"):
        read_type_map(gazetteers / "map.tsv")


READMES = {"ncbi_disease.tsv": ["NCBI-disease"], "bc5cdr.tsv": ["BC5CDR"],
           "bionlp13cg.tsv": ["BioNLP13CG"]}


@pytest.mark.parametrize("name", sorted(READMES))
def test_shipped_type_maps_name_real_files_and_dataset_labels(shared_data, name):
    config = Path(__file__).parents[2] / "configs" / "weak" / name
    rows = read_type_map(config, Path(shared_data) / "gazetteers" / "openbel")
    for dataset in READMES[name]:
        readme = (Path(shared_data) / dataset / "README.md").read_text()
        types = set(re.findall(r"^\| (\S+) \|", readme.split("Entities per type")[1], re.M))
        assert {row.label for row in rows} <= types, (name, types)
    assert all(os.path.isfile(row.path) for row in rows)

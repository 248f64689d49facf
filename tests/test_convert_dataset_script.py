"""scripts/convert_dataset.py (the project's convert step) without the real data: one line."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import spacy
from spacy.tokens import DocBin

ROOT = Path(__file__).resolve().parent.parent


def convert(*args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "convert_dataset.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


@pytest.mark.parametrize("layout", ["no folder", "missing split"])
def test_missing_data_is_one_clear_line(tmp_path, layout):
    data = tmp_path / "data"
    if layout == "missing split":
        (data / "BioNLP13CG").mkdir(parents=True)
        (data / "BioNLP13CG" / "train.tsv").write_text("IL-2\tB-Gene_or_gene_product\n")
    result = convert("bionlp13cg", data, tmp_path / "corpus")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in result.stderr
    assert ("../shared/data" in lines[0]) if layout == "no folder" else ("dev.tsv" in lines[0] and "test.tsv" in lines[0])
    assert not (tmp_path / "corpus").exists()  # checked before any conversion


def test_unknown_dataset(tmp_path):
    result = convert("imagenet", tmp_path, tmp_path / "corpus")
    assert result.returncode != 0 and "unknown dataset 'imagenet'" in result.stderr and "Traceback" not in result.stderr


CONLL = "IL-2\tB-Gene\nbinds\tO\nCD25\tB-Gene\n.\tO\n\nNo\tO\nentity\tO\n"


def write_own(folder, fmt, splits=("train", "dev", "test")):
    """A data set of one's own in ``fmt``, two sentences and two spans per split."""
    folder.mkdir(parents=True)
    for split in splits:
        if fmt == "conll":
            (folder / f"{split}.conll").write_text(CONLL, encoding="utf8")
        elif fmt == "scierc":
            doc = {"doc_key": split, "sentences": [["IL-2", "binds", "CD25", "."], ["No", "entity"]],
                   "ner": [[[0, 0, "Gene"], [2, 2, "Gene"]], []]}
            (folder / f"{split}.json").write_text(json.dumps(doc) + "\n", encoding="utf8")
        elif fmt == "prodigy":  # character offsets with the annotator's own tokens
            tokens = [{"text": t, "start": s, "end": s + len(t), "id": i, "ws": ws}
                      for i, (t, s, ws) in enumerate([("IL-2", 0, True), ("binds", 5, True), ("CD25", 11, False), (".", 15, False)])]
            records = [{"text": "IL-2 binds CD25.", "tokens": tokens, "answer": "accept",
                        "spans": [{"start": 0, "end": 4, "label": "Gene"}, {"start": 11, "end": 15, "label": "Gene"}]},
                       {"text": "No entity", "spans": []}]
            (folder / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf8")
        elif fmt == "doccano":
            records = [{"id": 1, "text": "IL-2 binds CD25.", "label": [[0, 4, "Gene"], [11, 15, "Gene"]]},
                       {"id": 2, "text": "No entity", "label": []}]
            (folder / f"{split}.json").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf8")
        elif fmt in ("docbin_ents", "docbin_spans"):  # spacy convert's NER output / a spancat DocBin
            nlp = spacy.blank("en")
            doc = nlp.make_doc("IL-2 binds CD25.")
            spans = [doc.char_span(0, 4, "Gene"), doc.char_span(11, 15, "Gene")]
            if fmt == "docbin_ents":
                doc.ents = spans
            else:
                doc.spans["sc"] = spans
            DocBin(docs=[doc, nlp.make_doc("No entity")]).to_disk(folder / f"{split}.spacy")
        elif fmt == "brat_pair":  # train.txt + train.ann: BRAT, not CoNLL, for the .ann beside it
            (folder / f"{split}.txt").write_text("IL-2 binds CD25.\nNo entity\n", encoding="utf8")
            (folder / f"{split}.ann").write_text("T1\tGene 0 4\tIL-2\nT2\tGene 11 15\tCD25\n", encoding="utf8")
        elif fmt == "docbin_folder":  # train/ holding DocBins
            write_own(folder / "tmp", "docbin_spans", splits=(split,))
            (folder / split).mkdir()
            (folder / "tmp" / f"{split}.spacy").rename(folder / split / "part1.spacy")
            (folder / "tmp").rmdir()
        else:
            (folder / split).mkdir()
            (folder / split / "a.txt").write_text("IL-2 binds CD25.\nNo entity\n", encoding="utf8")
            (folder / split / "a.ann").write_text("T1\tGene 0 4\tIL-2\nT2\tGene 11 15\tCD25\n", encoding="utf8")


@pytest.mark.parametrize("fmt", ["conll", "scierc", "brat", "brat_pair", "prodigy", "doccano", "docbin_ents",
                                 "docbin_spans", "docbin_folder"])
def test_own_dataset_converts_by_its_file_names(tmp_path, fmt):
    write_own(tmp_path / "data" / "my_set", fmt)
    result = convert("my_set", tmp_path / "data", tmp_path / "corpus")
    assert result.returncode == 0, result.stderr
    for split in ("train", "dev", "test"):
        assert f"my_set/{split}: " in result.stdout
        docs = list(DocBin().from_disk(tmp_path / "corpus" / f"{split}.spacy").get_docs(spacy.blank("en").vocab))
        spans = [(s.text, s.label_) for doc in docs for s in doc.spans["sc"]]
        assert spans == [("IL-2", "Gene"), ("CD25", "Gene")]


@pytest.mark.parametrize("problem", ["no folder", "no train", "missing test", "bad name"])
def test_own_dataset_problems_are_one_line(tmp_path, problem):
    data = tmp_path / "data"
    if problem == "no train":
        (data / "my_set").mkdir(parents=True)
        (data / "my_set" / "notes.md").write_text("x")
    elif problem == "missing test":
        write_own(data / "my_set", "conll", splits=("train", "dev"))
    result = convert("my-set" if problem == "bad name" else "my_set", data, tmp_path / "corpus")
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0 and len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    expected = {"no folder": "no folder", "no train": "train.tsv", "missing test": "test.conll",
                "bad name": "letters, digits and _"}[problem]
    assert expected in lines[0]
    assert not (tmp_path / "corpus").exists()


@pytest.mark.parametrize("domain, expected", [("bio", "6 text files"), ("cs", "3 text files")])
def test_aux_domain_for_own_dataset(tmp_path, domain, expected):
    aux = ROOT / "scripts" / "aux.py"
    for name in ("AnatEM-text", "BC2GM-text", "linnaeus-text", "Ex-PTM-text", "CRAFT-text", "JNLPBA-text",
                 "CSAbstruct-text", "ACL-ARC-citations-text", "SciCite-text"):
        (tmp_path / "aux" / name).mkdir(parents=True)
        (tmp_path / "aux" / name / "text.txt").write_text("Some text .\n")
    run = subprocess.run([sys.executable, str(aux), "my_set", str(tmp_path), "--domain", domain, "--",
                          "python", "-c", "import sys; print(len(sys.argv) - 1)", "{AUX}"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert expected in run.stdout and run.stdout.strip().splitlines()[-1] == expected.split()[0]
    refused = subprocess.run([sys.executable, str(aux), "my_set", str(tmp_path), "--", "true"],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "--vars.domain bio or cs" in refused.stderr


def test_scierc_doc_is_one_doc_per_abstract_with_sentence_starts(tmp_path):
    record = {"doc_key": "A1", "sentences": [["We", "use", "BERT", "."], ["It", "parses", "text", "."]],
              "ner": [[[2, 2, "Method"]], [[6, 6, "Material"]]], "relations": [[], []]}
    (tmp_path / "data" / "scierc").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        (tmp_path / "data" / "scierc" / f"{split}.json").write_text(json.dumps(record) + "\n")
    for dataset, n_docs in (("scierc_doc", 1), ("scierc", 2)):
        result = convert(dataset, tmp_path / "data", tmp_path / dataset)
        assert result.returncode == 0, result.stderr
        docs = list(DocBin().from_disk(tmp_path / dataset / "dev.spacy").get_docs(spacy.blank("en").vocab))
        assert len(docs) == n_docs
    doc = list(DocBin().from_disk(tmp_path / "scierc_doc" / "dev.spacy").get_docs(spacy.blank("en").vocab))[0]
    assert [s.text for s in doc.sents] == ["We use BERT .", "It parses text ."]
    assert [(s.text, s.label_) for s in doc.spans["sc"]] == [("BERT", "Method"), ("text", "Material")]

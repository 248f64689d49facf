"""displaCy options with a colour per label, and `sciner render` (predictions vs gold)."""
import spacy
from spacy import displacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin, Span
from typer.testing import CliRunner

from spacy_sciner.cli import sciner_cli
from spacy_sciner.render import PALETTE, displacy_options, label_colors, render_comparison

WORDS = "the support vector machine beats neural nets".split()


@Language.component("test_render_spans")
def write_spans(doc):
    """A stand-in model: tokens 1-4 are a Method, token 5 a Task (where the doc is long enough)."""
    doc.spans["sc"] = [Span(doc, s, e, label) for s, e, label in [(1, 4, "Method"), (5, 6, "Task")] if e <= len(doc)]
    return doc


def gold_doc(vocab):
    doc = Doc(vocab, words=WORDS)
    doc.spans["sc"] = [Span(doc, 1, 4, "Method"), Span(doc, 1, 3, "Other"), Span(doc, 5, 7, "Method")]
    return doc


def test_label_colors_are_stable_and_distinct():
    labels = ["Task", "Method", "Material", "Metric"]
    colors = label_colors(labels)
    assert colors == label_colors(reversed(labels)) == label_colors(labels + ["Task"])
    assert len(set(colors.values())) == 4 and colors["Material"] == PALETTE[0]
    many = [f"L{i:02d}" for i in range(30)]
    assert len(set(label_colors(many).values())) == 30 and label_colors(many) == label_colors(many[::-1])
    options = displacy_options(labels, spans_key="gold")
    assert options == {"spans_key": "gold", "colors": colors}


def test_displacy_options_colour_the_spans():
    doc = gold_doc(spacy.blank("en").vocab)
    html = displacy.render(doc, style="span", options=displacy_options(["Method", "Other"]))
    assert label_colors(["Method", "Other"])["Other"] in html and "support" in html


def test_render_comparison_counts_and_diff():
    vocab = spacy.blank("en").vocab
    pred = write_spans(Doc(vocab, words=WORDS))
    same = Doc(vocab, words=["ok"])
    same.spans["sc"] = [Span(same, 0, 1, "Task")]
    page, counts = render_comparison([pred, same], [gold_doc(vocab), same], ["Method"])
    assert counts == {"docs": 2, "tp": 2, "fp": 1, "fn": 2}
    assert "missed</b>: &#x27;support vector&#x27; Other, &#x27;neural nets&#x27; Method" in page
    assert "spurious</b>: &#x27;neural&#x27; Task" in page
    for color in label_colors(["Method", "Other", "Task"]).values():
        assert color in page
    page, counts = render_comparison([pred, same], [gold_doc(vocab), same], [], only_errors=True)
    assert counts["docs"] == 1 and "doc 1" not in page


def test_render_cli_with_a_pipeline(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("test_render_spans")
    nlp.to_disk(tmp_path / "model")
    DocBin(docs=[gold_doc(nlp.vocab)]).to_disk(tmp_path / "gold.spacy")
    out = tmp_path / "new" / "page.html"
    result = CliRunner().invoke(sciner_cli, ["render", str(tmp_path / "model"), str(tmp_path / "gold.spacy"), str(out)])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "1 correct, 2 missed, 1 spurious" in result.output
    page = out.read_text(encoding="utf8")
    assert page.startswith("<!DOCTYPE html>") and "<h3>gold</h3>" in page and "<h3>predicted</h3>" in page
    # text input: predictions only
    (tmp_path / "texts.txt").write_text("the support vector machine wins\n\nneural nets too\n", encoding="utf8")
    result = CliRunner().invoke(sciner_cli, ["render", str(tmp_path / "model"), str(tmp_path / "texts.txt"), str(out)])
    assert result.exit_code == 0, result.output
    assert "2 docs" in result.output and "<h3>gold</h3>" not in out.read_text(encoding="utf8")


def test_render_cli_with_a_predictions_docbin(tmp_path):
    vocab = spacy.blank("en").vocab
    DocBin(docs=[write_spans(Doc(vocab, words=WORDS))] * 3).to_disk(tmp_path / "pred.spacy")
    DocBin(docs=[gold_doc(vocab)] * 3).to_disk(tmp_path / "gold.spacy")
    out = tmp_path / "page.html"
    args = ["render", str(tmp_path / "pred.spacy"), str(tmp_path / "gold.spacy"), str(out), "--limit", "2"]
    result = CliRunner().invoke(sciner_cli, args)
    assert result.exit_code == 0, result.output
    assert "2 docs; spans: 2 correct, 4 missed, 2 spurious" in result.output


def test_render_cli_errors(tmp_path, assert_cli_error, tree):
    vocab = spacy.blank("en").vocab
    DocBin(docs=[write_spans(Doc(vocab, words=WORDS))]).to_disk(tmp_path / "pred.spacy")
    DocBin(docs=[gold_doc(vocab)] * 2).to_disk(tmp_path / "gold2.spacy")
    other = Doc(vocab, words=["other", "words"])
    DocBin(docs=[other]).to_disk(tmp_path / "other.spacy")
    (tmp_path / "texts.txt").write_text("some text\n")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "notamodel").mkdir()
    before = tree(tmp_path)

    def run(*args):
        return CliRunner().invoke(sciner_cli, ["render", *map(str, args)])

    pred, out = tmp_path / "pred.spacy", tmp_path / "out.html"
    assert_cli_error(run(pred, tmp_path / "gold2.spacy", out), pred, "1 docs", "has 2")
    assert_cli_error(run(pred, tmp_path / "other.spacy", out), pred, "doc 0 has other tokens")
    assert_cli_error(run(pred, tmp_path / "texts.txt", out), "needs a gold DocBin")
    assert_cli_error(run(pred, tmp_path / "nope.spacy", out), tmp_path / "nope.spacy", "not found")
    assert_cli_error(run(tmp_path / "notamodel", tmp_path / "texts.txt", out), tmp_path / "notamodel", "cannot load the pipeline")
    assert_cli_error(run(pred, tmp_path / "gold2.spacy", tmp_path / "afile" / "x.html"), tmp_path / "afile", "not a directory")
    assert tree(tmp_path) == before

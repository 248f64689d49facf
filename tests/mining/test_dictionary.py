import pytest

from spacy_sciner.mining.dictionary import TermDictionary, is_acronym, resolve_overlaps


def spans(dictionary, text, overlap="all"):
    words = text.split()
    return [(" ".join(words[s:e]), src) for s, e, src in dictionary.match(words, overlap)]


def test_match_is_token_aligned_never_inside_a_word():
    d = TermDictionary(case="lowercase")
    d.add("vector")
    d.add("net")
    assert spans(d, "support vectors and a network use a vector net") == [
        ("vector", "dict"), ("net", "dict")]


def test_hyphen_spacing_is_normalised_but_boundaries_kept():
    d = TermDictionary(case="exact")
    d.add("acetyl-CoA carboxylase")
    d.add("IL-2")
    assert spans(d, "the acetyl - CoA carboxylase of IL-2R and IL - 2") == [
        ("acetyl - CoA carboxylase", "dict"), ("IL - 2", "dict")]


def test_case_policies():
    exact, lower, smart = (TermDictionary(case=c) for c in ("exact", "lowercase", "smart"))
    for d in (exact, lower, smart):
        d.add("Support Vector Machine")
        d.add("CAT")
    text = "a support vector machine and a cat and CAT"
    assert spans(exact, text) == [("CAT", "dict")]
    assert spans(lower, text) == [("support vector machine", "dict"), ("cat", "dict"),
                                  ("CAT", "dict")]
    # smart: case-insensitive, except for the acronym.
    assert spans(smart, text) == [("support vector machine", "dict"), ("CAT", "dict")]
    assert is_acronym("mRNA") and is_acronym("IL-2") and not is_acronym("Support Vector")


def test_overlaps_longest_first_or_all():
    d = TermDictionary(case="lowercase")
    for term in ("vector", "support vector", "support vector machine", "machine learning"):
        d.add(term)
    text = "support vector machine learning"
    assert spans(d, text, "longest") == [("support vector machine", "dict")]
    assert len(spans(d, text, "all")) == 4
    assert resolve_overlaps([(0, 2, "a"), (1, 3, "b"), (3, 4, "c")]) == [(0, 2, "a"), (3, 4, "c")]
    with pytest.raises(ValueError, match="overlap policy"):
        resolve_overlaps([], "shortest")


def test_sources_merge_on_the_same_span():
    d = TermDictionary()
    d.add("hidden markov model", "dict")
    d.add("hidden Markov model", "phrase")
    assert spans(d, "a hidden Markov model") == [("hidden Markov model", "dict|phrase")]


def test_special_characters_match_literally():
    d = TermDictionary(case="exact")
    for term in ("C++", "(R)-2-hydroxy acid", "a.*b", "[Ca2+]i"):
        d.add(term)
    assert spans(d, "in C++ the ( R ) - 2 - hydroxy acid and [ Ca2 + ] i but not aXXb") == [
        ("C++", "dict"), ("( R ) - 2 - hydroxy acid", "dict"), ("[ Ca2 + ] i", "dict")]
    assert spans(d, "a.*b") == [("a.*b", "dict")]


def test_plain_gazetteer_bad_lines_are_counted(tmp_path):
    path = tmp_path / "terms.txt"
    path.write_bytes(b"protein kinase\n\n   \nprotein kinase\nx\nNF-kappaB\n\xff\xfebad\nok term\nit\n")
    d = TermDictionary()
    report = d.load_gazetteer(str(path))
    assert (report.added, report.blank, report.duplicate, report.too_short, report.malformed,
            report.stop_word) == (3, 2, 1, 1, 1, 1)
    assert "it" not in d and "ok term" in d
    keep = TermDictionary(skip_stop_words=False)
    assert keep.load_gazetteer(str(path)).added == 4
    assert f"{path}:2: blank" in report.examples
    assert spans(d, "the NF - kappaB protein kinase") == [
        ("NF - kappaB", "dict"), ("protein kinase", "dict")]


def test_plain_gazetteer_with_columns_takes_the_first(tmp_path):
    # "term<TAB>id" lists are common; the whole line as a term ("BRCA1 672") would never
    # match. The first column is the term, and the lines that had columns are counted.
    path = tmp_path / "genes.tsv"
    path.write_text("BRCA1\t672\tbreast cancer 1\ntumor protein p53\t7157\nKRAS\n\t9999\n", encoding="utf8")
    d = TermDictionary()
    report = d.load_gazetteer(str(path))
    assert (report.added, report.first_column, report.blank, report.malformed) == (3, 2, 1, 0)
    assert spans(d, "BRCA1 and tumor protein p53 bind KRAS") == [
        ("BRCA1", "dict"), ("tumor protein p53", "dict"), ("KRAS", "dict")]
    assert "672" not in d and "breast cancer 1" not in d


def test_bel_gazetteer_and_strict_errors(tmp_path):
    path = tmp_path / "x.belns"
    path.write_text("[Namespace]\nKeyword=X\n\n[Values]\nIL2|GRP\nIL2|GRP\n"
                    "no separator here\nbeta\\{1\\}|A\n\nA|GRP\n", encoding="utf8")
    d = TermDictionary(case="exact")
    report = d.load_gazetteer(str(path))
    assert (report.added, report.duplicate, report.malformed, report.too_short, report.blank) == (
        2, 1, 1, 1, 1)
    assert spans(d, "IL2 and beta{1}") == [("IL2", "dict"), ("beta{1}", "dict")]
    with pytest.raises(ValueError, match=r"x\.belns:7: expected 'name\|code'"):
        TermDictionary().load_gazetteer(str(path), strict=True)


def test_real_openbel_gazetteer(shared_data):
    d = TermDictionary()
    report = d.load_gazetteer(f"{shared_data}/gazetteers/openbel/mesh-cellular-structures.belns")
    assert report.added == 230 and report.malformed == 0
    assert spans(d, "in the cell nucleus of") == [("cell nucleus", "dict")]


def test_round_trip_rows():
    d = TermDictionary()
    d.add("SVM", "pattern")
    d.add("support vector machine", "phrase")
    d.add("support vector machine", "dict")
    copy = TermDictionary.from_list(d.to_list())
    assert copy.to_list() == d.to_list() == [
        ("support vector machine", "dict|phrase", False), ("SVM", "pattern", True)]
    assert spans(copy, "an SVM is a Support Vector Machine not an svm") == [
        ("SVM", "pattern"), ("Support Vector Machine", "dict|phrase")]


def test_batch_matching_equals_line_by_line_and_skips_whitespace_tokens():
    from spacy_sciner.mining.text import glue_punctuation, tokenize

    d = TermDictionary(case="smart")
    for term in ("IL-2", "protein kinase C", "NF-kappaB", "T cell", "(R)-acid"):
        d.add(term)
    lines = ["IL-2 activates protein kinase C in T cells .", "(IL-2) and NF-kappaB's role",
             "", "no term here", "T cell ( R ) - acid and (R)-acid", "IL-2" * 3]
    token_lists = [tokenize(line) for line in lines]
    assert d.match_many(token_lists) == [d.match(words) for words in token_lists]
    # "NF-kappaB's" is one token (inner apostrophe): NF-kappaB is inside a word there.
    assert d.match_many(token_lists)[:2] == [[(0, 1, "dict"), (2, 5, "dict")], [(1, 2, "dict")]]
    assert d.match_text(lines[4]) == [(0, 2, "dict"), (2, 7, "dict"), (8, 13, "dict")]
    # spaCy whitespace tokens are skipped, indices still refer to the original tokens.
    assert d.match(["T", "\n", "cell", " ", "IL-2"]) == [(0, 3, "dict"), (4, 5, "dict")]
    assert glue_punctuation("IL-2 ( x ) a.b\n-c") == "IL\x01-\x012 ( x ) a\x01.\x01b\n-\x01c"

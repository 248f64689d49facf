from spacy_sciner.mining.acronyms import (
    abbreviation_spans, best_long_form_start, find_acronym_candidates, find_definitions,
    is_valid_short_form)


def texts(sentences):
    sents = [s.split() for s in sentences]
    found, pairs = find_acronym_candidates(sents)
    return [(i, " ".join(sents[i][a:b])) for i, a, b in found], pairs


def test_long_form_then_short_form_and_later_uses():
    found, pairs = texts(["We train a support vector machine ( SVM ) .",
                          "The SVM beats a Support Vector Machine baseline ; svm is not it ."])
    assert pairs == [("support vector machine", "SVM")]
    assert found == [(0, "support vector machine"), (0, "support vector machine ( SVM )"),
                     (0, "SVM"), (1, "SVM"), (1, "Support Vector Machine")]


def test_short_form_then_long_form():
    found, pairs = texts(["The HMM ( hidden Markov model ) is used ."])
    assert pairs == [("hidden Markov model", "HMM")]
    assert found == [(0, "HMM"), (0, "HMM ( hidden Markov model )"), (0, "hidden Markov model")]


def test_nested_parentheses_and_trailing_citation():
    assert texts(["conditional random fields ( CRF ( Lafferty 2001 ) ) work"])[1] == [
        ("conditional random fields", "CRF")]
    assert texts(["a hidden Markov model ( HMM ; Rabiner , 1989 ) was"])[1] == [
        ("hidden Markov model", "HMM")]
    assert texts(["unbalanced ( and never closed"]) == ([], [])


def test_lower_case_short_forms():
    assert texts(["messenger RNA ( mRNA ) and small interfering RNA ( siRNA )"])[1] == [
        ("messenger RNA", "mRNA"), ("small interfering RNA", "siRNA")]


def test_short_form_not_matching_long_form_is_rejected():
    assert texts(["tumor necrosis factor ( XYZ ) was high"]) == ([], [])
    assert texts(["as shown ( see Fig . 1 ) and ( p < 0.05 )"]) == ([], [])
    assert texts(["the parser ( Collins ) works"]) == ([], [])


def test_ptb_brackets_and_long_form_window():
    assert texts(["Natural Language Processing -LRB- NLP -RRB- ."])[1] == [
        ("Natural Language Processing", "NLP")]
    # The best (shortest) long form is taken, never crossing a bracket or a full stop.
    words = "we use . latent Dirichlet allocation ( LDA )".split()
    assert find_definitions(words) == [(0, 3, 6, 7, 8)]


def test_initials_preferred_to_shortest_match():
    # Schwartz-Hearst alone would stop at "Cooccurrence Restrictions".
    assert texts(["of Category Cooccurrence Restrictions ( CCRs ) ."])[1] == [
        ("Category Cooccurrence Restrictions", "CCRs")]
    assert texts(["the Expectation-Maximization ( EM ) step"])[1] == [("Expectation-Maximization", "EM")]
    # With a citation inside the brackets, the whole definition is not one candidate.
    found, _ = texts(["a hidden Markov model ( HMM ; Rabiner , 1989 ) was"])
    assert [t for _, t in found] == ["hidden Markov model", "HMM"]


def test_short_form_rules():
    assert is_valid_short_form(["mRNA"]) and is_valid_short_form(["IL", "-2"])
    assert not is_valid_short_form(["a"]) and not is_valid_short_form(["(x)"])
    assert not is_valid_short_form(["1234"]) and not is_valid_short_form(["see", "Fig", "1"])
    assert best_long_form_start("SVM", ["a", "support", "vector", "machine"]) == 1
    assert best_long_form_start("XYZ", ["tumor", "necrosis", "factor"]) is None


def test_short_forms_written_with_split_hyphens():
    # Tokenizers that split at hyphens write "A-T" as "A - T" (NCBI-disease, BioNLP).
    assert is_valid_short_form(["A", "-", "T"]) and is_valid_short_form(["MPS", "IVA"])
    assert not is_valid_short_form(["A", "-"]) and not is_valid_short_form(["A", "-", "B", "-", "C"])
    assert texts(["ataxia - telangiectasia ( A - T ) is rare"])[1] == [("ataxia - telangiectasia", "A - T")]


def test_abbreviation_spans_take_the_long_form_label():
    words = ("familial adenomatous polyposis ( FAP ) and FAP , but not fap ; "
             "tumor necrosis factor ( TNF ) and TNF").split()
    spans = [(1, 3, "Disease", "mesh")]  # "adenomatous polyposis": ends where the LF ends
    assert abbreviation_spans(words, spans) == [(4, 5, "Disease", "abbreviation:mesh"),
                                                (7, 8, "Disease", "abbreviation:mesh")]
    # A long form with no labeled span gives nothing ("TNF"); nor a span that stops short of
    # the long form's end.
    assert abbreviation_spans(words, [(0, 2, "Disease", "x")]) == []
    # The given spans win: a use of the short form inside one is left alone.
    assert abbreviation_spans(words, spans + [(6, 8, "Other", "y")]) == [
        (4, 5, "Disease", "abbreviation:mesh")]
    assert abbreviation_spans("no brackets here".split(), spans) == []


def test_abbreviation_spans_first_labeled_definition_counts():
    words = "the HD ( Huntington disease ) gene ; heart disease ( HD ) ; HD".split()
    spans = [(3, 5, "Disease", "a"), (8, 10, "Other", "b")]
    # "SF ( LF )" is read too; the second definition of HD does not relabel it.
    assert abbreviation_spans(words, spans) == [(1, 2, "Disease", "abbreviation:a"),
                                                (11, 12, "Disease", "abbreviation:a"),
                                                (14, 15, "Disease", "abbreviation:a")]

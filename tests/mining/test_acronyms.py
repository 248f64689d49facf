from spacy_sciner.mining.acronyms import (
    best_long_form_start, find_acronym_candidates, find_definitions, is_valid_short_form)


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

"""Acronym definitions as candidates (the C_pattern source): Schwartz & Hearst (2003).

Both "long form ( SF )" and "SF ( long form )" are recognised on token sequences; PTB
brackets (``-LRB-``, SciERC) count as parentheses. Extensions of the original algorithm:

- nested or unbalanced brackets: the parenthetical ends at the matching closing bracket,
  and only the part before the first "," or ";" at depth 0 is a short-form candidate
  ("( SVM ; Vapnik 1995 )");
- the long form window never crosses a bracket or a sentence-final mark;
- every other use of a defined short form (exact case) and of its long form (any case) in
  the same document is a candidate too, and so is the whole "LF ( SF )" when the brackets
  hold only the short form (SciERC annotates "Markov random field ( MRF )" as one mention);
- a long form whose word initials spell the short form is preferred to the Schwartz-Hearst
  shortest match ("Category Cooccurrence Restrictions ( CCRs )").

A short form is valid when it has 1-2 tokens (not counting "-" or "/" tokens between them:
text tokenized at hyphens writes "A-T" as "A - T"), 2-10 characters, a letter, and starts with a
letter or digit, so lower-case short forms ("mRNA", "siRNA", "il") are allowed; a pair is
kept only when the characters of the short form are found in order in the long form with
its first character starting a word, so "( see above )" or an SF that does not match its
long form is rejected.
"""
import re
from typing import Dict, List, Optional, Sequence, Tuple

OPEN = {"(": ")", "[": "]", "-LRB-": "-RRB-", "-LSB-": "-RSB-"}
CLOSE = {")", "]", "-RRB-", "-RSB-"}
_OPEN_SET = frozenset(OPEN)
_WINDOW_STOP = set(OPEN) | CLOSE | {".", ";", ":", "!", "?"}

_JOINERS = {"-", "/"}

Definition = Tuple[int, int, int, int, int]  # (sentence, lf_start, lf_end, sf_start, sf_end)
Candidate = Tuple[int, int, int]  # (sentence, start, end exclusive)
LabeledSpan = Tuple[int, int, str, str]  # (start, end, label, source)


def is_valid_short_form(tokens: Sequence[str]) -> bool:
    """Schwartz-Hearst short-form test, on 1-2 tokens ("-"/"/" tokens between them aside)."""
    if not tokens or tokens[0] in _JOINERS or tokens[-1] in _JOINERS:
        return False
    if not 1 <= sum(t not in _JOINERS for t in tokens) <= 2:
        return False
    text = "".join(tokens)
    if not 2 <= len(text) <= 10 or not text[0].isalnum():
        return False
    return any(c.isalpha() for c in text)


def best_long_form_start(short: str, words: Sequence[str]) -> Optional[int]:
    """The Schwartz-Hearst backward match of a short form in a long-form window.

    short (str): The short form, e.g. "SVM".
    words (Sequence[str]): The tokens that may hold the long form (the window).
    RETURNS (Optional[int]): Index of the first long-form token in ``words``, or None.
    """
    long = " ".join(words)
    s_index, l_index = len(short) - 1, len(long) - 1
    while s_index >= 0:
        char = short[s_index].lower()
        if not char.isalnum():
            s_index -= 1
            continue
        # The first SF character must start a word of the long form.
        while l_index >= 0 and (
            long[l_index].lower() != char
            or (s_index == 0 and l_index > 0 and long[l_index - 1].isalnum())
        ):
            l_index -= 1
        if l_index < 0:
            return None
        l_index -= 1
        s_index -= 1
    start_char = long.rfind(" ", 0, l_index + 1) + 1
    return long[:start_char].count(" ")


_MINOR_WORDS = {"of", "the", "and", "for", "in", "on", "to", "a", "an", "with", "by", "at"}


def initials_long_form_start(short: str, words: Sequence[str]) -> Optional[int]:
    """Long form whose word initials spell the short form (tried before Schwartz-Hearst).

    Schwartz-Hearst takes the shortest long form in which the SF letters occur in order,
    which cuts "Category Cooccurrence Restrictions ( CCRs )" to "Cooccurrence
    Restrictions"; matching initials (ignoring minor words, splitting at hyphens, and a
    plural "s" of the SF) finds the whole name.

    short (str): The short form.
    words (Sequence[str]): The window before the bracket.
    RETURNS (Optional[int]): Index of the first long-form token, or None.
    """
    letters = [c.lower() for c in short if c.isalpha()]
    targets = [letters]
    if len(letters) > 2 and short.endswith("s") and short[:-1].upper() == short[:-1]:
        targets.append(letters[:-1])
    for target in targets:
        for k in range(1, min(len(words), len(target) + 3) + 1):
            first = words[-k]
            if not first[:1].isalnum() or first.lower() in _MINOR_WORDS:
                continue
            initials = [piece[0].lower() for word in words[-k:] for piece in re.split(r"[-/]", word)
                        if piece[:1].isalpha() and piece.lower() not in _MINOR_WORDS]
            if initials == target:
                return len(words) - k
    return None


def _closing(words: Sequence[str], open_i: int) -> Optional[int]:
    """Index of the bracket closing the one at ``open_i`` (nesting aware), or None."""
    depth = 0
    for j in range(open_i, len(words)):
        if words[j] in OPEN:
            depth += 1
        elif words[j] in CLOSE:
            depth -= 1
            if depth == 0:
                return j
    return None


def _head(inner: Sequence[str]) -> List[str]:
    """The part of a parenthetical before its first ',', ';' or nested bracket."""
    for k, word in enumerate(inner):
        if word in (",", ";") or word in OPEN:
            return list(inner[:k])
    return list(inner)


def find_definitions(words: Sequence[str], sentence: int = 0) -> List[Definition]:
    """Acronym definitions in one sentence.

    words (Sequence[str]): Tokens.
    sentence (int): Index stored in the result.
    RETURNS (List[Definition]): (sentence, lf_start, lf_end, sf_start, sf_end) tuples.
    """
    found = []
    for i, word in enumerate(words):
        if word not in OPEN:
            continue
        close = _closing(words, i)
        inner = words[i + 1: close if close is not None else len(words)]
        head = _head(inner)
        if not head:
            continue
        if is_valid_short_form(head):
            # long form ( SF ): the window before the bracket, up to a stop token.
            n_chars = len("".join(head))
            size = min(n_chars + 5, n_chars * 2)
            lo = i
            while lo > 0 and i - lo < size and words[lo - 1] not in _WINDOW_STOP:
                lo -= 1
            window = words[lo:i]
            short = "".join(head)
            start = None
            if window:
                start = initials_long_form_start(short, window)
                if start is None:
                    start = best_long_form_start(short, window)
            if start is not None and "".join(window[start:]) != "".join(head):
                found.append((sentence, lo + start, i, i + 1, i + 1 + len(head)))
                continue
        short = words[i - 1] if i > 0 else ""
        if len(head) >= 2 and is_valid_short_form([short]) and short.lower() != short:
            # SF ( long form ): the whole head must be the long form; the SF needs an
            # upper-case letter here, or every "word ( explanation )" would be tried.
            size = min(len(short) + 5, len(short) * 2)
            if len(head) <= size and best_long_form_start(short, head) == 0:
                found.append((sentence, i + 1, i + 1 + len(head), i - 1, i))
    return found


def find_acronym_candidates(
    sentences: Sequence[Sequence[str]],
) -> Tuple[List[Candidate], List[Tuple[str, str]]]:
    """Acronym candidates in a document: definitions plus other uses of them.

    sentences (Sequence[Sequence[str]]): The document's sentences as token lists (a single
        sentence is a one-sentence document).
    RETURNS (Tuple[List[Candidate], List[Tuple[str, str]]]): Candidate spans as (sentence,
        start, end) and the (long form, short form) pairs defined.
    """
    definitions: List[Definition] = []
    for s, words in enumerate(sentences):
        if not _OPEN_SET.isdisjoint(words):  # a C-level test: most sentences have none
            definitions.extend(find_definitions(words, s))
    if not definitions:
        return [], []
    spans = set()
    pairs = []
    short_forms: Dict[Tuple[str, ...], None] = {}
    long_forms: Dict[Tuple[str, ...], None] = {}
    for s, lf_start, lf_end, sf_start, sf_end in definitions:
        spans.add((s, lf_start, lf_end))
        spans.add((s, sf_start, sf_end))
        # The whole "LF ( SF )" / "SF ( LF )" when the brackets hold just the inner form:
        # SciERC annotates such definitions as one mention.
        first, second = sorted([(lf_start, lf_end), (sf_start, sf_end)])
        words = sentences[s]
        if second[0] == first[1] + 1 and second[1] < len(words) and words[second[1]] in CLOSE:
            spans.add((s, first[0], second[1] + 1))
        lf = tuple(sentences[s][lf_start:lf_end])
        sf = tuple(sentences[s][sf_start:sf_end])
        short_forms[sf] = None
        long_forms[tuple(w.lower() for w in lf)] = None
        pairs.append((" ".join(lf), " ".join(sf)))
    # Other uses in the same document: SF with its exact case, LF in any case.
    for s, words in enumerate(sentences):
        lowered = [w.lower() for w in words]
        for forms, seq in ((short_forms, words), (long_forms, lowered)):
            for form in forms:
                n = len(form)
                for k in range(len(seq) - n + 1):
                    if seq[k] == form[0] and tuple(seq[k:k + n]) == form:
                        spans.add((s, k, k + n))
    return sorted(spans), pairs


def abbreviation_spans(words: Sequence[str], spans: Sequence[LabeledSpan]) -> List[LabeledSpan]:
    """Labels for the short forms of a document's acronym definitions, from their long forms.

    A definition "LF ( SF )" or "SF ( LF )" whose long form ends with a labeled span (one that
    ends where the long form ends and overlaps it: "familial [adenomatous polyposis] ( FAP )")
    gives its short form that span's label, and so does every other use of the short form in
    the document (the same tokens, exact case): a gazetteer or a model that knows "adenomatous
    polyposis" then also labels "FAP" wherever the document defined it. The given spans win:
    a short form overlapping one of them (or an earlier new span) is left alone; of two
    definitions of one short form, the first with a labeled long form counts.

    words (Sequence[str]): The tokens of one document.
    spans (Sequence[LabeledSpan]): Its labeled spans, (start, end, label, source).
    RETURNS (List[LabeledSpan]): The new spans, sorted; source "abbreviation:" + the long
        form span's source.
    """
    if _OPEN_SET.isdisjoint(words):  # no bracket, no definition (most sentences)
        return []
    by_end: Dict[int, List[LabeledSpan]] = {}
    taken = [False] * len(words)
    for span in spans:
        by_end.setdefault(span[1], []).append(span)
        taken[span[0]:span[1]] = [True] * (span[1] - span[0])
    forms: Dict[Tuple[str, ...], Tuple[str, str]] = {}
    for _, lf_start, lf_end, sf_start, sf_end in find_definitions(words):
        for start, _, label, source in by_end.get(lf_end, []):
            if start < lf_end:
                forms.setdefault(tuple(words[sf_start:sf_end]), (label, "abbreviation:" + source))
                break
    found = []
    for form, (label, source) in forms.items():
        n = len(form)
        for k in range(len(words) - n + 1):
            if tuple(words[k:k + n]) == form and not any(taken[k:k + n]):
                taken[k:k + n] = [True] * n
                found.append((k, k + n, label, source))
    return sorted(found)

"""Token-aligned dictionary matching with pyahocorasick (the C_exist source).

One Aho-Corasick automaton holds every term in lower case; a term that must match with its
case (policy "exact", or an acronym under policy "smart") is checked against the original
text after the automaton found it. That keeps one pass over the text whatever the policy.
Terms and text are compared in the fine "scan" form (``text.glue_punctuation``) and a match counts
only when it starts and ends on token boundaries of the text.
"""
import bisect
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import ahocorasick
from spacy.lang.en.stop_words import STOP_WORDS

from .text import GLUE, clean_tokens, glue_punctuation, normalize_term, safe_lower, tokenize

CASE_POLICIES = ("exact", "lowercase", "smart")
OVERLAP_POLICIES = ("longest", "all")
# A term is acronym-like when one of its words has an upper-case letter after its first
# character ("SVM", "mRNA", "IL-2", "NF-kappaB"); lower-casing those would make them match
# ordinary words ("CAT" / "cat"), while "Support Vector Machine" stays case-insensitive.
Match = Tuple[int, int, str]  # (start token, end token exclusive, sources "a|b")


def is_acronym(term: str) -> bool:
    """Whether a term is acronym-like, hence matched case-sensitively under "smart"."""
    return any(
        any(c.isupper() for c in piece[1:]) for piece in normalize_term(term).split(" ")
    )


@dataclass
class LoadReport:
    """What loading a gazetteer kept and skipped, with a few file:line locations."""

    added: int = 0
    blank: int = 0
    duplicate: int = 0
    too_short: int = 0
    stop_word: int = 0
    no_letter: int = 0
    malformed: int = 0
    # Lines with TAB-separated columns ("term<TAB>id"): the first column was taken as the
    # term. Not a skip; counted so that a two-column file read as a plain list is visible.
    first_column: int = 0
    examples: List[str] = field(default_factory=list)

    def skip(self, kind: str, path: str, line_no: int) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.examples) < 5:
            self.examples.append(f"{path}:{line_no}: {kind}")

    def as_dict(self) -> Dict[str, object]:
        return dict(self.__dict__)


class TermDictionary:
    """Terms with source tags, matched token-aligned in tokenized text.

    case (str): "exact", "lowercase" or "smart" (case-insensitive unless the term is an
        acronym).
    min_chars (int): Shorter terms are skipped (one-letter gazetteer entries match noise).
    skip_stop_words (bool): Skip one-word terms that are English stop words when loading
        lists (SciERC labels pronouns like "this" and "it" as Generic mentions; as
        candidates they would swamp everything else). Terms without a letter are always
        skipped.
    """

    def __init__(self, case: str = "smart", min_chars: int = 2, skip_stop_words: bool = True):
        if case not in CASE_POLICIES:
            raise ValueError(f"Unknown case policy '{case}': expected one of {CASE_POLICIES}")
        self.case = case
        self.min_chars = min_chars
        self.skip_stop_words = skip_stop_words
        # key (lower-cased scan form) -> {surface scan form or None (any case): sources}
        self._terms: Dict[str, Dict[Optional[str], set]] = {}
        self._automaton: Optional[ahocorasick.Automaton] = None
        self._size = 0  # number of (key, form) entries, kept so len() is O(1)

    def __len__(self) -> int:
        return self._size

    def __contains__(self, term: str) -> bool:
        return safe_lower(normalize_term(term)) in self._terms

    def add(self, term: str, source: str = "dict", case_sensitive: Optional[bool] = None) -> bool:
        """Add a term; returns False when it was already there with this source.

        term (str): The term, in any tokenization.
        source (str): Source tag, e.g. "dict", "pattern", "phrase".
        case_sensitive (Optional[bool]): Override the case policy for this term.
        RETURNS (bool): Whether the dictionary changed.
        """
        scan = normalize_term(term)
        if len(scan) < self.min_chars:
            raise ValueError(f"term {term!r} is shorter than {self.min_chars} characters")
        if case_sensitive is None:
            case_sensitive = self.case == "exact" or (self.case == "smart" and is_acronym(scan))
        key = safe_lower(scan)
        forms = self._terms.setdefault(key, {})
        form = scan if case_sensitive else None
        if form not in forms:
            self._size += 1
        sources = forms.setdefault(form, set())
        if source in sources:
            return False
        sources.add(source)
        self._automaton = None
        return True

    def add_many(self, terms: Iterable[str], source: str = "dict") -> LoadReport:
        """Add terms from an iterable (e.g. gold entity texts), counting what was skipped."""
        report = LoadReport()
        for i, term in enumerate(terms, start=1):
            self._add_counted(term, source, report, "<terms>", i)
        return report

    def _add_counted(self, term: str, source: str, report: LoadReport, path: str, line_no: int):
        if not term.strip():
            report.skip("blank", path, line_no)
        elif len(normalize_term(term)) < self.min_chars:
            report.skip("too_short", path, line_no)
        elif self.skip_stop_words and term.strip().lower() in STOP_WORDS:
            report.skip("stop_word", path, line_no)
        elif not any(c.isalpha() for c in term):
            # "10" (an elliptical gene name in BioNLP13CG), "3.5", "(+)": numbers and
            # symbols alone would match every table and figure reference.
            report.skip("no_letter", path, line_no)
        elif self.add(term, source):
            report.added += 1
        else:
            report.skip("duplicate", path, line_no)

    def load_gazetteer(self, path: str, source: str = "dict", strict: bool = False) -> LoadReport:
        """Load a gazetteer: one term per line, or a BEL ``.belns``/``.belanno`` file.
        A line with TABs (``term<TAB>id``) gives its first column, counted in
        ``first_column``.

        BEL files are recognised by their ``[Values]`` section; each value line is
        ``name|code`` and BEL escapes (``\\{``) are undone. Blank, duplicate, too short and
        malformed lines are skipped and counted (``strict`` raises on malformed ones).

        path (str): The file.
        source (str): Source tag of its terms.
        strict (bool): Raise ValueError naming file and line on a malformed line.
        RETURNS (LoadReport): Counts of added and skipped lines.
        """
        report = LoadReport()
        with open(path, "rb") as handle:
            raw_lines = handle.read().split(b"\n")
        is_bel = any(line.strip() == b"[Values]" for line in raw_lines)
        in_values = not is_bel
        for line_no, raw in enumerate(raw_lines, start=1):
            try:
                line = raw.decode("utf8").rstrip("\r")
            except UnicodeDecodeError:
                if strict:
                    raise ValueError(f"{path}:{line_no}: invalid UTF-8 in gazetteer line")
                report.skip("malformed", path, line_no)
                continue
            if is_bel and not in_values:
                in_values = line.strip() == "[Values]"
                continue
            if is_bel and line.strip():
                name, sep, code = line.partition("|")
                if not sep or not name.strip() or "|" in code:
                    if strict:
                        raise ValueError(f"{path}:{line_no}: expected 'name|code', got {line!r}")
                    report.skip("malformed", path, line_no)
                    continue
                line = re.sub(r"\\(.)", r"\1", name)
            elif "\t" in line:  # a term never holds a TAB: "term<TAB>id", first column
                line = line.split("\t", 1)[0]
                report.first_column += bool(line.strip())  # a blank first column is a blank line
            if raw == b"" and line_no == len(raw_lines):
                continue  # the empty string after the final newline is not a line
            self._add_counted(line.strip(), source, report, path, line_no)
        return report

    @property
    def automaton(self) -> ahocorasick.Automaton:
        if self._automaton is None:
            automaton = ahocorasick.Automaton()
            for key, forms in self._terms.items():
                # Padding with spaces makes every hit start and end on a fine-token
                # boundary of the (equally padded) scan string: no hits inside words.
                # (length, sources when any case matches, ((form, sources), ...) when
                # only that exact form matches): the hot loop then does no string work.
                any_case = frozenset(forms.get(None, ()))
                cased = tuple((f, frozenset(srcs)) for f, srcs in forms.items() if f is not None)
                automaton.add_word(f" {key} ", (len(key) + 2, any_case, cased))
            automaton.make_automaton()
            self._automaton = automaton
        return self._automaton

    def match(self, words: Sequence[str], overlap: str = "all") -> List[Match]:
        """Find the terms in a token sequence (e.g. the tokens of a spaCy Doc).

        words (Sequence[str]): The coarse tokens of a sentence or document.
        overlap (str): "all" keeps overlapping matches, "longest" resolves them.
        RETURNS (List[Match]): (start, end, sources) token spans, sorted.
        """
        return resolve_overlaps(self.match_many([words])[0], overlap)

    def match_text(self, text: str, tokenizer: str = "regex", overlap: str = "all") -> List[Match]:
        """Find the terms in a raw line; token indices refer to ``tokenize(text, tokenizer)``."""
        return self.match(tokenize(text, tokenizer), overlap)

    def match_many(
        self, token_lists: Sequence[Sequence[str]], clean: bool = False
    ) -> List[List[Match]]:
        """Find the terms in many token sequences at once (the miner's hot path).

        All sequences are marked (see ``text.glue_punctuation``) and scanned as one string, one
        line each, so the per-line Python work is a join: string preparation and the
        Aho-Corasick pass run at C speed over the whole batch.

        token_lists (Sequence[Sequence[str]]): Token lists (lines, sentences or docs).
        clean (bool): The caller guarantees tokens without whitespace (``text.tokenize``
            output), so the check for spaCy's whitespace tokens is skipped.
        RETURNS (List[List[Match]]): Per list, its (start, end, sources) spans, sorted.
        """
        results: List[List[Match]] = [[] for _ in token_lists]
        if not self._size or not token_lists:
            return results
        cleaned = token_lists
        indexes: Dict[int, List[int]] = {}
        joined = "\n".join(" ".join(words) for words in token_lists)
        if not clean and len(joined.split()) != sum(map(len, token_lists)):  # whitespace tokens
            cleaned = list(token_lists)
            for i, words in enumerate(token_lists):
                cleaned[i], index = clean_tokens(words)
                if index is not None:
                    indexes[i] = index
            joined = "\n".join(" ".join(words) for words in cleaned)
        # " \n " between lines: every line is space-padded like a single scanned line.
        marked = glue_punctuation(joined).replace("\n", " \n ")
        starts = [0] + [m.end() + 1 for m in re.finditer("\n", marked)]
        scan = marked.replace(GLUE, " ")
        padded = f" {safe_lower(scan)} "
        last = len(padded) - 1
        found: Dict[Tuple[int, int, int], set] = {}
        for p1, (length, sources, cased) in self.automaton.iter(padded):
            p0 = p1 - length + 1
            # padded[i] is marked[i - 1]; the term is marked[p0:p1 - 1] and both padding
            # spaces around it must be token boundaries, not GLUE.
            if (p0 and marked[p0 - 1] != " ") or (p1 != last and marked[p1 - 1] != " "):
                continue
            if cased:
                text = scan[p0:p1 - 1]
                for form, form_sources in cased:
                    if form == text:
                        sources = sources | form_sources
                if not sources:
                    continue
            line = bisect.bisect_right(starts, p0) - 1
            start = marked.count(" ", starts[line], p0)
            end = start + marked.count(" ", p0, p1 - 1) + 1
            found.setdefault((line, start, end), set()).update(sources)
        for (line, start, end), sources in found.items():
            if line in indexes:
                start, end = indexes[line][start], indexes[line][end - 1] + 1
            results[line].append((start, end, "|".join(sorted(sources))))
        for spans in results:
            spans.sort()
        return results

    def to_list(self) -> List[Tuple[str, str, bool]]:
        """Serializable content: (term, sources, case_sensitive) rows."""
        rows = []
        for key, forms in sorted(self._terms.items()):
            for form, sources in sorted(forms.items(), key=lambda kv: kv[0] or ""):
                rows.append((form or key, "|".join(sorted(sources)), form is not None))
        return rows

    @classmethod
    def from_list(cls, rows: Iterable[Sequence], case: str = "smart", min_chars: int = 2):
        """Rebuild from ``to_list`` rows."""
        dictionary = cls(case=case, min_chars=min_chars)
        for term, sources, case_sensitive in rows:
            for source in sources.split("|"):
                dictionary.add(term, source, case_sensitive=bool(case_sensitive))
        return dictionary


def resolve_overlaps(matches: List[Match], overlap: str = "longest") -> List[Match]:
    """Resolve overlapping spans.

    "longest": greedily keep the longest span, ties broken by the earlier start, and drop
    every span that overlaps one already kept (the usual gazetteer rule: "support vector
    machine" wins over "vector"). "all": keep everything.

    matches (List[Match]): (start, end, label) spans.
    overlap (str): "longest" or "all".
    RETURNS (List[Match]): The kept spans sorted by (start, end).
    """
    if overlap not in OVERLAP_POLICIES:
        raise ValueError(f"Unknown overlap policy '{overlap}': expected one of {OVERLAP_POLICIES}")
    if overlap == "all" or len(matches) < 2:
        return sorted(matches)
    kept: List[Match] = []
    occupied = set()
    for start, end, label in sorted(matches, key=lambda m: (m[0] - m[1], m[0])):
        if any(i in occupied for i in range(start, end)):
            continue
        occupied.update(range(start, end))
        kept.append((start, end, label))
    return sorted(kept)

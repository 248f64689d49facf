"""Fast tokenization and robust line reading for the candidate miner.

spaCy's tokenizer is not used in the mining hot path: at ~94k lines it would dominate the
run time. Two cheap tokenizers stand in for it:

- "whitespace": the line is already tokenized (most aux corpora are); split on whitespace.
- "regex" (default): ``\\w+(?:[-'.]\\w+)*|\\S`` keeps words with inner hyphens, apostrophes
  and dots together ("IL-2", "3.5", "Fe-S") and splits every other punctuation mark off;
  on already tokenized text it changes almost nothing.

These "coarse" tokens are the tokens of the output Docs. Dictionary matching runs on a
finer view: every coarse token is split into ``\\w+`` runs and single punctuation marks and
the pieces are joined by one space ("acetyl-CoA" -> "acetyl - CoA"), so a term matches
whatever the hyphen spacing of the text, while a match still counts only if it starts and
ends on coarse token boundaries (never inside a word).
"""
import re
import sys
import unicodedata
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

FINE_RE = re.compile(r"\w+|[^\w\s]")
COARSE_RE = re.compile(r"\w+(?:[-'.]\w+)*|\S")
# C0/C1 control characters except tab; they break downstream tokenizers and JSON viewers.
CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
TOKENIZERS = ("regex", "whitespace")


def tokenize(text: str, tokenizer: str = "regex") -> List[str]:
    """Split a line into coarse tokens.

    text (str): The line.
    tokenizer (str): "regex" or "whitespace".
    RETURNS (List[str]): The tokens.
    """
    if tokenizer == "whitespace":
        return text.split()
    if tokenizer == "regex":
        return COARSE_RE.findall(text)
    raise ValueError(f"Unknown tokenizer '{tokenizer}': expected one of {TOKENIZERS}")


def tokenize_with_spaces(text: str, tokenizer: str = "regex") -> Tuple[List[str], List[bool]]:
    """Tokenize a line and record whether whitespace follows each token (for spaCy Docs).

    text (str): The line.
    tokenizer (str): "regex" or "whitespace".
    RETURNS (Tuple[List[str], List[bool]]): Words and spaces, as ``Doc(vocab, words, spaces)``
        takes them.
    """
    pattern = re.compile(r"\S+") if tokenizer == "whitespace" else COARSE_RE
    if tokenizer not in TOKENIZERS:
        raise ValueError(f"Unknown tokenizer '{tokenizer}': expected one of {TOKENIZERS}")
    words, spaces = [], []
    for match in pattern.finditer(text):
        words.append(match.group())
        end = match.end()
        spaces.append(end < len(text) and text[end].isspace())
    return words, spaces


GLUE = "\x01"  # marks a fine boundary inside a coarse token ("IL-2" -> "IL\x01-\x012")


class _GlueAround(dict):
    """str.translate table: a punctuation mark -> GLUE mark GLUE, other characters kept.

    Filled on first sight of each character, so translate runs at C speed afterwards
    (a regex substitution with a template was 5x slower).
    """

    def __missing__(self, code: int) -> str:
        char = chr(code)
        value = char if _WORD_OR_SPACE.match(char) else f"{GLUE}{char}{GLUE}"
        self[code] = value
        return value


_WORD_OR_SPACE = re.compile(r"[\w\s]")
_GLUE_TABLE = _GlueAround()


def glue_punctuation(joined: str) -> str:
    """Set off every punctuation mark inside a token by GLUE, in a string of tokens joined
    by spaces (lines may be joined by newlines): "IL-2 (x)" -> "IL\x01-\x012 (\x01x\x01)".
    GLUE next to a space, a newline or another GLUE is dropped, so standalone marks stay
    tokens of their own. C-level string operations only.
    """
    marked = joined.translate(_GLUE_TABLE)
    # Separators next to a token boundary or another separator are not glue.
    marked = marked.replace(GLUE + GLUE, GLUE).replace(" " + GLUE, " ").replace(GLUE + " ", " ")
    if "\n" in marked:
        marked = marked.replace("\n" + GLUE, "\n").replace(GLUE + "\n", "\n")
    return marked.strip(GLUE)


def clean_tokens(words: Sequence[str]) -> Tuple[List[str], Optional[List[int]]]:
    """Tokens fit for joining by spaces: whitespace tokens (spaCy) dropped, inner whitespace
    (never from spaCy's tokenizer) replaced by "_"; with the kept tokens' original indices,
    or None when every token was fine (the usual case, checked at C speed).
    """
    if len(" ".join(words).split()) == len(words):
        return list(words), None
    index = [i for i, w in enumerate(words) if w and not w.isspace()]
    return ["_".join(words[i].split()) for i in index], index


def normalize_term(term: str) -> str:
    """The scan-string form of a dictionary term (see ``glue_punctuation``).

    term (str): A term as written in a gazetteer or a gold span.
    RETURNS (str): Its fine pieces joined by single spaces; "" if it has no token.
    """
    return " ".join(FINE_RE.findall(term))


def safe_lower(text: str) -> str:
    """Lower-case without changing the string length, so offsets stay valid.

    A few characters ("İ") grow when lower-cased; those are kept as they are.
    """
    lowered = text.lower()
    if len(lowered) == len(text):
        return lowered
    return "".join(c if len(c.lower()) != 1 else c.lower() for c in text)


@dataclass
class ReadStats:
    """Counts of what the reader had to repair or skip, reported at the end of a run."""

    lines: int = 0
    empty: int = 0
    decode_errors: int = 0
    control_chars: int = 0
    examples: List[str] = field(default_factory=list)

    def note(self, kind: str, path: str, line_no: int) -> None:
        # Keep a few locations so that the report names file and line.
        if len(self.examples) < 5:
            self.examples.append(f"{path}:{line_no}: {kind}")

    def merge(self, other: "ReadStats") -> None:
        self.lines += other.lines
        self.empty += other.empty
        self.decode_errors += other.decode_errors
        self.control_chars += other.control_chars
        self.examples.extend(other.examples[: max(0, 5 - len(self.examples))])

    def as_dict(self) -> Dict[str, object]:
        return {
            "lines": self.lines,
            "empty_lines_skipped": self.empty,
            "lines_with_invalid_utf8_replaced": self.decode_errors,
            "lines_with_control_chars_replaced": self.control_chars,
            "examples": list(self.examples),
        }


def clean_line(raw: bytes, path: str, line_no: int, stats: ReadStats) -> Optional[str]:
    """Decode and clean one raw line; None for an empty line (counted in stats)."""
    try:
        text = raw.decode("utf8")
    except UnicodeDecodeError:
        # Invalid bytes become U+FFFD; the line is kept, the repair is counted.
        text = raw.decode("utf8", errors="replace")
        stats.decode_errors += 1
        stats.note("invalid UTF-8 replaced by U+FFFD", path, line_no)
    text = text.rstrip("\r\n")
    if CONTROL_RE.search(text):
        text = CONTROL_RE.sub(" ", text)
        stats.control_chars += 1
        stats.note("control characters replaced by spaces", path, line_no)
    if "\u2028" in text or "\u2029" in text:
        text = text.replace("\u2028", " ").replace("\u2029", " ")
    text = unicodedata.normalize("NFC", text) if not text.isascii() else text
    if not text.strip():
        stats.empty += 1
        return None
    return text


def read_documents(
    paths: Sequence[str], doc_boundary: str = "line", stats: Optional[ReadStats] = None
) -> Iterator[List[Tuple[str, int, str]]]:
    """Stream documents from text files, one line each or blank-line separated, or DocBins.

    paths (Sequence[str]): Text files; "-" reads stdin; a ``.spacy`` file is a DocBin whose
        Docs are documents (see ``_docbin_documents``).
    doc_boundary (str): "line": every line is a document (sentences or abstracts);
        "blank": consecutive lines up to a blank line form one document, so that an
        acronym defined in one sentence is found in the next ones.
    stats (Optional[ReadStats]): Filled with repair/skip counts.
    YIELDS (List[Tuple[str, int, str]]): A document as (path, line number, text) lines.
    """
    if doc_boundary not in ("line", "blank"):
        raise ValueError(f"Unknown doc_boundary '{doc_boundary}': expected 'line' or 'blank'")
    stats = stats if stats is not None else ReadStats()
    for path in paths:
        if path.endswith(".spacy"):
            yield from _docbin_documents(path, stats)
            continue
        handle = sys.stdin.buffer if path == "-" else open(path, "rb")
        try:
            doc: List[Tuple[str, int, str]] = []
            for line_no, raw in enumerate(handle, start=1):
                stats.lines += 1
                text = clean_line(raw, path, line_no, stats)
                if text is None:
                    if doc_boundary == "blank" and doc:
                        yield doc
                        doc = []
                    continue
                doc.append((path, line_no, text))
                if doc_boundary == "line":
                    yield doc
                    doc = []
            if doc:
                yield doc
        finally:
            if handle is not sys.stdin.buffer:
                handle.close()


def _docbin_documents(path: str, stats: ReadStats) -> Iterator[List[Tuple[str, int, str]]]:
    """The Docs of a DocBin as documents: one line per sentence (per Doc when sentences
    are not set), its tokens joined by single spaces (whitespace tokens dropped), so that
    ``--tokenizer whitespace`` gives back the Doc's tokens. "Line numbers" are Doc indices.
    """
    from spacy.tokens import DocBin
    from spacy.vocab import Vocab

    try:
        docbin = DocBin().from_disk(path)
    except Exception as err:  # msgpack/srsly raise many types for a corrupt file
        raise ValueError(f"{path}: not a readable spaCy DocBin ({err})") from err
    for i, doc in enumerate(docbin.get_docs(Vocab())):
        parts = doc.sents if doc.has_annotation("SENT_START") else [doc[:]]
        lines = [" ".join(t.text for t in part if t.text.strip()) for part in parts]
        stats.lines += len(lines)
        stats.empty += sum(1 for line in lines if not line)
        doc_lines = [(path, i + 1, line) for line in lines if line]
        if doc_lines:
            yield doc_lines


_SENT_END = {".", "!", "?"}
# Tokens before a "." that do not end a sentence ("et al .", "Fig . 2", "e.g .").
_ABBREVIATIONS = {"al", "fig", "figs", "e.g", "i.e", "eq", "eqs", "vs", "cf", "ref", "refs",
                  "no", "dr", "mr", "ms", "approx", "ca", "resp", "sect", "tab"}


def sentence_starts(words: Sequence[str]) -> List[int]:
    """Token indices where sentences start: after ". ! ?" followed by an upper-case or
    digit token, unless the mark follows an abbreviation ("et al .", "Fig .").

    Abstract-per-line corpora (CSAbstruct) need it so that pre-fine-tuning gets sentences;
    sentence-per-line corpora pass through unchanged.
    """
    starts = [0]
    for i in range(1, len(words) - 1):
        if words[i] in _SENT_END and i > starts[-1]:
            following = words[i + 1]
            if words[i - 1].lower() not in _ABBREVIATIONS and (
                following[0].isupper() or following[0].isdigit()
            ):
                starts.append(i + 1)
    return starts


def split_sentences(words: Sequence[str]) -> List[List[str]]:
    """Split a token list into sentences (see ``sentence_starts``)."""
    if not words:
        return []
    bounds = sentence_starts(words) + [len(words)]
    return [list(words[a:b]) for a, b in zip(bounds, bounds[1:])]

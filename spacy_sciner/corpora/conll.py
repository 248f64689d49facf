"""CoNLL-style token/tag files to spaCy Docs (one Doc per sentence).

Accepted layouts (one token per line, sentences separated by blank lines):

- ``token<TAB>tag`` (the MTL-Bioinformatics-2016 / CrossNER files), or any TAB-separated
  columns with the tag last;
- space-separated columns with the tag last, e.g. SciBERT's SciERC rendering
  ``token NN O I-Task``;
- ``-DOCSTART-`` lines (first column) start a new document; ``doc.user_data["doc_index"]``
  numbers documents from 0 (sentences before any -DOCSTART- have index 0 too).

Tag schemes: "iob1" (``I-X`` starts a chunk; ``B-X`` only separates two adjacent chunks
of one type), "iob2" (every chunk starts with ``B-X``), "iobes" (``B-`` ``I-`` ``E-``
``S-``; BILOU's ``L-``/``U-`` are read as ``E-``/``S-``), or "auto": per file, IOBES if
any ``E-``/``S-``/``L-``/``U-`` tag occurs, else IOB1 if chunks start with ``I-`` and never
with ``B-``, else IOB2.

Inconsistent sequences are errors naming the file and line: in IOB2 an ``I-X`` that does
not continue an ``X`` chunk; in IOBES an ``I-X``/``E-X`` without a head, and a ``B-X``/
``I-X`` chunk that is not closed by ``E-X``. With ``repair=True`` they are fixed the
obvious way instead (a headless ``I-X`` starts a chunk, ``E-X`` becomes ``S-X``, an
unclosed chunk ends at its last token) and each fix is counted in
``ConversionStats.repairs`` and reported in one warning per file.

spaCy's ``iob_to_biluo`` does the IOB1/IOB2 conversion but cannot say *where* a file is
wrong, hence the small state machine here.
"""
import re
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Tuple, Union

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

from .common import DEFAULT_SPANS_KEY, ConversionStats, CorpusFormatError, read_lines, set_gold_spans, warn_summary

SCHEMES = ("auto", "iob1", "iob2", "iobes")
DOCSTART = "-DOCSTART-"
TAG_RE = re.compile(r"^(?:O|([BIESLU])-(\S+))$")
BILOU_TO_IOBES = {"L": "E", "U": "S"}

# One token: (line number, word, prefix or "O", label or "").
Token = Tuple[int, str, str, str]


def read_conll(
    path: Union[str, Path],
    vocab: Vocab,
    *,
    scheme: str = "auto",
    spans_key: str = DEFAULT_SPANS_KEY,
    repair: bool = False,
    stats: Optional[ConversionStats] = None,
) -> Iterator[Doc]:
    """Read a CoNLL-style file, one Doc per sentence.

    path (Union[str, Path]): The file.
    vocab (Vocab): Vocab for the Docs.
    scheme (str): "auto", "iob1", "iob2" or "iobes".
    spans_key (str): Span group receiving the gold chunks.
    repair (bool): Fix inconsistent tag sequences (counted) instead of raising.
    stats (Optional[ConversionStats]): Receives repair counts and notes.
    YIELDS (Doc): Docs with ``doc.spans[spans_key]`` and ``doc.ents`` set (flat chunks,
        so both hold the same mentions).
    RAISES (CorpusFormatError): Malformed line, unknown tag, inconsistent sequence (when
        not repairing), empty file.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    path = Path(path)
    stats = stats if stats is not None else ConversionStats()
    repairs_before = stats.repairs
    sentences = list(_parse_sentences(path))
    if scheme == "auto":
        scheme = detect_scheme(sentence for _, sentence in sentences)
    stats.schemes[str(path)] = scheme
    for doc_index, sentence in sentences:
        words = [word for _, word, _, _ in sentence]
        # A sentence per Doc: mark it, so that sentence-aware code sees one sentence.
        sent_starts = [True] + [False] * (len(words) - 1)
        doc = Doc(vocab, words=words, spaces=[True] * (len(words) - 1) + [False], sent_starts=sent_starts)
        chunks = _chunks(sentence, scheme, repair, path, stats)
        doc.user_data["doc_index"] = doc_index
        doc.user_data["source"] = f"{path.name}:{sentence[0][0]}"
        yield set_gold_spans(doc, [Span(doc, s, e, label=label) for s, e, label in chunks], spans_key, stats)
    warn_summary(stats, path, "tag sequences repaired", stats.repairs - repairs_before)


def _parse_sentences(path: Path) -> Iterator[Tuple[int, List[Token]]]:
    """Yield (document index, tokens) per sentence; validate every line's shape and tag."""
    doc_index = 0
    doc_has_tokens = False  # a -DOCSTART- only opens a new document after some content
    sentence: List[Token] = []
    for line_no, line in enumerate(read_lines(path), start=1):
        # Split at TABs or ASCII spaces only: a token may hold other whitespace (NBSP).
        columns = line.split("\t") if "\t" in line else [c for c in line.split(" ") if c]
        columns = [c.strip(" ") for c in columns] or [""]
        if not line.strip(" \t") or columns[0] == DOCSTART:
            if sentence:
                yield doc_index, sentence
                sentence = []
            if columns[0] == DOCSTART and doc_has_tokens:
                doc_index += 1
                doc_has_tokens = False
            continue
        if len(columns) < 2 or not columns[0] or not columns[-1]:
            raise CorpusFormatError(
                path,
                f"malformed line {line!r}: expected 'token<TAB>tag' or space-separated columns with the tag last",
                line=line_no,
            )
        tag = columns[-1]
        match = TAG_RE.match(tag)
        if match is None:
            raise CorpusFormatError(path, f"unknown tag {tag!r} (expected O, B-X, I-X, E-X or S-X)", line=line_no)
        prefix, label = match.group(1) or "O", match.group(2) or ""
        sentence.append((line_no, columns[0], BILOU_TO_IOBES.get(prefix, prefix), label))
        doc_has_tokens = True
    if sentence:
        yield doc_index, sentence


def detect_scheme(sentences: Iterable[List[Token]]) -> str:
    """Guess the tag scheme of a whole file from its sentences' tokens."""
    b_heads = i_heads = 0
    for sentence in sentences:
        prev_prefix, prev_label = "O", ""
        for _, _, prefix, label in sentence:
            if prefix in ("E", "S"):
                return "iobes"
            continues = prev_prefix != "O" and prev_label == label
            if prefix == "B" and not continues:
                b_heads += 1
            elif prefix == "I" and not continues:
                i_heads += 1
            prev_prefix, prev_label = prefix, label
    return "iob1" if i_heads and not b_heads else "iob2"


def _chunks(
    sentence: List[Token], scheme: str, repair: bool, path: Path, stats: ConversionStats
) -> List[Tuple[int, int, str]]:
    """(start, end exclusive, label) chunks of one sentence."""
    chunks: List[Tuple[int, int, str]] = []
    open_start, open_label = -1, ""

    def problem(line_no: int, message: str, fix: str) -> None:
        if not repair:
            raise CorpusFormatError(
                path, f"{message} ({scheme.upper()}); pass repair=True (--repair) to {fix}", line=line_no
            )
        stats.repairs += 1
        stats.notes.append(f"{path}:{line_no}: {message}: {fix}")

    def close(end: int) -> None:
        nonlocal open_start
        if open_start >= 0:
            chunks.append((open_start, end, open_label))
        open_start = -1

    for i, (line_no, _, prefix, label) in enumerate(sentence):
        if prefix in ("E", "S") and scheme != "iobes":
            raise CorpusFormatError(path, f"tag {prefix}-{label} is not valid in {scheme.upper()}", line=line_no)
        continues = open_start >= 0 and open_label == label
        if scheme == "iobes" and open_start >= 0 and not (continues and prefix in ("I", "E")):
            # The open chunk should have ended with E- on the previous token.
            problem(sentence[i - 1][0], f"{sentence[i - 1][2]}-{open_label} is not closed by E-{open_label}", "end the chunk there")
            close(i)
        if prefix == "O":
            close(i)
        elif prefix == "B" or prefix == "S":
            close(i)
            open_start, open_label = i, label
            if prefix == "S":
                close(i + 1)
        elif prefix == "I":
            if not continues:
                if scheme != "iob1":
                    problem(line_no, f"I-{label} does not continue a {label} chunk", f"start a chunk (B-{label})")
                close(i)
                open_start, open_label = i, label
        elif prefix == "E":
            if not continues:
                problem(line_no, f"E-{label} does not continue a {label} chunk", f"read it as S-{label}")
                open_start, open_label = i, label
            close(i + 1)
    if open_start >= 0 and scheme == "iobes":
        last = sentence[-1]
        problem(last[0], f"{last[2]}-{open_label} at sentence end is not closed by E-{open_label}", "end the chunk there")
    close(len(sentence))
    return chunks

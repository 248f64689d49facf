"""Read a pre-fine-tuning corpus and turn it into word-piece examples with candidate spans.

Two input formats are accepted (the miner's ``build-corpus`` writes either):

* a spaCy ``DocBin`` (``.spacy``): one sentence per ``Doc``, candidates in
  ``doc.spans["candidates"]`` with the source tag(s) as label (``"dict|phrase"``);
* JSON lines (``.jsonl``): ``{"text": ..., "tokens": [...], "candidates":
  [[start_token, end_token_exclusive, "source"], ...]}``. Without ``"tokens"`` the text is
  split on white space; ``"candidates"`` may be missing (no candidates).

Sequences longer than the model window are **split into windows at word boundaries**
(never truncated, so no text is lost); a candidate that a window boundary cuts is skipped
and counted. Candidates whose words produce no word piece at all (e.g. a lone zero-width
character) are skipped and counted too. All counts end up in ``CorpusStats`` and in the
run's JSON log.
"""
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

CANDIDATES_KEY = "candidates"


class PFTDataError(ValueError):
    """Bad pre-fine-tuning input; the message names the file and line (or doc)."""


@dataclass
class Sentence:
    """One corpus sentence: its tokens and its candidate spans (token offsets).

    tokens (List[str]): The words.
    candidates (List[Tuple[int, int, str]]): ``(start, end_exclusive, source)`` spans.
    where (str): ``file:line`` or ``file doc N``, for error messages.
    """

    tokens: List[str]
    candidates: List[Tuple[int, int, str]]
    where: str


@dataclass
class Example:
    """A model input window: word pieces plus candidate spans in word-piece coordinates.

    input_ids (List[int]): Piece ids including the special tokens ([CLS] ... [SEP]).
    word_ids (List[int]): Word index (within the window) of every piece; -1 for specials.
    candidates (List[Tuple[int, int]]): ``(first_piece, end_piece_exclusive)`` per candidate.
    """

    input_ids: List[int]
    word_ids: List[int]
    candidates: List[Tuple[int, int]] = field(default_factory=list)


@dataclass
class CorpusStats:
    """What reading the corpus kept and skipped (all reported in the run log)."""

    sentences: int = 0
    empty_sentences: int = 0
    windows: int = 0
    split_sentences: int = 0
    candidates: int = 0
    candidates_kept: int = 0
    candidates_no_piece: int = 0
    candidates_cut_by_window: int = 0
    pieces: int = 0

    def to_dict(self) -> Dict[str, int]:
        return asdict(self)


def read_sentences(path: Path) -> Iterator[Sentence]:
    """Stream the sentences of a DocBin (``.spacy``) or JSONL (anything else) corpus.

    path (Path): The corpus file.
    YIELDS (Sentence): One per doc / line (blank lines are skipped).
    """
    path = Path(path)
    if not path.exists():
        raise PFTDataError(f"PFT corpus not found: {path}")
    if path.suffix == ".spacy":
        yield from _read_docbin(path)
    else:
        yield from _read_jsonl(path)


def _read_docbin(path: Path) -> Iterator[Sentence]:
    import spacy
    from spacy.tokens import DocBin

    try:
        doc_bin = DocBin().from_disk(path)
    except Exception as err:  # srsly/msgpack raise many types for a corrupt file
        raise PFTDataError(f"{path}: not a readable spaCy DocBin ({err})") from err
    vocab = spacy.blank("xx").vocab
    for i, doc in enumerate(doc_bin.get_docs(vocab)):
        spans = doc.spans.get(CANDIDATES_KEY, [])
        candidates = [(s.start, s.end, s.label_) for s in spans]
        yield Sentence([t.text for t in doc], candidates, f"{path} doc {i}")


def _read_jsonl(path: Path) -> Iterator[Sentence]:
    with open(path, encoding="utf8") as file_:
        for line_no, line in enumerate(file_, start=1):
            where = f"{path}:{line_no}"
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise PFTDataError(f"{where}: invalid JSON ({err.msg})") from err
            if not isinstance(record, dict) or not isinstance(record.get("text", ""), str):
                raise PFTDataError(f"{where}: expected an object with a 'text' string")
            tokens = record.get("tokens")
            if tokens is None:
                tokens = record.get("text", "").split()
            if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
                raise PFTDataError(f"{where}: 'tokens' must be a list of strings")
            candidates = []
            for cand in record.get("candidates", []):
                ok = isinstance(cand, (list, tuple)) and len(cand) >= 2
                ok = ok and all(isinstance(x, int) for x in cand[:2])
                if not ok or not 0 <= cand[0] < cand[1] <= len(tokens):
                    raise PFTDataError(
                        f"{where}: candidate {cand!r} is not [start, end_exclusive, source] "
                        f"within the {len(tokens)} tokens"
                    )
                candidates.append((cand[0], cand[1], str(cand[2]) if len(cand) > 2 else ""))
            yield Sentence(tokens, candidates, where)


def _windows(word_pieces: List[List[int]], max_pieces: int) -> List[Tuple[int, int]]:
    """Split words into consecutive windows of at most ``max_pieces`` pieces.

    A single word longer than the window is cut to its first pieces (it is the only case
    where pieces are dropped; such words are garbage such as long URLs or sequences).
    """
    windows, start, size = [], 0, 0
    for i, pieces in enumerate(word_pieces):
        n = min(len(pieces), max_pieces)
        if size + n > max_pieces and i > start:
            windows.append((start, i))
            start, size = i, 0
        size += n
    if start < len(word_pieces):
        windows.append((start, len(word_pieces)))
    return windows


def _window_example(word_pieces: List[List[int]], w_start: int, w_end: int, candidates: List[Tuple[int, int, str]],
                    cls_id: int, sep_id: int, max_length: int, stats: CorpusStats) -> Example:
    """The example of words ``w_start:w_end`` (CLS + pieces + SEP) with the candidates that
    start in it and end in it, on pieces; counts kept and skipped candidates in ``stats``."""
    ids, word_ids, first_piece = [cls_id], [-1], {}
    for w in range(w_start, w_end):
        first_piece[w] = len(ids)
        pieces = word_pieces[w][: max_length - 2]
        ids.extend(pieces)
        word_ids.extend([w - w_start] * len(pieces))
    end_piece = {w: first_piece[w] + len(word_pieces[w][: max_length - 2]) for w in first_piece}
    ids.append(sep_id)
    word_ids.append(-1)
    example = Example(ids, word_ids)
    for start, end, _ in candidates:
        if start < w_start or start >= w_end:
            continue
        if end > w_end:
            stats.candidates_cut_by_window += 1
            continue
        p_start, p_end = first_piece[start], end_piece[end - 1]
        if p_end <= p_start:
            stats.candidates_no_piece += 1
            continue
        example.candidates.append((p_start, p_end))
    stats.candidates_kept += len(example.candidates)
    stats.windows += 1
    stats.pieces += len(ids)
    return example


def encode_sentences(
    sentences: Iterable[Sentence], tokenizer, max_length: int, stats: CorpusStats
) -> List[Example]:
    """Tokenize sentences into word pieces and map candidates onto pieces.

    sentences (Iterable[Sentence]): Corpus sentences.
    tokenizer: A Hugging Face *fast* tokenizer (``word_ids`` needed).
    max_length (int): Window size in pieces including the two special tokens.
    stats (CorpusStats): Updated in place with counts of what was kept and skipped.
    RETURNS (List[Example]): One example per window.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise PFTDataError("PFT needs a fast (Rust) tokenizer to align words and pieces")
    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    if cls_id is None or sep_id is None:
        raise PFTDataError("The tokenizer has no CLS/SEP (or <s>/</s>) token")
    examples: List[Example] = []
    for sent in sentences:
        stats.sentences += 1
        stats.candidates += len(sent.candidates)
        if not sent.tokens:
            stats.empty_sentences += 1
            stats.candidates_no_piece += len(sent.candidates)
            continue
        enc = tokenizer(sent.tokens, is_split_into_words=True, add_special_tokens=False)
        word_pieces: List[List[int]] = [[] for _ in sent.tokens]
        for piece_id, word in zip(enc["input_ids"], enc.word_ids()):
            word_pieces[word].append(piece_id)
        windows = _windows(word_pieces, max_length - 2)
        if len(windows) > 1:
            stats.split_sentences += 1
        # Candidates of the sentence, each handed to the window that fully contains it.
        pending = sorted(sent.candidates)
        for w_start, w_end in windows:
            example = _window_example(word_pieces, w_start, w_end, pending, cls_id, sep_id, max_length, stats)
            if len(example.input_ids) > 2:
                examples.append(example)
    return examples


def load_corpus(
    path: Path, tokenizer, max_length: int, limit: Optional[int] = None
) -> Tuple[List[Example], CorpusStats]:
    """Read and encode a corpus file.

    path (Path): DocBin or JSONL corpus.
    tokenizer: Fast tokenizer of the encoder.
    max_length (int): Window size in pieces (including specials).
    limit (Optional[int]): Read at most this many sentences (smoke runs).
    RETURNS (Tuple[List[Example], CorpusStats]): The examples and the counts.
    """
    stats = CorpusStats()
    sentences = read_sentences(path)
    if limit is not None:
        sentences = (s for i, s in zip(range(limit), sentences))
    examples = encode_sentences(sentences, tokenizer, max_length, stats)
    if not examples:
        raise PFTDataError(
            f"PFT corpus {path} has no usable text ({stats.sentences} sentences read, "
            f"{stats.empty_sentences} empty)"
        )
    return examples, stats


def split_heldout(
    examples: Sequence[Example], fraction: float, max_size: int, seed: int
) -> Tuple[List[Example], List[Example]]:
    """Put a seeded random slice of the examples aside for the evaluation loss.

    fraction (float): Share of the examples held out.
    max_size (int): Upper bound of the held-out slice (keeps evaluation cheap).
    seed (int): Seed of the split, so a resumed run holds out the same slice.
    RETURNS (Tuple[List[Example], List[Example]]): ``(train, heldout)``; the held-out slice
        is empty when the corpus is too small to spare anything.
    """
    n_held = min(max_size, int(len(examples) * fraction))
    if n_held == 0 or n_held >= len(examples):
        return list(examples), []
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    held = set(order[:n_held])
    train = [ex for i, ex in enumerate(examples) if i not in held]
    return train, [examples[i] for i in sorted(held)]

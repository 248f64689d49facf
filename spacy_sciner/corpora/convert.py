"""Convert a corpus file (or BRAT directory) into a spaCy DocBin (``.spacy``)."""
import json
from pathlib import Path
from typing import Iterator, Union

import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin

from ..cli_util import atomic_output_file
from .brat import read_brat
from .common import DEFAULT_SPANS_KEY, ConversionStats, CorpusFormatError, count_docs
from .conll import read_conll
from .spacy_docbin import read_docbin
from .jsonl import read_jsonl
from .scierc import read_scierc

FORMATS = ("scierc", "conll", "brat", "jsonl", "docbin")
# File suffix -> format ("json": SciERC's JSON lines or character-offset JSONL, told apart by
# the first record; ".txt": CoNLL, or BRAT where an .ann file lies beside it).
SUFFIX_FORMATS = {
    ".spacy": "docbin", ".json": "json", ".jsonl": "json", ".ann": "brat",
    ".tsv": "conll", ".txt": "conll", ".conll": "conll", ".iob": "conll", ".bio": "conll",
}


def detect_format(path: Union[str, Path]) -> str:
    """The format of a corpus file or directory, from its suffix (and, for JSON lines, its
    first record): a directory of ``.spacy`` files is "docbin", any other directory "brat".

    RAISES (CorpusFormatError): An unknown suffix (the message lists the known ones).
    """
    path = Path(path)
    if path.is_dir():
        return "docbin" if any(path.rglob("*.spacy")) else "brat"
    fmt = SUFFIX_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise CorpusFormatError(
            path, f"cannot tell the format from the suffix {path.suffix!r} (known: {', '.join(SUFFIX_FORMATS)}); "
                  f"name it with --format ({', '.join(FORMATS)})"
        )
    if fmt == "json":
        return json_lines_format(path)
    if path.suffix.lower() == ".txt" and path.with_suffix(".ann").is_file():
        return "brat"
    return fmt


def json_lines_format(path: Union[str, Path]) -> str:
    """"scierc" when the first record of a JSON-lines file has SciERC's ``sentences``, else
    "jsonl" (character offsets; its reader names what a record lacks); a first line that does
    not parse goes to the SciERC reader, whose error names the line."""
    with Path(path).open(encoding="utf8", errors="replace") as file_:
        first = next((line for line in file_ if line.strip()), "")
    try:
        record = json.loads(first)
    except json.JSONDecodeError:
        return "scierc"
    return "scierc" if isinstance(record, dict) and "sentences" in record else "jsonl"


def read_docs(
    input_path: Union[str, Path],
    fmt: str,
    nlp: Language,
    *,
    scheme: str = "auto",
    spans_key: str = DEFAULT_SPANS_KEY,
    doc_unit: str = "sentence",
    repair: bool = False,
    discontinuous: str = "merge",
    stats: ConversionStats,
) -> Iterator[Doc]:
    """Dispatch to the reader of `fmt`; options a format does not have are ignored
    (e.g. `scheme` for SciERC), so one call site serves the CLI and the readers."""
    if fmt == "scierc":
        return read_scierc(input_path, nlp.vocab, doc_unit=doc_unit, spans_key=spans_key, stats=stats)
    if fmt == "conll":
        return read_conll(input_path, nlp.vocab, scheme=scheme, spans_key=spans_key, repair=repair, stats=stats)
    if fmt == "brat":
        # BRAT: one Doc per file unless doc_unit="line" (one per line of the .txt).
        unit = "line" if doc_unit == "line" else "document"
        return read_brat(input_path, nlp, spans_key=spans_key, discontinuous=discontinuous, doc_unit=unit, stats=stats)
    if fmt == "jsonl":
        return read_jsonl(input_path, nlp, spans_key=spans_key, stats=stats)
    if fmt == "docbin":
        return read_docbin(input_path, nlp.vocab, spans_key=spans_key, stats=stats)
    raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")


def convert(
    input_path: Union[str, Path],
    output_path: Union[str, Path],
    fmt: str,
    *,
    scheme: str = "auto",
    spans_key: str = DEFAULT_SPANS_KEY,
    doc_unit: str = "sentence",
    repair: bool = False,
    discontinuous: str = "merge",
    lang: str = "en",
) -> ConversionStats:
    """Convert `input_path` to a DocBin at `output_path` (user_data kept).

    input_path (Union[str, Path]): SciERC ``.json``, CoNLL file, BRAT file/directory,
        character-offset ``.jsonl`` (Prodigy, doccano) or ``.spacy`` DocBin (file/directory).
    output_path (Union[str, Path]): The ``.spacy`` file to write (parents created; the
        file is replaced atomically, so a failed conversion leaves no partial output).
    fmt (str): One of FORMATS.
    scheme (str): CoNLL tag scheme: "auto", "iob1", "iob2", "iobes".
    spans_key (str): Span group receiving all gold mentions.
    doc_unit (str): SciERC: "sentence" or "document"; BRAT: "line" for one Doc per
        text line, anything else for one Doc per file.
    repair (bool): CoNLL: fix inconsistent tag sequences (counted) instead of raising.
    discontinuous (str): BRAT: "merge", "fragments" or "error".
    lang (str): Language whose tokenizer BRAT and JSONL text goes through (``spacy.blank(lang)``).
    RETURNS (ConversionStats): The counts.
    """
    nlp = spacy.blank(lang)
    stats = ConversionStats()
    docs = read_docs(
        input_path, fmt, nlp, scheme=scheme, spans_key=spans_key, doc_unit=doc_unit,
        repair=repair, discontinuous=discontinuous, stats=stats,
    )
    doc_bin = DocBin(store_user_data=True)
    for doc in count_docs(docs, spans_key, stats):
        doc_bin.add(doc)
    with atomic_output_file(output_path) as tmp_path:
        doc_bin.to_disk(tmp_path)
    return stats

"""Corpus readers and converters: SciERC JSON lines, CoNLL token/tag files, BRAT standoff,
character-offset JSONL (Prodigy, doccano) and DocBins of your own to spaCy Docs with gold ``doc.spans`` (all mentions, nested allowed) and
``doc.ents`` (the non-overlapping subset, longest first), and to DocBin files.
"""
from .brat import read_brat
from .common import ConversionStats, CorpusFormatError
from .conll import read_conll
from .convert import convert
from .spacy_docbin import read_docbin
from .jsonl import read_jsonl
from .scierc import read_scierc

__all__ = [
    "read_scierc", "read_conll", "read_brat", "read_jsonl", "read_docbin", "convert", "ConversionStats",
    "CorpusFormatError",
]

"""spacy-sciner: scientific named entity recognition for spaCy.

Components, architectures, readers, scorers and suggesters are registered through
setup.cfg entry points, so spaCy finds them without ``--code`` or an import.
"""
__version__ = "0.1.0"

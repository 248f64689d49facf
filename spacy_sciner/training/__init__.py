"""Training utilities: loggers registered for ``spacy train``."""

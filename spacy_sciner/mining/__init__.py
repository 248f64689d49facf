"""Entity-candidate mining (Tri-Train §3.2.3) and the pre-fine-tuning corpus builder (§3.3).

Modules: ``text`` (fast tokenizers, robust line reading), ``dictionary`` (token-aligned
Aho-Corasick matching, gazetteers), ``acronyms`` (Schwartz-Hearst definitions), ``phrases``
(AutoPhrase-style phrase quality), ``candidates`` (candidate table, annotation), ``miner``
(streaming mining), ``select`` (top/bottom/random-N sentence selection), ``parallel``
(multi-process passes), ``output`` (checked, atomic output files), ``component`` (``sciner_candidate_miner``), ``suggester``
(``spacy-sciner.candidate_suggester.v1``) and ``cli`` (``sciner mine``, ``sciner build-corpus``).
Kept import-free: spaCy imports the component module for every ``Language``.
"""

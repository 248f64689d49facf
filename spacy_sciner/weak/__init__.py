"""Weak supervision: typed distant labels from gazetteers, training data and mined
candidates (``labeling``), and the NER-BERT corpus rules and balanced type sampling
(``corpus``) that weakly supervised pretraining trains on."""

"""A shared toy sequence for the PFT masking tests (BERT uncased ids).

[CLS] we use support vec ##tor machines ( svm ) [SEP]
  0    1   2     3     4    5      6     7  8  9   10
"""
from spacy_sciner.pft.masking import MaskVocab

WORD_IDS = [-1, 0, 1, 2, 3, 3, 4, 5, 6, 7, -1]
IDS = [101, 2057, 2224, 2490, 2310, 4263, 6681, 1006, 17917, 1007, 102]
VOCAB = MaskVocab(pad_id=0, mask_id=103, size=30522, special_ids=(0, 100, 101, 102, 103))

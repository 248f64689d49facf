"""Pre-fine-tuning (PFT, Tri-Train §3.2): continue masked-LM training of an encoder on a
small in-domain corpus, masking mined entity candidates (MLM_CAND) and predicting their
boundary words (ECB). Entry points: ``sciner pft`` (cli.py) and ``train_pft`` (train.py).
"""

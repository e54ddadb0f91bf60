"""Decoding: batched beam search over the models' incremental API, translation of raw text, and
CTranslate2 export for comparison with a reference engine."""

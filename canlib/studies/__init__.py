"""The book's studies, read top to bottom:

``scales`` (corpus, presets, budget and seeds of tiny/small/full) -> ``store`` (compute, cache or load a
result with its provenance) -> ``runs`` (the runs of a scale, training one) -> ``quality`` (beam-4 BLEU
on valid and every test split, hypotheses, seeds, rescoring) -> ``analyses`` (similarity, error
buckets, conversion) -> ``cli`` (``canlib experiment``). ``results`` reads and writes stored results,
``paper`` holds the paper's numbers, ``analysis`` the probes into trained models.
"""

"""The book's studies, read top to bottom:

``scales`` (corpus, presets, budget and seeds of tiny/small/full) -> ``store`` (compute, cache or load a
result with its provenance) -> ``runs`` (the runs of a scale, training one) -> ``quality`` (beam-4 BLEU
on valid and every test split, hypotheses, seeds, rescoring) -> ``analyses`` (similarity, error
buckets, conversion) -> ``speed`` (the CPU speed studies every chapter shares) and ``gpu_results``
(stored GPU measurements) -> ``scorecard`` (the paper's claims as data, judged only by evidence that
can test them) -> ``cli`` (``canlib experiment``). ``results`` reads and writes stored results,
``paper`` holds the paper's numbers, ``probes`` the hooks that look into trained models, and
``figures`` and ``attention_maps`` draw the chapters' pictures.
"""

"""What the chapters call to read and draw stored results, read top to bottom; nothing here trains:

``scales`` (corpus, presets, budget and seeds of tiny/small/full) -> ``results`` (stored results with their
provenance) -> ``store`` (where a result lives; the speed studies' compute-once rule) -> ``quality`` (BLEU over
seeds, hypotheses, which scale a chapter shows) -> ``analyses`` (the stored similarity, error-bucket, attention
and conversion studies) -> ``speed`` (the CPU speed studies every chapter shares) and ``gpu_results`` (stored GPU
measurements) -> ``scorecard`` (the paper's claims as data, judged only by evidence that can test them) ->
``beyond`` (the beyond studies, defined as data and read). ``paper`` holds the paper's numbers, ``probes`` and
``attention_maps`` look into trained models, and ``figures``, ``plots`` and ``tables`` draw the chapters' pictures.
The engine that trains, evaluates and stores the runs is :mod:`canlib.experiments`, above this package.
"""

"""What the pages' glue (``book/_code``) calls to read stored results and judge the claims, read top to bottom;
nothing here trains:

``verdict`` (the one rule every verdict of the book follows) -> ``store`` (:class:`~repro.studies.store.Store`: the
one reader of stored runs, logs, hypotheses, analyses and measurements) -> ``analyses`` (the stored similarity,
error-bucket, attention and conversion studies) -> ``paper`` (the paper's numbers, read by name) -> ``claims`` (the
claims registry: every claim declared once and judged once) -> ``beyond`` (the beyond studies, as read).

The results schema (:mod:`repro.results`) and the computations on models (:mod:`canlib.analysis`) sit below this
package; the engine that trains, evaluates and stores the runs (:mod:`repro.experiments`) is a sibling: neither
imports the other.
"""

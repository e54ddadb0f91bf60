"""What the chapters call to read and draw stored results, read top to bottom; nothing here trains:

``verdict`` (the one rule every verdict of the book follows) -> ``gpu_results`` (stored GPU measurements and operator
counts) -> ``store`` (:class:`~repro.studies.store.Store`: the one reader of stored runs, logs, hypotheses,
analyses and measurements) -> ``analyses`` (the stored similarity, error-bucket, attention and conversion studies)
-> ``paper`` (the paper's numbers, read by name) -> ``claims`` (the claims registry: every claim declared once and
judged once) -> ``beyond`` and ``tables`` (the beyond studies and the results tables, as read) -> ``chapters`` (one
module per chapter: the values its prose glues); ``figures`` and ``plots`` draw the chapters' pictures.

The results schema (:mod:`repro.results`) and the computations on models (:mod:`canlib.analysis`) sit below this
package; the engine that trains, evaluates and stores the runs (:mod:`repro.experiments`) is a sibling: neither
imports the other.
"""

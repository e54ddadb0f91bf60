"""What the pages' glue (``book/_code``) calls to read stored results and judge the claims, read top to bottom;
nothing here trains:

``verdict`` (the one rule every verdict of the book follows) -> ``store`` (:class:`~repro.studies.store.Store`: the
one reader of stored runs, logs, hypotheses, analyses and measurements) -> ``analyses`` (the stored attention study
and what the registry reads of it and of a training log) -> ``paper`` (the paper's numbers, read by name) ->
``claims`` (the claims registry: every claim declared once and judged once). What the pages alone read of the stored
results (which scale a chapter shows, the beyond studies as shown, the analyses a page quotes) is their glue's.

The results schema (:mod:`repro.results`) and the computations on models (:mod:`canlib.analysis`) sit below this
package; the engine that trains, evaluates and stores the runs (:mod:`repro.experiments`) is a sibling: neither
imports the other.
"""

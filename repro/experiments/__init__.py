"""The experiment engine: a run is a value, training is a verb, and one pool trains everything.

``run`` (the frozen :class:`~repro.experiments.run.Run`, stored where its
:class:`~repro.results.layout.Where` says, and :func:`~repro.experiments.run.plan`; ``load(run)``,
``trained(run)``) -> ``corpus`` (what a run reads, a split translated and scored) -> ``distill`` (a teacher's
translations as targets) -> ``evaluate`` (``evaluate(run)``: beam search, BLEU, hypotheses, stored with provenance)
-> ``train`` (``trainer(run)``: its Trainer) -> ``pool`` (the one process pool and deadline; its task trains and
evaluates a run) -> ``analyses`` (the paper's analyses of trained runs) and ``beyond`` (the beyond studies as
variants of the plan, read off the study table) -> ``summarise``, ``estimate``, ``rescore`` -> ``experiment`` (one
call for a selection, and the explicit call a chapter makes). Each command (``python -m repro experiment``, ``rescore``,
``estimate``, ``summarise``) lives in the module that does its work; ``cli`` holds the options they share and
builds the one value of where the results live. Measurements made on another machine are stored by
:mod:`repro.ingest` (``python -m repro ingest``), not by the engine.

The results schema (:mod:`repro.results`) and the computations on models (:mod:`canlib.analysis`) sit below;
the book's readers (:mod:`repro.studies`) are a sibling: neither package imports the other, so loading a result
cannot train. Nothing is imported here, so importing one module loads only what it needs.
"""

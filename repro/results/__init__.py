"""The results schema: what the engine stores and the readers read, below both of them.

``plan`` (which systems each scale trains, on which corpora, with which seeds), ``files`` (a result file with its
provenance: save, load, describe) -> ``layout`` (where each result lives, how runs and study models are named, the
command that stores a missing one, the compute-once rule of a measurement) -> ``studies`` (the study table: the
analyses and the beyond studies as data). Each scale's corpus, presets and budget are the core's
:mod:`canlib.catalogue`. The engine (:mod:`repro.experiments`) and the readers (:mod:`repro.studies`) both sit
above this package and never import each other.
"""

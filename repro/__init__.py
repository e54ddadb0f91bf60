"""The reproduction the book reads: everything that turns canlib's models into the paper's studies and judges them.

Apart from the library so that the tree shows the design: the core (``canlib.catalogue``, ``data``, ``model``,
``decoding``, ``training``, ``analysis``, ``bleu``, ``io``) is what a user imports for their own corpus and never
imports this package; the reproduction builds on it (each scale's corpus, budget and seeds, the systems' names and
labels: the core's catalogue), in layers, each importing only those below:

* ``results``: the schema of stored results (where each result lives, the study table);
* ``bench``: the decoding-speed studies, operator counts and the CPU measurements the chapters share;
* ``experiments``: the engine that trains, evaluates and stores a scale's runs and studies
  (``python -m repro experiment``);
* ``studies``: the readers: one store, the verdict rule and the claims registry (``python -m repro claims``), one
  module per chapter. The engine and the readers are siblings: neither imports the other, so reading never trains;
* ``ingest``: measurements made on another machine (a GPU) stored as results (``python -m repro ingest``).
"""

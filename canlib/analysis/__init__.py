"""Computations on models that the engine runs and the readers draw, below both of them.

``probes`` (sub-layer inputs, weights and bytes a decoding step reads), ``attention_maps`` (attention maps and CAN's
gate in a trained model) and ``speed`` (the speed studies every chapter shares: measured once per setting, cached at
tiny and stored at the other scales). Nothing here trains; the engine (:mod:`canlib.experiments`) calls these on
the models it trained and the chapters (:mod:`canlib.studies`) on the models they load.
"""

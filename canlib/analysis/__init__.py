"""Measurements of a model: what its sub-layers read and how alike they are (``probes``), its attention maps and
CAN's gate (``attention_maps``). Nothing here trains; the reproduction's engine calls these on the models it trained
and its chapters on the models they load.
"""

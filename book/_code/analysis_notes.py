"""What a chapter says about the stored analysis it shows: where it is not stored at ``small``, that fact first, what
the page shows instead, and the command that stores it with the GPU-minutes it takes (once stored, the note is empty
and the chapter reads it: its ``default_scale``); and which weights an analysis of a trained model read."""

from __future__ import annotations

import math
from collections.abc import Sequence

from canlib.catalogue import LABELS
from repro.results.layout import experiment_command, run_name
from repro.studies.store import Store


def gpu_minutes(small: Store, systems: Sequence[str]) -> int:
    """Minutes to store an analysis of seed-1 ``systems`` on one GPU: the small runs' checkpoints are not kept with
    the book, so each is trained again for its weights, for as long as its stored run trained (its own budget where
    none is stored), the analysis itself on top (a minute)."""
    seconds = 60.0
    for system in systems:
        if not small.has(run_name(system, 1, small.corpus)):
            raise FileNotFoundError(f"gpu_minutes: {system}'s seed-1 small run is not stored: its time is unknown")
        seconds += small.run(system, 1)[0]["training"]["wall_s"]
    return math.ceil(seconds / 60)


def not_stored_note(analysis: str, what: str, systems: Sequence[str], root=None) -> str:
    """Markdown for the top of a page whose ``analysis`` (``what`` it measures) is not stored at small; "" once
    it is."""
    small = Store("small", root)
    if small.has(analysis):
        return ""
    names = " and ".join(f"{LABELS.get(s, s)} (seed 1)" for s in systems)
    command = experiment_command("small", corpora=[small.corpus], studies=[analysis])
    return (
        f"**The `small` {what} is not stored yet.** This page shows the `tiny` one instead: models of a few "
        f"minutes on a CPU, which do not translate, so what follows demonstrates the method, not the finding. On "
        f"one GPU, `{command}` trains {names} again for its weights and stores it, in about "
        f"{gpu_minutes(small, systems)} minutes; the page then reads it when it is next built."
    )


def weights_paragraph(scale: str, system: str = "balanced") -> str:
    """Which weights a stored analysis of ``system``'s seed-1 model read: at small and full that configuration trained
    again when the analysis was stored (the runs' checkpoints are not kept with the book), at tiny the model the book
    trains while it builds."""
    name = LABELS.get(system, system)
    if scale == "tiny":
        return (
            f"The weights are those of the `tiny` seed-1 {name} that the book trains while it builds (CPU minutes, "
            "cached): a model that does not translate."
        )
    return (
        f"The weights are {name}'s seed-1 configuration at `{scale}`, trained again when this analysis was stored: "
        "the runs' checkpoints are not kept with the book, only their results. The results chapter evaluates the "
        "stored run of the same configuration and seed; these weights come from a second training of it, not "
        "necessarily identical to the first."
    )

"""The study plan: which systems each scale trains, on which corpora, with which seeds (:func:`rows`).

The engine trains these rows (:func:`repro.experiments.run.plan`) and the reader waits for them
(:func:`repro.studies.store.default_scale`), so both read them here. The systems and each scale's widths, corpus
and budget are the library's (:mod:`canlib.catalogue`): a user of ``canlib`` trains any of them with any seed;
how many seeds this reproduction trains of which system, and on which further directions, is its own choice.

* Table 2's systems and Table 5's ablations: ``ScalePlan.seeds`` seeds each on the scale's corpus;
* Figure 4's other depths (9/4, 14/1): ``depth_seeds`` on the scale's corpus;
* Baseline, Balanced and CAN (the systems of the paper's Tables 2 and 3): ``direction_seeds`` on each of
  ``directions``, the further Multi30k directions of the ``small`` scale.
"""

from __future__ import annotations

from dataclasses import dataclass

from canlib.catalogue import ABLATION_SYSTEMS, DEPTH_SYSTEMS, PAPER_SYSTEMS, scale_spec

SEEDED_SYSTEMS = tuple(dict.fromkeys(PAPER_SYSTEMS + ABLATION_SYSTEMS))  # trained with ScalePlan.seeds seeds
DEPTH_ONLY = tuple(s for s in DEPTH_SYSTEMS if s not in SEEDED_SYSTEMS)  # 9/4 and 14/1: ScalePlan.depth_seeds
DIRECTION_SYSTEMS = ("baseline", "balanced", "can")  # trained on every direction (paper Tables 2 and 3)


@dataclass(frozen=True)
class ScalePlan:
    """How many seeds a scale trains of each group of systems, and the further corpora its direction systems
    train on."""

    seeds: int = 1  # seeds of the Table 2 systems and the two ablations
    depth_seeds: int = 1  # seeds of the depth systems (9/4, 14/1)
    directions: tuple[str, ...] = ()  # further corpora on which the direction systems are trained
    direction_seeds: int = 1


_PLANS: dict[str, ScalePlan] = {  # the scales not named train the defaults: one seed, the main corpus
    "small": ScalePlan(
        seeds=3,
        depth_seeds=3,
        direction_seeds=2,
        directions=("multi30k-de-en", "multi30k-en-fr", "multi30k-fr-en", "multi30k-en-cs", "multi30k-cs-en"),
    ),
}


@dataclass(frozen=True)
class Row:
    """One row of a scale's plan: a system trained on a corpus with these seeds."""

    system: str
    corpus: str
    seeds: tuple[int, ...]


def scale_plan(scale: str) -> ScalePlan:
    """The seed counts and further directions of ``scale``'s plan."""
    scale_spec(scale)  # an unknown scale is the catalogue's error, which lists the known ones
    return _PLANS.get(scale, ScalePlan())


def corpora(scale: str) -> tuple[str, ...]:
    """The corpora a scale's plan trains on: its main corpus first, then its further directions."""
    return (scale_spec(scale).corpus, *scale_plan(scale).directions)


def rows(scale: str) -> tuple[Row, ...]:
    """Every row of ``scale``'s plan, in training order: the main corpus's systems (Table 2 and the ablations,
    then the depths), then each further direction's."""
    main, p = scale_spec(scale).corpus, scale_plan(scale)
    counted = [(s, main, p.seeds) for s in SEEDED_SYSTEMS] + [(s, main, p.depth_seeds) for s in DEPTH_ONLY]
    counted += [(s, c, p.direction_seeds) for c in p.directions for s in DIRECTION_SYSTEMS]
    return tuple(Row(s, c, tuple(range(1, n + 1))) for s, c, n in counted if n > 0)


def planned_seeds(scale: str, system: str, corpus: str | None = None) -> tuple[int, ...]:
    """The seeds of ``system`` on ``corpus`` (default: the scale's own) in the plan of ``scale``; () for a
    system or corpus the plan does not train."""
    corpus = scale_spec(scale).corpus if corpus is None else corpus
    return next((r.seeds for r in rows(scale) if (r.system, r.corpus) == (system, corpus)), ())

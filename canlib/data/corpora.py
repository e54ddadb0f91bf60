"""The registry of corpora: where each file comes from and what each scale prepares.

A corpus is a set of *local files* (``newstest2014.en``, ``train.de`` ...), each one the
concatenation of one or more *members* of downloads (a file inside a .tgz, a .gz, an SGM
test set). Local files are looked up first in ``$CANLIB_DATA_DIR`` (see
:mod:`canlib.data.prepare`), so a machine without internet never downloads anything.

Checksums: a ``Remote`` may carry a published sha256. None of the URLs below has one we
could verify, so none is written here; instead the downloader records size + sha256 at
the first download and checks every later use against that record.
"""
from __future__ import annotations

from dataclasses import dataclass, field

STATMT = "http://www.statmt.org"
WMT17 = "http://data.statmt.org/wmt17/translation-task"
MULTI30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"


@dataclass(frozen=True)
class Remote:
    """One downloadable file; ``sha256`` is a published checksum when one is known."""

    url: str
    sha256: str | None = None


@dataclass(frozen=True)
class Member:
    """One text file inside a download, found by its base name (``None``: the download itself).

    ``.sgm``/``.xml`` members are read with the SGM rule, ``.gz`` members are decompressed.
    """

    remote: Remote
    name: str | None = None


@dataclass(frozen=True)
class Scale:
    """What one scale prepares: file stems per split, vocabulary size, subsets and filters.

    Stems name local files without the language suffix (``newstest2013`` ->
    ``newstest2013.en`` + ``newstest2013.de``). ``*_pairs`` take a deterministic subset
    (train: a seeded sample, valid/test: the first lines). ``max_len`` and ``max_ratio``
    filter training pairs by subword counts, as Moses' clean-corpus-n does in fairseq's
    WMT14 recipe (1..250 pieces per side, longer side <= 1.5 x shorter side).
    ``vocab_pairs`` caps (by a seeded sample) the pairs SentencePiece is trained on.
    """

    train: tuple[str, ...]
    valid: tuple[str, ...]
    test: tuple[str, ...]
    vocab_size: int
    train_pairs: int | None = None
    valid_pairs: int | None = None
    test_pairs: int | None = None
    max_len: int = 250
    max_ratio: float = 1.5
    vocab_pairs: int | None = None
    description: str = ""


@dataclass(frozen=True)
class Corpus:
    name: str
    src: str
    tgt: str
    description: str
    files: dict[str, tuple[Member, ...]] = field(default_factory=dict)
    scales: dict[str, Scale] = field(default_factory=dict)

    def scale(self, name: str) -> Scale:
        if name not in self.scales:
            raise ValueError(f"corpus {self.name!r} has no scale {name!r}; it has {sorted(self.scales)}")
        return self.scales[name]


def _pair(stem: str, src: str, tgt: str, src_members: list[Member], tgt_members: list[Member]) -> dict:
    return {f"{stem}.{src}": tuple(src_members), f"{stem}.{tgt}": tuple(tgt_members)}


def _wmt14(tgt: str) -> dict[str, tuple[Member, ...]]:
    """Training corpora, dev sets and newstest2014 of WMT14 for en-``tgt`` (de or fr)."""
    pair = f"{tgt}-en"
    europarl = Remote(f"{STATMT}/wmt13/training-parallel-europarl-v7.tgz")
    commoncrawl = Remote(f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz")
    nc = Remote(f"{STATMT}/wmt14/training-parallel-nc-v9.tgz")
    dev = Remote(f"{STATMT}/wmt14/dev.tgz")
    test_full = Remote(f"{STATMT}/wmt14/test-full.tgz")
    test_filtered = Remote(f"{STATMT}/wmt14/test.tgz")
    train = {
        lang: [Member(europarl, f"europarl-v7.{pair}.{lang}"), Member(commoncrawl, f"commoncrawl.{pair}.{lang}"),
               Member(nc, f"news-commentary-v9.{pair}.{lang}")]
        for lang in ("en", tgt)
    }
    if tgt == "fr":
        un = Remote(f"{STATMT}/wmt13/training-parallel-un.tgz")
        giga = Remote(f"{STATMT}/wmt10/training-giga-fren.tar")
        for lang in ("en", "fr"):
            train[lang] += [Member(un, f"undoc.2000.fr-en.{lang}"), Member(giga, f"giga-fren.release2.fixed.{lang}.gz")]
    code = f"{tgt}en"
    files = _pair("train", "en", tgt, train["en"], train[tgt])
    for year in range(2008, 2014):
        files |= _pair(f"newstest{year}", "en", tgt, [Member(dev, f"newstest{year}-src.en.sgm")],
                       [Member(dev, f"newstest{year}-src.{tgt}.sgm")])
    files |= _pair("newstest2008-2012", "en", tgt, [m for y in range(2008, 2013) for m in files[f"newstest{y}.en"]],
                   [m for y in range(2008, 2013) for m in files[f"newstest{y}.{tgt}"]])
    files |= _pair("newstest2014", "en", tgt, [Member(test_full, f"newstest2014-{code}-src.en.sgm")],
                   [Member(test_full, f"newstest2014-{code}-ref.{tgt}.sgm")])
    files |= _pair("newstest2014.filtered", "en", tgt, [Member(test_filtered, f"newstest2014-{code}-src.en.sgm")],
                   [Member(test_filtered, f"newstest2014-{code}-ref.{tgt}.sgm")])
    return files


def _wmt17(other: str, valid: tuple[str, ...]) -> Corpus:
    """WMT17 en-``other`` from the official preprocessed (tokenized, truecased) release."""
    base = f"{WMT17}/preprocessed/{other}-en"
    dev = Remote(f"{base}/dev.tgz")
    test = Remote(f"{WMT17}/test.tgz")
    files = _pair("train", "en", other, [Member(Remote(f"{base}/corpus.tc.en.gz"))],
                  [Member(Remote(f"{base}/corpus.tc.{other}.gz"))])
    files |= _pair("valid", "en", other, [Member(dev, f"{name}.tc.en") for name in valid],
                   [Member(dev, f"{name}.tc.{other}") for name in valid])
    files |= _pair("newstest2017", "en", other, [Member(test, f"newstest2017-en{other}-src.en.sgm")],
                   [Member(test, f"newstest2017-en{other}-ref.{other}.sgm")])
    full = Scale(("train",), ("valid",), ("newstest2017",), vocab_size=32000, vocab_pairs=1_000_000,
                 description="paper recipe: preprocessed WMT17 training data, newstest2017 test")
    return Corpus(f"wmt17-en-{other}", "en", other, f"WMT17 English-{other.upper()} (paper Table 3)", files, {"full": full})


def _multi30k() -> Corpus:
    files: dict[str, tuple[Member, ...]] = {}
    for split in ("train", "val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco", "test_2018_flickr"):
        files |= _pair(split, "en", "de", [Member(Remote(f"{MULTI30K}/{split}.en.gz"))],
                       [Member(Remote(f"{MULTI30K}/{split}.de.gz"))])
    scales = {
        "small": Scale(("train",), ("val",), ("test_2016_flickr",), vocab_size=8000,
                       description="all 29000 training pairs, val 1014, test2016 1000"),
        "tiny": Scale(("train",), ("val",), ("test_2016_flickr",), vocab_size=2000, train_pairs=3000,
                      valid_pairs=200, test_pairs=200, description="CI: 3000 seeded training pairs, 200 val, 200 test"),
    }
    return Corpus("multi30k-en-de", "en", "de", "Multi30k task 1 image captions, English-German", files, scales)


_NEWS_POOL = ("train.detok", "newstest2008-2012", "newstest2015-2020")
_WMT14_EN_DE = Corpus(
    "wmt14-en-de", "en", "de", "WMT14 English-German (paper Table 2)", _wmt14("de"),
    {
        "full": Scale(("train",), ("newstest2013",), ("newstest2014",), vocab_size=32000, vocab_pairs=1_000_000,
                      description="paper recipe: Europarl v7 + CommonCrawl + News Commentary v9, 32k joint BPE"),
        "small": Scale(_NEWS_POOL, ("newstest2013",), ("newstest2014",), vocab_size=8000,
                       description="CPU scale: ~37.6k real pairs (train.detok + newstest2008-2012 + 2015-2020)"),
        "tiny": Scale(_NEWS_POOL, ("newstest2013",), ("newstest2014",), vocab_size=2000, train_pairs=3000,
                      valid_pairs=200, test_pairs=200, description="CI: 3000 seeded pairs of the small pool"),
    },
)
_WMT14_EN_FR = Corpus(
    "wmt14-en-fr", "en", "fr", "WMT14 English-French (paper Table 2)", _wmt14("fr"),
    {"full": Scale(("train",), ("newstest2012", "newstest2013"), ("newstest2014",), vocab_size=32000,
                   vocab_pairs=1_000_000, description="paper recipe: + UN + Gigaword; valid newstest2012+2013")},
)

REGISTRY: dict[str, Corpus] = {
    c.name: c
    for c in (
        _WMT14_EN_DE,
        _WMT14_EN_FR,
        _wmt17("de", ("newstest2014", "newstest2015", "newstest2016")),
        _wmt17("fi", ("newstest2015", "newsdev2015", "newstest2016", "newstestB2016")),
        _wmt17("lv", ("newsdev2016",)),
        _wmt17("ru", ("newstest2014", "newstest2015", "newstest2016")),
        _wmt17("cs", ("newstest2014", "newstest2015", "newstest2016")),
        _multi30k(),
    )
}


def get_corpus(name: str) -> Corpus:
    if name not in REGISTRY:
        raise ValueError(f"unknown corpus {name!r}; known: {', '.join(REGISTRY)}")
    return REGISTRY[name]

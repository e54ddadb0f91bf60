"""The registry of corpora: where each file comes from and what each scale prepares.

A corpus is a set of *local files* (``newstest2014.en``, ``train.de`` ...), each one the
concatenation of one or more *members* of downloads (a file inside a .tgz, a .gz, an SGM
test set). Local files are looked up first in ``$CANLIB_DATA_DIR`` (see
:mod:`canlib.data.preparation`), so a machine without internet never downloads anything.

Checksums: a ``Remote`` may carry a sha256 of its bytes, or (for a ``.gz``) of its
decompressed bytes (``content_sha256``), which the downloader verifies before it keeps the
file. The Multi30k files carry the latter: computed from the project's shared copies, which
hold upstream's decompressed text byte for byte (their PROVENANCE.md). The statmt.org
archives carry none we could verify; for them the downloader records size + sha256 at the
first download and checks every later use against that record.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from canlib.catalogue import SCALES, scale_spec
from canlib.io import atomic_write_bytes, cache_dir

STATMT = "http://www.statmt.org"
WMT17 = "http://data.statmt.org/wmt17/translation-task"
# Pinned to the snapshot named in the shared data's PROVENANCE.md, so the checksums below stay true.
MULTI30K_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
MULTI30K = f"https://raw.githubusercontent.com/multi30k/dataset/{MULTI30K_COMMIT}/data/task1/raw"


@dataclass(frozen=True)
class Remote:
    """One downloadable file and what its bytes must hash to (sha256, hex), when known.

    ``sha256`` is of the downloaded bytes; ``content_sha256`` of the decompressed bytes of a
    ``.gz`` download, for files whose compressed bytes nobody here could check.
    """

    url: str
    sha256: str | None = None
    content_sha256: str | None = None


@dataclass(frozen=True)
class Member:
    """One text file inside a download, found by its base name (``None``: the download itself).

    ``.sgm``/``.xml`` members are read with the SGM rule, ``.gz`` members are decompressed.
    """

    remote: Remote
    name: str | None = None


@dataclass(frozen=True)
class Scale:
    """What one corpus prepares at one scale: file stems per split, vocabulary size (the registered corpora's is
    their scale's in :mod:`canlib.catalogue`), subsets and filters.

    Stems name local files without the language suffix (``newstest2013`` ->
    ``newstest2013.en`` + ``newstest2013.de``). ``*_pairs`` take a deterministic subset
    (train: a seeded sample, valid/test: the first lines). ``max_len`` and ``max_ratio``
    filter training pairs by subword counts, as Moses' clean-corpus-n does in fairseq's
    WMT14 recipe (1..250 pieces per side, longer side <= 1.5 x shorter side).
    ``vocab_pairs`` caps (by a seeded sample) the pairs SentencePiece is trained on.
    ``extra_tests`` names further test sets (split name -> stems), prepared like ``test``
    (same ``test_pairs`` cap, never filtered) and loaded by their names.
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
    extra_tests: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def test_splits(self) -> tuple[str, ...]:
        """``test`` first, then the extra test sets, in registry order."""
        return ("test", *self.extra_tests)

    def stems(self) -> dict[str, tuple[str, ...]]:
        """File stems of every split this scale prepares (train, valid, the test sets)."""
        return {"train": self.train, "valid": self.valid, "test": self.test, **self.extra_tests}


@dataclass(frozen=True)
class Corpus:
    """A translation direction ``src`` -> ``tgt``, its files and its scales.

    ``folder`` is the sub-folder of ``$CANLIB_DATA_DIR`` holding its files (default: ``name``);
    a reversed direction shares its forward direction's folder and downloads. ``path``: a folder of
    the corpus's own files, read from there only and strictly (a researcher's corpus, :func:`register_files`).
    """

    name: str
    src: str
    tgt: str
    description: str
    files: dict[str, tuple[Member, ...]] = field(default_factory=dict)
    scales: dict[str, Scale] = field(default_factory=dict)
    folder: str = ""
    path: str = ""
    drop_empty: bool = False  # with ``path``: training pairs with an empty side are left out (and counted)

    def __post_init__(self) -> None:
        if not self.folder:
            object.__setattr__(self, "folder", self.name)

    def reversed(self, name: str, description: str) -> Corpus:
        """The opposite direction over the same files, folder and scales."""
        return Corpus(name, self.tgt, self.src, description, self.files, self.scales, self.folder)

    def needed_files(self, scale: str) -> list[str]:
        """Local file names (``stem.lang``) that preparing ``scale`` reads, in order, once each."""
        stems = self.scale(scale).stems().values()
        return list(
            dict.fromkeys(f"{stem}.{lang}" for group in stems for stem in group for lang in (self.src, self.tgt))
        )

    def scale(self, name: str) -> Scale:
        if name not in self.scales:
            raise ValueError(f"corpus {self.name!r} has no scale {name!r}; it has {sorted(self.scales)}")
        return self.scales[name]


# the caps of every registered corpus's scale: full learns the vocabulary from a seeded million training pairs,
# tiny (CI) keeps 3000 seeded training pairs and the first 200 valid and test lines
_SCALE_CAPS = {
    "full": {"vocab_pairs": 1_000_000},
    "small": {},
    "tiny": {"train_pairs": 3000, "valid_pairs": 200, "test_pairs": 200},
}


def _scale(name: str, stems: tuple[tuple[str, ...], ...], description: str, **settings) -> Scale:
    """A registered corpus's scale ``name`` over ``stems`` (train, valid, test), with the scale's size and caps."""
    return Scale(*stems, scale_spec(name).vocab_size, description=description, **_SCALE_CAPS[name], **settings)


def _sgm_test(stem: str, remote: Remote, prefix: str, other: str) -> dict[str, tuple[Member, ...]]:
    """A WMT test set in ``remote``: the English source ``{prefix}-src.en.sgm``, the reference
    ``{prefix}-ref.{other}.sgm``."""
    roles = (("en", "src"), (other, "ref"))
    return {f"{stem}.{lang}": (Member(remote, f"{prefix}-{role}.{lang}.sgm"),) for lang, role in roles}


def _wmt14(tgt: str) -> dict[str, tuple[Member, ...]]:
    """Training corpora, dev sets and newstest2014 of WMT14 for en-``tgt`` (de or fr)."""
    pair, langs = f"{tgt}-en", ("en", tgt)
    europarl = Remote(f"{STATMT}/wmt13/training-parallel-europarl-v7.tgz")
    commoncrawl = Remote(f"{STATMT}/wmt13/training-parallel-commoncrawl.tgz")
    nc = Remote(f"{STATMT}/wmt14/training-parallel-nc-v9.tgz")
    dev = Remote(f"{STATMT}/wmt14/dev.tgz")
    files = {
        f"train.{lang}": (
            Member(europarl, f"europarl-v7.{pair}.{lang}"),
            Member(commoncrawl, f"commoncrawl.{pair}.{lang}"),
            Member(nc, f"news-commentary-v9.{pair}.{lang}"),
        )
        for lang in langs
    }
    if tgt == "fr":
        un = Remote(f"{STATMT}/wmt13/training-parallel-un.tgz")
        giga = Remote(f"{STATMT}/wmt10/training-giga-fren.tar")
        for lang in langs:
            files[f"train.{lang}"] += (
                Member(un, f"undoc.2000.fr-en.{lang}"),
                Member(giga, f"giga-fren.release2.fixed.{lang}.gz"),
            )
    for year in range(2008, 2014):
        files |= {f"newstest{year}.{lang}": (Member(dev, f"newstest{year}-src.{lang}.sgm"),) for lang in langs}
    files |= {
        f"newstest2008-2012.{lang}": tuple(m for y in range(2008, 2013) for m in files[f"newstest{y}.{lang}"])
        for lang in langs
    }
    prefix = f"newstest2014-{tgt}en"
    files |= _sgm_test("newstest2014", Remote(f"{STATMT}/wmt14/test-full.tgz"), prefix, tgt)
    return files | _sgm_test("newstest2014.filtered", Remote(f"{STATMT}/wmt14/test.tgz"), prefix, tgt)


def _wmt17(other: str, valid: tuple[str, ...]) -> Corpus:
    """WMT17 en-``other`` from the official preprocessed (tokenized, truecased) release."""
    base = f"{WMT17}/preprocessed/{other}-en"
    dev = Remote(f"{base}/dev.tgz")
    langs = ("en", other)
    files = {f"train.{lang}": (Member(Remote(f"{base}/corpus.tc.{lang}.gz")),) for lang in langs}
    files |= {f"valid.{lang}": tuple(Member(dev, f"{name}.tc.{lang}") for name in valid) for lang in langs}
    files |= _sgm_test("newstest2017", Remote(f"{WMT17}/test.tgz"), f"newstest2017-en{other}", other)
    stems = (("train",), ("valid",), ("newstest2017",))
    full = _scale("full", stems, "paper recipe: preprocessed WMT17 training data, newstest2017 test")
    return Corpus(
        f"wmt17-en-{other}", "en", other, f"WMT17 English-{other.upper()} (paper Table 3)", files, {"full": full}
    )


# sha256 of the decompressed text of each upstream ``data/task1/raw/<split>.<lang>.gz`` at
# MULTI30K_COMMIT, computed from ../shared/data/multi30k-en-*/ (the same text byte for byte, see
# PROVENANCE.md there); the downloader verifies them after decompressing the download.
_MULTI30K_TEXT_SHA256 = {
    "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
    "test_2017_flickr.en": "ce1450ddc5ab0834502579d77a170849952e15a2938b34cc503bdc25ebb4fb98",
    "test_2017_mscoco.en": "43051fdfa86fd5395182e718a94ca67b1b227b9f7c79596ff0f6b813216981d2",
    "test_2018_flickr.en": "4e585c2dd525911a6ea7730e9d0b516239af3f1b1ffae6a2130223cfb639f25e",
    "train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
    "val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
    "test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "test_2017_flickr.de": "c3078bc3b36808bf9d20eb2347ed6137016179ef59ec0d2b9b8ecc3fb2880081",
    "test_2017_mscoco.de": "58277df3c75f92f7145a11b910b553d1cf82c439249d4dc237c899609eafac22",
    "test_2018_flickr.de": "39fcc8b3331d76fb42d648d019c6898b0d5e58baac87bc2a0bb93f44ec8db207",
    "train.fr": "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d",
    "val.fr": "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc",
    "test_2016_flickr.fr": "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6",
    "test_2017_flickr.fr": "6f3764e31dac41e9455e612958bcfd4e877c5e15cd66df2c2b2be6d9bd83e5b6",
    "test_2017_mscoco.fr": "39cde3f43f32b0a6bf29ce4917a46329ff32e53070c2fac87506695a740ae0a0",
    "test_2018_flickr.fr": "234b4a887da0da4801a3e2c6f21336231ff7dd46daeb80cfa1b551c8bbb78239",
    "train.cs": "2be68b38c8d586ff4f54eb13cc6e1baaaa053695b3f070d3038303a47f2268da",
    "val.cs": "d53827e469b0a1ca8d57e9e26b2b64c4bc4b33f5479c7b03ae87ae5c882c3e33",
    "test_2016_flickr.cs": "45adb85f688de8407fddcbe1b36dca15d12aab868149b337e2576f2d6d2ff8d8",
    "test_2018_flickr.cs": "1db59fe6980c9b3f9bade65122a985e71150214837d76f4768a5a8384c0b2dc7",
}
# Upstream has Czech only for train, val, test_2016_flickr and test_2018_flickr.
_MULTI30K_TESTS = {
    "de": ("2016_flickr", "2017_flickr", "2017_mscoco", "2018_flickr"),
    "fr": ("2016_flickr", "2017_flickr", "2017_mscoco", "2018_flickr"),
    "cs": ("2016_flickr", "2018_flickr"),
}
_LANGUAGE = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}


def _multi30k_remote(split: str, lang: str) -> Remote:
    return Remote(f"{MULTI30K}/{split}.{lang}.gz", content_sha256=_MULTI30K_TEXT_SHA256[f"{split}.{lang}"])


def _multi30k(other: str) -> tuple[Corpus, Corpus]:
    """Multi30k task 1 (image captions) en-``other`` and ``other``-en, over one folder of files.

    small: all 29,000 training pairs, val (1,014), test_2016_flickr as ``test``, plus the
    2017 test sets that exist for the pair as named splits; tiny: a seeded 3,000-pair sample,
    the first 200 lines of val and of test2016.
    """
    tests = _MULTI30K_TESTS[other]
    files = {
        f"{split}.{lang}": (Member(_multi30k_remote(split, lang)),)
        for split in ("train", "val", *(f"test_{t}" for t in tests))
        for lang in ("en", other)
    }
    extra = {f"test{t}": (f"test_{t}",) for t in tests if t.startswith("2017")}
    named = f" + {', '.join(extra)}" if extra else ""
    stems = (("train",), ("val",), ("test_2016_flickr",))
    scales = {
        "small": _scale("small", stems, f"all 29000 training pairs, val 1014, test2016 1000{named}", extra_tests=extra),
        "tiny": _scale("tiny", stems, "CI: 3000 seeded training pairs, 200 val, 200 test"),
    }
    what = "Multi30k task 1 image captions"
    forward = Corpus(f"multi30k-en-{other}", "en", other, f"{what}, English-{_LANGUAGE[other]}", files, scales)
    return forward, forward.reversed(f"multi30k-{other}-en", f"{what}, {_LANGUAGE[other]}-English")


# WMT14 En-De below full: the news pool to train on, newstest2013 to validate, newstest2014 to test
_NEWS_STEMS = (("train.detok", "newstest2008-2012", "newstest2015-2020"), ("newstest2013",), ("newstest2014",))
_WMT14_EN_DE = Corpus(
    "wmt14-en-de",
    "en",
    "de",
    "WMT14 English-German (paper Table 2)",
    _wmt14("de"),
    {
        "full": _scale(
            "full",
            (("train",), ("newstest2013",), ("newstest2014",)),
            "paper recipe: Europarl v7 + CommonCrawl + News Commentary v9, 32k joint BPE",
        ),
        "small": _scale(
            "small",
            _NEWS_STEMS,
            "news pool, local files only: ~37.6k real pairs (train.detok + newstest2008-2012 + 2015-2020)",
        ),
        "tiny": _scale("tiny", _NEWS_STEMS, "3000 seeded pairs of the news pool (local files only)"),
    },
)
_WMT14_EN_FR = Corpus(
    "wmt14-en-fr",
    "en",
    "fr",
    "WMT14 English-French (paper Table 2)",
    _wmt14("fr"),
    {
        "full": _scale(
            "full",
            (("train",), ("newstest2012", "newstest2013"), ("newstest2014",)),
            "paper recipe: + UN + Gigaword; valid newstest2012+2013",
        )
    },
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
        *_multi30k("de"),
        *_multi30k("fr"),
        *_multi30k("cs"),
    )
}


# -- a researcher's own corpus: plain parallel files ---------------------------------------------------

FILE_STEMS = ("train", "valid", "test")  # <folder>/<stem>.<lang>, plain text or .gz, one sentence a line
FILES_MAX_LEN = 1023  # subwords a side the models' position table holds (1024 rows, one for EOS or BOS)
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def files_corpus(
    name: str,
    folder: str | Path,
    src: str,
    tgt: str,
    vocab_size: int | None = None,
    train_pairs: int | None = None,
    max_len: int | None = None,
    max_ratio: float | None = None,
    drop_empty: bool | None = None,
) -> Corpus:
    """A corpus of plain parallel files ``<folder>/{train,valid,test}.{src,tgt}`` (or ``.gz``), prepared whole at
    every scale: every training pair is kept unless asked otherwise (``train_pairs``: a seeded sample of that many;
    ``max_len``: pairs with a side longer than that many subwords left out, default only what the models cannot
    hold; ``max_ratio``: pairs whose longer side is over that many times the shorter left out, default off), valid
    and test are never cut. The scale sets the joint vocabulary's size (``vocab_size``, default as the registered
    corpora at each scale). Every line must have a partner with text, except, with ``drop_empty``, the training
    files' (those pairs are left out and counted)."""
    folder = Path(folder).expanduser().resolve()
    if not _NAME.fullmatch(name) or name in REGISTRY:
        raise ValueError(
            f"corpus name {name!r}: use lowercase letters, digits, '.', '-' or '_', and not a registered corpus's name"
        )
    if src == tgt or not all(_NAME.fullmatch(lang) for lang in (src, tgt)):
        raise ValueError(f"languages {src!r} -> {tgt!r}: two different file suffixes (e.g. en and de)")
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder}: no such folder" if not folder.exists() else f"{folder}: is a file, not a folder"
        )
    missing = [
        f"{stem}.{lang}"
        for stem in FILE_STEMS
        for lang in (src, tgt)
        if not (folder / f"{stem}.{lang}").is_file() and not (folder / f"{stem}.{lang}.gz").is_file()
    ]
    if missing:
        raise FileNotFoundError(
            f"{folder}: no {', '.join(missing)} (a corpus of files needs train, valid and test "
            f"files for both languages, one sentence a line)"
        )
    if vocab_size is not None and vocab_size < 8:
        raise ValueError(f"vocab_size={vocab_size}: too small for a subword vocabulary")
    for option, value, least in (("train_pairs", train_pairs, 1), ("max_len", max_len, 1), ("max_ratio", max_ratio, 0)):
        if value is not None and not value >= least:
            raise ValueError(f"{option}={value}: must be >= {least}")
    kept = f"a seeded {train_pairs} training pairs" if train_pairs else "every training pair"
    filters = [f"none over {max_len} subwords"] if max_len else []
    filters += [f"none with one side over {max_ratio:g}x the other"] if max_ratio else []
    recipe = f"{folder}: {', '.join([kept, *filters])}; every valid and test line"
    scales = {
        s: Scale(
            ("train",),
            ("valid",),
            ("test",),
            vocab_size=vocab_size or scale_spec(s).vocab_size,
            train_pairs=train_pairs,
            max_len=max_len or FILES_MAX_LEN,
            max_ratio=max_ratio or 0.0,
            description=recipe,
        )
        for s in SCALES
    }
    title = f"files in {folder}, {src}->{tgt}"
    return Corpus(name, src, tgt, title, {}, scales, path=str(folder), drop_empty=bool(drop_empty))


def _files_registry() -> Path:
    return cache_dir() / "corpora"


def files_record(name: str, folder: str | Path, src: str, tgt: str, **settings: float | None) -> dict:
    """What the registry keeps of a corpus of files: its folder, languages and the settings it is prepared with
    (``vocab_size``, ``train_pairs``, ``max_len``, ``max_ratio``; unset ones left out)."""
    folder = str(Path(folder).expanduser().resolve())
    return {"name": name, "folder": folder, "src": src, "tgt": tgt, **{k: v for k, v in settings.items() if v}}


def check_registration(record: dict, force: bool = False) -> None:
    """Refuse to give a registered name other files or settings, unless ``force`` (prepare it again with these)."""
    path = _files_registry() / f"{record['name']}.json"
    if force or not path.is_file():
        return
    old = {k: v for k, v in json.loads(path.read_text(encoding="utf-8")).items() if v}  # an older record: nulls
    if old == record:
        return
    diff = ", ".join(
        f"{k} {old.get(k, 'unset')} -> {record.get(k, 'unset')}"
        for k in sorted({*old, *record})
        if old.get(k) != record.get(k)
    )
    raise ValueError(
        f"corpus {record['name']!r} is registered with other files or settings ({diff}; {path}): pass --force to "
        "prepare it again with these, or choose another name"
    )


def register(record: dict) -> None:
    """Write ``record`` (:func:`files_record`) to the registry in ``$CANLIB_CACHE_DIR``."""
    atomic_write_bytes((json.dumps(record, indent=1) + "\n").encode(), _files_registry() / f"{record['name']}.json")


def register_files(
    name: str, folder: str | Path, src: str, tgt: str, vocab_size: int | None = None, force: bool = False, **filters
) -> Corpus:
    """Check a corpus of files (:func:`files_corpus`) and register it under ``name`` in ``$CANLIB_CACHE_DIR``,
    so that every later command (``canlib data prepare NAME``, ``python -m repro experiment --corpora NAME``) finds it.
    Registering the same name again with other files or settings is an error unless ``force``. (``canlib data
    prepare --files`` registers a corpus only once it is prepared.)"""
    corpus = files_corpus(name, folder, src, tgt, vocab_size, **filters)
    record = files_record(name, folder, src, tgt, vocab_size=vocab_size, **filters)
    check_registration(record, force)
    register(record)
    return corpus


def registered_files() -> list[str]:
    """The names of the corpora of files registered in this cache folder."""
    return [path.stem for path in sorted(_files_registry().glob("*.json"))]


def get_corpus(name: str) -> Corpus:
    """A registered corpus, or a corpus of files registered with :func:`register_files`."""
    if name in REGISTRY:
        return REGISTRY[name]
    path = _files_registry() / f"{name}.json"
    if path.is_file():
        record = json.loads(path.read_text(encoding="utf-8"))
        settings = {k: record.get(k) for k in ("vocab_size", "train_pairs", "max_len", "max_ratio", "drop_empty")}
        return files_corpus(name, record["folder"], record["src"], record["tgt"], **settings)
    raise ValueError(
        f"unknown corpus {name!r}; known: {', '.join([*REGISTRY, *registered_files()])} "
        f"(a corpus of your own files: `canlib data prepare NAME --files FOLDER --src xx --tgt yy`)"
    )

"""A user's fresh machine: no CANLIB_DATA_DIR, an empty cache, every default corpus downloaded and verified.

The downloads come from a local HTTP server on 127.0.0.1 that serves the files of the shared data
folder at the real URLs' paths (gzipped on the fly, as upstream serves ``.gz``), reached through
``CANLIB_DOWNLOAD_MIRROR``. The registry tests need no data and no network.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import missing as missing_data

from canlib.catalogue import scale_spec
from canlib.data import get_corpus, load_prepared, prepare
from canlib.data.corpora import MULTI30K, MULTI30K_COMMIT
from canlib.data.download import MIRROR_ENV, download_path, mirrored
from canlib.data.text import normalize

MULTI30K_NAMES = [f"multi30k-{a}-{b}" for x in ("de", "fr", "cs") for a, b in (("en", x), (x, "en"))]
DEFAULT_SCALES = ("tiny", "small")  # what the book, the tests and `python -m repro experiment` prepare by default
SHA256 = re.compile(r"[0-9a-f]{64}")


def default_corpora() -> list[tuple[str, str]]:
    """(corpus, corpus scale) that the studies' default scales prepare, read from the studies themselves."""
    return list(dict.fromkeys((scale_spec(s).corpus, scale_spec(s).corpus_scale) for s in DEFAULT_SCALES))


# --- the registry: every file a default path needs can be downloaded and verified -----------------


def unverifiable_files(corpus: str, scale: str) -> list[str]:
    """Local files of (corpus, scale) lacking a download or a checksum, with what is missing."""
    entry = get_corpus(corpus)
    bad = []
    for name in entry.needed_files(scale):
        members = entry.files.get(name, ())
        if not members:
            bad.append(f"{corpus}/{name}: no download")
        for m in members:
            if not m.remote.url.startswith("https://"):
                bad.append(f"{corpus}/{name}: {m.remote.url!r} is not an https URL")
            if not any(SHA256.fullmatch(h or "") for h in (m.remote.sha256, m.remote.content_sha256)):
                bad.append(f"{corpus}/{name}: {m.remote.url} has no sha256")
    return bad


def test_every_multi30k_direction_is_registered_with_tiny_and_small():
    for name in MULTI30K_NAMES:
        corpus = get_corpus(name)
        assert set(DEFAULT_SCALES) <= set(corpus.scales), name
        assert corpus.folder == "multi30k-en-" + (corpus.tgt if corpus.src == "en" else corpus.src)
        assert name == f"multi30k-{corpus.src}-{corpus.tgt}"


@pytest.mark.parametrize("name", MULTI30K_NAMES)
def test_every_file_multi30k_tiny_and_small_need_has_a_pinned_url_and_a_checksum(name):
    corpus = get_corpus(name)
    for scale in DEFAULT_SCALES:
        assert unverifiable_files(name, scale) == []
        for file in corpus.needed_files(scale):
            for m in corpus.files[file]:
                assert m.remote.url.startswith(f"{MULTI30K}/") and MULTI30K_COMMIT in m.remote.url, m.remote.url


def test_the_studies_default_scales_need_only_verifiable_downloads():
    for corpus, scale in default_corpora():
        assert unverifiable_files(corpus, scale) == [], (corpus, scale)


def test_the_news_pool_is_reported_as_not_downloadable():
    """The check above can fail: the WMT news pool (local files only) has no download."""
    assert "wmt14-en-de/train.detok.en: no download" in unverifiable_files("wmt14-en-de", "tiny")


def test_extra_test_sets_are_the_2017_sets_that_exist_for_the_pair():
    for name in MULTI30K_NAMES:
        corpus = get_corpus(name)
        extra = ("test2017_flickr", "test2017_mscoco") if "cs" not in name else ()
        assert corpus.scale("small").test_splits == ("test", *extra), name
        assert corpus.scale("tiny").test_splits == ("test",), name


def test_mirror_replaces_scheme_and_host_and_keeps_the_path():
    url = f"{MULTI30K}/val.de.gz"
    path = urllib.parse.urlsplit(url).path
    assert mirrored(url, None) == url
    assert mirrored(url, "http://127.0.0.1:8080") == f"http://127.0.0.1:8080{path}"
    assert mirrored(url, "https://mirror.example/pub/") == f"https://mirror.example/pub{path}"
    with pytest.raises(ValueError, match=f"{MIRROR_ENV}='127.0.0.1:8080'"):
        mirrored(url, "127.0.0.1:8080")


def test_registry_checksums_match_the_shared_copies(shared_data):
    """Each recorded sha256 is of the text the shared folder holds (decompressed for train.*.gz)."""
    checked = 0
    for name in ("multi30k-en-de", "multi30k-en-fr", "multi30k-en-cs"):
        corpus = get_corpus(name)
        folder = shared_data / corpus.folder
        if not folder.is_dir():
            missing_data(f"{folder} not present")
        for file, members in corpus.files.items():
            (member,) = members
            plain, packed = folder / file, folder / f"{file}.gz"
            text = plain.read_bytes() if plain.is_file() else gzip.decompress(packed.read_bytes())
            assert hashlib.sha256(text).hexdigest() == member.remote.content_sha256, f"{name}/{file}"
            checked += 1
    assert checked == 12 + 12 + 8


# --- a fresh machine against a local mirror of the real URLs --------------------------------------


class Mirror:
    """Serves ../shared/data's Multi30k text at the upstream URL paths, gzipped; logs every request."""

    def __init__(self, shared: Path) -> None:
        self.shared = shared
        self.prefix = urllib.parse.urlsplit(MULTI30K).path + "/"
        self.corrupt: set[str] = set()  # file names (``val.de``) whose text gets one byte flipped
        self.requests: list[str] = []

    def body(self, path: str) -> bytes | None:
        if not path.startswith(self.prefix) or not path.endswith(".gz"):
            return None
        name = path[len(self.prefix) : -len(".gz")]
        for folder in sorted(self.shared.glob("multi30k-en-*")):
            plain, packed = folder / name, folder / f"{name}.gz"
            if plain.is_file() or packed.is_file():
                text = plain.read_bytes() if plain.is_file() else gzip.decompress(packed.read_bytes())
                if name in self.corrupt:
                    text = text[:100] + bytes([text[100] ^ 0x01]) + text[101:]
                return gzip.compress(text, mtime=0)
        return None


@pytest.fixture
def mirror(shared_data, tmp_path, monkeypatch):
    """The mirror server, and the environment of a fresh machine pointed at it; stops within 120 s."""
    if not any(shared_data.glob("multi30k-en-*")):
        missing_data(f"no Multi30k folders in {shared_data} to serve")
    state = Mirror(shared_data)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            state.requests.append(self.path)
            body = state.body(self.path)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    guard = threading.Timer(120, server.shutdown)
    guard.start()
    monkeypatch.delenv("CANLIB_DATA_DIR", raising=False)
    monkeypatch.delenv("CANLIB_OFFLINE", raising=False)
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "fresh-cache"))
    monkeypatch.setenv(MIRROR_ENV, f"http://127.0.0.1:{server.server_address[1]}")
    yield state
    guard.cancel()
    server.shutdown()
    server.server_close()
    thread.join(5)


def shared_lines(shared: Path, folder: str, file: str) -> list[str]:
    plain, packed = shared / folder / file, shared / folder / f"{file}.gz"
    text = plain.read_bytes() if plain.is_file() else gzip.decompress(packed.read_bytes())
    return [normalize(s) for s in text.decode("utf-8").split("\n")[:-1]]


def test_fresh_machine_downloads_and_prepares_every_default_scale(mirror, shared_data, tmp_path):
    cache = tmp_path / "fresh-cache"
    for corpus, scale in default_corpora():
        entry = get_corpus(corpus)
        prepared = load_prepared(prepare(corpus, scale, progress=False))
        assert prepared.path == cache / "prepared" / f"{corpus}-{scale}"
        test = prepared.split("test")
        assert (
            test.tgt_text
            == shared_lines(shared_data, entry.folder, f"{entry.scale(scale).test[0]}.{entry.tgt}")[: len(test)]
        )
        for split in prepared.test_splits:
            assert len(prepared.split(split)) == prepared.meta["counts"][split] > 0
    # each needed file was fetched once, from the mirror, at the registry URL's path, and verified
    records = json.loads((cache / "downloads" / "checksums.json").read_text())
    needed = {
        m.remote for c, s in default_corpora() for f in get_corpus(c).needed_files(s) for m in get_corpus(c).files[f]
    }
    assert sorted(mirror.requests) == sorted(urllib.parse.urlsplit(r.url).path for r in needed)
    for remote in needed:
        path = download_path(remote.url, cache)
        assert records[remote.url]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() == remote.content_sha256
    if ("multi30k-en-de", "small") in default_corpora():
        small = load_prepared(cache / "prepared" / "multi30k-en-de-small")
        assert small.test_splits == ("test", "test2017_flickr", "test2017_mscoco")
        assert len(small.split("train")) > 28000 and len(small.split("test2017_mscoco")) == 461


def test_fresh_machine_rejects_a_corrupted_download_naming_the_file(mirror, tmp_path):
    mirror.corrupt.add("val.de")
    with pytest.raises(
        ValueError, match=r"val\.de\.gz \(https://raw\.githubusercontent\.com/.*checksum mismatch"
    ) as info:
        prepare("multi30k-en-de", "tiny", tmp_path / "out", progress=False)
    assert "fetched from http://127.0.0.1:" in str(info.value)
    dest = download_path(f"{MULTI30K}/val.de.gz", tmp_path / "fresh-cache")
    assert not dest.exists() and not dest.with_name("val.de.gz.part").exists()
    assert not (tmp_path / "out").exists()
    mirror.corrupt.clear()  # a good copy upstream: the next call downloads it and succeeds
    assert len(load_prepared(prepare("multi30k-en-de", "tiny", tmp_path / "out", progress=False)).split("valid")) == 200


def test_a_reversed_direction_reuses_the_forward_downloads(mirror, tmp_path):
    prepare("multi30k-en-fr", "tiny", tmp_path / "en-fr", progress=False)
    fetched = len(mirror.requests)
    assert fetched == 6
    fr_en = load_prepared(prepare("multi30k-fr-en", "tiny", tmp_path / "fr-en", progress=False))
    assert len(mirror.requests) == fetched
    en_fr = load_prepared(tmp_path / "en-fr")
    assert (fr_en.src_lang, fr_en.tgt_lang) == ("fr", "en") == (en_fr.tgt_lang, en_fr.src_lang)
    assert fr_en.split("test").src_text == en_fr.split("test").tgt_text


def test_data_dir_files_are_never_downloaded(mirror, shared_data, tmp_path, monkeypatch):
    monkeypatch.setenv("CANLIB_DATA_DIR", str(shared_data))
    prepare("multi30k-de-en", "tiny", tmp_path / "de-en", progress=False)
    assert mirror.requests == []

"""Downloads against a local HTTP server: statmt-layout archive, checksum mismatch, resumed transfer."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import missing as missing_data

from canlib.data import REGISTRY, Corpus, Member, Remote, Scale, fetch, load_prepared, prepare
from canlib.data.download import download_path, extract_members, sha256_gunzipped
from canlib.data.text import normalize, read_lines


class Site:
    """What the local server serves, and a log of (path, Range header) per request."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.drop_once: set[str] = set()  # send half the body, then close the connection
        self.ignore_range = False
        self.requests: list[tuple[str, str | None]] = []


def handler_for(site: Site):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            rng = self.headers.get("Range")
            site.requests.append((self.path, rng))
            data = site.files.get(self.path)
            if data is None:
                self.send_error(404)
                return
            start = int(re.fullmatch(r"bytes=(\d+)-", rng).group(1)) if rng and not site.ignore_range else 0
            if start >= len(data) > 0:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.end_headers()
                return
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.path in site.drop_once:
                site.drop_once.discard(self.path)
                body = body[: len(body) // 2]
                self.close_connection = True
            self.wfile.write(body)

    return Handler


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A server on 127.0.0.1 for this test only; it shuts itself down after 60 s at the latest."""
    state = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    guard = threading.Timer(60, server.shutdown)
    guard.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.delenv("CANLIB_DATA_DIR", raising=False)
    monkeypatch.delenv("CANLIB_OFFLINE", raising=False)
    monkeypatch.setenv("CANLIB_CACHE_DIR", str(tmp_path / "cache"))
    yield state
    guard.cancel()
    server.shutdown()
    server.server_close()
    thread.join(5)


def sgm(lines: list[str], lang: str) -> bytes:
    """A WMT-style SGM file; extra spaces and a no-break space test the normalisation."""
    segs = "".join(f'<seg id="{i}"> {line.replace(" ", "  ", 1)}\u00a0</seg>\n' for i, line in enumerate(lines, 1))
    head = '<srcset setid="newstest" srclang="any">\n<doc sysid="ref" docid="d1" genre="news" origlang="en">\n'
    return f"{head}{segs}</doc>\n</srcset>\n".encode()


def statmt_tgz(shared_data: Path) -> tuple[bytes, dict[str, list[str]]]:
    """A small tgz laid out like statmt's: plain training files and SGM dev/test sets (real lines).

    Skips where the WMT news files (local only, no download) are absent.
    """
    wmt = shared_data / "wmt14-en-de"
    missing = [
        f"{stem}.{lang}"
        for stem in ("train.detok", "newstest2013", "newstest2014")
        for lang in ("en", "de")
        if not (wmt / f"{stem}.{lang}").is_file()
    ]
    if missing:
        missing_data(f"WMT news files not in {wmt} (local only, no download): {', '.join(missing)}")
    take = lambda name, n: (wmt / name).read_text(encoding="utf-8").split("\n")[:n]  # noqa: E731
    text = {f"train.{lang}": take(f"train.detok.{lang}", 300) for lang in ("en", "de")}
    text |= {f"newstest2013.{lang}": take(f"newstest2013.{lang}", 40) for lang in ("en", "de")}
    text |= {f"newstest2014.{lang}": take(f"newstest2014.{lang}", 30) for lang in ("en", "de")}
    members = {
        "training/europarl-v7.de-en.en": "".join(s + "\n" for s in text["train.en"]).encode(),
        "training/europarl-v7.de-en.de": "".join(s + "\n" for s in text["train.de"]).encode(),
        "dev/newstest2013-src.en.sgm": sgm(text["newstest2013.en"], "en"),
        "dev/newstest2013-src.de.sgm": sgm(text["newstest2013.de"], "de"),
        "test-full/newstest2014-deen-src.en.sgm": sgm(text["newstest2014.en"], "en"),
        "test-full/newstest2014-deen-ref.de.sgm": sgm(text["newstest2014.de"], "de"),
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue(), text


def toy_corpus(url: str, sha256: str | None = None) -> Corpus:
    remote = Remote(url, sha256)
    files = {
        "train.en": (Member(remote, "europarl-v7.de-en.en"),),
        "train.de": (Member(remote, "europarl-v7.de-en.de"),),
        "newstest2013.en": (Member(remote, "newstest2013-src.en.sgm"),),
        "newstest2013.de": (Member(remote, "newstest2013-src.de.sgm"),),
        "newstest2014.en": (Member(remote, "newstest2014-deen-src.en.sgm"),),
        "newstest2014.de": (Member(remote, "newstest2014-deen-ref.de.sgm"),),
    }
    scale = Scale(("train",), ("newstest2013",), ("newstest2014",), vocab_size=400)
    return Corpus("toy-en-de", "en", "de", "statmt-layout test corpus", files, {"full": scale})


def test_prepare_downloads_extracts_and_reads_sgm(site, shared_data, tmp_path, monkeypatch):
    data, text = statmt_tgz(shared_data)
    site.files["/wmt14/toy.tgz"] = data
    monkeypatch.setitem(REGISTRY, "toy-en-de", toy_corpus(site.url + "/wmt14/toy.tgz"))
    out = prepare("toy-en-de", "full", tmp_path / "toy", progress=False)
    corpus = load_prepared(out)
    assert corpus.split("valid").src_text == [normalize(s) for s in text["newstest2013.en"]]
    assert corpus.split("test").tgt_text == [normalize(s) for s in text["newstest2014.de"]]
    assert 250 <= len(corpus.split("train")) <= 300
    record = json.loads((tmp_path / "cache" / "downloads" / "checksums.json").read_text())[site.url + "/wmt14/toy.tgz"]
    assert record["size"] == len(data) and record["sha256"] == hashlib.sha256(data).hexdigest()
    assert len(site.requests) == 1
    assert prepare("toy-en-de", "full", tmp_path / "toy", progress=False) == out
    assert len(site.requests) == 1  # the verified download and the prepared folder are reused


def test_published_checksum_mismatch_is_an_error_and_the_file_is_not_kept(site, shared_data, tmp_path):
    data, _ = statmt_tgz(shared_data)
    site.files["/corrupt.tgz"] = data[:100] + bytes([data[100] ^ 0xFF]) + data[101:]
    remote = Remote(site.url + "/corrupt.tgz", hashlib.sha256(data).hexdigest())
    with pytest.raises(ValueError, match=r"corrupt\.tgz .*checksum mismatch"):
        fetch(remote, tmp_path / "cache", progress=False)
    dest = download_path(remote.url, tmp_path / "cache")
    assert not dest.exists() and not dest.with_name(dest.name + ".part").exists()
    site.files["/corrupt.tgz"] = data
    assert fetch(remote, tmp_path / "cache", progress=False).read_bytes() == data


def test_a_file_that_changes_after_its_first_download_is_rejected(site, tmp_path):
    site.files["/a.gz"] = b"first version" * 100
    remote = Remote(site.url + "/a.gz")
    path = fetch(remote, tmp_path / "cache", progress=False)
    path.write_bytes(path.read_bytes()[:-1] + b"X")  # corrupted on disk: caught at the next use
    with pytest.raises(ValueError, match="a.gz .*checksum mismatch"):
        fetch(remote, tmp_path / "cache", progress=False)
    assert not path.exists()
    site.files["/a.gz"] = b"other version" * 100  # same size, new content upstream
    with pytest.raises(ValueError, match="checksum mismatch"):
        fetch(remote, tmp_path / "cache", progress=False)
    assert not path.exists() and not path.with_name("a.gz.part").exists()


def test_interrupted_transfer_is_resumed_with_range(site, tmp_path):
    data = bytes(range(256)) * 4000
    site.files["/big.tgz"] = data
    site.drop_once.add("/big.tgz")
    remote = Remote(site.url + "/big.tgz")
    with pytest.raises(RuntimeError, match="resumes"):
        fetch(remote, tmp_path / "cache", retries=0, progress=False)
    dest = download_path(remote.url, tmp_path / "cache")
    part = dest.with_name("big.tgz.part")
    assert not dest.exists() and part.stat().st_size == len(data) // 2
    assert fetch(remote, tmp_path / "cache", retries=0, progress=False).read_bytes() == data
    assert site.requests[-1] == ("/big.tgz", f"bytes={len(data) // 2}-")
    assert not part.exists()


def test_retry_within_one_call_resumes(site, tmp_path):
    site.files["/x.tgz"] = data = b"0123456789" * 5000
    site.drop_once.add("/x.tgz")
    assert (
        fetch(Remote(site.url + "/x.tgz"), tmp_path / "cache", retries=1, backoff=0, progress=False).read_bytes()
        == data
    )
    assert [r for _, r in site.requests] == [None, f"bytes={len(data) // 2}-"]


def test_server_ignoring_range_restarts_from_zero(site, tmp_path):
    site.files["/y.tgz"] = data = b"abcdefghij" * 3000
    site.ignore_range = True
    remote = Remote(site.url + "/y.tgz")
    dest = download_path(remote.url, tmp_path / "cache")
    dest.parent.mkdir(parents=True)
    dest.with_name("y.tgz.part").write_bytes(b"stale bytes")
    assert fetch(remote, tmp_path / "cache", progress=False).read_bytes() == data


def test_missing_member_and_corrupt_archive_name_the_archive(site, shared_data, tmp_path, monkeypatch):
    data, _ = statmt_tgz(shared_data)
    site.files["/ok.tgz"] = data
    archive = fetch(Remote(site.url + "/ok.tgz"), tmp_path / "cache", progress=False)
    with pytest.raises(ValueError, match=r"ok\.tgz: no member named newstest2099-src\.en\.sgm"):
        extract_members(archive, ["newstest2099-src.en.sgm"], tmp_path / "cache")
    site.files["/bad.tgz"] = b"this is not a tar archive" * 20
    monkeypatch.setitem(REGISTRY, "toy-en-de", toy_corpus(site.url + "/bad.tgz"))
    with pytest.raises(ValueError, match=r"bad\.tgz: corrupt or unreadable archive"):
        prepare("toy-en-de", "full", tmp_path / "toy", progress=False)
    assert not (tmp_path / "toy").exists()


def test_sgm_reading_matches_sacrebleu(tmp_path):
    from sacrebleu.dataset.base import Dataset
    from sacrebleu.dataset.fake_sgml import FakeSGMLDataset

    path = tmp_path / "t.de.sgm"
    path.write_text(
        '<doc docid="a">\n<seg id="1">  Ein\u00a0 Test .</seg>\n<p>\n<seg id=2>Zwei\tTabs</seg> x\n'
        '  <seg id="3">eingerückt: nicht gelesen</seg>\n</doc>\n',
        encoding="utf-8",
    )
    theirs = tmp_path / "theirs.txt"
    FakeSGMLDataset._convert_format(SimpleNamespace(_clean=Dataset._clean), str(path), str(theirs))
    assert (
        read_lines(path) == theirs.read_text(encoding="utf-8").split("\n")[:-1] == ["Ein Test .", "Zwei Tabs x"]
    )  # sacrebleu keeps text after </seg>


def test_mirror_serves_the_registry_path_and_the_cache_keeps_the_registry_url(site, tmp_path):
    site.files["/multi30k/dataset/abc/data/task1/raw/val.de.gz"] = data = gzip.compress(b"Ein Hund.\n", mtime=0)
    remote = Remote(
        "https://raw.githubusercontent.com/multi30k/dataset/abc/data/task1/raw/val.de.gz",
        content_sha256=hashlib.sha256(b"Ein Hund.\n").hexdigest(),
    )
    path = fetch(remote, tmp_path / "cache", progress=False, mirror=site.url)
    assert path == download_path(remote.url, tmp_path / "cache") and path.read_bytes() == data
    assert site.requests == [("/multi30k/dataset/abc/data/task1/raw/val.de.gz", None)]
    assert remote.url in json.loads((tmp_path / "cache" / "downloads" / "checksums.json").read_text())
    assert fetch(remote, tmp_path / "cache", progress=False) == path and len(site.requests) == 1  # cached, re-verified


def test_decompressed_checksum_rejects_other_text_and_non_gzip_bytes(site, tmp_path):
    remote = Remote(site.url + "/t.en.gz", content_sha256=hashlib.sha256(b"A dog.\n").hexdigest())
    site.files["/t.en.gz"] = gzip.compress(b"A cat.\n")
    with pytest.raises(
        ValueError, match=r"t\.en\.gz .*expected decompressed text with sha256 [0-9a-f]{64}, found [0-9a-f]{64}"
    ):
        fetch(remote, tmp_path / "cache", progress=False)
    site.files["/t.en.gz"] = b"A dog.\n"  # right text, but not gzip
    with pytest.raises(ValueError, match="found no readable gzip data"):
        fetch(remote, tmp_path / "cache", progress=False)
    assert not download_path(remote.url, tmp_path / "cache").exists()
    site.files["/t.en.gz"] = gzip.compress(b"A dog.\n")
    path = fetch(remote, tmp_path / "cache", progress=False)
    assert sha256_gunzipped(path) == remote.content_sha256
    path.write_bytes(gzip.compress(b"A dot.\n"))  # changed on disk: caught at the next use
    with pytest.raises(ValueError, match="checksum mismatch"):
        fetch(remote, tmp_path / "cache", progress=False)

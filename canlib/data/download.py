"""Downloads that resume, verify and never leave a half file under the final name.

A download goes to ``<name>.part`` (resumed with an HTTP Range request after an
interruption), is checked against the registry's sha256 (of its bytes, or of the
decompressed bytes of a ``.gz``) when it has one, else against the size + sha256 recorded at
its first download (``checksums.json`` beside the downloads), and only then renamed into
place. Archive members are extracted the same way.

``$CANLIB_DOWNLOAD_MIRROR`` (``http://host:port``, optionally with a path prefix) fetches
every file from a mirror that serves the registry URLs' paths; the cache and the checksum
records stay keyed by the registry URL, so a mirrored file is verified exactly like the
original.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from pathlib import Path

from canlib.data.corpora import Remote
from canlib.io import atomic_write_bytes, cache_dir, tqdm

CHUNK = 1 << 20
MIRROR_ENV = "CANLIB_DOWNLOAD_MIRROR"


class IncompleteDownload(OSError):
    """The server closed the connection before sending all the bytes it announced."""


def download_path(url: str, root: Path) -> Path:
    """``<root>/downloads/<host>/<url path>``: same-named files of different sites never clash."""
    parts = urllib.parse.urlsplit(url)
    host = re.sub(r"[^A-Za-z0-9._-]", "_", parts.netloc)
    return root / "downloads" / host / parts.path.lstrip("/")


def download_mirror() -> str | None:
    """``$CANLIB_DOWNLOAD_MIRROR`` (None when unset or empty)."""
    return os.environ.get(MIRROR_ENV) or None


def mirrored(url: str, mirror: str | None) -> str:
    """``url`` with its scheme and host replaced by ``mirror``'s (whose path, if any, is a prefix)."""
    if not mirror:
        return url
    m = urllib.parse.urlsplit(mirror)
    if m.scheme not in ("http", "https") or not m.netloc:
        raise ValueError(f"{MIRROR_ENV}={mirror!r}: expected http(s)://host[:port][/prefix]")
    u = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((m.scheme, m.netloc, m.path.rstrip("/") + u.path, u.query, ""))


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def sha256_gunzipped(path: Path) -> str | None:
    """sha256 of the decompressed bytes of a gzip file; None when it is not readable gzip."""
    h = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
    except (OSError, EOFError, zlib.error):
        return None
    return h.hexdigest()


def _check(path: Path, remote: Remote, record: dict | None, source: str | None = None) -> str:
    """sha256 of ``path``; a mismatch with the registry's or the recorded checksum deletes it and raises."""
    digest = sha256_file(path)
    size = path.stat().st_size
    expected = remote.sha256 or (record or {}).get("sha256")
    content = sha256_gunzipped(path) if remote.content_sha256 else None
    if record and record.get("size") != size:
        expected_what = f"size {record['size']} (recorded at first download), found {size}"
    elif expected and digest != expected:
        expected_what = f"sha256 {expected}, found {digest}"
    elif remote.content_sha256 and content != remote.content_sha256:
        found = content if content is not None else "no readable gzip data"
        expected_what = f"decompressed text with sha256 {remote.content_sha256}, found {found}"
    else:
        return digest
    path.unlink()
    where = remote.url if source in (None, remote.url) else f"{remote.url}, fetched from {source}"
    raise ValueError(
        f"{path.name.removesuffix('.part')} ({where}): checksum mismatch: expected {expected_what}; "
        "the file was deleted"
    )


def _transfer(url: str, part: Path, progress: bool) -> None:
    """Fetch ``url`` into ``part``, continuing from its current size with a Range request."""
    have = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "canlib"} | ({"Range": f"bytes={have}-"} if have else {})
    try:
        resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and have:  # nothing left to fetch: the .part is whole, verification decides
            return
        raise
    with resp:
        content_range = resp.headers.get("Content-Range", "")
        resumed = have and resp.status == 206 and content_range.startswith(f"bytes {have}-")
        start = have if resumed else 0
        length = resp.headers.get("Content-Length")
        total = start + int(length) if length is not None else None
        with (
            open(part, "ab" if resumed else "wb") as f,
            tqdm(
                total=total,
                initial=start,
                unit="B",
                unit_scale=True,
                desc=part.name.removesuffix(".part"),
                disable=not progress,
                leave=False,
            ) as bar,
        ):
            while chunk := resp.read(CHUNK):
                f.write(chunk)
                bar.update(len(chunk))
    got = part.stat().st_size
    if total is not None and got < total:
        raise IncompleteDownload(f"{url}: connection closed after {got} of {total} bytes")


def fetch(
    remote: Remote,
    root: Path | None = None,
    retries: int = 3,
    backoff: float = 2.0,
    progress: bool = True,
    mirror: str | None = None,
) -> Path:
    """The verified local copy of ``remote``, downloading (and resuming) it if needed.

    ``mirror`` (``http://host:port``) fetches ``remote.url``'s path from there instead; the
    copy is cached and verified under the registry URL all the same.
    """
    root = Path(root) if root is not None else cache_dir()
    url = mirrored(remote.url, mirror)
    dest = download_path(remote.url, root)
    records_path = root / "downloads" / "checksums.json"
    records = json.loads(records_path.read_text()) if records_path.is_file() else {}
    if dest.is_file():
        _check(dest, remote, records.get(remote.url))
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    for attempt in range(retries + 1):
        try:
            _transfer(url, part, progress)
            break
        except urllib.error.HTTPError as exc:
            if exc.code < 500 or attempt == retries:
                raise RuntimeError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
        except (urllib.error.URLError, http.client.HTTPException, OSError) as exc:
            if attempt == retries:
                raise RuntimeError(
                    f"{url}: download failed after {attempt + 1} tries ({exc}); "
                    f"the partial file {part} is kept and the next call resumes it"
                ) from exc
        time.sleep(backoff * 2**attempt)
    digest = _check(part, remote, records.get(remote.url), url)
    os.replace(part, dest)
    records[remote.url] = {"file": str(dest.relative_to(root)), "size": dest.stat().st_size, "sha256": digest}
    atomic_write_bytes(json.dumps(records, indent=1, sort_keys=True).encode(), records_path)
    return dest


def extract_members(archive: Path, names: list[str], root: Path) -> dict[str, Path]:
    """Extract the members whose base names are ``names`` (one pass), each placed atomically.

    Members are found by base name, so ``dev/newstest2013-src.en.sgm`` and a layout without
    the ``dev/`` folder both work. A missing member or a corrupt archive names the archive.
    """
    out_dir = root / "extracted" / archive.relative_to(root / "downloads")
    out = {name: out_dir / name for name in names}
    wanted = {name for name, path in out.items() if not path.is_file()}
    if not wanted:
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        with tarfile.open(archive, "r:*") as tar:
            for info in tar:
                base = info.name.rsplit("/", 1)[-1]
                if info.isfile() and base in wanted:
                    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=out_dir)
                    try:
                        with os.fdopen(fd, "wb") as f, tar.extractfile(info) as src:
                            shutil.copyfileobj(src, f, CHUNK)
                        os.replace(tmp, out[base])
                    except BaseException:
                        Path(tmp).unlink(missing_ok=True)
                        raise
                    wanted.discard(base)
                    if not wanted:
                        break
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise ValueError(f"{archive}: corrupt or unreadable archive ({exc})") from exc
    if wanted:
        raise ValueError(f"{archive}: no member named {', '.join(sorted(wanted))}")
    return out

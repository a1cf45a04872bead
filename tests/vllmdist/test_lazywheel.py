"""patchq.vllmdist.lazywheel against a local HTTP server (127.0.0.1 only, no internet): a
small real wheel served with or without Range support, and a PEP 691 JSON index.

One test in the wheel layer runs the partial fetch on a real release from PyPI: the tree
made from ~8 MB of range requests is byte-identical to the one extracted from the whole
274 MB wheel. It fetches those ~8 MB from PyPI on every run (into a temporary cache)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import os
import re
import threading
import zipfile
from pathlib import Path

import platformdirs
import pytest
from packaging.version import Version

from patchq.vllmdist import lazywheel as L
from patchq.vllmdist import releases as R

WHEEL = "vllm-0.9.1-2-cp38-abi3-manylinux_2_28_x86_64.whl"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(path: Path, *, tamper: str | None = None) -> dict[str, bytes]:
    """A vLLM-shaped wheel: .py files between big compiled blobs, a dist-info with RECORD.
    ``tamper``: a member whose RECORD hash is wrong. Returns the wanted members."""
    import random

    rng = random.Random(7)
    blob = bytes(rng.getrandbits(8) for _ in range(300_000))  # incompressible: a ".so"
    members: dict[str, bytes] = {}
    for i in range(40):
        members[f"vllm/pkg{i % 4}/mod{i}.py"] = f"X = {i}\n".encode() * 50
        if i % 10 == 9:
            members[f"vllm/_C{i}.abi3.so"] = blob
    members["vllm/configs/a.json"] = b"{}"
    members["vllm-0.9.1.dist-info/METADATA"] = b"Name: vllm\nVersion: 0.9.1\n"
    members["vllm-0.9.1.dist-info/WHEEL"] = b"Wheel-Version: 1.0\n"
    members["vllm-0.9.1.dist-info/entry_points.txt"] = b"[console_scripts]\nvllm = vllm.cli:main\n"
    record = "".join(f"{n},sha256={b64(d if n != tamper else b'other')},{len(d)}\n" for n, d in members.items())
    members["vllm-0.9.1.dist-info/RECORD"] = (record + "vllm-0.9.1.dist-info/RECORD,,\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return {n: d for n, d in members.items() if R._wanted_member(n, "vllm")}


class Server:
    """Serves ``files`` (path -> bytes) on 127.0.0.1; counts requests; Range optional."""

    def __init__(self, files: dict[str, bytes], ranges: bool = True):
        self.files, self.ranges, self.requests = files, ranges, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_GET(self):
                outer.requests.append((self.path, self.headers.get("Range")))
                data = outer.files.get(self.path)
                if data is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                rng = self.headers.get("Range")
                m = re.fullmatch(r"bytes=(\d+)-(\d+)", rng or "")
                if outer.ranges and m:
                    start, end = int(m.group(1)), min(int(m.group(2)), len(data) - 1)
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
                    body = data[start:end + 1]
                else:
                    self.send_response(200)
                    body = data
                ctype = "application/vnd.pypi.simple.v1+json" if self.path.startswith("/simple/") else \
                    "application/octet-stream"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def served(tmp_path, monkeypatch):
    """``served(ranges=True, tamper=None)`` -> (server, wheel path, wanted members), with a
    PEP 691 index at ``<server>/simple/vllm/`` named by ``PIP_INDEX_URL``."""
    monkeypatch.delenv("PATCHQ_OFFLINE", raising=False)  # localhost only
    monkeypatch.setenv("PATCHQ_PROGRESS", "0")
    servers = []

    def make(ranges: bool = True, tamper: str | None = None):
        wheel = tmp_path / WHEEL
        wanted = build_wheel(wheel, tamper=tamper)
        data = wheel.read_bytes()
        index = {"meta": {"api-version": "1.1"}, "name": "vllm", "files": [
            {"filename": WHEEL, "url": f"../../files/{WHEEL}", "size": len(data),
             "hashes": {"sha256": hashlib.sha256(data).hexdigest()}, "yanked": False},
            {"filename": WHEEL.replace("-2-", "-1-"), "url": "../../files/old.whl", "hashes": {}, "yanked": False},
            {"filename": WHEEL.replace("x86_64", "aarch64"), "url": "../../files/arm.whl", "hashes": {}},
        ]}
        srv = Server({f"/files/{WHEEL}": data, "/simple/vllm/": json.dumps(index).encode()}, ranges)
        servers.append(srv)
        monkeypatch.setenv("PIP_INDEX_URL", srv.url + "/simple/")
        return srv, wheel, wanted

    yield make
    for srv in servers:
        srv.close()


def test_locate_picks_the_highest_build_tag_x86_64(served):
    srv, wheel, _ = served()
    remote = L.locate("0.9.1")
    assert remote.filename == WHEEL and remote.url == f"{srv.url}/files/{WHEEL}"
    assert remote.size == wheel.stat().st_size
    assert remote.sha256 == hashlib.sha256(wheel.read_bytes()).hexdigest()
    with pytest.raises(L.NotOnIndex):
        L.locate("0.9.2")


def test_fetch_members_reads_only_what_patchq_needs(served, tmp_path):
    srv, wheel, wanted = served()
    dest = tmp_path / "tree"
    dest.mkdir()
    info = L.fetch_members("0.9.1", dest, lambda n: R._wanted_member(n, "vllm"), R._safe_relpath,
                           max_gap=100_000)  # below a blob's 300 kB: blobs are skipped
    got = {p.relative_to(dest).as_posix(): p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    assert got == wanted  # byte-identical, .so and .json left out
    size = wheel.stat().st_size
    assert info["source"] == "range" and info["files"] == len(wanted) and info["wheel_size"] == size
    assert info["fetched_bytes"] < size / 4  # the 1.2 MB of blobs were not fetched
    ranges = [r for p, r in srv.requests if p.startswith("/files/")]
    assert all(r and r.startswith("bytes=") for r in ranges)
    assert len(ranges) == info["requests"] <= 8  # tail + a few coalesced spans
    assert info["metadata_date"][0] >= 1980


def test_release_tree_by_range_is_what_whole_wheel_extraction_gives(served, tmp_path, monkeypatch):
    srv, wheel, wanted = served()
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "c1"))
    by_range = R.release_tree("0.9.1")
    marker = R.tree_info("0.9.1")
    assert marker["source"] == "range" and Version("0.9.1") in R.cached_releases()
    assert R.cached_wheels() == {}  # no whole wheel was stored
    assert R.build_date("0.9.1") == tuple(marker["metadata_date"])
    # the same release from the whole wheel, in another cache
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "c2"))
    (tmp_path / "c2" / "wheels").mkdir(parents=True)
    (tmp_path / "c2" / "wheels" / WHEEL).write_bytes(wheel.read_bytes())
    by_zip = R.release_tree("0.9.1")
    assert R.tree_info("0.9.1")["source"] == "wheel"

    def files(root):
        return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
                if p.is_file() and not p.name.startswith(".patchq")}

    assert files(by_range) == files(by_zip) == wanted


def test_no_range_support_falls_back_to_the_whole_wheel(served, tmp_path, monkeypatch):
    srv, wheel, wanted = served(ranges=False)
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setattr(R, "_have_pip", lambda: False)  # the pip-less download route
    root = R.release_tree("0.9.1")
    assert R.tree_info("0.9.1")["source"] == "wheel"
    assert (tmp_path / "c" / "wheels" / WHEEL).read_bytes() == wheel.read_bytes()
    extracted = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert extracted - {".patchq-extracted-v1", ".patchq-verified.json"} == set(wanted)


def test_a_member_that_disagrees_with_record_is_refused(served, tmp_path, monkeypatch):
    served(tamper="vllm/pkg1/mod5.py")
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "c"))
    with pytest.raises(R.ReleaseError, match="mod5.py differs from its RECORD sha256"):
        R.release_tree("0.9.1")
    assert not (tmp_path / "c" / "releases" / "0.9.1").exists()
    assert not [p for p in (tmp_path / "c" / "releases").iterdir() if ".tmp-" in p.name]


def test_offline_forbids_the_network(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHQ_OFFLINE", "1")
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "c"))
    with pytest.raises(R.ReleaseError, match="PATCHQ_OFFLINE=1"):
        R.release_tree("0.23.0")
    with pytest.raises(R.ReleaseError, match="PATCHQ_OFFLINE=1"):
        R.wheel_path("0.23.0")


def test_coalesce_and_record_digests():
    assert L.coalesce([(50, 60), (0, 10), (12, 20), (200, 300)], max_gap=5) == [(0, 20), (50, 60), (200, 300)]
    assert L.coalesce([], 5) == []
    digests = L.record_digests(f'a.py,sha256={b64(b"x")},1\n"b,c.py",sha256={b64(b"")},0\nR,,\n'.encode())
    assert digests == {"a.py": hashlib.sha256(b"x").hexdigest(), "b,c.py": hashlib.sha256(b"").hexdigest()}


def test_index_url_from_env_then_pip_config(tmp_path, monkeypatch):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://mirror.example/simple\nextra-index-url = file:///x\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    assert L.index_url() == "https://mirror.example/simple/"
    monkeypatch.setenv("PIP_INDEX_URL", "https://env.example/simple")
    assert L.index_url() == "https://env.example/simple/"
    monkeypatch.setenv("PIP_INDEX_URL", "file:///opt/pypi/simple")  # not http: skipped
    assert L.index_url() == "https://mirror.example/simple/"
    conf.write_text("[global]\nfind-links = /opt/wheels\n")
    assert L.index_url() == L.PYPI_SIMPLE


# -- on a real release from PyPI (the wheel layer) ----------------------------------------------

REAL_CACHE = os.environ.get("PATCHQ_CACHE_DIR") or platformdirs.user_cache_dir("patchq")


@pytest.mark.wheel
def test_range_tree_equals_the_whole_wheel_0_23_0(tmp_path, monkeypatch):
    monkeypatch.setenv("PATCHQ_CACHE_DIR", REAL_CACHE)
    wheel = R.wheel_path("0.23.0")  # the whole wheel (cached once)
    monkeypatch.setenv("PATCHQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATCHQ_PROGRESS", "0")
    root = R.release_tree("0.23.0")
    info = R.tree_info("0.23.0")
    assert info["source"] == "range" and info["wheel"] == wheel.name
    assert info["wheel_size"] == wheel.stat().st_size
    assert info["fetched_bytes"] < info["wheel_size"] / 20 and info["requests"] <= 16
    with zipfile.ZipFile(wheel) as zf:
        want = {i.filename: zf.read(i) for i in zf.infolist()
                if not i.is_dir() and R._wanted_member(i.filename, "vllm")}
        meta = next(i for i in zf.infolist() if i.filename == "vllm-0.23.0.dist-info/METADATA")
    got = {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*")
           if p.is_file() and not p.name.startswith(".patchq")}
    assert len(got) > 1900 and got == want
    assert R.build_date("0.23.0") == meta.date_time
    assert R.cached_wheels() == {}

"""patchq.vllmdist.record on a fake dist-info (stdlib only)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys

from patchq.vllmdist import record


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_site(tmp_path):
    site = tmp_path / "site-packages"
    files = {"vllm/__init__.py": b"x = 1\n", "vllm/a,b.py": b"# comma in the name\n"}
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    dist = site / "vllm-0.23.0.dist-info"
    dist.mkdir()
    (dist / "RECORD").write_text(
        f"vllm/__init__.py,sha256={b64(files['vllm/__init__.py'])},6\n"
        f"\"vllm/a,b.py\",sha256={b64(files['vllm/a,b.py'])},20\n"
        "vllm/md5.py,md5=abc,3\n"
        "vllm-0.23.0.dist-info/RECORD,,\n"
    )
    (site / "vllm-0.22.1.dist-info").mkdir()  # an older leftover: the newest wins
    (site / "vllm_flash_attn-2.0.dist-info").mkdir()  # another project
    return site, files


def test_dist_info_and_version(tmp_path):
    site, _ = make_site(tmp_path)
    assert record.dist_info_name(str(site)) == "vllm-0.23.0.dist-info"
    assert record.version_of("/x/vllm-0.23.0.dist-info") == "0.23.0"
    assert record.dist_info_name(str(tmp_path / "missing")) is None
    assert record.dist_info_name(str(site / "vllm" / "__init__.py")) is None


def test_read_record_hex_sha256_only(tmp_path):
    site, files = make_site(tmp_path)
    got = record.read_record(str(site / "vllm-0.23.0.dist-info"))
    assert got == {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    assert record.read_record(str(site / "vllm-0.23.0.dist-info"), wanted={"vllm/__init__.py"}) == {
        "vllm/__init__.py": hashlib.sha256(files["vllm/__init__.py"]).hexdigest()}


def test_hash_to_hex():
    assert record.hash_to_hex("sha256=" + b64(b"")) == hashlib.sha256(b"").hexdigest()
    assert record.hash_to_hex("md5=abc") is None and record.hash_to_hex("sha256=") is None


def test_stdlib_only():
    code = ("import sys, patchq.vllmdist.record; "
            "print(sorted(m for m in ('libcst', 'typer', 'packaging') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_editable_vllm_is_the_same_answer_for_status_and_apply(tmp_path):
    """An editable install (PEP 660: a dist-info and a .pth, its sources in a checkout):
    status exited 0 naming a vLLM that apply said was not there; both say why now (exit 3)."""
    import pytest

    from patchq.env import status
    from patchq.errors import TargetNotFound
    from patchq.vllmdist import record, sources
    from testing import small_series

    src = small_series.write_tree(tmp_path / "checkout")
    site = tmp_path / "site"
    di = site / "vllm-0.1.0.dist-info"
    di.mkdir(parents=True)
    (di / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.1.0\n\n")
    (di / "RECORD").write_text("__editable__.vllm-0.1.0.pth,,\nvllm-0.1.0.dist-info/RECORD,,\n")
    (di / "direct_url.json").write_text(f'{{"url": "file://{src}", "dir_info": {{"editable": true}}}}')
    (site / "__editable__.vllm-0.1.0.pth").write_text(f"{src}\n")
    why = record.not_here(str(site), di.name)
    assert why.startswith(f"vllm 0.1.0 in {site} is an editable install (its sources are in {src}")
    with pytest.raises(TargetNotFound) as from_status:
        status.collect(str(site), str(tmp_path / "series"), str(tmp_path / "anchors"))
    with pytest.raises(TargetNotFound) as from_apply:
        sources.installed(site)
    assert str(from_status.value) == str(from_apply.value) == why
    (di / "direct_url.json").unlink()
    assert "holds vllm-0.1.0.dist-info but no vllm/ directory" in record.not_here(str(site), di.name)

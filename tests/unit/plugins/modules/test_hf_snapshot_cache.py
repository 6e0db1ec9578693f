"""dgx_spark.glm53.hf_snapshot on caches others left: huggingface_hub 2.4's shared blob store
(built here with the library's own utils/_shared_blobs.py), and the temporary files of a run
that was killed. Run as a real module by ``ansible`` with the real client against the lab hub.

What happened is judged from the hub's request log, the bytes and links on disk and /proc,
never from the module's own figures alone.
"""

import hashlib
import os
import signal
import subprocess
import sys
import sysconfig

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.modules.test_hf_snapshot import (
    BIG, DFLASH, DFLASH_SHA, SMALL, Hub, args_for, assert_complete, gets, read, repo_dir, run_module, served, snapshot)
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.modules import test_hf_snapshot as _snapshot_tests
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import (
    alive, cmdline, descendants, wait_until)

_HOME_FIXTURE = _snapshot_tests.fixture_home  # the fixture `home`: an HF_HOME without a stored token

LFS = "model.safetensors"


@pytest.fixture(scope="module")
def xet_hub(tmp_path_factory):
    """The lab hub announcing its LFS files as Xet files, as the Hub does for Xet-backed repos."""
    hub = Hub(str(tmp_path_factory.mktemp("hub-xet")), repos=[DFLASH], lfs_size=SMALL, xet_headers=True).start()
    yield hub
    hub.stop()


@pytest.fixture(scope="module")
def python_without_xet(tmp_path_factory):
    """This venv's python without hf_xet (as with ``pip install huggingface_hub --no-deps``): the
    client still reads the Xet headers and uses its shared store, but downloads over plain HTTP,
    which the lab hub serves (there is no Xet storage here)."""
    root = tmp_path_factory.mktemp("no-xet")
    site = root / "site"
    site.mkdir()
    packages = sysconfig.get_paths()["purelib"]
    for entry in os.listdir(packages):
        if not entry.startswith("hf_xet") and not entry.endswith(".pth"):
            os.symlink(os.path.join(packages, entry), str(site / entry))
    script = root / "python"
    script.write_text('#!/bin/sh\nPYTHONPATH=%s exec %s -S "$@"\n' % (site, sys.executable))
    script.chmod(0o755)
    probe = subprocess.run([str(script), "-c", "from huggingface_hub.utils._runtime import is_xet_available as x; "
                            "import huggingface_hub; print(huggingface_hub.__version__, x())"],
                           capture_output=True, text=True, check=False)
    assert probe.stdout.split() == ["2.4.0", "False"], probe
    return str(script)


def to_shared_store(cache, hub):
    """Lay out every Xet file of DFLASH as huggingface_hub 2.4 leaves a Xet download, with its
    own function: the bytes in <hub>/blobs/<xx>/<xet hash>, blobs/<etag> a relative link to
    them. The Xet hash is the one the hub announces. Returns {file name: store path}."""
    # pylint: disable=import-outside-toplevel
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.utils._shared_blobs import publish_blob_to_shared_store, shared_blob_path
    hub_dir = os.path.join(str(cache), "hub")
    stores = {}
    for name, data in sorted(served(hub, DFLASH).items()):
        meta = get_hf_file_metadata(hf_hub_url(DFLASH, name, revision=DFLASH_SHA, endpoint=hub.url))
        if meta.xet_file_data is None:
            continue
        blob = os.path.join(repo_dir(cache, DFLASH), "blobs", meta.etag)
        assert publish_blob_to_shared_store(blob_path=blob, xet_hash=meta.xet_file_data.file_hash,
                                            cache_dir=hub_dir, expected_size=len(data))
        stores[name] = str(shared_blob_path(hub_dir, meta.xet_file_data.file_hash))
        assert os.path.islink(blob) and os.path.realpath(blob) == stores[name]
    return stores


def flip_a_byte(path, offset):
    """Same size, other bytes; the file's mode (the store's are read-only) and time kept."""
    info = os.stat(path)
    os.chmod(path, 0o600)
    with open(path, "r+b") as handle:
        handle.seek(offset)
        byte = handle.read(1)
        handle.seek(offset)
        handle.write(bytes([byte[0] ^ 0xFF]))
    os.chmod(path, info.st_mode & 0o7777)
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))


def test_a_corrupt_file_of_the_shared_store_is_repaired_by_content(xet_hub, tmp_path, home, python_without_xet):
    xet_hub.reset()
    cache = tmp_path / "cache"
    rc, result, _text = run_module(args_for(xet_hub, cache, verify="sha256"), home, python=python_without_xet)
    assert rc == 0, result
    stores = to_shared_store(cache, xet_hub)
    assert list(stores) == [LFS]
    flip_a_byte(stores[LFS], SMALL // 2)
    corrupt = read(stores[LFS])

    xet_hub.reset()
    rc, result, _text = run_module(args_for(xet_hub, cache, verify="sha256"), home, python=python_without_xet)
    assert rc == 0, result
    assert (result["verified"], result["repaired"], result["downloaded_bytes"]) == (True, [LFS], SMALL)
    assert gets(xet_hub) == [LFS]
    assert_complete(cache, xet_hub, DFLASH, DFLASH_SHA)
    blob = os.path.realpath(os.path.join(snapshot(cache, DFLASH, DFLASH_SHA), LFS))
    assert os.path.dirname(blob) == os.path.join(repo_dir(cache, DFLASH), "blobs"), blob  # the repo's own file
    # The store file is left to the other repos that may link it, and named.
    assert read(stores[LFS]) == corrupt
    assert any(stores[LFS] in warning for warning in result.get("warnings", [])), result

    xet_hub.reset()
    rc, again, _text = run_module(args_for(xet_hub, cache, verify="sha256"), home, python=python_without_xet)
    assert rc == 0 and again["changed"] is False and again["repaired"] == [], again
    assert xet_hub.requests() == []


def test_a_snapshot_in_the_shared_layout_verifies_offline(xet_hub, tmp_path, home, python_without_xet):
    xet_hub.reset()
    cache = tmp_path / "cache"
    assert run_module(args_for(xet_hub, cache), home, python=python_without_xet)[0] == 0
    to_shared_store(cache, xet_hub)
    rc, result, _text = run_module(args_for(xet_hub, cache, offline=True, verify="sha256"), home)
    assert rc == 0 and result["verified"] is True and result["changed"] is False, result


def test_a_killed_run_leaves_partial_files_that_the_rerun_removes(tmp_path, home):
    # Its own hub, slow, so the run is killed in the middle of the 12 MiB file, after the client
    # wrote its first 10 MiB piece.
    hub = Hub(str(tmp_path / "hub"), repos=[DFLASH], lfs_size=BIG).start()
    cache = tmp_path / "cache"
    blobs = os.path.join(repo_dir(cache, DFLASH), "blobs")
    etag = hashlib.sha256(served(hub, DFLASH)[LFS]).hexdigest()
    try:
        hub.set_faults({"rate_bps": 4 << 20})
        proc = run_module(args_for(hub, cache), home, background=True)

        def partial():
            names = os.listdir(blobs) if os.path.isdir(blobs) else []
            return [n for n in names if n.startswith(etag) and n.endswith(".incomplete")
                    and os.path.getsize(os.path.join(blobs, n)) >= 10 << 20]
        left = wait_until(partial, 60)
        assert left, "no partial file appeared"
        module = [pid for pid in descendants(proc.pid) if "python" in os.path.basename((cmdline(pid) or [""])[0])
                  and cmdline(pid)[-1].endswith("AnsiballZ_hf_snapshot.py")]
        assert len(module) == 1, [cmdline(pid) for pid in descendants(proc.pid)]
        # What Ansible's async limit does.
        os.kill(module[0], signal.SIGKILL)
        proc.communicate(timeout=60)
        assert wait_until(lambda: not alive(module[0]), 10)
        size = os.path.getsize(os.path.join(blobs, left[0]))
        assert size > 0 and os.path.exists(os.path.join(blobs, left[0]))  # what the kill leaves

        # A partial file someone still writes is kept.
        busy = os.path.join(blobs, "f" * 64 + ".0123abcd.incomplete")
        with open(busy, "wb") as handle:
            handle.write(b"x" * 1000)
        writer = subprocess.Popen(["sleep", "60"], stdout=open(busy, "ab"))  # pylint: disable=consider-using-with
        try:
            rc, checked, _text = run_module(args_for(hub, cache), home, check=True)
            assert rc == 0 and checked["removed_partials"] == left and checked["removed_partial_bytes"] == size
            assert os.path.exists(os.path.join(blobs, left[0]))  # check mode removes nothing

            hub.set_faults({"rate_bps": None})
            rc, result, _text = run_module(args_for(hub, cache), home)
        finally:
            writer.kill()
            writer.wait()
        assert rc == 0 and result["verified"] is True, result
        assert (result["removed_partials"], result["removed_partial_bytes"]) == (left, size)
        assert sorted(n for n in os.listdir(blobs) if n.endswith(".incomplete")) == [os.path.basename(busy)]
        assert_complete(cache, hub, DFLASH, DFLASH_SHA)
    finally:
        hub.stop()

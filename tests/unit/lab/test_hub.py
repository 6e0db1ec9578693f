"""The lab hub (lab/hub/hub.py) driven by the real huggingface_hub client on 127.0.0.1.

Checks use only the client's view (model_info, downloads, the exceptions it raises) and
hashes computed here with hashlib from the downloaded bytes; the hub's own manifest is
never the reference.
"""

import hashlib
import http.client
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from huggingface_hub import HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    EntryNotFoundError,
    GatedRepoError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import OVERDUE

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "lab" / "hub"))

from hub import GATED_TOKEN, Hub  # noqa: E402  pylint: disable=wrong-import-position
import repos as lab_repos  # noqa: E402  pylint: disable=wrong-import-position

TR3 = "brandonmusic/GLM-5.3-Flash-tr3-4bpw"
TR3_SHA = "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"
DFLASH = "incoai/GLM-5.3-Flash-DFlash2"
DFLASH_SHA = "7d74cdd881ed7e32c31175984a67823127b66cfe"
NVFP4 = "LibertAIDAI/GLM-5.3-Flash-NVFP4"
NVFP4_SHA = "9e0d74e3cef17f634e84fb8e2223707e02616290"
GATED = "glm53-lab/gated-model"
SMALL = 256 * 1024  # bytes of every LFS file in the small hub
# huggingface_hub writes what it receives in 10 MiB pieces and resumes from the last whole
# piece, so a resumed Range starts past 0 only when the drop comes after 10 MiB.
BIG = 12 * 1024 * 1024
SHARDS = [f"model-0000{i}-of-00003.safetensors" for i in (1, 2, 3)]


def sha256_of(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def git_blob_sha1(path) -> str:
    data = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def control(hub, path, payload=None):
    """The hub's HTTP control API, as a test in another process uses it."""
    data = None if payload is None else json.dumps(payload).encode()
    req = urllib.request.Request(hub.url + path, data=data, method="GET" if data is None else "POST")
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)


def logged(hub, count, keep):
    """The hub's log entries that ``keep`` accepts, once there are ``count`` of them.

    The hub writes an entry when its handler is done, after the last byte went out, so a
    client may hold the whole answer a moment before the entry exists (seen under load).
    The handler is past its last write by then: the limit only ends a hang.
    """
    deadline = time.monotonic() + 30
    while True:
        found = [r for r in hub.requests() if keep(r)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


def gets(hub, filename, count):
    return logged(hub, count, lambda r: r["method"] == "GET" and r["file"] == filename)


@pytest.fixture(scope="module")
def small_hub(tmp_path_factory):
    hub = Hub(tmp_path_factory.mktemp("hub-small"), lfs_size=SMALL).start()
    yield hub
    hub.stop()


@pytest.fixture(name="hub")
def fixture_hub(small_hub):
    small_hub.reset()
    return small_hub


@pytest.fixture(scope="module")
def big_hub(tmp_path_factory):
    hub = Hub(tmp_path_factory.mktemp("hub-big"), repos=[TR3], lfs_size=BIG).start()
    yield hub
    hub.stop()


def test_model_info_pinned_sha_sizes_and_lfs(hub):
    info = HfApi(endpoint=hub.url, token=False).model_info(TR3, revision=TR3_SHA, files_metadata=True)
    assert info.id == TR3
    assert info.sha == TR3_SHA
    assert info.private is False and not info.gated
    files = {s.rfilename: s for s in info.siblings}
    assert set(files) == {
        ".gitattributes", "config.json", "generation_config.json", "tokenizer.json",
        "tokenizer_config.json", "model.safetensors.index.json", *SHARDS,
    }
    for name in SHARDS:
        assert files[name].size == SMALL
        assert files[name].lfs.size == SMALL
        assert len(files[name].lfs.sha256) == 64
        assert len(files[name].blob_id) == 40
    assert len({files[name].lfs.sha256 for name in SHARDS}) == 3
    assert files["config.json"].lfs is None and files["config.json"].size > 0
    # Without files_metadata the Hub lists names only; `main` resolves to the pinned commit.
    plain = HfApi(endpoint=hub.url, token=False).model_info(TR3, revision="main")
    assert plain.sha == TR3_SHA
    assert {s.rfilename for s in plain.siblings} == set(files)
    assert all(s.size is None and s.lfs is None for s in plain.siblings)


def test_hf_hub_download_matches_advertised_hashes(hub, tmp_path):
    info = HfApi(endpoint=hub.url, token=False).model_info(DFLASH, revision=DFLASH_SHA, files_metadata=True)
    files = {s.rfilename: s for s in info.siblings}
    weights = hf_hub_download(DFLASH, "model.safetensors", revision=DFLASH_SHA, endpoint=hub.url,
                              cache_dir=tmp_path, token=False)
    assert Path(weights).stat().st_size == files["model.safetensors"].lfs.size == SMALL
    assert sha256_of(weights) == files["model.safetensors"].lfs.sha256
    assert f"snapshots/{DFLASH_SHA}/model.safetensors" in weights
    license_file = hf_hub_download(DFLASH, "LICENSE", revision=DFLASH_SHA, endpoint=hub.url,
                                   cache_dir=tmp_path, token=False)
    assert git_blob_sha1(license_file) == files["LICENSE"].blob_id
    assert "CC BY-NC-ND 4.0" in Path(license_file).read_text()


def test_snapshot_download_whole_repo(hub, tmp_path):
    info = HfApi(endpoint=hub.url, token=False).model_info(NVFP4, revision=NVFP4_SHA, files_metadata=True)
    folder = Path(snapshot_download(NVFP4, revision=NVFP4_SHA, endpoint=hub.url, cache_dir=tmp_path, token=False))
    assert folder.name == NVFP4_SHA
    assert sorted(p.name for p in folder.iterdir()) == sorted(s.rfilename for s in info.siblings)
    for sib in info.siblings:
        if sib.lfs:
            assert sha256_of(folder / sib.rfilename) == sib.lfs.sha256
        else:
            assert git_blob_sha1(folder / sib.rfilename) == sib.blob_id
    index = json.loads((folder / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
    # snapshot_download lists the tree, then fetches every file once (HEAD + GET).
    assert any(r["path"].startswith(f"/api/models/{NVFP4}/tree/{NVFP4_SHA}") for r in hub.requests())
    assert len(logged(hub, len(info.siblings), lambda r: r["method"] == "GET" and r["file"])) == len(info.siblings)


def test_drop_mid_file_client_resumes_with_range(big_hub, tmp_path):
    big_hub.reset()
    name = SHARDS[1]
    cut = 11 * 1024 * 1024
    # Set over HTTP, as a test in another process (or the lab) would.
    state = control(big_hub, "/_lab/faults", {"drop": {name: {"after_bytes": cut, "times": 1}}})
    assert state["drop"][name]["after_bytes"] == cut
    path = hf_hub_download(TR3, name, revision=TR3_SHA, endpoint=big_hub.url, cache_dir=tmp_path, token=False)
    advertised = HfApi(endpoint=big_hub.url, token=False).model_info(TR3, revision=TR3_SHA, files_metadata=True)
    assert sha256_of(path) == next(s.lfs.sha256 for s in advertised.siblings if s.rfilename == name)
    first, resumed = gets(big_hub, name, 2)
    assert (first["status"], first["bytes_sent"], first["complete"]) == (200, cut, False)
    assert resumed["status"] == 206 and resumed["complete"] is True
    start = int(resumed["range"].split("=")[1].split("-")[0])
    assert 0 < start <= cut
    assert resumed["bytes_sent"] == BIG - start


def test_reset_drop_fails_first_call_second_completes(hub, tmp_path):
    name = "model.safetensors"
    hub.set_faults({"drop": {f"{DFLASH}/{name}": {"after_bytes": 1000, "times": 1, "reset": True}}})
    with pytest.raises(Exception, match="reset"):
        hf_hub_download(DFLASH, name, revision=DFLASH_SHA, endpoint=hub.url, cache_dir=tmp_path, token=False)
    path = hf_hub_download(DFLASH, name, revision=DFLASH_SHA, endpoint=hub.url, cache_dir=tmp_path, token=False)
    assert Path(path).stat().st_size == SMALL
    assert [(r["bytes_sent"], r["complete"]) for r in gets(hub, name, 2)] == [(1000, False), (SMALL, True)]


def test_drop_every_time_and_ranges_over_raw_http(hub):
    name = "model.safetensors"
    url_path = f"/{DFLASH}/resolve/{DFLASH_SHA}/{name}"
    hub.set_faults({"drop": {name: {"after_bytes": 5000, "times": None}}})
    host, port = hub.url.split("//")[1].split(":")
    for headers in ({}, {"Range": "bytes=0-"}):
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", url_path, headers=headers)
        resp = conn.getresponse()
        with pytest.raises(http.client.IncompleteRead):
            resp.read()
        conn.close()
    # Past the cut point every response is cut at once: the file never completes.
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", url_path, headers={"Range": "bytes=6000-"})
    resp = conn.getresponse()
    assert resp.status == 206
    with pytest.raises(http.client.IncompleteRead):
        resp.read()
    conn.close()
    control(hub, "/_lab/reset", {})
    assert control(hub, "/_lab/faults") == {"drop": {}, "rate_bps": None}

    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("HEAD", url_path)
    head = conn.getresponse()
    head.read()
    assert head.status == 200
    assert head.getheader("X-Repo-Commit") == DFLASH_SHA
    assert head.getheader("Accept-Ranges") == "bytes"
    assert head.getheader("X-Linked-Size") == head.getheader("Content-Length") == str(SMALL)
    assert len(head.getheader("X-Linked-Etag").strip('"')) == 64
    conn.request("GET", url_path, headers={"Range": "bytes=100-199"})
    part = conn.getresponse()
    body = part.read()
    assert (part.status, len(body), part.getheader("Content-Range")) == (206, 100, f"bytes 100-199/{SMALL}")
    conn.request("GET", url_path, headers={"Range": f"bytes={SMALL}-"})
    beyond = conn.getresponse()
    beyond.read()
    assert (beyond.status, beyond.getheader("Content-Range")) == (416, f"bytes */{SMALL}")
    conn.close()
    entry = logged(hub, 1, lambda r: r["status"] == 416)[-1]  # the last request: Range beyond the end
    assert entry == hub.requests()[-1]
    assert set(entry) == {"ts", "client", "method", "path", "repo", "revision", "file", "status", "range",
                          "bytes_sent", "complete"}
    assert (entry["client"], entry["repo"], entry["revision"], entry["file"]) == ("127.0.0.1", DFLASH, DFLASH_SHA, name)


def test_rate_limit_is_shared_by_parallel_downloads(hub, tmp_path):
    rate = 256 * 1024  # bytes/s: the two 256 KiB shards together need about 2 s
    hub.set_faults({"rate_bps": rate})
    errors = []

    def fetch(name):
        try:
            hf_hub_download(TR3, name, revision=TR3_SHA, endpoint=hub.url, cache_dir=tmp_path / name, token=False)
        except Exception as exc:  # pylint: disable=broad-except
            errors.append(exc)

    threads = [threading.Thread(target=fetch, args=(name,)) for name in SHARDS[:2]]
    t0 = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    elapsed = time.monotonic() - t0
    assert not errors
    expected = 2 * SMALL / rate
    # A limit per connection would finish both in about half the time: the lower bound is the
    # test. The upper one only says the limit is the one asked for, not a fraction of it; the
    # client's own requests and a loaded machine are in the room up to OVERDUE times.
    assert 0.7 * expected <= elapsed <= OVERDUE * expected, f"{elapsed:.2f}s for {expected:.2f}s of data"
    windows = [(r["ts"], r["bytes_sent"]) for r in logged(hub, 2, lambda r: r["method"] == "GET")]
    assert [b for _ts, b in windows] == [SMALL, SMALL]


def test_errors_raise_the_client_exceptions(hub, tmp_path):
    api = HfApi(endpoint=hub.url, token=False)

    def download(repo_id, filename, revision, token=False):
        return hf_hub_download(repo_id, filename, revision=revision, endpoint=hub.url, cache_dir=tmp_path, token=token)

    with pytest.raises(RepositoryNotFoundError):
        download("glm53-lab/no-such-repo", "config.json", TR3_SHA)
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("glm53-lab/no-such-repo", revision=TR3_SHA)
    with pytest.raises(RevisionNotFoundError):
        download(TR3, "config.json", "0" * 40)
    with pytest.raises(RevisionNotFoundError):
        api.model_info(TR3, revision="0" * 40, files_metadata=True)
    with pytest.raises(EntryNotFoundError):
        download(TR3, "no-such-file.json", TR3_SHA)
    gated_sha = HfApi(endpoint=hub.url, token=False).model_info(GATED).sha
    with pytest.raises(GatedRepoError) as no_token:
        download(GATED, "model.safetensors", gated_sha)
    assert no_token.value.response.status_code == 401
    with pytest.raises(GatedRepoError) as wrong_token:
        download(GATED, "model.safetensors", gated_sha, token="hf_not_the_lab_token")
    assert wrong_token.value.response.status_code == 403
    with pytest.raises(GatedRepoError):
        snapshot_download(GATED, revision=gated_sha, endpoint=hub.url, cache_dir=tmp_path, token=False)


def test_gated_download_with_token_and_token_never_logged(hub, tmp_path):
    info = HfApi(endpoint=hub.url, token=False).model_info(GATED, files_metadata=True)
    assert info.gated == "manual"
    folder = Path(snapshot_download(GATED, revision=info.sha, endpoint=hub.url, cache_dir=tmp_path, token=GATED_TOKEN))
    weights = next(s for s in info.siblings if s.lfs)
    assert sha256_of(folder / weights.rfilename) == weights.lfs.sha256
    with pytest.raises(GatedRepoError):
        hf_hub_download(GATED, "config.json", revision=info.sha, endpoint=hub.url, cache_dir=tmp_path / "other",
                        token="hf_some_other_secret_token")
    lines = (hub.root / "requests.jsonl").read_text().splitlines()
    assert any(json.loads(line)["file"] == weights.rfilename for line in lines)
    over_http = json.dumps(control(hub, "/_lab/requests"))
    for text in lines + [over_http]:
        assert GATED_TOKEN not in text
        assert "hf_some_other_secret_token" not in text
        assert "Bearer" not in text


def test_control_api_rejects_bad_faults(hub):
    with pytest.raises(urllib.error.HTTPError) as bad:
        control(hub, "/_lab/faults", {"drop": {"x": {"after_bytes": -1}}})
    assert bad.value.code == 400
    with pytest.raises(urllib.error.HTTPError):
        control(hub, "/_lab/faults", {"rate": 5})
    status = control(hub, "/_lab/status")
    assert status["repos"][TR3] == TR3_SHA and status["repos"][GATED]


def test_repos_regenerate_only_what_is_missing_or_wrong(tmp_path):
    spec = lab_repos.catalog(lfs_size=64 * 1024)[DFLASH]
    first, written = lab_repos.ensure_repo(tmp_path, spec)
    assert sorted(written) == sorted(f.name for f in spec.files)
    weights = first.files["model.safetensors"].path
    digest = sha256_of(weights)
    again, written = lab_repos.ensure_repo(tmp_path, spec)
    assert written == []
    with open(weights, "r+b") as fh:
        fh.truncate(1000)
    (first.files["config.json"].path).write_text("{}")
    repaired, written = lab_repos.ensure_repo(tmp_path, spec)
    assert sorted(written) == ["config.json", "model.safetensors"]
    assert sha256_of(weights) == digest == repaired.files["model.safetensors"].sha256 == again.files["model.safetensors"].sha256

"""dgx_spark.glm53.hf_snapshot run as a real module by ``ansible`` (ad hoc, local), with the
real huggingface_hub client, against the lab hub (lab/hub/hub.py) serving the pinned repos
with small stand-in files on 127.0.0.1.

What the module did is judged from the hub's request log and from the bytes on disk compared
with the files the hub serves (hashlib here), never from the module's own figures alone.
Set GLM53_HUB_DIR to use a lab hub from another checkout.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest
import yaml

from ansible_collections.dgx_spark.glm53.plugins.modules import hf_snapshot
from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
HUB_DIR = os.environ.get("GLM53_HUB_DIR") or os.path.join(REPO, "lab", "hub")
if not os.path.exists(os.path.join(HUB_DIR, "hub.py")):
    raise RuntimeError("no lab hub at %s (lab/hub/hub.py): set GLM53_HUB_DIR to a checkout's lab/hub" % HUB_DIR)
sys.path.insert(0, HUB_DIR)

from hub import GATED_TOKEN, Hub  # noqa: E402  pylint: disable=wrong-import-position,import-error

BIN = os.path.dirname(sys.executable)
# The module needs huggingface_hub: the interpreter of this venv has it.
CLIENT_PYTHON = sys.executable
MODULE = "dgx_spark.glm53.hf_snapshot"
# Keys ansible-core adds to every module result, and to any result with an existing `path`
# (its file attributes); not the module's to document.
ANSIBLE_KEYS = {"_ansible_no_log", "action", "invocation", "changed", "failed", "warnings", "deprecations", "msg",
                "state", "mode", "owner", "group", "uid", "gid", "size", "secontext"}

TR3 = "brandonmusic/GLM-5.3-Flash-tr3-4bpw"
TR3_SHA = "5ab363a8dcf6405955fd5f99671e01a1c9fb124b"
DFLASH = "incoai/GLM-5.3-Flash-DFlash2"
DFLASH_SHA = "7d74cdd881ed7e32c31175984a67823127b66cfe"
GATED = "glm53-lab/gated-model"
GATED_SHA = "50ea7830a2158ed664558a85c58dc30f916237ad"
SMALL = 256 * 1024
# huggingface_hub writes what it receives in 10 MiB pieces and resumes after the last whole
# one, so a Range past 0 needs a drop after 10 MiB.
BIG = 12 * 1024 * 1024
SHARD = "model-00002-of-00003.safetensors"


@pytest.fixture(scope="module")
def small_hub(tmp_path_factory):
    hub = Hub(str(tmp_path_factory.mktemp("hub-small")), lfs_size=SMALL).start()
    yield hub
    hub.stop()


@pytest.fixture(name="hub")
def fixture_hub(small_hub):
    small_hub.reset()
    return small_hub


@pytest.fixture(scope="module")
def big_hub(tmp_path_factory):
    hub = Hub(str(tmp_path_factory.mktemp("hub-big")), repos=[DFLASH], lfs_size=BIG).start()
    yield hub
    hub.stop()


@pytest.fixture(name="bare_python", scope="module")
def fixture_bare_python(tmp_path_factory):
    """A Python without huggingface_hub, as on a node before the hf_weights role made its venv:
    a fresh venv of this interpreter (no pip, no site-packages), so any machine has one."""
    home = tmp_path_factory.mktemp("bare-python")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--clear", str(home)], check=True,
                   capture_output=True, text=True)
    python = str(home / "bin" / "python")
    probe = subprocess.run([python, "-c", "import huggingface_hub"], capture_output=True, text=True, check=False)
    assert probe.returncode == 1 and "No module named 'huggingface_hub'" in probe.stderr, probe.stderr
    return python


@pytest.fixture(name="home")
def fixture_home(tmp_path):
    """An HF_HOME with no stored token, so only the token a test passes is used."""
    path = tmp_path / "hf-home"
    path.mkdir()
    return str(path)


def run_module(args, home, check=False, python=CLIENT_PYTHON, background=False):
    """Run the module through ansible with the JSON callback: (exit code, the host's result,
    everything ansible printed), or the Popen with ``background``."""
    command = [os.path.join(BIN, "ansible"), "localhost", "-i", "localhost,", "-c", "local",
               "-e", "ansible_python_interpreter=%s" % python, "-m", MODULE, "-a", json.dumps(args)]
    if check:
        command.append("--check")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json", HF_HOME=home)
    for name in ("HF_TOKEN", "HF_ENDPOINT", "HF_HUB_OFFLINE", "HF_HUB_CACHE"):
        env.pop(name, None)
    if background:
        return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc = ansiballz.run(command, cwd=REPO, env=env, timeout=300)
    return parse(proc.returncode, proc.stdout, proc.stderr)


def parse(returncode, stdout, stderr):
    try:
        report = json.loads(stdout)
    except ValueError:
        pytest.fail("ansible printed no JSON (rc %d): %s %s" % (returncode, stdout, stderr))
    return returncode, report["plays"][0]["tasks"][0]["hosts"]["localhost"], stdout + stderr


def args_for(hub, cache, repo_id=DFLASH, revision=DFLASH_SHA, **extra):
    args = {"repo_id": repo_id, "revision": revision, "cache_dir": str(cache), "endpoint": hub.url}
    args.update(extra)
    return args


def served(hub, repo_id):
    """{name: bytes} of the files the hub serves for repo_id."""
    files = hub.repos[repo_id].files
    return dict((name, open(str(f.path), "rb").read()) for name, f in files.items())


def repo_dir(cache, repo_id):
    return os.path.join(str(cache), "hub", "models--" + repo_id.replace("/", "--"))


def snapshot(cache, repo_id, sha):
    return os.path.join(repo_dir(cache, repo_id), "snapshots", sha)


def manifest_path(cache, repo_id, sha):
    return os.path.join(repo_dir(cache, repo_id), ".glm53", sha + ".json")


def read(path):
    with open(path, "rb") as handle:
        return handle.read()


def gets(hub):
    """Names of the files the hub sent (GET on a file), in order."""
    return [r["file"] for r in hub.requests() if r["method"] == "GET" and r["file"]]


def assert_complete(cache, hub, repo_id, sha):
    """Every file the hub serves is in the snapshot with the same bytes, linked into blobs/."""
    snap = snapshot(cache, repo_id, sha)
    for name, data in served(hub, repo_id).items():
        path = os.path.join(snap, name)
        assert os.path.islink(path) and not os.path.isabs(os.readlink(path)), path
        assert read(path) == data, name


def assert_no_traceback(result, text):
    """A user error is the message alone. (The JSON callback shows every failure with
    ``exception: (traceback unavailable)``; a real one would carry the Python traceback.)"""
    assert "Traceback (most recent call last)" not in text and "module_stderr" not in result, text
    assert result.get("exception") in (None, "(traceback unavailable)"), result


def returned_always():
    return {name for name, spec in yaml.safe_load(hf_snapshot.RETURN).items() if spec["returned"] == "always"}


# ------------------------------------------------------------------------ download


def test_fresh_download_is_verified_and_the_rerun_downloads_nothing(hub, tmp_path, home):
    cache = tmp_path / "cache"
    progress = tmp_path / "progress.json"
    rc, result, _text = run_module(args_for(hub, cache, repo_id=TR3, revision=TR3_SHA, verify="sha256",
                                            progress_file=str(progress)), home)
    assert rc == 0, result
    files = served(hub, TR3)
    total = sum(len(data) for data in files.values())
    assert returned_always() <= set(result) and set(result) - ANSIBLE_KEYS <= returned_always(), result
    assert (result["changed"], result["verified"], result["files"], result["bytes"]) == (True, True, len(files), total)
    assert (result["downloaded_bytes"], result["missing_bytes"]) == (total, total)
    assert sorted(result["missing"]) == sorted(files) and result["repaired"] == []
    assert result["path"] == snapshot(cache, TR3, TR3_SHA)
    assert_complete(cache, hub, TR3, TR3_SHA)
    assert sorted(gets(hub)) == sorted(files)

    # The manifest, against hashes taken here from what the hub serves.
    assert result["manifest"] == manifest_path(cache, TR3, TR3_SHA)
    with open(result["manifest"]) as handle:
        manifest = json.load(handle)
    assert (manifest["schema"], manifest["repo_id"], manifest["revision"], manifest["bytes"]) == (1, TR3, TR3_SHA, total)
    assert (manifest["allow_patterns"], manifest["ignore_patterns"], manifest["verified_with"]) == (None, None, "sha256")
    for row in manifest["files"]:
        data = files[row["name"]]
        assert row["size"] == len(data)
        assert row["sha256"] == (hashlib.sha256(data).hexdigest() if row["name"].endswith(".safetensors") else None)
        assert row["lfs"] is row["name"].endswith(".safetensors")
    with open(str(progress)) as handle:
        last = json.load(handle)
    assert (last["phase"], last["bytes_done"], last["bytes_total"]) == ("done", total, total)
    assert last["files_done"] == len(files)

    # huggingface_hub's own cache scan sees a clean repo (the manifest is outside snapshots/).
    from huggingface_hub import scan_cache_dir  # pylint: disable=import-outside-toplevel
    scan = scan_cache_dir(str(cache / "hub"))
    assert scan.warnings == []
    assert [(r.repo_id, [rev.commit_hash for rev in r.revisions]) for r in scan.repos] == [(TR3, [TR3_SHA])]

    hub.reset()
    rc, again, _text = run_module(args_for(hub, cache, repo_id=TR3, revision=TR3_SHA, verify="sha256"), home)
    assert rc == 0, again
    assert (again["changed"], again["verified"], again["missing"], again["downloaded_bytes"]) == (False, True, [], 0)
    assert hub.requests() == []  # no network at all


def test_patterns_select_what_is_fetched(hub, tmp_path, home):
    cache = tmp_path / "cache"
    rc, result, _text = run_module(args_for(hub, cache, allow_patterns=["*.json", "*.safetensors"],
                                            ignore_patterns=["config.json"]), home)
    assert rc == 0, result
    assert sorted(gets(hub)) == ["model.safetensors"] and result["files"] == 1
    assert sorted(os.listdir(snapshot(cache, DFLASH, DFLASH_SHA))) == ["model.safetensors"]
    # Other patterns are another selection: listed on the hub again, the rest fetched.
    hub.reset()
    rc, result, _text = run_module(args_for(hub, cache), home)
    assert rc == 0 and result["files"] == 5, result
    assert sorted(gets(hub)) == [".gitattributes", "LICENSE", "README.md", "config.json"]
    assert result["missing"] == [".gitattributes", "LICENSE", "README.md", "config.json"]


def test_check_mode_fetches_nothing(hub, tmp_path, home):
    cache = tmp_path / "cache"
    rc, result, _text = run_module(args_for(hub, cache, progress_file=str(tmp_path / "p.json")), home, check=True)
    assert rc == 0, result
    files = served(hub, DFLASH)
    assert (result["changed"], result["verified"], result["downloaded_bytes"]) == (True, False, 0)
    assert sorted(result["missing"]) == sorted(files)
    assert result["missing_bytes"] == sum(len(d) for d in files.values())
    assert [r["method"] for r in hub.requests()] == ["GET"] and gets(hub) == []  # the file list only
    assert not os.path.exists(str(cache)) and not os.path.exists(str(tmp_path / "p.json"))

    # With a complete snapshot and its manifest, one truncated file: reported, untouched, no network.
    run_module(args_for(hub, cache), home)
    blob = os.path.realpath(os.path.join(snapshot(cache, DFLASH, DFLASH_SHA), "model.safetensors"))
    os.truncate(blob, 1000)
    hub.reset()
    rc, result, _text = run_module(args_for(hub, cache), home, check=True)
    assert rc == 0, result
    assert (result["changed"], result["missing"], result["repaired"]) == (True, ["model.safetensors"],
                                                                          ["model.safetensors"])
    assert hub.requests() == [] and os.path.getsize(blob) == 1000


# -------------------------------------------------------------------- interruptions


def test_a_connection_dropped_mid_file_is_resumed_with_range(big_hub, tmp_path, home):
    big_hub.reset()
    cache = tmp_path / "cache"
    cut = 11 * 1024 * 1024
    big_hub.set_faults({"drop": {"model.safetensors": {"after_bytes": cut, "times": 1}}})
    rc, result, _text = run_module(args_for(big_hub, cache, verify="sha256"), home)
    assert rc == 0, result
    assert result["verified"] is True
    tries = [r for r in big_hub.requests() if r["method"] == "GET" and r["file"] == "model.safetensors"]
    assert [(t["status"], t["complete"]) for t in tries] == [(200, False), (206, True)]
    start = int(tries[1]["range"].split("=")[1].split("-")[0])
    assert 0 < start <= cut and tries[1]["bytes_sent"] == BIG - start
    assert_complete(cache, big_hub, DFLASH, DFLASH_SHA)


def test_a_reset_connection_fails_the_run_and_the_rerun_fetches_only_the_rest(hub, tmp_path, home):
    cache = tmp_path / "cache"
    hub.set_faults({"drop": {"model.safetensors": {"after_bytes": 100000, "times": 1, "reset": True}}})
    rc, result, text = run_module(args_for(hub, cache), home)
    assert rc != 0 and result["failed"] is True
    assert result["msg"].startswith("fetching 'model.safetensors' of %s@%s from %s was interrupted ("
                                    % (DFLASH, DFLASH_SHA, hub.url)), result["msg"]
    assert "rerun to resume" in result["msg"], result["msg"]
    assert_no_traceback(result, text)
    # Never verified, no manifest, and nothing short in the snapshot or the blobs.
    assert result["verified"] is False and not os.path.exists(manifest_path(cache, DFLASH, DFLASH_SHA))
    snap = snapshot(cache, DFLASH, DFLASH_SHA)
    assert "model.safetensors" not in os.listdir(snap)
    blobs = os.path.join(repo_dir(cache, DFLASH), "blobs")
    assert all(os.path.getsize(os.path.join(blobs, b)) in [len(d) for d in served(hub, DFLASH).values()]
               for b in os.listdir(blobs))

    hub.reset()
    rc, result, _text = run_module(args_for(hub, cache, verify="sha256"), home)
    assert rc == 0 and result["verified"] is True, result
    assert gets(hub) == ["model.safetensors"]
    assert (result["missing"], result["downloaded_bytes"]) == (["model.safetensors"], SMALL)
    assert_complete(cache, hub, DFLASH, DFLASH_SHA)
    assert os.path.exists(manifest_path(cache, DFLASH, DFLASH_SHA))


def test_progress_file_follows_a_slow_fetch(big_hub, tmp_path, home, monkeypatch):
    big_hub.reset()
    rate = 4 * 1024 * 1024
    big_hub.set_faults({"rate_bps": rate})  # 12 MiB in about 3 s
    # The module writes the progress file about once a second. So that one write surely lands
    # between the client's first 10 MiB piece and the end, the hub holds the transfer after
    # 11 MiB until the test has read such a record (the guard only ends a hang).
    sent, release = [0], threading.Event()
    take = big_hub.bucket.take

    def held(nbytes):
        if sent[0] >= 11 * 1024 * 1024:
            release.wait(60)
        sent[0] += nbytes
        take(nbytes)

    monkeypatch.setattr(big_hub.bucket, "take", held)
    cache = tmp_path / "cache"
    progress = str(tmp_path / "progress.json")
    proc = run_module(args_for(big_hub, cache, progress_file=progress), home, background=True)
    seen = []
    while proc.poll() is None:
        try:
            with open(progress) as handle:
                seen.append(json.load(handle))
        except (IOError, ValueError):
            pass
        else:
            if seen[-1]["phase"] == "fetching" and 10 * 1024 * 1024 <= seen[-1]["bytes_done"] < seen[-1]["bytes_total"]:
                release.set()
        time.sleep(0.05)
    release.set()
    rc, result, _text = parse(proc.returncode, proc.stdout.read(), proc.stderr.read())
    assert rc == 0, result
    fetching = [s for s in seen if s["phase"] == "fetching"]
    assert fetching and all(s["bytes_total"] == result["bytes"] for s in fetching), seen
    # huggingface_hub writes what it receives in 10 MiB pieces: the first piece of the 12 MiB
    # file shows on disk before the file is complete.
    middle = [s for s in fetching if 10 * 1024 * 1024 <= s["bytes_done"] < s["bytes_total"]]
    assert middle, fetching
    # Never faster than the hub sends; the first sample is taken before the transfer starts.
    assert all(rate / 4 < s["rate_bps"] <= rate * 1.05 and s["eta_s"] > 0 for s in middle), middle
    with open(progress) as handle:
        last = json.load(handle)
    assert (last["phase"], last["bytes_done"], last["files_done"]) == ("done", result["bytes"], result["files"])


def test_timeout_bounds_each_request(tmp_path, home):
    # Its own hub: the stalled sends keep their handler threads asleep after the client gives up.
    hub = Hub(str(tmp_path / "hub"), repos=[DFLASH], lfs_size=SMALL).start()
    try:
        hub.set_faults({"rate_bps": 100})  # config.json (441 bytes) takes 4.4 s, under the client's default 10 s
        started = time.monotonic()
        rc, result, text = run_module(args_for(hub, tmp_path / "cache", allow_patterns=["config.json"], timeout=1),
                                      home)
        took = time.monotonic() - started
    finally:
        hub.stop()
    assert rc != 0
    assert result["msg"].startswith("fetching 'config.json' of %s@%s from %s was interrupted (" % (
        DFLASH, DFLASH_SHA, hub.url)), result["msg"]
    assert "; no answer within the timeout of 1 s): rerun to resume" in result["msg"], result["msg"]
    assert took < 40, took
    assert_no_traceback(result, text)


# ------------------------------------------------------------------------- repairs


def test_a_truncated_blob_is_repaired(hub, tmp_path, home):
    cache = tmp_path / "cache"
    assert run_module(args_for(hub, cache), home)[0] == 0
    path = os.path.join(snapshot(cache, DFLASH, DFLASH_SHA), "model.safetensors")
    os.truncate(os.path.realpath(path), SMALL // 2)
    hub.reset()
    rc, result, _text = run_module(args_for(hub, cache), home)
    assert rc == 0, result
    assert (result["changed"], result["verified"], result["repaired"], result["missing"]) == (
        True, True, ["model.safetensors"], ["model.safetensors"])
    assert result["downloaded_bytes"] == SMALL and gets(hub) == ["model.safetensors"]
    assert_complete(cache, hub, DFLASH, DFLASH_SHA)


def test_flipped_bytes_are_found_by_sha256_and_repaired(hub, tmp_path, home):
    cache = tmp_path / "cache"
    assert run_module(args_for(hub, cache), home)[0] == 0
    snap = snapshot(cache, DFLASH, DFLASH_SHA)
    for name, offset in (("model.safetensors", SMALL // 2), ("config.json", 10)):
        with open(os.path.realpath(os.path.join(snap, name)), "r+b") as handle:
            handle.seek(offset)
            byte = handle.read(1)
            handle.seek(offset)
            handle.write(bytes([byte[0] ^ 0x01]))
    hub.reset()
    rc, result, _text = run_module(args_for(hub, cache), home)
    assert rc == 0 and result["verified"] is True and result["changed"] is False  # size cannot see it
    assert hub.requests() == []
    rc, result, _text = run_module(args_for(hub, cache, verify="sha256"), home)
    assert rc == 0, result
    assert sorted(result["repaired"]) == ["config.json", "model.safetensors"] and result["verified"] is True
    assert sorted(gets(hub)) == ["config.json", "model.safetensors"]
    assert_complete(cache, hub, DFLASH, DFLASH_SHA)
    with open(manifest_path(cache, DFLASH, DFLASH_SHA)) as handle:
        assert json.load(handle)["verified_with"] == "sha256"


# -------------------------------------------------------------------------- errors


@pytest.mark.parametrize("revision", ["main", TR3_SHA[:39]])
def test_a_revision_that_is_not_a_full_sha_fails_before_any_request(hub, tmp_path, home, revision):
    rc, result, text = run_module(args_for(hub, tmp_path / "cache", repo_id=TR3, revision=revision), home)
    assert rc != 0
    assert result["msg"] == "revision for %s must be a full 40-hex commit sha, found %r" % (TR3, revision)
    assert hub.requests() == [] and not os.path.exists(str(tmp_path / "cache"))
    assert_no_traceback(result, text)


def test_an_unknown_repo_and_an_unknown_revision_say_what_to_check(hub, tmp_path, home):
    rc, result, _text = run_module(args_for(hub, tmp_path / "cache", repo_id="brandonmusic/no-such-model"), home)
    assert rc != 0
    assert result["msg"].startswith("the hub answered RepoNotFound for 'brandonmusic/no-such-model' at revision "
                                    "'%s' (endpoint %s): check hf_weights repo_id" % (DFLASH_SHA, hub.url))
    rc, result, _text = run_module(args_for(hub, tmp_path / "cache", revision="0" * 40), home)
    assert rc != 0
    assert result["msg"] == ("the hub answered RevisionNotFound for '%s' at revision '%s' (endpoint %s): check "
                             "hf_weights revision (a commit of that repo)" % (DFLASH, "0" * 40, hub.url))


def test_a_gated_repo_needs_a_token_and_the_token_is_never_shown(hub, tmp_path, home):
    cache = tmp_path / "cache"
    rc, result, _text = run_module(args_for(hub, cache, repo_id=GATED, revision=GATED_SHA), home)
    assert rc != 0
    assert result["msg"].startswith("'%s' is gated: accept its terms on the hub and pass a token (hf_weights_token)"
                                    % GATED), result["msg"]

    wrong = "hf_wrong_token_for_the_lab_0000"
    rc, result, text = run_module(args_for(hub, cache, repo_id=GATED, revision=GATED_SHA, token=wrong), home)
    assert rc != 0 and "has no access" in result["msg"], result["msg"]
    assert wrong not in text

    progress = tmp_path / "progress.json"
    rc, result, text = run_module(args_for(hub, cache, repo_id=GATED, revision=GATED_SHA, token=GATED_TOKEN,
                                           progress_file=str(progress)), home)
    assert rc == 0 and result["verified"] is True, result
    assert_complete(cache, hub, GATED, GATED_SHA)
    assert GATED_TOKEN not in text and GATED_TOKEN not in json.dumps(result)
    needle = GATED_TOKEN.encode()
    for where in (str(cache), str(progress)):
        for folder, _dirs, names in os.walk(where) if os.path.isdir(where) else [("", [], [where])]:
            for name in names:
                path = os.path.join(folder, name)
                if os.path.isfile(path):
                    assert needle not in read(path), path
    assert os.listdir(home) == []  # the client stored no token either


def test_no_space_fails_before_fetching_naming_the_figures(hub, tmp_path, home):
    mount = tempfile.mkdtemp(dir=str(tmp_path))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", mount], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        rc, result, _text = run_module(args_for(hub, mount), home)
    finally:
        subprocess.run(["umount", mount], check=True)
    assert rc != 0
    needed = sum(len(d) for d in served(hub, DFLASH).values())
    assert result["msg"] == (
        "no space left for %s@%s under %s: 128.0 KiB (131072 bytes) free, %.1f KiB (%d bytes) still needed: "
        "free space there or set hf_weights cache_dir to a larger disk"
        % (DFLASH, DFLASH_SHA, os.path.join(repo_dir(mount, DFLASH), "blobs"), needed / 1024.0, needed))
    assert gets(hub) == []


def test_a_disk_that_fills_up_mid_fetch_fails_naming_the_figures(hub, tmp_path, home):
    # Free space covers the bytes, but tmpfs rounds each small file up to a 4 KiB page.
    mount = tempfile.mkdtemp(dir=str(tmp_path))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%d" % (SMALL + 4096), "tmpfs", mount],
                      capture_output=True, check=False).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        rc, result, text = run_module(args_for(hub, mount), home)
        leftovers = [n for n in os.listdir(os.path.join(repo_dir(mount, DFLASH), "blobs")) if "incomplete" in n]
        has_manifest = os.path.exists(manifest_path(mount, DFLASH, DFLASH_SHA))
    finally:
        subprocess.run(["umount", mount], check=True)
    assert rc != 0
    assert result["msg"].startswith("no space left for %s@%s under %s: " % (
        DFLASH, DFLASH_SHA, os.path.join(repo_dir(mount, DFLASH), "blobs"))), result["msg"]
    assert "still needed" in result["msg"]
    assert_no_traceback(result, text)
    assert result["verified"] is False and not has_manifest and leftovers == []


def test_a_read_only_cache_fails_naming_it(hub, tmp_path, home):
    mount = tempfile.mkdtemp(dir=str(tmp_path))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", mount], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        rc, result, text = run_module(args_for(hub, mount), home)
    finally:
        subprocess.run(["umount", mount], check=True)
    assert rc != 0
    assert result["msg"].startswith("%s@%s: cannot use the cache under %s: Read-only file system (%s/hub"
                                    % (DFLASH, DFLASH_SHA, mount, mount)), result["msg"]
    assert result["msg"].endswith(": check that this user may write there, or set another cache_dir; "
                                  "5 of 5 files not fetched: .gitattributes, LICENSE, README.md, config.json, "
                                  "model.safetensors"), result["msg"]
    assert_no_traceback(result, text)


def test_without_huggingface_hub_the_interpreter_is_named(hub, tmp_path, home, bare_python):
    rc, result, _text = run_module(args_for(hub, tmp_path / "cache"), home, python=bare_python)
    assert rc != 0
    assert result["msg"].startswith("huggingface_hub is not importable by %s (" % bare_python), result["msg"]
    assert "the hf_weights role creates a virtualenv with it" in result["msg"]
    assert hub.requests() == []


# ------------------------------------------------------------------------- offline


def test_offline_without_a_manifest_fails_with_the_fix(hub, tmp_path, home):
    cache = tmp_path / "cache"
    rc, result, _text = run_module(args_for(hub, cache, offline=True), home)
    assert rc != 0
    assert result["msg"] == ("no verified manifest for %s@%s under %s: download it on this node or copy it from "
                             "the head" % (DFLASH, DFLASH_SHA, repo_dir(cache, DFLASH)))
    assert hub.requests() == []


def test_offline_with_a_copied_snapshot_verifies_without_network(hub, tmp_path, home, bare_python):
    head = tmp_path / "head"
    assert run_module(args_for(hub, head), home)[0] == 0
    # The worker gets the head's cache as an operator copies it (links kept), and no huggingface_hub.
    worker = tmp_path / "worker"
    shutil.copytree(str(head), str(worker), symlinks=True)
    hub.reset()
    rc, result, _text = run_module(args_for(hub, worker, offline=True, verify="sha256"), home, python=bare_python)
    assert rc == 0, result
    assert (result["verified"], result["changed"], result["files"]) == (True, False, len(served(hub, DFLASH)))
    assert hub.requests() == []

    # A file that no longer verifies is listed; nothing is fetched.
    os.truncate(os.path.realpath(os.path.join(snapshot(worker, DFLASH, DFLASH_SHA), "model.safetensors")), 10)
    os.unlink(os.path.join(snapshot(worker, DFLASH, DFLASH_SHA), "LICENSE"))
    rc, result, _text = run_module(args_for(hub, worker, offline=True), home, python=bare_python)
    assert rc != 0
    assert result["msg"] == (
        "offline: 2 of 5 files of %s@%s fail verification under %s: LICENSE (missing), model.safetensors (size 10, "
        "expected %d); copy them from the head or run without offline"
        % (DFLASH, DFLASH_SHA, snapshot(worker, DFLASH, DFLASH_SHA), SMALL))
    assert hub.requests() == []

    # Online, the manifest's list is enough (no listing): the truncated file is fetched again; the
    # intact blob of the unlinked one is linked again by the client without a transfer.
    rc, result, _text = run_module(args_for(hub, worker), home)
    assert rc == 0 and sorted(result["missing"]) == ["LICENSE", "model.safetensors"], result
    assert (result["repaired"], result["downloaded_bytes"]) == (["model.safetensors"], SMALL)
    assert gets(hub) == ["model.safetensors"]
    assert not [r for r in hub.requests() if r["path"].startswith("/api/")]
    assert_complete(worker, hub, DFLASH, DFLASH_SHA)


def test_a_snapshot_copied_as_plain_files_verifies_and_is_repaired(hub, tmp_path, home):
    # `rsync -L` or `cp -rL` from the head turns the links into files: still complete.
    head = tmp_path / "head"
    assert run_module(args_for(hub, head), home)[0] == 0
    worker = tmp_path / "worker"
    shutil.copytree(os.path.join(repo_dir(head, DFLASH), "snapshots"),
                    os.path.join(repo_dir(worker, DFLASH), "snapshots"), symlinks=False)
    shutil.copytree(os.path.join(repo_dir(head, DFLASH), ".glm53"), os.path.join(repo_dir(worker, DFLASH), ".glm53"))
    hub.reset()
    rc, result, _text = run_module(args_for(hub, worker, offline=True, verify="sha256"), home)
    assert rc == 0 and result["verified"] is True, result

    plain = os.path.join(snapshot(worker, DFLASH, DFLASH_SHA), "model.safetensors")
    assert not os.path.islink(plain)
    os.truncate(plain, 100)
    rc, result, _text = run_module(args_for(hub, worker), home)
    assert rc == 0, result
    assert (result["repaired"], result["verified"]) == (["model.safetensors"], True)
    assert gets(hub) == ["model.safetensors"]
    assert read(plain) == served(hub, DFLASH)["model.safetensors"]

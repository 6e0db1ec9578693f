"""The pure parts of hf_mirror: the file set from a manifest on a cache tree, stream balancing,
rsync's argv, and the parsers, fed with output captured from the real rsync here."""

import json
import os
import shlex
import subprocess

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_mirror as hm
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import (
    REVISION,
    folder,
    make_snapshot,
    need_rsync,
)

MIB = 1 << 20


def params(**over):
    base = {"models": [{"repo_id": "org/model", "revision": REVISION}], "streams": 4, "timeout": 60,
            "bwlimit": None, "target": "spark@198.18.1.11", "dest": "~/.cache/huggingface",
            "ssh_options": list(hm.DEFAULT_SSH_OPTIONS), "force": []}
    base.update(over)
    return base


# ------------------------------------------------------------------------------ inputs


@pytest.mark.parametrize("dest, expected", [
    ("~/.cache/huggingface", ".cache/huggingface"),
    ("~/.cache/huggingface/", ".cache/huggingface"),
    ("~", ""),
    ("~/", ""),
    ("/data/hf", "/data/hf"),
    ("/data//hf/", "/data/hf"),
    ("relative/path", None),
    ("~spark/x", None),
    ("~/../etc", None),
    ("", None),
])
def test_remote_dir_makes_tilde_paths_relative_to_the_remote_home(dest, expected):
    assert hm.remote_dir(dest) == expected


def test_destination_is_the_hub_dir_remote_or_local(tmp_path, monkeypatch):
    assert hm.destination("spark@198.18.1.11", "~/.cache/huggingface") == "spark@198.18.1.11:.cache/huggingface/hub/"
    assert hm.destination("spark@198.18.1.11", "~") == "spark@198.18.1.11:hub/"
    assert hm.destination("spark@198.18.1.11", "/srv/hf") == "spark@198.18.1.11:/srv/hf/hub/"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hm.destination("", "~/cache") == str(tmp_path / "cache" / "hub") + "/"
    assert hm.destination("", "/srv/hf/") == "/srv/hf/hub/"


def test_validate_names_every_bad_option():
    errors = hm.validate(params(
        models=[{"repo_id": "org/model", "revision": "main"}, {"repo_id": "../x", "revision": REVISION}],
        streams=17, timeout=0, bwlimit=0, target="-oProxyCommand=sh", dest="cache",
        ssh_options=["-o", ""], force=[{"repo_id": "org/model", "name": "../secret"}]))
    text = "\n".join(errors)
    for expected in ("models[0].revision (org/model) must be a full 40-hex commit sha", "models[1].repo_id",
                     "streams must be between 1 and 16, got 17", "timeout must be a positive",
                     "bwlimit must be at least 1", "target must be user@address", "dest must be an absolute path",
                     "ssh_options[1] must be a non-empty string", "force[0]: file name '../secret'"):
        assert expected in text, text
    assert hm.validate(params()) == []
    assert hm.validate(params(target="", dest="/tmp/x")) == []
    assert hm.validate(params(target="198.18.1.11")) == []


# ----------------------------------------------------------------------------- the plan


def test_plan_lists_blobs_links_and_the_manifest(tmp_path):
    doc = make_snapshot(tmp_path, files={"a.safetensors": b"A" * 1000, "sub/b.json": b"{}\n", "same.bin": b"A" * 1000})
    plan = hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])
    base = folder("org/model")
    blob_a = "%s/blobs/%s" % (base, doc["files"][0]["sha256"])
    assert plan["dirs"] == [base, base + "/blobs"]
    # Two files with the same content share one blob: it is sent once.
    assert plan["blobs"] == {blob_a: 1000, "%s/blobs/%s" % (base, doc["files"][2]["sha256"]): 3}
    assert sorted(plan["links"]) == ["%s/snapshots/%s/%s" % (base, REVISION, name)
                                     for name in ("a.safetensors", "same.bin", "sub/b.json")]
    manifest = "%s/.glm53/%s.json" % (base, REVISION)
    assert plan["manifests"] == {manifest: os.path.getsize(str(tmp_path / "hub" / manifest))}
    assert plan["snapshot_files"] == 3 and plan["forced"] == set() and plan["warnings"] == []
    assert not any("refs" in path for path in list(plan["blobs"]) + plan["links"])


def test_plan_maps_forced_names_to_their_blobs(tmp_path):
    doc = make_snapshot(tmp_path)
    plan = hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}],
                         force=[{"repo_id": "org/model", "name": "model.safetensors"},
                                {"repo_id": "other/repo", "name": "x.bin"}])
    sha = [row["sha256"] for row in doc["files"] if row["name"] == "model.safetensors"][0]
    assert plan["forced"] == {"%s/blobs/%s" % (folder("org/model"), sha)}
    assert plan["warnings"] == ["force: other/repo is not in models; x.bin not re-sent"]
    with pytest.raises(hm.MirrorError, match="force: nope.bin is not a file of the org/model snapshot on the head"):
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}],
                      force=[{"repo_id": "org/model", "name": "nope.bin"}])


def test_plan_without_a_manifest_says_to_run_hf_snapshot(tmp_path):
    make_snapshot(tmp_path, manifest=False)
    with pytest.raises(hm.MirrorError) as info:
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])
    assert str(info.value).startswith("no verified snapshot of org/model@%s on the head" % REVISION)
    assert str(info.value).endswith("run hf_snapshot there first")


def test_plan_refuses_a_manifest_of_another_revision(tmp_path):
    make_snapshot(tmp_path)
    path = tmp_path / "hub" / folder("org/model") / ".glm53" / (REVISION + ".json")
    doc = json.loads(path.read_text())
    doc["revision"] = "f" * 40
    path.write_text(json.dumps(doc))
    with pytest.raises(hm.MirrorError, match=r"is unusable \(it is for org/model@f{40}\): run hf_snapshot there again"):
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])


def test_plan_refuses_a_head_snapshot_that_lost_or_changed_files(tmp_path):
    doc = make_snapshot(tmp_path)
    blobs = tmp_path / "hub" / folder("org/model") / "blobs"
    by_name = dict((row["name"], row["sha256"]) for row in doc["files"])
    (blobs / by_name["config.json"]).unlink()
    with open(str(blobs / by_name["model.safetensors"]), "ab") as handle:
        handle.write(b"x")
    with pytest.raises(hm.MirrorError) as info:
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])
    message = str(info.value)
    assert "config.json is missing" in message
    assert "model.safetensors is %d bytes, the manifest says %d" % (3 * MIB + 1, 3 * MIB) in message
    assert message.endswith("run hf_snapshot there again (it fetches what is missing or wrong)")


def test_plan_refuses_links_out_of_the_blobs_dir(tmp_path):
    make_snapshot(tmp_path)
    outside = tmp_path / "secret"
    outside.write_bytes(b"{}\n")
    link = tmp_path / "hub" / folder("org/model") / "snapshots" / REVISION / "config.json"
    link.unlink()
    link.symlink_to(outside)
    with pytest.raises(hm.MirrorError, match="config.json links to %s, not to a file in" % outside):
        hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])


def test_plan_copies_a_regular_snapshot_file_as_it_is(tmp_path):
    make_snapshot(tmp_path)
    path = tmp_path / "hub" / folder("org/model") / "snapshots" / REVISION / "config.json"
    data = path.read_bytes()
    path.unlink()
    path.write_bytes(data)
    plan = hm.build_plan(str(tmp_path / "hub"), [{"repo_id": "org/model", "revision": REVISION}])
    rel = "%s/snapshots/%s/config.json" % (folder("org/model"), REVISION)
    assert plan["blobs"][rel] == len(data) and rel not in plan["links"]


def test_plan_follows_a_blob_link_only_inside_the_cache(tmp_path):
    doc = make_snapshot(tmp_path)
    hub = tmp_path / "hub"
    by_name = dict((row["name"], row) for row in doc["files"])
    # A blob that links into huggingface_hub's shared store, inside the cache: sent (as its bytes).
    shared = hub / "blobs" / "ab" / ("ab" + "0" * 62)
    shared.parent.mkdir(parents=True)
    blob = hub / folder("org/model") / "blobs" / by_name["model.safetensors"]["sha256"]
    blob.rename(shared)
    blob.symlink_to(os.path.relpath(str(shared), str(blob.parent)))
    plan = hm.build_plan(str(hub), [{"repo_id": "org/model", "revision": REVISION}])
    assert plan["blobs"]["%s/blobs/%s" % (folder("org/model"), blob.name)] == by_name["model.safetensors"]["size"]
    # One that leads out of the cache is refused, naming it.
    outside = tmp_path / "elsewhere"
    outside.write_bytes(b'{"a": 1}\n')
    small = hub / folder("org/model") / "blobs" / by_name["config.json"]["sha256"]
    small.unlink()
    small.symlink_to(str(outside))
    with pytest.raises(hm.MirrorError) as info:
        hm.build_plan(str(hub), [{"repo_id": "org/model", "revision": REVISION}])
    assert "config.json: its blob %s/blobs/%s links to %s, outside the cache %s" % (
        folder("org/model"), small.name, outside, hub) in str(info.value)


# ---------------------------------------------------------------------------- balancing


def test_balance_puts_the_largest_first_on_the_lightest_stream():
    sizes = {"a": 10, "b": 9, "c": 8, "d": 7, "e": 1}
    lists = hm.balance(sizes, 2)
    totals = sorted(sum(sizes[p] for p in paths) for paths in lists)
    assert totals == [17, 18]
    assert sorted(p for paths in lists for p in paths) == sorted(sizes)


def test_balance_never_makes_more_streams_than_files_nor_empty_ones():
    assert hm.balance({"a": 5, "b": 5}, 16) == [["a"], ["b"]]
    assert hm.balance({"x": 0, "y": 0, "z": 0}, 2) == [["x", "z"], ["y"]]
    assert hm.balance({}, 4) == []


def test_balance_evens_out_many_equal_shards():
    sizes = dict(("model-%05d.safetensors" % i, 5 << 30) for i in range(37))
    sizes["config.json"] = 1000
    lists = hm.balance(sizes, 4)
    totals = [sum(sizes[p] for p in paths) for paths in lists]
    assert len(lists) == 4 and max(totals) - min(totals) <= 5 << 30


# ---------------------------------------------------------------------------- rsync argv


def test_rsync_argv_never_compresses_and_goes_to_the_home_relative_dest():
    ssh = hm.ssh_command(hm.DEFAULT_SSH_OPTIONS)
    dest = hm.destination("spark@198.18.1.11", "~/.cache/huggingface")
    argv = hm.rsync_argv("/usr/bin/rsync", "/tmp/l", "/home/spark/.cache/huggingface/hub/", dest, ssh=ssh,
                         ignore_times=True, bwlimit=25000, progress=True)
    assert argv[:5] == ["/usr/bin/rsync", "-a", "--partial", "--inplace", "--mkpath"]
    assert "--files-from=/tmp/l" in argv and "--ignore-times" in argv and "--bwlimit=25000" in argv
    assert "--info=progress2" in argv and "--stats" in argv and "--dry-run" not in argv
    short_flags = [arg for arg in argv if arg.startswith("-") and not arg.startswith("--")]
    assert not any("z" in arg for arg in short_flags) and not any(arg.startswith("--compress") for arg in argv)
    assert argv[argv.index("-e") + 1] == "ssh -o BatchMode=yes -o ConnectTimeout=10"
    assert argv[-2:] == ["/home/spark/.cache/huggingface/hub/", "spark@198.18.1.11:.cache/huggingface/hub/"]
    local = hm.rsync_argv("rsync", "/tmp/l", "/a/hub/", "/b/hub/", dry_run=True)
    assert "-e" not in local and "--dry-run" in local and "--ignore-times" not in local


def test_blob_passes_send_what_links_point_at_and_every_run_has_an_io_timeout():
    argv = hm.rsync_argv("rsync", "/tmp/l", "/a/hub/", "w:hub/", ssh="ssh", copy_links=True, io_timeout=30)
    assert "--copy-links" in argv and "--timeout=30" in argv
    plain = hm.rsync_argv("rsync", "/tmp/l", "/a/hub/", "w:hub/", ssh="ssh", io_timeout=7)
    assert "--copy-links" not in plain and "--timeout=7" in plain


def test_ssh_keepalive_ends_a_silent_session_in_about_the_io_timeout():
    assert hm.keepalive_options(30) == ["-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3"]
    assert hm.keepalive_options(4) == ["-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3"]
    assert hm.keepalive_options(1) == ["-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=3"]
    assert hm.link_address("spark@198.18.1.11") == "198.18.1.11"
    assert hm.link_address("spark@[fd00::11]") == "fd00::11" and hm.link_address("198.18.1.11") == "198.18.1.11"


def test_ssh_command_quotes_options_as_rsync_splits_them():
    options = ["-o", "UserKnownHostsFile=/tmp/known hosts", "-o", "ProxyCommand=none", "-i", "/k/it's"]
    assert shlex.split(hm.ssh_command(options)) == ["ssh"] + options


# ------------------------------------------------------------- parsing real rsync output


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """Output of the real rsync copying a fake cache locally: first run (slowed so progress2 prints
    intermediate records), a rerun, and a dry run into an empty directory."""
    rsync = need_rsync()
    root = tmp_path_factory.mktemp("captured")
    doc = make_snapshot(root, files={"a.safetensors": os.urandom(2 * MIB), "b.safetensors": os.urandom(MIB),
                                     "c.json": b"{}\n"})
    hub = str(root / "hub") + "/"
    plan = hm.build_plan(hub, [{"repo_id": "org/model", "revision": REVISION}])
    listing = root / "list"
    listing.write_text("".join(p + "\n" for p in sorted(plan["blobs"]) + sorted(plan["links"])))
    env = dict(os.environ, LC_ALL="C")

    def run(dest, **kwargs):
        argv = hm.rsync_argv(rsync, str(listing), hub, dest, **kwargs)
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=True).stdout

    dest = str(root / "dest" / "hub") + "/"
    return {"doc": doc, "plan": plan, "first": run(dest, progress=True, bwlimit=6000),
            "rerun": run(dest, progress=True), "dry": run(str(root / "empty" / "hub") + "/", dry_run=True),
            "empty": root / "empty"}


def test_progress2_records_of_a_real_run_count_up_to_the_bytes_sent(captured):
    records = hm.parse_progress2(captured["first"])
    total = captured["doc"]["bytes"]
    assert len(records) >= 3, captured["first"]
    assert [r["bytes"] for r in records] == sorted(r["bytes"] for r in records)
    assert 0 < records[0]["bytes"] < total
    last = records[-1]
    assert last["bytes"] == total and last["percent"] >= 99  # of the list, links included
    # rsync's file list holds the three blobs, the two links and their directories.
    assert last["files"] == 3 and last["to_check"] == 0 and last["total"] >= 5


def test_progress2_of_a_rerun_sends_nothing(captured):
    records = hm.parse_progress2(captured["rerun"])
    assert records and all(r["bytes"] == 0 and r["files"] == 0 for r in records)


def test_stats_and_items_of_a_real_run(captured):
    plan, total = captured["plan"], captured["doc"]["bytes"]
    stats = hm.parse_stats(captured["first"])
    assert stats["transferred_size"] == total and stats["files_transferred"] == 3
    items = hm.parse_items(captured["first"])
    sent = dict((i["name"], i["size"]) for i in items if i["flags"] == ">f+++++++++")
    assert sent == plan["blobs"]
    links = [i["name"] for i in items if i["flags"].startswith("cL+")]
    assert sorted(links) == sorted(plan["links"])
    assert len(hm.changes(items)) == len(plan["blobs"]) + len(plan["links"])
    assert hm.parse_stats(captured["rerun"])["transferred_size"] == 0
    assert hm.changes(hm.parse_items(captured["rerun"])) == []


def test_a_dry_run_lists_what_would_be_sent_and_creates_nothing(captured):
    items = hm.parse_items(captured["dry"])
    assert dict((i["name"], i["size"]) for i in items if i["flags"].startswith(">f")) == captured["plan"]["blobs"]
    assert hm.parse_stats(captured["dry"])["transferred_size"] == captured["doc"]["bytes"]
    assert not captured["empty"].exists()


def test_output_tail_follows_a_growing_file_and_split_records(tmp_path):
    path = tmp_path / "out"
    tail = hm.OutputTail(str(path))
    tail.poll()
    assert (tail.bytes, tail.files) == (0, 0)
    path.write_bytes(b"GLM53-ITEM >f+++++++++ 100 x\n\r      32,768   0%    0.00kB/s    0:00:00 (xfr#0, to-c")
    tail.poll()
    assert (tail.bytes, tail.files) == (0, 0)
    with open(str(path), "ab") as handle:
        handle.write(b"hk=1/2)\r  2,000,000  99%  10.00MB/s    0:00:00 (xfr#1, to-chk=0/2)\r")
    tail.poll()
    assert (tail.bytes, tail.files) == (2000000, 1)


def test_parse_version():
    assert hm.parse_version("rsync  version 3.2.7  protocol version 31\n") == (3, 2, 7)
    assert hm.parse_version("rsync  version v3.4.1  protocol version 32") == (3, 4, 1)
    assert hm.parse_version("nope") is None


# ------------------------------------------------------------------------------ failures


def _fake_rsh(tmp_path, path_dirs):
    """A remote shell for rsync that runs the remote command here, with ``path_dirs`` as PATH:
    the real rsync talks to a real `rsync --server`, or finds none."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "env"):
        os.symlink(subprocess.check_output(["sh", "-c", "command -v " + tool], text=True).strip(), str(bin_dir / tool))
    script = tmp_path / "rsh"
    script.write_text('#!/bin/sh\nwhile [ "$1" = "-o" ] || [ "$1" = "-l" ]; do shift 2; done\nshift\n'
                      'exec env PATH="%s" sh -c "$*"\n' % ":".join([str(bin_dir)] + path_dirs))
    script.chmod(0o755)
    return str(script)


def test_rsync_missing_on_the_worker_is_named(tmp_path):
    rsync = need_rsync()
    make_snapshot(tmp_path / "head")
    listing = tmp_path / "list"
    listing.write_text(folder("org/model") + "\n")
    argv = hm.rsync_argv(rsync, str(listing), str(tmp_path / "head" / "hub") + "/", "spark@worker:cache/hub/",
                         ssh=_fake_rsh(tmp_path, []))
    run = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"), check=False)
    meaning, fix = hm.explain_failure({"rc": run.returncode, "stderr": run.stderr}, "spark@worker")
    assert meaning.startswith("exit %d: " % run.returncode) and run.returncode != 0, run.stderr
    assert fix == "rsync is missing on the worker spark@worker: install rsync (apt install rsync)"


def test_items_of_a_push_to_a_remote_rsync_count_as_sent(tmp_path):
    rsync = need_rsync()
    doc = make_snapshot(tmp_path / "head")
    plan = hm.build_plan(str(tmp_path / "head" / "hub"), [{"repo_id": "org/model", "revision": REVISION}])
    listing = tmp_path / "list"
    listing.write_text("".join(p + "\n" for p in sorted(plan["blobs"])))
    rsh = _fake_rsh(tmp_path, [os.path.dirname(rsync)])
    outputs = []
    for dry_run in (True, False):
        argv = hm.rsync_argv(rsync, str(listing), str(tmp_path / "head" / "hub") + "/",
                             "spark@worker:%s/" % (tmp_path / "worker" / "hub"), ssh=rsh, dry_run=dry_run)
        outputs.append(subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"),
                                      check=True).stdout)
    for output in outputs:
        items = hm.parse_items(output)
        # A push itemizes sent files with "<" (a local copy with ">").
        assert all(item["flags"].startswith("<f") for item in items if item["name"] in plan["blobs"]), items
        assert dict((i["name"], i["size"]) for i in items if hm.sends(i)) == plan["blobs"]
    assert hm.parse_stats(outputs[1])["transferred_size"] == doc["bytes"]


@pytest.mark.parametrize("rc, stderr", [
    (30, "[sender] io timeout after 30 seconds -- exiting\nrsync error: timeout in data send/receive (code 30)"),
    (255, "Timeout, server 198.18.1.11 not responding.\r\nrsync: connection unexpectedly closed (0 bytes)"),
])
def test_a_silent_peer_names_the_worker_and_its_link_address(rc, stderr):
    meaning, fix = hm.explain_failure({"rc": rc, "stderr": stderr}, "spark-worker (spark@198.18.1.11)",
                                      address="198.18.1.11", io_timeout=30)
    assert meaning == "exit %d: %s" % (rc, hm.EXIT_CODES[rc])
    assert fix.startswith("no data moved for 30s: the link to 198.18.1.11 is down or the worker spark-worker "
                          "(spark@198.18.1.11) stopped answering: check the CX7 link on both nodes"), fix


@pytest.mark.parametrize("rc, stderr, expected", [
    (255, "ssh: connect to host 198.18.1.11 port 22: Connection refused\r\nrsync: connection unexpectedly closed",
     "the head cannot ssh to spark@198.18.1.11: check the CX7 link"),
    (255, "spark@198.18.1.11: Permission denied (publickey).", "the worker refused the head's ssh key"),
    (255, "Host key verification failed.", "does not know the worker's host key"),
    (23, 'rsync: [receiver] write failed on "/x": No space left on device (28)',
     "disk under the destination is full (1024 bytes free there now, this copy sends 4096 bytes)"),
    (11, "rsync: mkdir failed: Permission denied (13)", "may not write the destination"),
    (12, "rsync: connection unexpectedly closed (0 bytes received so far) [sender]", "the connection to the worker broke"),
    (1, "rsync: on remote machine: --mkpath: unknown option", "rsync on the worker spark@198.18.1.11 is too old"),
    (14, "rsync: Failed to exec ssh: No such file or directory (2)", "the OpenSSH client is missing on the head"),
])
def test_explain_failure_gives_the_meaning_and_the_fix(rc, stderr, expected):
    meaning, fix = hm.explain_failure({"rc": rc, "stderr": stderr}, "spark@198.18.1.11", free=1024, needed=4096)
    assert meaning == "exit %d: %s" % (rc, hm.EXIT_CODES[rc])
    assert expected in fix, fix


def test_explain_failure_of_a_timeout_and_of_a_missing_head_rsync():
    meaning, fix = hm.explain_failure({"rc": -15, "timed_out": True, "timeout": 30, "stderr": ""}, "w")
    assert meaning == "it did not finish within 30s and was killed" and fix.startswith("rerun to resume")
    meaning, fix = hm.explain_failure({"rc": None, "error": "cannot run rsync: ENOENT", "stderr": ""}, "w")
    assert fix == "rsync is missing on the head: install rsync (apt install rsync)"

"""rsync and ssh's command lines, and the parsers of rsync's output, fed with output captured
from the real rsync here; its failures explained."""

import os
import shlex
import subprocess

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_mirror as hm
from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_mirror_inputs as hi
from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_mirror_rsync as hr
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import (
    REVISION,
    folder,
    make_snapshot,
    need_rsync,
)

MIB = 1 << 20


# ---------------------------------------------------------------------------- rsync argv


def test_rsync_argv_never_compresses_and_goes_to_the_home_relative_dest():
    ssh = hr.ssh_command(hi.DEFAULT_SSH_OPTIONS)
    dest = hi.destination("spark@198.18.1.11", "~/.cache/huggingface")
    argv = hr.rsync_argv("/usr/bin/rsync", "/tmp/l", "/home/spark/.cache/huggingface/hub/", dest, ssh=ssh,
                         ignore_times=True, bwlimit=25000, progress=True)
    assert argv[:5] == ["/usr/bin/rsync", "-a", "--partial", "--inplace", "--mkpath"]
    assert "--files-from=/tmp/l" in argv and "--ignore-times" in argv and "--bwlimit=25000" in argv
    assert "--info=progress2" in argv and "--stats" in argv and "--dry-run" not in argv
    short_flags = [arg for arg in argv if arg.startswith("-") and not arg.startswith("--")]
    assert not any("z" in arg for arg in short_flags) and not any(arg.startswith("--compress") for arg in argv)
    assert argv[argv.index("-e") + 1] == "ssh -o BatchMode=yes -o ConnectTimeout=10"
    assert argv[-2:] == ["/home/spark/.cache/huggingface/hub/", "spark@198.18.1.11:.cache/huggingface/hub/"]
    local = hr.rsync_argv("rsync", "/tmp/l", "/a/hub/", "/b/hub/", dry_run=True)
    assert "-e" not in local and "--dry-run" in local and "--ignore-times" not in local


def test_blob_passes_send_what_links_point_at_and_every_run_has_an_io_timeout():
    argv = hr.rsync_argv("rsync", "/tmp/l", "/a/hub/", "w:hub/", ssh="ssh", copy_links=True, io_timeout=30)
    assert "--copy-links" in argv and "--timeout=30" in argv
    plain = hr.rsync_argv("rsync", "/tmp/l", "/a/hub/", "w:hub/", ssh="ssh", io_timeout=7)
    assert "--copy-links" not in plain and "--timeout=7" in plain


def test_ssh_keepalive_ends_a_silent_session_in_about_the_io_timeout():
    assert hr.keepalive_options(30) == ["-o", "ServerAliveInterval=10", "-o", "ServerAliveCountMax=3"]
    assert hr.keepalive_options(4) == ["-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=3"]
    assert hr.keepalive_options(1) == ["-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=3"]


def test_ssh_command_quotes_options_as_rsync_splits_them():
    options = ["-o", "UserKnownHostsFile=/tmp/known hosts", "-o", "ProxyCommand=none", "-i", "/k/it's"]
    assert shlex.split(hr.ssh_command(options)) == ["ssh"] + options


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
        argv = hr.rsync_argv(rsync, str(listing), hub, dest, **kwargs)
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=True).stdout

    dest = str(root / "dest" / "hub") + "/"
    return {"doc": doc, "plan": plan, "first": run(dest, progress=True, bwlimit=6000),
            "rerun": run(dest, progress=True), "dry": run(str(root / "empty" / "hub") + "/", dry_run=True),
            "empty": root / "empty"}


def test_progress2_records_of_a_real_run_count_up_to_the_bytes_sent(captured):
    records = hr.parse_progress2(captured["first"])
    total = captured["doc"]["bytes"]
    assert len(records) >= 3, captured["first"]
    assert [r["bytes"] for r in records] == sorted(r["bytes"] for r in records)
    assert 0 < records[0]["bytes"] < total
    last = records[-1]
    assert last["bytes"] == total and last["percent"] >= 99  # of the list, links included
    # rsync's file list holds the three blobs, the two links and their directories.
    assert last["files"] == 3 and last["to_check"] == 0 and last["total"] >= 5


def test_progress2_of_a_rerun_sends_nothing(captured):
    records = hr.parse_progress2(captured["rerun"])
    assert records and all(r["bytes"] == 0 and r["files"] == 0 for r in records)


def test_stats_and_items_of_a_real_run(captured):
    plan, total = captured["plan"], captured["doc"]["bytes"]
    stats = hr.parse_stats(captured["first"])
    assert stats["transferred_size"] == total and stats["files_transferred"] == 3
    items = hr.parse_items(captured["first"])
    sent = dict((i["name"], i["size"]) for i in items if i["flags"] == ">f+++++++++")
    assert sent == plan["blobs"]
    links = [i["name"] for i in items if i["flags"].startswith("cL+")]
    assert sorted(links) == sorted(plan["links"])
    assert len(hr.changes(items)) == len(plan["blobs"]) + len(plan["links"])
    assert hr.parse_stats(captured["rerun"])["transferred_size"] == 0
    assert hr.changes(hr.parse_items(captured["rerun"])) == []


def test_a_dry_run_lists_what_would_be_sent_and_creates_nothing(captured):
    items = hr.parse_items(captured["dry"])
    assert dict((i["name"], i["size"]) for i in items if i["flags"].startswith(">f")) == captured["plan"]["blobs"]
    assert hr.parse_stats(captured["dry"])["transferred_size"] == captured["doc"]["bytes"]
    assert not captured["empty"].exists()


def test_parse_version():
    assert hr.parse_version("rsync  version 3.2.7  protocol version 31\n") == (3, 2, 7)
    assert hr.parse_version("rsync  version v3.4.1  protocol version 32") == (3, 4, 1)
    assert hr.parse_version("nope") is None


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
    argv = hr.rsync_argv(rsync, str(listing), str(tmp_path / "head" / "hub") + "/", "spark@worker:cache/hub/",
                         ssh=_fake_rsh(tmp_path, []))
    run = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"), check=False)
    meaning, fix = hr.explain_failure({"rc": run.returncode, "stderr": run.stderr}, "spark@worker")
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
        argv = hr.rsync_argv(rsync, str(listing), str(tmp_path / "head" / "hub") + "/",
                             "spark@worker:%s/" % (tmp_path / "worker" / "hub"), ssh=rsh, dry_run=dry_run)
        outputs.append(subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"),
                                      check=True).stdout)
    for output in outputs:
        items = hr.parse_items(output)
        # A push itemizes sent files with "<" (a local copy with ">").
        assert all(item["flags"].startswith("<f") for item in items if item["name"] in plan["blobs"]), items
        assert dict((i["name"], i["size"]) for i in items if hr.sends(i)) == plan["blobs"]
    assert hr.parse_stats(outputs[1])["transferred_size"] == doc["bytes"]


@pytest.mark.parametrize("rc, stderr", [
    (30, "[sender] io timeout after 30 seconds -- exiting\nrsync error: timeout in data send/receive (code 30)"),
    (255, "Timeout, server 198.18.1.11 not responding.\r\nrsync: connection unexpectedly closed (0 bytes)"),
])
def test_a_silent_peer_names_the_worker_and_its_link_address(rc, stderr):
    meaning, fix = hr.explain_failure({"rc": rc, "stderr": stderr}, "spark-worker (spark@198.18.1.11)",
                                      address="198.18.1.11", io_timeout=30)
    assert meaning == "exit %d: %s" % (rc, hr.EXIT_CODES[rc])
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
    meaning, fix = hr.explain_failure({"rc": rc, "stderr": stderr}, "spark@198.18.1.11", free=1024, needed=4096)
    assert meaning == "exit %d: %s" % (rc, hr.EXIT_CODES[rc])
    assert expected in fix, fix


def test_explain_failure_of_a_timeout_and_of_a_missing_head_rsync():
    meaning, fix = hr.explain_failure({"rc": -15, "timed_out": True, "timeout": 30, "stderr": ""}, "w")
    assert meaning == "it did not finish within 30s and was killed" and fix.startswith("rerun to resume")
    meaning, fix = hr.explain_failure({"rc": None, "error": "cannot run rsync: ENOENT", "stderr": ""}, "w")
    assert fix == "rsync is missing on the head: install rsync (apt install rsync)"


@pytest.mark.parametrize("rc, stderr, expected", [
    (24, "file has vanished: \"/x\"", "files changed on the head during the copy: rerun"),
    (23, 'rsync: [sender] send_files failed to open "/x": Input/output error (5)', "could not be read on the head"),
    (127, "sh: 1: rsync: not found", "rsync is missing on the worker w"),
    (10, "rsync: read error: Connection reset by peer (104)", "the connection to the worker broke"),
    (99, "something else", "see rsync's message"),
])
def test_explain_failure_of_the_other_exit_codes(rc, stderr, expected):
    meaning, fix = hr.explain_failure({"rc": rc, "stderr": stderr}, "w")
    assert meaning == "exit %d: %s" % (rc, hr.EXIT_CODES.get(rc, "unknown exit code"))
    assert expected in fix, fix


def test_a_full_disk_without_figures_says_so_alone():
    stderr = 'rsync: [receiver] write failed on "/x": Disk quota exceeded (122)'
    assert hr.disk_full(stderr) and not hr.disk_full("Permission denied (13)") and not hr.disk_full(None)
    _meaning, fix = hr.explain_failure({"rc": 11, "stderr": stderr}, "w")
    assert fix.startswith("the worker's disk under the destination is full: free space there"), fix


def test_last_lines_joins_the_last_non_blank_lines():
    assert hr.last_lines("a\n\n  b  \nc\n", lines=2) == "b | c"
    assert hr.last_lines("\n".join(str(n) for n in range(10))) == "4 | 5 | 6 | 7 | 8 | 9"
    assert hr.last_lines(None) == "" and hr.last_lines("  \n") == ""

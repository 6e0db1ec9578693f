"""_writers on real processes: who has a file open, ending a recorded process (and only that
one), and the record a later run reads. Liveness is judged here from /proc."""

import json
import os
import subprocess
import sys

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _writers as wr
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import alive, wait_until


def spawn(*argv, **kwargs):
    return subprocess.Popen(list(argv), start_new_session=True, **kwargs)  # pylint: disable=consider-using-with


def test_open_paths_sees_a_writer_of_another_process(tmp_path):
    held, free = tmp_path / "held.incomplete", tmp_path / "free.incomplete"
    free.write_bytes(b"x")
    with open(str(held), "ab") as out:
        writer = spawn("sleep", "30", stdout=out)
    try:
        assert wr.open_paths([str(held), str(free)]) == {str(held)}
    finally:
        writer.kill()
        writer.wait()
    assert wr.open_paths([str(held), str(free)]) == set()


def test_a_record_of_another_start_time_is_never_signalled():
    sleeper = spawn("sleep", "30")
    try:
        record = wr.identity(sleeper.pid)
        assert wr.same_process(record)
        # The same pid, started at another time (the kernel gave it to a new process): not ours.
        assert wr.end_process(dict(record, start=record["start"] - 1), group=True) is True
        assert wr.end_process(dict(record, boot="another-boot"), group=True) is True
        assert alive(sleeper.pid)
    finally:
        sleeper.kill()
        sleeper.wait()


def test_end_process_ends_a_group_whose_leader_already_died(tmp_path):
    # The leader starts two copies of itself (as rsync forks its receiver and generator) and dies.
    script = tmp_path / "forks.py"
    script.write_text("import os, sys, time\n"
                      "if len(sys.argv) == 2:\n"
                      "    for _ in range(2):\n"
                      "        if os.fork() == 0:\n"
                      "            time.sleep(60)\n"
                      "            os._exit(0)\n"
                      "    time.sleep(60)\n")
    argv = [sys.executable, str(script), "leader"]
    leader = spawn(*argv)
    members = wait_until(lambda: [p for p in wr.group_members(leader.pid, argv) if p != leader.pid], 10)
    assert len(members) == 2
    record = dict(wr.identity(leader.pid), argv=argv)
    leader.kill()
    leader.wait()
    assert all(alive(pid) for pid in members)
    assert wr.end_process(record, group=True, grace=2) is True
    assert not [pid for pid in members if alive(pid)]


def test_claim_ends_the_writers_a_dead_run_recorded(tmp_path):
    base = str(tmp_path / "locks" / "mirror-x")
    first = wr.WriterRecord(base, "copying to x")
    assert first.claim() == []
    writer = spawn("sleep", "30")
    first.add(writer.pid, ["sleep", "30"], "sleep 30")
    with open(base + ".json") as handle:
        assert [w["pid"] for w in json.load(handle)["writers"]] == [writer.pid]
    # The module dies without cleaning up: its lock goes with it, its record stays.
    os.close(first.fd)
    second = wr.WriterRecord(base, "copying to x")
    try:
        assert second.claim(grace=2) == [{"pid": writer.pid, "command": "sleep 30"}]
        assert writer.wait(timeout=5) == -15
    finally:
        second.release()
        if writer.poll() is None:
            writer.kill()
    assert not os.path.exists(base + ".json")

"""_ssh against a real OpenSSH client: a peer that never answers, and a ProxyCommand that hangs.

198.18.255.254 is in the lab range and answers nothing. Wall times are measured here,
around the calls, never taken from the results under test.
"""

import os

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import OVERDUE, alive, gone_within, require, timed
from ansible_collections.dgx_spark.glm53.plugins.module_utils import _ssh

NOWHERE = "198.18.255.254"


def test_batch_options_put_the_callers_first_so_they_win():
    assert _ssh.batch_options(5) == ["-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
    assert _ssh.batch_options(10, ["-o", "ConnectTimeout=2", "-p", "2222"]) == [
        "-o", "ConnectTimeout=2", "-p", "2222", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"]


def _sleepers(mark):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as handle:
                if handle.read() == b"sleep\0" + mark.encode() + b"\0" and alive(int(pid)):
                    found.append(pid)
        except (IOError, OSError):
            pass
    return found


def test_ssh_that_hangs_is_killed_with_its_proxy_command():
    require("ssh", "openssh-client")
    mark = "30.%d" % os.getpid()  # the ProxyCommand sleeps 30 s unless it is killed
    result, wall = timed(_ssh.run_ssh, "nobody@%s" % NOWHERE, ["-o", "BatchMode=yes", "-o", "ProxyCommand=sleep %s" % mark],
                         "docker ps -q", 1.5)
    assert 1.5 <= wall < OVERDUE * 1.5, wall
    assert result["timed_out"] is True and result["timeout"] == 1.5 and result["target"] == "nobody@%s" % NOWHERE
    assert result["command"] == "ssh -o BatchMode=yes -o 'ProxyCommand=sleep %s' nobody@%s 'docker ps -q'" % (mark, NOWHERE)
    assert result["error"] == "`%s` did not finish within 1.5s; its process group was killed" % result["command"]
    # SIGKILL went to the whole group; the killed ProxyCommand exits when the kernel gets to
    # it, which a loaded machine can delay. Half its own 30 s is still proof it was killed.
    assert gone_within(lambda: _sleepers(mark), 15) == []


def test_ssh_that_cannot_connect_fails_with_255_within_its_connect_timeout():
    require("ssh", "openssh-client")
    options = ["-o", "BatchMode=yes", "-o", "ConnectTimeout=1", "-o", "StrictHostKeyChecking=no",
               "-o", "UserKnownHostsFile=/dev/null"]
    result, wall = timed(_ssh.run_ssh, "nobody@%s" % NOWHERE, options, "true", 10)
    # ssh gave up by itself (ConnectTimeout=1), before run_ssh's 10 s deadline: not killed, rc 255.
    assert wall < 10, wall
    assert result["timed_out"] is False and result["rc"] == 255 and result["error"] is None, result

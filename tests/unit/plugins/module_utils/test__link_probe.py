"""_link_probe against real sockets on loopback and real processes (ping, ssh, sh).

198.18.255.254 is in the lab range and answers nothing, which makes it the
"peer that never replies". Wall times are measured here, around the calls,
never taken from the results under test.
"""

import os
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins.ports import Reserved, listening
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import OVERDUE, require, timed
from ansible_collections.dgx_spark.glm53.plugins.module_utils import _link_probe as lp

NOWHERE = "198.18.255.254"


@pytest.fixture(name="port")
def fixture_port():
    """A port on 127.0.0.1 held for the test (ports.Reserved): nobody else can take it meanwhile."""
    with Reserved() as reserved:
        yield reserved.port


def wait_listening(port, listener, limit):
    """Wait until the listener thread is in LISTEN on ``port`` (it gives up at ``limit`` s anyway)."""
    deadline = time.monotonic() + limit
    while not listening(port):
        assert not listener.done(), "the listener returned before it listened: %r" % (listener.result(),)
        assert time.monotonic() < deadline, "nothing listens on port %d after %g s" % (port, limit)
        time.sleep(0.01)


# --- listen / connect ---------------------------------------------------------------------------

def test_connect_started_after_the_listener(port):
    with ThreadPoolExecutor(1) as pool:
        listener = pool.submit(lp.listen, "127.0.0.1", port, 10)
        wait_listening(port, listener, 10)
        connected = lp.connect("127.0.0.1", port, 5)
        heard = listener.result()
    # The listener was up, so the first attempt got through.
    assert connected["connected"] is True and connected["error"] is None and connected["attempts"] == 1, connected
    assert heard == dict(heard, bound=True, accepted=["127.0.0.1"], error=None)
    assert not listening(port), "the listener left its socket open"


def test_connect_started_before_the_listener_waits_for_it(port, monkeypatch):
    # The listener starts only once the connector was refused (seen on the real call's
    # outcome), so the connector must have retried to get through.
    refused = threading.Event()
    create_connection = socket.create_connection

    def watched(*args, **kwargs):
        try:
            return create_connection(*args, **kwargs)
        except ConnectionRefusedError:
            refused.set()
            raise

    monkeypatch.setattr(lp.socket, "create_connection", watched)
    timeout = 5
    with ThreadPoolExecutor(1) as pool:
        connector = pool.submit(lp.connect, "127.0.0.1", port, timeout)
        assert refused.wait(timeout), connector.result()
        heard = lp.listen("127.0.0.1", port, timeout)
        connected = connector.result()
    assert connected["connected"] is True and connected["error"] is None, connected
    assert connected["attempts"] > 1, connected
    assert heard["accepted"] == ["127.0.0.1"]


def test_listener_waits_for_the_expected_number_of_connections(port):
    # One connection after the other: a listener that returned after the first would have
    # closed its socket, and the second would be refused or never accepted.
    with ThreadPoolExecutor(1) as pool:
        listener = pool.submit(lp.listen, "127.0.0.1", port, 10, 2)
        first = lp.connect("127.0.0.1", port, 5)
        second = lp.connect("127.0.0.1", port, 5)
        heard = listener.result()
    assert first["connected"] and second["connected"], (first, second)
    assert heard["accepted"] == ["127.0.0.1", "127.0.0.1"] and heard["error"] is None


def test_listener_reports_a_port_held_by_another_socket():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        heard, wall = timed(lp.listen, "127.0.0.1", port, 5)
    assert wall < 5, "waited for its timeout instead of reporting the bind error: %.1fs" % wall
    assert heard["bound"] is False and heard["accepted"] == []
    assert heard["error"] == "cannot listen on 127.0.0.1:%d: EADDRINUSE (Address already in use)" % port


def test_listener_gives_up_at_its_timeout_and_closes(port):
    heard, wall = timed(lp.listen, "127.0.0.1", port, 1)
    assert 1 <= wall < OVERDUE * 1, wall
    assert heard["bound"] is True and heard["accepted"] == []
    assert heard["error"] == "accepted 0 of 1 connection(s) on 127.0.0.1:%d within 1s" % port
    assert not listening(port)


def test_listener_reports_an_address_not_on_this_host(port):
    heard = lp.listen(NOWHERE, port, 1)
    assert heard["bound"] is False and "EADDRNOTAVAIL" in heard["error"]


def test_connect_to_a_port_nobody_listens_on_fails_at_the_deadline(port):
    connected, wall = timed(lp.connect, "127.0.0.1", port, 1)
    assert 1 <= wall < OVERDUE * 1, wall
    # Retried until the deadline, CONNECT_RETRY apart: at most one attempt per pause, plus the first.
    assert 2 <= connected["attempts"] <= 1 / lp.CONNECT_RETRY + 1, connected
    assert connected["connected"] is False
    assert connected["error"].startswith("no connection to 127.0.0.1:%d within 1s (" % port)
    assert connected["error"].endswith("last error: ECONNREFUSED (Connection refused)")


# --- pings --------------------------------------------------------------------------------------

def test_pings_on_loopback_and_to_a_silent_peer_run_in_parallel():
    require("ping", "iputils-ping")
    pings = [{"netdev": "lo", "target": "127.0.0.1", "size": 1472, "peer": "self"}]
    pings += [{"netdev": "lo", "target": NOWHERE, "size": 1472, "peer": "silent%d" % i} for i in range(3)]
    ping_timeout = 1
    (single,), one_wall = timed(lp.run_pings, pings[1:2], 2, 0.2, ping_timeout)
    results, wall = timed(lp.run_pings, pings, 2, 0.2, ping_timeout)
    assert one_wall >= ping_timeout, one_wall  # a silent peer: ping waits its -W for the last reply
    # One after another the three silent peers alone would take three -W waits.
    assert wall < 3 * ping_timeout, "pings ran one after another: %.1fs for four, %.1fs for one" % (wall, one_wall)
    ok = results[0]
    assert ok == {"netdev": "lo", "target": "127.0.0.1", "peer": "self", "size": 1472, "rc": 0, "ok": True,
                  "command": "ping -M do -s 1472 -c 2 -i 0.2 -W 1 -I lo 127.0.0.1", "error": None,
                  "timed_out": False}
    for result in results[1:] + [single]:
        assert result["ok"] is False and result["rc"] == 1 and result["timed_out"] is False
        assert "100% packet loss" in result["error"]
        assert "warning" not in result["error"].lower()
    assert [r["peer"] for r in results] == ["self", "silent0", "silent1", "silent2"]


def test_oversize_df_ping_reports_the_mtu():
    require("ping", "iputils-ping")
    route = subprocess.run(["ip", "route", "get", NOWHERE], capture_output=True, text=True, check=False).stdout.split()
    if "dev" not in route:
        pytest.skip("no route towards %s" % NOWHERE)
    netdev = route[route.index("dev") + 1]
    with open("/sys/class/net/%s/mtu" % netdev) as handle:
        mtu = int(handle.read())
    (result,) = lp.run_pings([{"netdev": netdev, "target": NOWHERE, "size": mtu - 27}], 1, 0.2, 1)
    assert result["ok"] is False and result["rc"] != 0
    assert "message too long, mtu=%d" % mtu in result["error"]
    assert "packet loss" in result["error"]


def test_ping_missing_from_path_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    (result,) = lp.run_pings([{"netdev": "lo", "target": "127.0.0.1", "size": 56}], 1, 0.2, 1)
    assert result["ok"] is False and result["rc"] is None
    assert result["error"] == "cannot run ping: ENOENT (No such file or directory)"


def test_ping_error_drops_warnings_and_keeps_the_loss_summary():
    run = {"rc": 1, "error": None, "stdout": "PING x\n\n--- x ping statistics ---\n"
           "2 packets transmitted, 0 received, +2 errors, 100% packet loss, time 1001ms\n",
           "stderr": "ping: Warning: source address might be selected on device other than: lo\n"
           "ping: local error: message too long, mtu=1500\nping: local error: message too long, mtu=1500\n"}
    assert lp.ping_error(run) == ("ping: local error: message too long, mtu=1500; "
                                  "ping: local error: message too long, mtu=1500; "
                                  "2 packets transmitted, 0 received, +2 errors, 100% packet loss, time 1001ms")


def test_a_wedged_ping_is_killed_and_reported(monkeypatch, tmp_path):
    # A ping that hangs (as one stuck on a dead DNS server would): a stand-in that sleeps.
    fake = tmp_path / "ping"
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    monkeypatch.setattr(lp, "PING_SLACK", 0.5)
    deadline = 1 * 0.2 + 1 + 0.5  # its schedule (1 ping, 0.2 s apart, -W 1) plus PING_SLACK: the 1.7 s below
    (result,), wall = timed(lp.run_pings, [{"netdev": "lo", "target": "127.0.0.1", "size": 56}], 1, 0.2, 1)
    assert deadline <= wall < OVERDUE * deadline, wall
    assert result["timed_out"] is True and result["ok"] is False
    assert result["error"].startswith("`ping -M do -s 56 -c 1 -i 0.2 -W 1 -I lo 127.0.0.1` did not finish within 1.7s")


# --- validate and probe -------------------------------------------------------------------------

def params(**overrides):
    base = {"pings": None, "ping_count": 2, "ping_interval": 0.2, "ping_timeout": 2, "listen": None, "connect": None,
            "ssh": None}
    base.update(overrides)
    return base


def test_validate_accepts_the_defaults_and_full_ranges():
    assert lp.validate(params()) == []
    assert lp.validate(params(
        pings=[{"netdev": "enp1s0f1np1", "target": "198.18.1.2", "size": 65507, "peer": None}],
        ping_count=20, ping_interval=10.0, ping_timeout=60,
        listen={"address": "::", "port": 65535, "timeout": 3600.0, "expect": 128},
        connect={"address": "spark-1", "port": 1, "timeout": 0.1},
        ssh=[{"target": "ops@198.18.1.2", "options": [], "command": "", "timeout": 1.0}])) == []


@pytest.mark.parametrize("overrides, message", [
    ({"listen": {"address": "127.0.0.1", "port": 0, "timeout": 5.0, "expect": 1}},
     "listen.port must be between 1 and 65535, got 0"),
    ({"connect": {"address": "127.0.0.1", "port": 70000, "timeout": 5.0}},
     "connect.port must be between 1 and 65535, got 70000"),
    ({"connect": {"address": "127.0.0.1", "port": 80, "timeout": 0.0}},
     "connect.timeout must be between 0.1 and 3600 seconds, got 0.0"),
    ({"listen": {"address": "127.0.0.1", "port": 80, "timeout": 5.0, "expect": 0}},
     "listen.expect must be between 1 and 128, got 0"),
    ({"pings": [{"netdev": "lo", "target": "127.0.0.1", "size": -1, "peer": None}]},
     "pings[0].size must be between 0 and 65507 bytes of ICMP payload (MTU - 28 fills one frame), got -1"),
    ({"pings": [{"netdev": "-f", "target": "127.0.0.1", "size": 56, "peer": None}]},
     "pings[0].netdev must be a non-empty value not starting with '-', got '-f'"),
    ({"ping_timeout": 0}, "ping_timeout must be between 1 and 60 seconds, got 0"),
    ({"ping_count": 21}, "ping_count must be between 1 and 20, got 21"),
    ({"ping_interval": 0.01}, "ping_interval must be between 0.2 and 10 seconds, got 0.01"),
    ({"ssh": [{"target": "-oProxyCommand=x", "options": [], "command": "true", "timeout": 5.0}]},
     "ssh[0].target must be a non-empty value not starting with '-', got '-oProxyCommand=x'"),
    ({"ssh": [{"target": "h", "options": [], "command": "true", "timeout": 4000.0}]},
     "ssh[0].timeout must be between 0.1 and 3600 seconds, got 4000.0"),
])
def test_validate_names_the_option(overrides, message):
    assert lp.validate(params(**overrides)) == [message]


# Each timed part's own limit in the test that runs them at once.
PART = 5


def test_probe_runs_every_part_at_once(port):
    require("ping", "iputils-ping")
    require("ssh", "openssh-client")
    result, wall = timed(
        lp.probe,
        pings=[{"netdev": "lo", "target": NOWHERE, "size": 56, "peer": None}], ping_count=1, ping_interval=0.2,
        ping_timeout=PART,
        listen_spec={"address": "127.0.0.1", "port": port, "timeout": 5.0, "expect": 1},
        connect_spec={"address": "127.0.0.1", "port": port, "timeout": 5.0},
        ssh_spec=[{"target": "h", "options": ["-o", "ProxyCommand=sleep 30"], "command": "true", "timeout": PART,
                   "worker": "w1"},
                  {"target": "h2", "options": ["-o", "ProxyCommand=sleep 30"], "command": "true", "timeout": PART,
                   "worker": "w2"}])
    # In sequence this would take at least 3 * PART: the ping waits its -W, each ssh its timeout.
    # At once it takes PART and the start of three processes, which a starved machine may
    # stretch by seconds, far less than 2 * PART.
    assert PART <= wall < 3 * PART, wall
    assert set(result) == {"pings", "listen", "connect", "ssh", "elapsed"}
    assert result["listen"]["accepted"] == ["127.0.0.1"] and result["connect"]["connected"] is True
    assert result["pings"][0]["ok"] is False
    # Both ssh entries ran at once (each takes its full timeout), each labelled with its worker.
    assert [(r["worker"], r["timed_out"]) for r in result["ssh"]] == [("w1", True), ("w2", True)]


def test_probe_leaves_out_what_was_not_asked():
    result = lp.probe(pings=[])
    assert result["pings"] == [] and result["listen"] is None and result["connect"] is None and result["ssh"] is None

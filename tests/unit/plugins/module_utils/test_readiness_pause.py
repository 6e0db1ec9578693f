"""While rank 0 loads, the pause between polls ends as soon as its API listens."""

import socket
import threading
import time

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _readiness_poll as rp

PARAMS = {"mode": "tensorfold", "url": None, "head_container": "glm53-tf-r0", "workers": [], "timeout": 30,
          "interval": 5, "ssh_options": [], "slots": 8, "served_name": None, "canary": False}


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def waiter(port, state="running", refused=True):
    params = dict(PARAMS, url="http://127.0.0.1:%d" % port)
    wait = rp.Waiter(params, head_node="spark-head")
    wait.head.last = {"state": state}
    wait.refused = refused
    return wait


def test_the_pause_ends_when_the_api_starts_listening():
    port = free_port()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    timer = threading.Timer(0.5, lambda: (server.bind(("127.0.0.1", port)), server.listen(1)))
    timer.start()
    try:
        started = time.monotonic()
        waiter(port)._pause(5)
        took = time.monotonic() - started
    finally:
        timer.join()
        server.close()
    assert 0.4 <= took < 2.5, took


def test_a_full_pause_when_not_loading():
    port = free_port()
    for wait in (waiter(port, state="absent"), waiter(port, refused=False)):
        started = time.monotonic()
        wait._pause(0.6)
        assert time.monotonic() - started >= 0.55

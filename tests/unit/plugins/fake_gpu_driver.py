"""A stand-in for the lab node's GPU driver socket (glm53-lab-gpud's /run/glm53-lab/gpu.sock)
for tests of the simulated engine: one JSON line per connection, {"total", "free", "cached",
"available"} in bytes, whatever `answer` holds when the connection comes (a test may change
it between starts). The engine finds it through GLM53_LAB_GPU_SOCK."""

import json
import shutil
import socket
import tempfile
import threading

MIB = 1 << 20
GIB = 1 << 30


def figures(free, total=4 * GIB, cached=0):
    return {"total": int(total), "free": int(free), "cached": int(cached), "available": int(free + cached)}


class FakeDriver(object):
    """Listens on a socket in a directory of its own with a short path (a unix socket's path
    is limited to 107 bytes); ``close()`` (or leaving the ``with``) removes both."""

    def __init__(self, answer):
        self.answer = answer
        self.asked = 0
        self.dir = tempfile.mkdtemp(prefix="gpu-", dir="/tmp")
        self.path = self.dir + "/gpu.sock"
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(self.path)
        self._sock.listen(16)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while True:
            try:
                conn = self._sock.accept()[0]
            except OSError:
                return  # closed
            with conn:
                self.asked += 1
                body = self.answer if isinstance(self.answer, bytes) else (json.dumps(self.answer) + "\n").encode()
                conn.sendall(body)

    def close(self):
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        except OSError:
            pass
        self._sock.close()
        self._thread.join(timeout=5)
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

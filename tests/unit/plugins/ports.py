"""TCP ports for tests, reserved for as long as the test needs them.

Picking a "free" port by binding port 0 and closing the socket again leaves a window in
which any other process can take the port before the code under test binds it. Here the
test keeps a socket bound to the port (bound, not listening) until it is done with it.
That socket has SO_REUSEADDR, and so does every listener the collection and the lab
simulators open, so they can still bind and listen on the port; a program without
SO_REUSEADDR cannot, and the kernel never hands a bound port out as an ephemeral one.
While nothing listens there, a connection to the port is refused, as on a free port.
"""

import socket


class Reserved(object):
    """A port held by a bound socket; ``close()`` (or leaving the ``with``) gives it back."""

    def __init__(self, address="127.0.0.1"):
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((address, 0))
        self.address = address
        self.port = self._sock.getsockname()[1]

    def close(self):
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _hex_address(address, port):
    """``address:port`` as /proc/net/tcp writes a local address (little-endian IPv4, hex port)."""
    packed = socket.inet_aton(address)
    return "%08X:%04X" % (int.from_bytes(packed, "little"), port)


def listening(port, address="127.0.0.1"):
    """True when a socket is in LISTEN on ``address:port``, read from /proc/net/tcp.

    Unlike a probe connection this takes nothing from the listener (a listener waiting for
    one connection would count the probe as that connection).
    """
    wanted = _hex_address(address, port)
    wildcard = _hex_address("0.0.0.0", port)
    with open("/proc/net/tcp") as handle:
        next(handle)
        for line in handle:
            fields = line.split()
            if fields[1] in (wanted, wildcard) and fields[3] == "0A":  # 0A: TCP_LISTEN
                return True
    return False

# Short-lived TCP probe between the nodes, run by one task on both at once:
#   listen ADDRESS PORT TIMEOUT   (head) accept one connection or give up at TIMEOUT
#   connect ADDRESS PORT TIMEOUT  (worker) retry until connected or TIMEOUT
# Prints one JSON line and always exits 0: the role judges the result. The
# listener closes its socket before exiting, so nothing is left listening.
import errno
import json
import socket
import sys
import time


def listen(address, port, timeout):
    out = {"mode": "listen", "address": address, "port": port, "bound": False, "accepted": False, "error": None}
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError as exc:
            out["error"] = "bind %s:%d: %s" % (address, port, errno.errorcode.get(exc.errno, exc.strerror))
            return out
        sock.listen(4)
        out["bound"] = True
        sock.settimeout(timeout)
        try:
            conn, peer = sock.accept()
            conn.close()
            out.update(accepted=True, peer=peer[0])
        except socket.timeout:
            out["error"] = "no connection within %ss" % timeout
    finally:
        sock.close()
    return out


def connect(address, port, timeout):
    out = {"mode": "connect", "address": address, "port": port, "connected": False, "error": None}
    deadline = time.time() + timeout
    while True:
        try:
            socket.create_connection((address, port), timeout=max(0.5, deadline - time.time())).close()
            out["connected"] = True
            out["error"] = None
            return out
        except (OSError, socket.timeout) as exc:
            out["error"] = errno.errorcode.get(getattr(exc, "errno", None) or 0, None) or str(exc) or "timeout"
        if time.time() >= deadline:
            return out
        # Refused means the listener on the other node is not up yet: retry.
        time.sleep(0.1)


def main(argv):
    mode, address, port, timeout = argv[1], argv[2], int(argv[3]), float(argv[4])
    result = listen(address, port, timeout) if mode == "listen" else connect(address, port, timeout)
    print(json.dumps(result))


main(sys.argv)

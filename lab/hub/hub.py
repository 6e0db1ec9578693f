#!/usr/bin/env python
"""The lab hub: a simulator of the Hugging Face Hub HTTP interface that the real
huggingface_hub client accepts as its `endpoint` (HF_ENDPOINT). See lab/README.md.

    python lab/hub/hub.py serve --root DIR [--host H] [--port P] [--rate-mbps N] [--bench]

Serves the deterministic repos of repos.py (generated under DIR/repos at start):

    GET  /api/models/{repo_id}[/revision/{rev}][?blobs=true]    model_info / repo_info
    GET  /api/models/{repo_id}/tree/{rev}[/{path}][?recursive=]  list_repo_tree (snapshot_download)
    HEAD|GET /{repo_id}/resolve/{rev}/{filename}                 hf_hub_download (Range -> 206)

with the Hub's headers (X-Repo-Commit, ETag, X-Linked-Etag/-Size, Accept-Ranges) and its
errors (X-Error-Code RepoNotFound / RevisionNotFound / EntryNotFound / GatedRepo), one
shared bandwidth limit over all connections, injected connection drops, and a request log
(DIR/requests.jsonl; never the Authorization header). Runtime control for tests:

    GET  /_lab/requests   the request log (JSON list)
    GET  /_lab/faults     current faults and rate
    GET  /_lab/status     repos, rate, code version
    POST /_lab/reset      clear the log and the faults (rate back to its start value)
    POST /_lab/faults     {"drop": {"<file>": {"after_bytes": N, "times": 1, "reset": false}}, "rate_bps": N|null}

In-process: Hub(root, host="127.0.0.1", port=0, rate_bps=None).start() ... .stop().
Hub(..., xet_headers=True) also announces LFS files as Xet files (tests of the client's
shared blob store; see hub_http.xet_hash()).
This file holds the Hub object (lifecycle, request log, status) and the CLI; the HTTP side is
hub_http.py, the bandwidth limit and injected drops hub_faults.py, the repos repos.py.
Standard library only (runs from lab/ with the controller's system python3).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

# The modules next to this file (see above).
import hub_faults  # noqa: E402
import repos as _repos  # noqa: E402
from hub_http import Handler, HubServer  # noqa: E402

GATED_TOKEN = _repos.GATED_TOKEN
PINNED = _repos.PINNED


def code_version() -> str:
    """Hash of the hub's own code, every module of it (each *.py here, by name and content):
    lab/spark_lab.py restarts a hub running older code, whichever module changed."""
    h = hashlib.sha256()
    for path in sorted(HERE.glob("*.py")):
        h.update(path.name.encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


class Hub:
    """The lab hub, in this process (tests) or behind `hub.py serve` (the lab).

    root: data directory (ROOT/repos: generated repos, ROOT/requests.jsonl: request log).
    repos: None (all lab repos), an iterable of repo ids (a subset of the catalog), or
        RepoSpec objects. bench: include glm53-lab/bench-1g. lfs_size: bytes of every LFS
        file instead of the lab sizes (small repos for fast unit tests).
    rate_bps: shared bandwidth limit in bytes per second (None: unlimited).
    xet_headers: resolve answers of LFS files carry X-Xet-Hash (hub_http.xet_hash()) and an
        X-Xet-Refresh-Route that is not served, as the Hub's do for Xet files. There is no
        Xet storage: only a client without hf_xet downloads such a file (over plain HTTP)."""

    def __init__(self, root, host="127.0.0.1", port=0, rate_bps=None, repos=None, bench=False, lfs_size=None, log=None,
                 xet_headers=False):
        self.root = Path(root)
        self.xet_headers = xet_headers
        self.host = host
        self.port = port
        self.injected = hub_faults.Faults(rate_bps)  # bandwidth limit and connection drops
        self.bucket = self.injected.bucket  # the shared limit every response body goes through
        self._log_fn = log
        specs = _repos.catalog(bench=bench, lfs_size=lfs_size)
        if repos is not None:
            chosen = {}
            for item in repos:
                spec = item if isinstance(item, _repos.RepoSpec) else specs.get(item)
                if spec is None:
                    raise ValueError(f"unknown lab repo {item!r}; known: {', '.join(specs)}")
                chosen[spec.repo_id] = spec
            specs = chosen
        self.specs = specs
        self.repos: dict[str, _repos.Repo] = {}
        self._state_lock = threading.Lock()
        self._requests: list[dict] = []
        self.log_path = self.root / "requests.jsonl"
        self._server: HubServer | None = None
        self._thread: threading.Thread | None = None
        self.version = code_version()
        self.root_inode: int | None = None  # set by prepare()

    # ------------------------------------------------------------------ lifecycle

    def prepare(self) -> "Hub":
        """Generate the repos (idempotent) without serving."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.repos = _repos.ensure(self.root, self.specs, log=self._log_fn)
        # Which directory it serves, beyond its path: one removed and made again under a
        # running hub (a checkout cloned anew at the same place) is not this hub's data.
        self.root_inode = self.root.stat().st_ino
        return self

    def bind(self) -> "Hub":
        """Generate the repos and open the listening socket (port 0: any free port)."""
        self.prepare()
        self.log_path.touch()
        self._server = HubServer((self.host, self.port), Handler, self)
        self.port = self._server.server_address[1]
        return self

    def start(self) -> "Hub":
        """bind(), then serve from a background thread; returns self (`.url` is set)."""
        self.bind()
        self._thread = threading.Thread(target=self._server.serve_forever, name="lab-hub", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until request_shutdown() (the CLI)."""
        if self._server is None:
            self.bind()
        self._server.serve_forever()
        self._server.server_close()
        self._server = None

    def request_shutdown(self) -> None:
        """Make serve_forever() return; callable from a signal handler."""
        if self._server is not None:
            threading.Thread(target=self._server.shutdown, daemon=True).start()

    def stop(self) -> None:
        server = self._server
        if server is None:
            return
        server.shutdown()
        # Keep-alive connections would hold their handler threads: close them.
        with server.conn_lock:
            conns = list(server.connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> "Hub":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    # -------------------------------------------------------------- test control

    def requests(self) -> list[dict]:
        """The request log since start or the last reset(), oldest first."""
        with self._state_lock:
            return [dict(r) for r in self._requests]

    def reset(self) -> None:
        """Clear the request log and the faults; the rate goes back to its start value."""
        with self._state_lock:
            self._requests.clear()
            self.log_path.write_text("")
        self.injected.clear()

    def set_faults(self, faults: dict) -> dict:
        """{"drop": {"<file>" or "<repo_id>/<file>": {"after_bytes": N, "times": 1, "reset": False}},
        "rate_bps": N or None}. A given "drop" replaces all drops ({} clears them); a given
        "rate_bps" sets the shared limit (None: unlimited). Returns faults()."""
        return self.injected.set(faults)

    def faults(self) -> dict:
        return self.injected.current()

    def status(self) -> dict:
        return {
            "version": self.version,
            "pid": os.getpid(),
            "root": str(self.root),
            "root_inode": self.root_inode,
            "url": self.url,
            "repos": {r.repo_id: r.sha for r in self.repos.values()},
            "rate_bps": self.bucket.rate,
            "requests": len(self._requests),
        }

    # ------------------------------------------------------------------ internals

    def _record(self, entry: dict) -> None:
        line = json.dumps(entry, sort_keys=True)
        with self._state_lock:
            self._requests.append(entry)
            with open(self.log_path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")


# --------------------------------------------------------------------------- CLI


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="The lab hub: a Hugging Face Hub simulator (lab/README.md).")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="generate the repos if needed, then serve them")
    serve.add_argument("--root", required=True, help="data directory (repos, requests.jsonl)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8090)
    serve.add_argument("--rate-mbps", type=float, default=None,
                       help="shared bandwidth limit over all connections, in megabits per second (default: unlimited)")
    serve.add_argument("--bench", action="store_true", help="also serve glm53-lab/bench-1g (8 x 128 MiB)")
    args = parser.parse_args(argv)

    rate = args.rate_mbps * 1e6 / 8 if args.rate_mbps else None
    hub = Hub(args.root, host=args.host, port=args.port, rate_bps=rate, bench=args.bench,
              log=lambda msg: print(f"[hub] {msg}", flush=True))

    def stop(signum, _frame):
        print(f"[hub] signal {signum}: stopping", flush=True)
        hub.request_shutdown()

    hub.bind()
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    limit = f"{args.rate_mbps:g} Mbit/s shared" if rate else "unlimited"
    print(f"[hub] pid {os.getpid()} serving {len(hub.repos)} repos at {hub.url} (root {hub.root}, bandwidth {limit}, "
          f"code {hub.version})", flush=True)
    hub.serve_forever()
    print("[hub] stopped", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

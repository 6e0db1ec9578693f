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
shared blob store; see xet_hash()).
Standard library only (runs from lab/ with the controller's system python3).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import repos as _repos  # noqa: E402  (next to this file, see above)

GATED_TOKEN = _repos.GATED_TOKEN
PINNED = _repos.PINNED

SEND_CHUNK = 1 << 20  # body write size when no rate limit applies


def code_version() -> str:
    """Hash of the hub's own code: lab/spark_lab.py restarts a hub running older code."""
    h = hashlib.sha256()
    for name in ("hub.py", "repos.py"):
        h.update((HERE / name).read_bytes())
    return h.hexdigest()[:12]


class TokenBucket:
    """One bandwidth limit (bytes/s) shared by every connection, like one office uplink.

    Each writer reserves the next slot of the line for its chunk and sleeps until that slot
    has passed; slots never overlap, so N parallel transfers share `rate` between them. No
    burst credit builds up while the line is idle."""

    def __init__(self, rate: float | None = None):
        self._lock = threading.Lock()
        self._next_free = 0.0
        self.rate = rate

    def set_rate(self, rate: float | None) -> None:
        with self._lock:
            self.rate = float(rate) if rate else None

    def chunk_size(self) -> int:
        rate = self.rate
        # About 50 slots per second: smooth sharing without a syscall storm.
        return SEND_CHUNK if not rate else int(min(SEND_CHUNK, max(4096, rate / 50)))

    def take(self, nbytes: int) -> None:
        with self._lock:
            rate = self.rate
            if not rate:
                return
            now = time.monotonic()
            start = max(now, self._next_free)
            self._next_free = start + nbytes / rate
            wait = self._next_free - now
        if wait > 0:
            time.sleep(wait)


class _Dropped(Exception):
    """The injected fault cut the connection."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, handler, hub):
        self.hub = hub
        self.connections = set()
        self.conn_lock = threading.Lock()
        super().__init__(addr, handler)


class Hub:
    """The lab hub, in this process (tests) or behind `hub.py serve` (the lab).

    root: data directory (ROOT/repos: generated repos, ROOT/requests.jsonl: request log).
    repos: None (all lab repos), an iterable of repo ids (a subset of the catalog), or
        RepoSpec objects. bench: include glm53-lab/bench-1g. lfs_size: bytes of every LFS
        file instead of the lab sizes (small repos for fast unit tests).
    rate_bps: shared bandwidth limit in bytes per second (None: unlimited).
    xet_headers: resolve answers of LFS files carry X-Xet-Hash (xet_hash()) and an
        X-Xet-Refresh-Route that is not served, as the Hub's do for Xet files. There is no
        Xet storage: only a client without hf_xet downloads such a file (over plain HTTP)."""

    def __init__(self, root, host="127.0.0.1", port=0, rate_bps=None, repos=None, bench=False, lfs_size=None, log=None,
                 xet_headers=False):
        self.root = Path(root)
        self.xet_headers = xet_headers
        self.host = host
        self.port = port
        self.initial_rate = rate_bps
        self.bucket = TokenBucket(rate_bps)
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
        self._drops: dict[str, dict] = {}
        self.log_path = self.root / "requests.jsonl"
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.version = code_version()

    # ------------------------------------------------------------------ lifecycle

    def prepare(self) -> "Hub":
        """Generate the repos (idempotent) without serving."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.repos = _repos.ensure(self.root, self.specs, log=self._log_fn)
        return self

    def bind(self) -> "Hub":
        """Generate the repos and open the listening socket (port 0: any free port)."""
        self.prepare()
        self.log_path.touch()
        self._server = _Server((self.host, self.port), _Handler, self)
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
            self._drops.clear()
            self.log_path.write_text("")
        self.bucket.set_rate(self.initial_rate)

    def set_faults(self, faults: dict) -> dict:
        """{"drop": {"<file>" or "<repo_id>/<file>": {"after_bytes": N, "times": 1, "reset": False}},
        "rate_bps": N or None}. A given "drop" replaces all drops ({} clears them); a given
        "rate_bps" sets the shared limit (None: unlimited). Returns faults()."""
        if not isinstance(faults, dict):
            raise ValueError("faults: expected a JSON object")
        unknown = set(faults) - {"drop", "rate_bps"}
        if unknown:
            raise ValueError(f"faults: unknown key(s) {sorted(unknown)}; expected drop, rate_bps")
        drops = None
        if "drop" in faults:
            drops = {}
            for name, spec in (faults["drop"] or {}).items():
                if not isinstance(spec, dict) or not isinstance(spec.get("after_bytes"), int) or spec["after_bytes"] < 0:
                    raise ValueError(f"drop[{name!r}]: expected {{'after_bytes': N >= 0, 'times': 1 or null}}")
                times = spec.get("times", 1)
                if times is not None and (not isinstance(times, int) or times < 1):
                    raise ValueError(f"drop[{name!r}].times: expected a count >= 1, or null for every time")
                drops[name] = {"after_bytes": spec["after_bytes"], "times": times, "reset": bool(spec.get("reset")), "done": 0}
        if "rate_bps" in faults:
            rate = faults["rate_bps"]
            if rate is not None and (not isinstance(rate, (int, float)) or rate <= 0):
                raise ValueError("rate_bps: expected bytes per second > 0, or null for unlimited")
            self.bucket.set_rate(rate)
        if drops is not None:
            with self._state_lock:
                self._drops = drops
        return self.faults()

    def faults(self) -> dict:
        with self._state_lock:
            return {"drop": {k: dict(v) for k, v in self._drops.items()}, "rate_bps": self.bucket.rate}

    def status(self) -> dict:
        return {
            "version": self.version,
            "pid": os.getpid(),
            "root": str(self.root),
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

    def _claim_drop(self, repo_id: str, filename: str, start: int, end: int) -> tuple[int, bool] | None:
        """(file offset to cut at, reset) when a drop fault applies to this response."""
        with self._state_lock:
            for key in (f"{repo_id}/{filename}", filename):
                drop = self._drops.get(key)
                if drop is None:
                    continue
                if drop["times"] is not None and drop["done"] >= drop["times"]:
                    return None
                cut = max(drop["after_bytes"], start)
                if cut >= end:
                    return None  # the response ends before the cut point
                drop["done"] += 1
                return cut, drop["reset"]
        return None


# ---------------------------------------------------------------------- handler

_API_RE = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)(?:/(?P<kind>revision|tree)/(?P<rev>[^/]+)(?P<rest>/.*)?)?$")
_RESOLVE_RE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


class _HubError(Exception):
    def __init__(self, status: int, code: str | None, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "glm53-lab-hub"
    timeout = 120  # idle keep-alive connections end eventually
    server: _Server

    def setup(self):
        super().setup()
        with self.server.conn_lock:
            self.server.connections.add(self.connection)

    def finish(self):
        with self.server.conn_lock:
            self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        pass  # requests.jsonl is the log

    @property
    def hub(self) -> Hub:
        return self.server.hub

    # --------------------------------------------------------------- dispatch

    def do_HEAD(self):  # noqa: N802 (http.server naming)
        self._dispatch(head=True)

    def do_GET(self):  # noqa: N802
        self._dispatch(head=False)

    def do_POST(self):  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = urlsplit(self.path).path
        try:
            if path == "/_lab/reset":
                self.hub.reset()
                self._send_json(200, {"reset": True})
            elif path == "/_lab/faults":
                self._send_json(200, self.hub.set_faults(json.loads(body or b"{}")))
            else:
                self._send_json(404, {"error": f"no POST route {path}"})
        except ValueError as exc:
            self._send_json(400, {"error": str(exc)})

    def _dispatch(self, head: bool):
        split = urlsplit(self.path)
        path, query = split.path, parse_qs(split.query)
        if path.startswith("/_lab/") and not head:
            self._lab_get(path)
            return
        entry = {
            "ts": round(time.time(), 3),
            "client": self.client_address[0],
            "method": self.command,
            "path": self.path,
            "repo": None,
            "revision": None,
            "file": None,
            "status": None,
            "range": self.headers.get("Range"),
            "bytes_sent": 0,
            "complete": False,
        }
        try:
            m = _RESOLVE_RE.match(path)
            if m:
                entry.update(repo=unquote(m["repo"]), revision=unquote(m["rev"]), file=unquote(m["file"]))
                self._resolve(entry, head)
                return
            m = _API_RE.match(path)
            if m:
                entry.update(repo=unquote(m["repo"]), revision=unquote(m["rev"]) if m["rev"] else None)
                if m["kind"] == "tree":
                    self._tree(entry, unquote((m["rest"] or "").lstrip("/")), query, head)
                else:
                    self._model_info(entry, query, head)
                return
            raise _HubError(404, None, f"Sorry, we can't find the page you are looking for: {path}")
        except _HubError as err:
            self._send_error(entry, err, head)
        finally:
            self.hub._record(entry)  # pylint: disable=protected-access

    def _lab_get(self, path: str):
        if path == "/_lab/requests":
            self._send_json(200, self.hub.requests())
        elif path == "/_lab/faults":
            self._send_json(200, self.hub.faults())
        elif path == "/_lab/status":
            self._send_json(200, self.hub.status())
        else:
            self._send_json(404, {"error": f"no lab route {path}"})

    # ------------------------------------------------------------ hub logic

    def _token(self) -> str | None:
        auth = self.headers.get("Authorization") or ""
        scheme, _sep, value = auth.partition(" ")
        return value.strip() if scheme.lower() == "bearer" and value.strip() else None

    def _repo(self, repo_id: str) -> _repos.Repo:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            # The Hub answers 401 without credentials (it will not say whether a private repo
            # exists) and 404 with them; X-Error-Code tells the client either way.
            status = 404 if self._token() else 401
            raise _HubError(status, "RepoNotFound", "Repository not found")
        return repo

    def _revision(self, repo: _repos.Repo, revision: str | None) -> str:
        """The commit sha a revision names: the full sha, or `main` (the only branch)."""
        if revision is None or revision in (repo.sha, "main", "refs/heads/main"):
            return repo.sha
        raise _HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")

    def _check_gate(self, repo: _repos.Repo) -> None:
        if not repo.spec.gated:
            return
        token = self._token()
        if token is None:
            raise _HubError(
                401, "GatedRepo",
                f"Access to model {repo.repo_id} is restricted. You must have access to it and be authenticated to access it. Please log in.",
            )
        if token not in repo.spec.tokens:
            raise _HubError(
                403, "GatedRepo",
                f"Access to model {repo.repo_id} is restricted and you are not in the authorized list. "
                f"Visit {self._base_url()}/{repo.repo_id} to ask for access.",
            )

    def _base_url(self) -> str:
        host = self.headers.get("Host") or f"{self.hub.host}:{self.hub.port}"
        return f"http://{host}"

    def _model_info(self, entry: dict, query: dict, head: bool):
        repo = self._repo(entry["repo"])
        sha = self._revision(repo, entry["revision"])
        blobs = (query.get("blobs") or ["false"])[-1].lower() in ("1", "true")
        siblings = []
        for f in repo.files.values():
            sib = {"rfilename": f.name}
            if blobs:
                sib.update(size=f.size, blobId=f.blob_id)
                if f.lfs:
                    sib["lfs"] = {"sha256": f.sha256, "size": f.size, "pointerSize": f.pointer_size}
            siblings.append(sib)
        org = repo.repo_id.split("/")[0] if "/" in repo.repo_id else None
        info = {
            "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "author": org,
            "sha": sha,
            "lastModified": _repos.LAST_MODIFIED,
            "createdAt": _repos.CREATED_AT,
            "private": False,
            "gated": repo.spec.gated,
            "disabled": False,
            "downloads": 0,
            "likes": 0,
            "library_name": "transformers",
            "tags": list(repo.spec.tags),
            "siblings": siblings,
            "usedStorage": repo.used_storage,
        }
        if repo.spec.license:
            info["cardData"] = {"license": repo.spec.license}
        self._send_json(200, info, entry=entry, head=head, extra={"X-Repo-Commit": sha})

    def _tree(self, entry: dict, sub: str, query: dict, head: bool):
        repo = self._repo(entry["repo"])
        sha = self._revision(repo, entry["revision"])
        recursive = (query.get("recursive") or ["false"])[-1].lower() in ("1", "true")
        prefix = sub.rstrip("/") + "/" if sub else ""
        if sub and not any(n.startswith(prefix) for n in repo.files):
            raise _HubError(404, "EntryNotFound", f"{sub} does not exist on \"{sha}\"", {"X-Repo-Commit": sha})
        items, folders = [], set()
        for f in repo.files.values():
            if not f.name.startswith(prefix):
                continue
            rel = f.name[len(prefix):]
            if "/" in rel and not recursive:
                folders.add(prefix + rel.split("/")[0])
                continue
            if recursive:
                parts = rel.split("/")[:-1]
                folders.update(prefix + "/".join(parts[: i + 1]) for i in range(len(parts)))
            item = {"type": "file", "oid": f.blob_id, "size": f.size, "path": f.name}
            if f.lfs:
                item["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": f.pointer_size}
            items.append(item)
        for folder in sorted(folders):
            items.append({"type": "directory", "oid": hashlib.sha1(f"tree {sha} {folder}".encode()).hexdigest(), "size": 0, "path": folder})
        self._send_json(200, items, entry=entry, head=head, extra={"X-Repo-Commit": sha})

    def _resolve(self, entry: dict, head: bool):
        repo = self._repo(entry["repo"])
        self._check_gate(repo)
        sha = self._revision(repo, entry["revision"])
        f = repo.files.get(entry["file"])
        if f is None:
            raise _HubError(404, "EntryNotFound", "Entry not found", {"X-Repo-Commit": sha})
        size = f.size
        start, end, status = 0, size, 200  # end exclusive
        rng = self.headers.get("Range")
        if rng:
            parsed = _parse_range(rng, size)
            if parsed == "unsatisfiable":
                raise _HubError(416, None, "Requested Range Not Satisfiable", {"Content-Range": f"bytes */{size}"})
            if parsed is not None:
                start, end = parsed
                status = 206
        headers = {
            "Content-Type": "application/octet-stream" if f.lfs else "text/plain; charset=utf-8",
            "Content-Length": str(end - start),
            "Accept-Ranges": "bytes",
            "ETag": f'"{f.etag}"',
            "X-Repo-Commit": sha,
            "Content-Disposition": f"inline; filename*=UTF-8''{quote(f.name.rsplit('/', 1)[-1])}; filename=\"{f.name.rsplit('/', 1)[-1]}\";",
            "X-Request-Id": _request_id(),
        }
        if f.lfs:
            headers["X-Linked-Etag"] = f'"{f.sha256}"'
            headers["X-Linked-Size"] = str(f.size)
            if self.hub.xet_headers:
                headers["X-Xet-Hash"] = xet_hash(f.sha256)
                headers["X-Xet-Refresh-Route"] = f"{self._base_url()}/api/models/{repo.repo_id}/xet-read-token/{sha}"
        if status == 206:
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        entry["status"] = status
        if head:
            entry["complete"] = True
            return
        cut = self.hub._claim_drop(repo.repo_id, f.name, start, end)  # pylint: disable=protected-access
        stop = cut[0] if cut else end
        try:
            self._send_file(f.path, start, stop, entry)
            if cut:
                raise _Dropped()
            entry["complete"] = True
        except _Dropped:
            self._cut(reset=cut[1])
        except OSError:
            self.close_connection = True  # the client went away

    def _send_file(self, path: Path, start: int, stop: int, entry: dict) -> None:
        bucket = self.hub.bucket
        with open(path, "rb") as fh:
            fh.seek(start)
            left = stop - start
            while left > 0:
                data = fh.read(min(bucket.chunk_size(), left))
                if not data:
                    raise OSError(f"{path} is shorter than its manifest says")
                bucket.take(len(data))
                self.wfile.write(data)
                entry["bytes_sent"] += len(data)
                left -= len(data)

    def _cut(self, reset: bool) -> None:
        """End the connection mid-body: a FIN (the client sees an incomplete body), or an RST."""
        self.close_connection = True
        try:
            self.wfile.flush()
            if reset:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -------------------------------------------------------------- replies

    def _send_json(self, status: int, obj, entry: dict | None = None, head: bool = False, extra: dict | None = None):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Request-Id", _request_id())
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)
        if entry is not None:
            entry.update(status=status, bytes_sent=0 if head else len(body), complete=True)

    def _send_error(self, entry: dict, err: _HubError, head: bool):
        extra = dict(err.headers)
        if err.code:
            extra["X-Error-Code"] = err.code
        extra["X-Error-Message"] = err.message
        self._send_json(err.status, {"error": err.message}, entry=entry, head=head, extra=extra)


def xet_hash(sha256: str) -> str:
    """The stand-in Xet hash of an LFS file: 64 hex like the real one (a Merkle hash of its
    chunks, which the client treats as an opaque name), and unlike its sha256."""
    return hashlib.sha256(b"lab-xet\0" + sha256.encode()).hexdigest()


def _request_id() -> str:
    return "Root=1-" + uuid.uuid4().hex[:8] + "-" + uuid.uuid4().hex[:24]


def _parse_range(value: str, size: int):
    """(start, end exclusive) of a single `bytes=` range, "unsatisfiable", or None to ignore
    the header (multiple ranges or garbage: answered with the whole file, as RFC 9110 allows)."""
    m = _RANGE_RE.match(value.strip())
    if not m or (not m[1] and not m[2]):
        return None
    if not m[1]:  # suffix: the last N bytes
        n = int(m[2])
        return (max(0, size - n), size) if n > 0 else "unsatisfiable"
    start = int(m[1])
    end = min(int(m[2]) + 1, size) if m[2] else size
    if start >= size or end <= start:
        return "unsatisfiable"
    return start, end


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

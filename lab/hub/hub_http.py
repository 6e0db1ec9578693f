"""The HTTP side of the lab hub (lab/hub/hub.py): the Hub's API routes, its headers and errors,
ranged downloads under the shared bandwidth limit and the injected drops, and the /_lab/
control routes. Standard library only."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import struct
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote, unquote, urlsplit

import repos as _repos  # next to this file: hub.py puts this directory on sys.path

if TYPE_CHECKING:
    from hub import Hub


class _Dropped(Exception):
    """The injected fault cut the connection."""


class HubServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, handler, hub):
        self.hub = hub
        self.connections = set()
        self.conn_lock = threading.Lock()
        super().__init__(addr, handler)


_API_RE = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)?)(?:/(?P<kind>revision|tree)/(?P<rev>[^/]+)(?P<rest>/.*)?)?$")
_RESOLVE_RE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_RANGE_RE = re.compile(r"^bytes=(\d*)-(\d*)$")


class _HubError(Exception):
    def __init__(self, status: int, code: str | None, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "glm53-lab-hub"
    timeout = 120  # idle keep-alive connections end eventually
    server: HubServer

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
        cut = self.hub.injected.claim_drop(repo.repo_id, f.name, start, end)
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

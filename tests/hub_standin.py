"""A small Hugging Face Hub stand-in on loopback, serving one folder as a dataset repository.

The Hub is the one boundary the tests cannot reach, so this is a real HTTP server (stdlib
`http.server`, threads) that answers exactly the endpoints `datasets` 5.2 and `huggingface_hub`
2.4 call for `load_dataset("org/name")` and `load_dataset("org/name", config)` (read in their
source: `datasets.load.dataset_module_factory` / `HubDatasetModuleFactory`, `HfApi.dataset_info`,
`hf_hub_download`, `HfFileSystem`):

- `HEAD|GET /datasets/{repo}/resolve/{revision}/{path}`: the file, with `X-Repo-Commit`, `ETag`
  and `Content-Length` (what `get_hf_file_metadata` reads); `Range` requests answered with 206;
- `GET /api/datasets/{repo}` and `/api/datasets/{repo}/revision/{revision}`: repo info (`id`,
  `sha`, `siblings`, ...);
- `GET /api/datasets/{repo}/tree/{revision}[/{path}]` (`?recursive=`): the listing `HfFileSystem`
  globs data files with;
- `POST /api/datasets/{repo}/paths-info/{revision}`: info on given paths.

Anything else is answered 404 and recorded in `unhandled`, so a test sees a new endpoint as soon
as `datasets` starts calling one. A plain file server is not enough (TOOLCHAINS.md): `datasets`
needs the commit header and the tree and paths-info endpoints.
"""

from __future__ import annotations

import hashlib
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class HubStandIn:
    """Serve `folder` as dataset repo `repo_id` at `self.endpoint` (use as a context manager)."""

    def __init__(self, folder: str | Path, repo_id: str) -> None:
        self.folder = Path(folder).resolve()
        self.repo_id = repo_id
        self.sha = hashlib.sha1(repo_id.encode()).hexdigest()  # one fixed commit
        self.requests: list[str] = []
        self.unhandled: list[str] = []
        handler = type("Handler", (_Handler,), {"hub": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "HubStandIn":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ---------------------------------------------------------------- repository content
    def files(self) -> list[Path]:
        return sorted(p for p in self.folder.rglob("*") if p.is_file())

    def entry(self, path: Path) -> dict:
        rel = str(path.relative_to(self.folder))
        if path.is_dir():
            return {"type": "directory", "path": rel, "oid": hashlib.sha1(rel.encode()).hexdigest()}
        data = path.read_bytes()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id
        return {"type": "file", "path": rel, "size": len(data), "oid": blob}

    def resolve(self, rel: str) -> Path | None:
        path = (self.folder / urllib.parse.unquote(rel)).resolve()
        return path if self.folder in path.parents or path == self.folder else None


class _Handler(BaseHTTPRequestHandler):
    hub: HubStandIn
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet: requests are recorded in hub.requests
        pass

    # ---------------------------------------------------------------- routing
    def _route(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        self.hub.requests.append(f"{method} {url.path}")
        repo = self.hub.repo_id
        parts = url.path.split("/")
        try:
            if url.path.startswith(f"/datasets/{repo}/resolve/"):
                rest = url.path[len(f"/datasets/{repo}/resolve/"):]
                _, _, rel = rest.partition("/")
                return self._file(rel, head=method == "HEAD")
            if url.path in (f"/api/datasets/{repo}", f"/api/datasets/{repo}/") or \
                    url.path.startswith(f"/api/datasets/{repo}/revision/"):
                return self._json(self._repo_info())
            if url.path.startswith(f"/api/datasets/{repo}/tree/"):
                rest = url.path[len(f"/api/datasets/{repo}/tree/"):]
                _, _, rel = rest.partition("/")
                query = urllib.parse.parse_qs(url.query)
                return self._tree(rel, recursive=query.get("recursive", ["false"])[0].lower() == "true")
            if method == "POST" and url.path.startswith(f"/api/datasets/{repo}/paths-info/"):
                return self._paths_info()
            del parts
        except BrokenPipeError:
            return
        self.hub.unhandled.append(f"{method} {self.path}")
        self._json({"error": f"not served by the stand-in: {method} {url.path}"}, status=404)

    def do_GET(self) -> None:
        self._route("GET")

    def do_HEAD(self) -> None:
        self._route("HEAD")

    def do_POST(self) -> None:
        self._route("POST")

    # ---------------------------------------------------------------- endpoints
    def _repo_info(self) -> dict:
        return {"id": self.hub.repo_id, "sha": self.hub.sha, "private": False, "disabled": False, "gated": False,
                "downloads": 0, "likes": 0, "tags": [], "lastModified": "2026-12-01T00:00:00.000Z",
                "siblings": [{"rfilename": str(p.relative_to(self.hub.folder))} for p in self.hub.files()]}

    def _file(self, rel: str, *, head: bool) -> None:
        path = self.hub.resolve(rel)
        if path is None or not path.is_file():
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound")
            self.send_header("X-Repo-Commit", self.hub.sha)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = path.read_bytes()
        status, body = 200, data
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            start_text, _, end_text = rng[6:].partition("-")
            start = int(start_text or 0)
            end = min(int(end_text) if end_text else len(data) - 1, len(data) - 1)
            status, body = 206, data[start:end + 1]
        self.send_response(status)
        self.send_header("X-Repo-Commit", self.hub.sha)
        self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{start + len(body) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _tree(self, rel: str, *, recursive: bool) -> None:
        base = self.hub.resolve(rel) if rel else self.hub.folder
        if base is None or not base.is_dir():
            return self._json({"error": "Entry not found"}, status=404, error_code="EntryNotFound")
        items = base.rglob("*") if recursive else base.iterdir()
        self._json([self.hub.entry(p) for p in sorted(items)])

    def _paths_info(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        if "json" in (self.headers.get("Content-Type") or ""):
            paths = json.loads(body).get("paths", [])
        else:
            paths = urllib.parse.parse_qs(body).get("paths", [])
        out = []
        for rel in paths:
            path = self.hub.resolve(rel)
            if path is not None and path.exists():
                out.append(self.hub.entry(path))
        self._json(out)

    def _json(self, value, status: int = 200, error_code: str | None = None) -> None:
        data = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Repo-Commit", self.hub.sha)
        if error_code:
            self.send_header("X-Error-Code", error_code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

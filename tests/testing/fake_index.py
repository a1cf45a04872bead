"""A package index on the loopback interface whose release list can grow: PEP 691 JSON for
one project, one (never downloaded) wheel file name per release, served by ``http.server``.

    with FakeIndex(["0.33.0"]) as index:      # index.url: http://127.0.0.1:PORT/simple/
        index.add("0.34.0")                   # the next request lists it
"""

from __future__ import annotations

import http.server
import json
import threading


class FakeIndex:
    """A PEP 691 simple index of ``project`` listing ``versions`` (mutable: :meth:`add`)."""

    def __init__(self, versions: list[str], project: str = "vllm") -> None:
        self.versions = list(versions)
        self.project = project
        self.requests = 0
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - the base class's name
                index.requests += 1
                if self.path.rstrip("/") != f"/simple/{index.project}":
                    self.send_error(404)
                    return
                files = [{"filename": f"{index.project}-{v}-cp38-abi3-manylinux_2_28_x86_64.whl",
                          "url": f"../../files/{v}.whl", "hashes": {}, "yanked": False} for v in index.versions]
                body = json.dumps({"meta": {"api-version": "1.1"}, "name": index.project, "files": files}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def add(self, version: str) -> None:
        """The index gains a release (as PyPI does on release day)."""
        self.versions.append(version)

    def __enter__(self) -> FakeIndex:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop answering (the index cannot be reached any more)."""
        self.server.shutdown()
        self.server.server_close()

"""An OTLP/HTTP trace receiver for tests: a real HTTP server on 127.0.0.1 that decodes each
``POST /v1/traces`` body (protobuf ``ExportTraceServiceRequest``) into plain span dicts."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OtlpReceiver:
    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                ok = self.path == "/v1/traces"
                if ok:
                    receiver._decode(body)
                self.send_response(200 if ok else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def _decode(self, body: bytes) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        out = []
        for rs in req.resource_spans:
            res = {a.key: a.value.string_value for a in rs.resource.attributes}
            for ss in rs.scope_spans:
                for s in ss.spans:
                    attrs = {}
                    for a in s.attributes:
                        v = a.value
                        attrs[a.key] = getattr(v, v.WhichOneof("value")) if v.WhichOneof(
                            "value") else None
                    out.append({
                        "name": s.name, "trace_id": s.trace_id.hex(), "span_id": s.span_id.hex(),
                        "parent_id": s.parent_span_id.hex() or None,
                        "service": res.get("service.name"), "attributes": attrs,
                    })
        with self.lock:
            self.spans.extend(out)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

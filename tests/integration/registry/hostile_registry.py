#!/usr/bin/python3
"""A registry that lies, for the pull hardening tests (issue 24): serves the distribution
API's manifests and blobs from DIR, and does what CONF (a JSON file re-read on every request,
so a test changes it between pulls) tells it to do wrong:

  "challenge": "Bearer realm=..."  answer requests without the expected token with 401 and
                                   this WWW-Authenticate header
  "token": "..."                   what GET /token answers ({"token": ...}); the bearer token
                                   the registry then accepts
  "pad": {"sha256:...": N}         serve that blob as its bytes followed by zeros, N bytes in all
  "ranges": true                    answer a blob's range requests (206 with those bytes), as a
                                   registry does; without it a blob is always sent whole
  "busy": {"count": N, "retry_after": "S"}
                                   answer the next N requests under /v2/NAME/ with 429 (Too
                                   Many Requests), with Retry-After: S when given; counted
                                   anew whenever this entry changes

Every request is logged to LOG as "METHOD PATH | header: value | ..." and, for a blob, the
bytes that went out before the client hung up ("sent N bytes of sha256:...").

    hostile_registry.py PORT DIR CONF LOG

DIR holds manifests/NAME/REFERENCE (the manifest, served with its media type and digest) and
blobs/sha256:HEX; files/NAME is served at /files/NAME as a web server serves a file (range
requests answered).
"""
import hashlib
import http.server
import json
import os
import sys

port, root, conf_path, log_path = sys.argv[1:5]
busy_served = {}  # the "busy" entry (as text) -> the 429s it has answered


def log(line):
    with open(log_path, "a") as out:
        out.write(line + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        conf = json.load(open(conf_path))
        log(" | ".join([f"GET {self.path}"] + [f"{k}: {v}" for k, v in self.headers.items()]))
        if self.path.startswith("/token"):
            return self.reply(200, json.dumps({"token": conf.get("token", "")}).encode(), "application/json")
        if self.path.startswith("/files/"):  # a web server's files, with range requests
            path = os.path.join(root, "files", os.path.basename(self.path))
            if not os.path.isfile(path):
                return self.reply(404, b"not found\n", "text/plain")
            data = open(path, "rb").read()
            if self.headers.get("Range", "").startswith("bytes="):
                return self.range(data)
            return self.reply(200, data, "application/octet-stream")
        challenge = conf.get("challenge")
        if challenge and self.headers.get("Authorization") != "Bearer " + conf.get("token", ""):
            return self.reply(401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', "application/json",
                              {"WWW-Authenticate": challenge})
        parts = self.path.split("/")
        if self.path == "/v2/":
            return self.reply(200, b"{}", "application/json")
        busy = conf.get("busy")
        if busy:
            key = json.dumps(busy, sort_keys=True)
            if busy_served.get(key, 0) < busy.get("count", 0):
                busy_served[key] = busy_served.get(key, 0) + 1
                extra = {"Retry-After": busy["retry_after"]} if "retry_after" in busy else {}
                return self.reply(429, b'{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}',
                                  "application/json", extra)
        if len(parts) >= 5 and parts[-2] == "manifests":
            name = "/".join(parts[2:-2])
            path = os.path.join(root, "manifests", name, parts[-1])
            if not os.path.exists(path):
                return self.reply(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', "application/json")
            body = open(path, "rb").read()
            media = json.loads(body).get("mediaType", "application/vnd.oci.image.manifest.v1+json")
            return self.reply(200, body, media,
                              {"Docker-Content-Digest": "sha256:" + hashlib.sha256(body).hexdigest()})
        if len(parts) >= 5 and parts[-2] == "blobs":
            digest = parts[-1]
            path = os.path.join(root, "blobs", digest)
            if not os.path.exists(path):
                return self.reply(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}', "application/json")
            data = open(path, "rb").read()
            if conf.get("ranges") and self.headers.get("Range", "").startswith("bytes="):
                return self.range(data)
            return self.blob(digest, data, conf.get("pad", {}).get(digest))
        self.reply(404, b"{}", "application/json")

    def blob(self, digest, data, total):
        total = total or len(data)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(total))
        self.end_headers()
        sent = 0
        zeros = bytes(1 << 16)
        try:
            while sent < total:
                chunk = data[sent:sent + len(zeros)] if sent < len(data) else zeros
                chunk = chunk[:total - sent]
                self.wfile.write(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        log(f"sent {sent} bytes of {digest}")

    def range(self, data):
        first, _, last = self.headers["Range"][6:].partition("-")
        part = data[int(first):int(last) + 1]
        self.reply(206, part, "application/octet-stream",
                   {"Content-Range": f"bytes {first}-{int(first) + len(part) - 1}/{len(data)}"})

    def reply(self, status, body, media, headers=None):
        self.send_response(status)
        if status == 206:
            log(f"sent {len(body)} bytes of a range")
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", int(port)), Handler).serve_forever()

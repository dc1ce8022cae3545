#!/usr/bin/python3
"""A Docker registry token service for the pull tests (the distribution spec's "token
authentication"): GET /token?service=S&scope=repository:NAME:ACTIONS with HTTP basic auth
answers {"token": JWT}. The JWT is RS256-signed with KEY (openssl does the signing) and
carries CERT in its x5c header, which the registry checks against its rootcertbundle.
A known user gets the actions it asked for; anyone else gets a token granting nothing, so
the registry refuses them as it would on a real site.

    token_server.py PORT KEY CERT ISSUER USER:PASSWORD LOG
"""
import base64
import http.server
import json
import os
import subprocess
import sys
import time
import urllib.parse

port, key, cert, issuer, account, log = sys.argv[1:7]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def cert_der() -> str:
    der = subprocess.run(["openssl", "x509", "-in", cert, "-outform", "DER"], check=True,
                         capture_output=True).stdout
    return base64.b64encode(der).decode()


X5C = cert_der()


def token(service: str, scopes: list, subject: str) -> str:
    header = {"typ": "JWT", "alg": "RS256", "x5c": [X5C]}
    now = int(time.time())
    # CTR_TEST_TOKEN_SECONDS: how long a token is good for (a long job's token expiring). The
    # registry (distribution) accepts a token up to 60 s past its "exp" (its Leeway), so "exp"
    # is set that much earlier.
    seconds = int(os.environ.get("CTR_TEST_TOKEN_SECONDS", "360"))
    claims = {"iss": issuer, "sub": subject, "aud": service, "iat": now, "nbf": now - 10,
              "exp": now + seconds - 60, "jti": b64url(os.urandom(12)), "access": scopes}
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key], input=signing_input.encode(),
                               check=True, capture_output=True).stdout
    return signing_input + "." + b64url(signature)


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        if url.path != "/token":
            self.send_error(404)
            return
        query = urllib.parse.parse_qs(url.query)
        user = ""
        auth = self.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            if base64.b64decode(auth[6:]).decode() == account:
                user = account.split(":", 1)[0]
            else:
                self.send_error(401, "wrong credentials")
                return
        scopes = []
        for scope in query.get("scope", []):
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            scopes.append({"type": kind, "name": name, "actions": actions.split(",") if user else []})
        body = json.dumps({"token": token(query.get("service", [""])[0], scopes, user or "anonymous")}).encode()
        with open(log, "a") as out:
            out.write(f"token for {user or 'anonymous'}: {query.get('scope', [])}\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


http.server.HTTPServer(("127.0.0.1", int(port)), Handler).serve_forever()

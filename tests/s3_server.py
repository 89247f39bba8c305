"""A real S3-compatible server for the tests: moto's server mode in its own process on a
loopback port, with IAM enforced, so a reader's credentials can be denied writes as a
team bucket's are, and every request it serves logged (``requests``) for tests that
count what a command fetched."""

from __future__ import annotations

import contextlib
import dataclasses
import http.client
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

# The requests moto serves before it checks credentials: exactly the set-up below (two
# users, each with a policy and a key); everything after is signed by one of them.
_SETUP_ACTIONS = 6
READ_ONLY = ["s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation"]


@dataclasses.dataclass
class S3Server:
    url: str
    log: Path
    keys: dict[str, tuple[str, str]]  # "writer" (every S3 action), "reader" (gets and lists only)

    def env(self, user: str = "writer") -> dict[str, str]:
        """The standard AWS environment a process finds the bucket by, as ``user``."""
        key, secret = self.keys[user]
        return {
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.url,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self, user: str = "writer"):
        import boto3

        key, secret = self.keys[user]
        return boto3.client(
            "s3", endpoint_url=self.url, aws_access_key_id=key, aws_secret_access_key=secret, region_name="us-east-1"
        )

    def upload(self, local: Path, bucket: str, prefix: str) -> None:
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=bucket)
        for path in sorted(local.rglob("*")):
            if path.is_file():
                client.upload_file(str(path), bucket, f"{prefix}/{path.relative_to(local).as_posix()}")

    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request served so far, from the server's own log."""
        return [(method, path) for method, path, _ in self.answers()]

    def answers(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of every request served so far: a range read (the first
        bytes discovery looks at) is answered 206, a whole object 200."""
        # werkzeug colours the lines of some answers (206 for a range read, 404) with ANSI codes
        pattern = re.compile(r'"(?:\x1b\[[0-9;]*m)*(GET|HEAD|PUT|POST|DELETE) (\S+) HTTP/1\.[01](?:\x1b\[0m)?" (\d+)')
        text = self.log.read_text(errors="replace")
        return [(method, path, int(status)) for method, path, status in pattern.findall(text)]


@contextlib.contextmanager
def s3_server(log: Path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_SETUP_ACTIONS)}
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"moto's server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}"
        import boto3

        iam = boto3.client(
            "iam", endpoint_url=url, aws_access_key_id="setup", aws_secret_access_key="setup", region_name="us-east-1"
        )
        keys = {}
        for user, actions in (("writer", ["s3:*"]), ("reader", READ_ONLY)):
            iam.create_user(UserName=user)
            policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}
            iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(policy))
            key = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
        yield S3Server(url, log, keys)
    finally:
        process.terminate()
        process.wait(timeout=30)


class CountingProxy:
    """An HTTP proxy on loopback in front of an S3 server that counts every request and the
    bytes answered, each request held ``latency`` seconds first (a real bucket's round
    trip: ``benchmarks/bench_bucket.py`` adds 30 ms)."""

    def __init__(self, upstream: str, latency: float = 0.0):
        target = urllib.parse.urlparse(upstream)
        self.lock = threading.Lock()
        self.requests: list[tuple[str, str, int]] = []  # (method, path, bytes answered)
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if latency:
                    time.sleep(latency)
                call = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
                call.request(self.command, self.path, body=body, headers=dict(self.headers))
                answer = call.getresponse()
                data = answer.read()
                call.close()
                # counted before the client has its answer: counted after, a request could land
                # in the next window a test reads (``since``) on a loaded machine
                with proxy.lock:
                    proxy.requests.append((self.command, self.path, len(data)))
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self) -> int:
        with self.lock:
            return len(self.requests)

    def since(self, start: int) -> list[tuple[str, str, int]]:
        with self.lock:
            return self.requests[start:]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

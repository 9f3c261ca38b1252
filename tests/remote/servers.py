# SPDX-License-Identifier: MIT
"""Real servers on loopback for the remote tests, started and stopped by them.

- Nginx(root, tls=False): Debian's nginx serving a directory (HTTP/1.1, or
  HTTPS with HTTP/2 and a self-signed certificate made here with openssl;
  .ca is the PEM to trust).
- FaultProxy(upstream): an HTTP/1.1 proxy in this process that passes GETs
  to upstream and, per request, injects the faults a network and an object
  store produce: delays, connection resets, 500/503/429, bodies cut short,
  bodies longer than the range, stalls; stop() and start() again on the
  same port.
- Moto(): moto's S3-compatible server from the venv (.venv at the worktree
  root, made by .ci/install-deps); moto_available() says whether it is there.

Every process is started with a deadline to come up and is killed (by its
own pid) at stop(); use them as context managers.
"""
import http.client
import os
import random
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SKIP = 77
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VENV = os.environ.get("RINGFEED_TEST_VENV", os.path.join(ROOT, ".venv"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc=None, timeout=15.0):
    end = time.time() + timeout
    while time.time() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("server exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on port %d after %.0f s" % (port, timeout))


def kill(proc):
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def make_cert(dirname):
    """A self-signed certificate for 127.0.0.1 and localhost."""
    key, crt = os.path.join(dirname, "key.pem"), os.path.join(dirname, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=localhost", "-keyout", key, "-out", crt,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    return key, crt


class Nginx:
    def __init__(self, root, workdir, tls=False):
        self.root, self.workdir, self.tls = root, workdir, tls
        self.port = free_port()
        self.proc = None
        self.ca = None
        scheme = "https" if tls else "http"
        self.url = "%s://127.0.0.1:%d/" % (scheme, self.port)

    def __enter__(self):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.path.exists(nginx):
            print("SKIP: nginx is not installed (apt-get install nginx-light)")
            sys.exit(SKIP)
        d = os.path.join(self.workdir, "nginx-%d" % self.port)
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        listen = "listen 127.0.0.1:%d;" % self.port
        tls = ""
        if self.tls:
            key, crt = make_cert(d)
            self.ca = crt
            # "ssl http2": nginx 1.22 (Debian 12) knows no "http2 on".
            listen = "listen 127.0.0.1:%d ssl http2;" % self.port
            tls = "ssl_certificate %s; ssl_certificate_key %s;" % (crt, key)
        conf = os.path.join(d, "nginx.conf")
        t = os.path.join(d, "tmp")
        with open(conf, "w") as f:
            f.write("""daemon off;
master_process off;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log;
events {}
http {
  log_format rf '$server_protocol $connection $status $http_range';
  access_log %(d)s/access.log rf;
  client_body_temp_path %(t)s; proxy_temp_path %(t)s; fastcgi_temp_path %(t)s;
  uwsgi_temp_path %(t)s; scgi_temp_path %(t)s;
  server { %(listen)s %(tls)s root %(root)s; }
}
""" % dict(d=d, t=t, listen=listen, tls=tls, root=self.root))
        self.proc = subprocess.Popen([nginx, "-c", conf, "-p", d], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        try:
            wait_port(self.port, self.proc)
        except RuntimeError:
            err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""
            raise RuntimeError("nginx did not start: " + err)
        return self

    def __exit__(self, *a):
        kill(self.proc)

    def log(self):
        """[(protocol, connection serial, status, range or "-")] of the requests so far
        (nginx writes its log line when a request ends)."""
        path = os.path.join(self.workdir, "nginx-%d" % self.port, "access.log")
        try:
            with open(path) as f:
                return [tuple(l.split()) for l in f if l.strip()]
        except OSError:
            return []


class FaultProxy:
    """Faults, each given as a probability per request (0..1):
    reset, e500, e503, e429, truncate, short (fewer bytes, consistent
    headers), long (more bytes than the range), stall (headers, then
    silence for stall_s); delay_s is added to every request."""

    def __init__(self, upstream_port, seed=1):
        self.upstream = upstream_port
        self.port = free_port()
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.faults = {}
        self.delay_s = 0.0
        self.stall_s = 3.0
        self.requests = 0
        self.injected = 0
        self.seen = []  # (path, headers) of every request
        # A Range header value: its next 206 response has one byte of its
        # body flipped (a corruption in transit that HTTP does not see),
        # once; then it is cleared.
        self.flip_range = None
        # (path, Range header value): answered with HTTP 503 every time.
        self.fail_range = None
        self.server = None
        self.thread = None
        self.url = "http://127.0.0.1:%d/" % self.port

    def set(self, delay_s=0.0, **faults):
        with self.lock:
            self.faults = dict(faults)
            self.delay_s = delay_s

    def pick(self):
        with self.lock:
            self.requests += 1
            r = self.rng.random()
            acc = 0.0
            for name, p in sorted(self.faults.items()):
                acc += p
                if r < acc:
                    self.injected += 1
                    return name
        return None

    def start(self):
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def reset(self):
                # RST, not FIN: what a crashed server or a middlebox does.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
                self.close_connection = True

            def do_GET(self):
                with proxy.lock:
                    proxy.seen.append((self.path, dict(self.headers.items())))
                fault = proxy.pick()
                if proxy.fail_range == (self.path, self.headers.get("Range")):
                    fault = "e503"
                if proxy.delay_s:
                    time.sleep(proxy.delay_s)
                if fault == "reset":
                    self.reset()
                    return
                if fault in ("e500", "e503", "e429"):
                    code = int(fault[1:])
                    body = (b"<?xml version=\"1.0\"?><Error><Code>SlowDown</Code>"
                            b"<Message>injected %d</Message></Error>" % code)
                    self.send_response(code)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                c = http.client.HTTPConnection("127.0.0.1", proxy.upstream, timeout=10)
                hdrs = {k: v for k, v in self.headers.items() if k.lower() in ("range", "host")}
                c.request("GET", self.path, headers=hdrs)
                resp = c.getresponse()
                body = resp.read()
                c.close()
                status = resp.status
                out = [(k, v) for k, v in resp.getheaders()
                       if k.lower() not in ("connection", "transfer-encoding", "content-length",
                                            "keep-alive")]
                if fault == "long" and status == 206:
                    body = body + b"\0garbage\0" * 3
                elif fault == "short" and status == 206 and len(body) > 1:
                    body = body[: len(body) // 2]
                with proxy.lock:
                    flip = (status == 206 and proxy.flip_range is not None
                            and self.headers.get("Range") == proxy.flip_range and len(body) > 64)
                    if flip:
                        proxy.flip_range = None
                        proxy.injected += 1
                if flip:
                    b = bytearray(body)
                    b[len(b) // 2] ^= 0x5A
                    body = bytes(b)
                self.send_response(status)
                for k, v in out:
                    self.send_header(k, v)
                if fault == "truncate" and len(body) > 1:
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.reset()
                    return
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if fault == "stall" and len(body) > 1:
                    self.wfile.write(body[:1])
                    self.wfile.flush()
                    time.sleep(proxy.stall_s)
                    self.reset()
                    return
                self.wfile.write(body)

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                pass  # resets are the point here, not news

        self.server = Server(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        if self.server:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *a):
        self.stop()


def moto_available():
    return os.path.exists(os.path.join(VENV, "bin", "moto_server"))


class Moto:
    """moto_server; with auth=True, requests must be signed by a key of an
    IAM user: the first few (unsigned) actions make one (make_user)."""

    def __init__(self, workdir, auth=True):
        self.auth = auth
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.workdir = workdir
        self.proc = None

    def __enter__(self):
        if not moto_available():
            print("SKIP: moto is not installed in %s (run .ci/install-deps)" % VENV)
            sys.exit(SKIP)
        log = open(os.path.join(self.workdir, "moto-%d.log" % self.port), "w")
        env = dict(os.environ)
        if self.auth:
            env["INITIAL_NO_AUTH_ACTION_COUNT"] = "3"
        self.proc = subprocess.Popen([os.path.join(VENV, "bin", "moto_server"), "-H", "127.0.0.1",
                                      "-p", str(self.port)], stdout=log, stderr=log, env=env)
        wait_port(self.port, self.proc, timeout=30)
        return self

    def __exit__(self, *a):
        kill(self.proc)

    def boto(self, code, *args, key="AK", secret="SK"):
        """Run Python code with boto3 (the venv's) and `s3`, `iam` clients
        bound to this server; returns its stdout."""
        head = ("import boto3, json, os, sys\n"
                "kw = dict(endpoint_url=%r, aws_access_key_id=%r, aws_secret_access_key=%r,"
                " region_name='us-east-1')\n"
                "s3 = boto3.client('s3', **kw)\niam = boto3.client('iam', **kw)\n"
                % (self.url, key, secret))
        p = subprocess.run([os.path.join(VENV, "bin", "python"), "-c", head + code] + list(args),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        if p.returncode != 0:
            raise RuntimeError("boto3 script failed: " + p.stderr)
        return p.stdout

    def make_user(self):
        """An IAM user allowed everything; returns (access key, secret)."""
        out = self.boto(
            "iam.create_user(UserName='u')\n"
            "iam.put_user_policy(UserName='u', PolicyName='all', PolicyDocument=json.dumps("
            "{'Version': '2012-10-17', 'Statement': [{'Effect': 'Allow', 'Action': '*',"
            " 'Resource': '*'}]}))\n"
            "k = iam.create_access_key(UserName='u')['AccessKey']\n"
            "print(k['AccessKeyId'], k['SecretAccessKey'])\n")
        a, s = out.split()
        return a, s

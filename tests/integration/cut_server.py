#!/usr/bin/env python3
"""An HTTP server for tests/integration/fetch_download.sh: serves FILE at any
path (an absolute URL too, as a proxy is asked), honours "Range: bytes=N-"
(206 with Content-Range), and answers the first whole-file request with the
whole Content-Length but only the first CUT bytes, then closes: a download
cut mid-way. Each request's path and Range header are appended to LOG; the
port it listens on is written to PORTFILE.

    cut_server.py FILE CUT LOG PORTFILE
"""
import http.server
import os
import sys

path, cut, log, portfile = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
data = open(path, "rb").read()
state = {"cut_done": False}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        rng = self.headers.get("Range")
        with open(log, "a") as f:
            f.write("%s %s\n" % (self.path, rng or "-"))
        start = 0
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if start == 0 and not state["cut_done"]:
            state["cut_done"] = True
            self.wfile.write(body[:cut])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)


srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()

#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# A profile store stand-in for test-push.sh: takes POSTs on 127.0.0.1 (a
# free port, written to DIR/port), keeps each body as DIR/N.pb.gz and its
# path and query as DIR/N.url, and answers 200, or 503 while DIR/fail
# exists, or 400 while DIR/reject does. Usage: push-receiver.py DIR
import http.server, os, sys

d = sys.argv[1]
count = 0


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        global count
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        for name, status in (("fail", 503), ("reject", 400)):
            if os.path.exists(os.path.join(d, name)):
                self.send_response(status)
                self.end_headers()
                return
        count += 1
        with open(os.path.join(d, f"{count}.pb.gz"), "wb") as f:
            f.write(body)
        with open(os.path.join(d, f"{count}.url"), "w") as f:
            f.write(self.path + "\n" + self.headers.get("Content-Type", "") + "\n")
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
with open(os.path.join(d, "port.tmp"), "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(os.path.join(d, "port.tmp"), os.path.join(d, "port"))
srv.serve_forever()

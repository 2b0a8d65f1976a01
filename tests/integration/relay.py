#!/usr/bin/python3
"""relay.py — a TCP relay between two bbd nodes for the secure_* tests: what
crosses a real connection can be captured (to show what an observer sees)
and altered (to show what a node does with a frame that was tampered with).

    relay.py PORT_FILE TARGET_PORT CAPTURE [--flip-at N]

Listens on 127.0.0.1 (a free port, written to PORT_FILE once listening),
forwards every accepted connection to 127.0.0.1:TARGET_PORT, appends every
byte it carries (both directions) to CAPTURE, and with --flip-at N flips one
bit of byte N of the first connection's client-to-target stream. Runs until
killed.
"""
import os
import selectors
import socket
import sys


def main():
    if len(sys.argv) not in (4, 6):
        sys.exit(__doc__)
    port_file, target, capture = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    flip_at = int(sys.argv[5]) if len(sys.argv) == 6 and sys.argv[4] == "--flip-at" else -1
    lsock = socket.socket()
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(lsock.getsockname()[1]))
    os.rename(tmp, port_file)
    sel = selectors.DefaultSelector()
    sel.register(lsock, selectors.EVENT_READ, None)
    out = open(capture, "ab", buffering=0)
    first = True
    while True:
        for key, _ in sel.select():
            if key.data is None:
                a, _ = lsock.accept()
                b = socket.create_connection(("127.0.0.1", target))
                state = {"sent": 0, "flip": flip_at if first else -1}
                first = False
                sel.register(a, selectors.EVENT_READ, (a, b, state, True))
                sel.register(b, selectors.EVENT_READ, (b, a, state, False))
                continue
            src, dst, state, forward = key.data
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                for s in (src, dst):
                    try:
                        sel.unregister(s)
                    except (KeyError, ValueError):
                        pass
                    s.close()
                continue
            if forward and 0 <= state["flip"] - state["sent"] < len(data):
                i = state["flip"] - state["sent"]
                data = data[:i] + bytes([data[i] ^ 0x01]) + data[i + 1:]
            if forward:
                state["sent"] += len(data)
            out.write(data)
            try:
                dst.sendall(data)
            except OSError:
                pass


if __name__ == "__main__":
    main()

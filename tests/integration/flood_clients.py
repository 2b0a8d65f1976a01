#!/usr/bin/python3
"""flood_clients.py -- hostile local clients for tests/integration/bbd_flood.sh.

  idle-control SOCKET N SECONDS      N control clients that connect and send nothing
  watch-control SOCKET N SECONDS     N watchers that ask to watch, then never read
  pipeline-control SOCKET BYTES SECONDS
                                     one client writing BYTES of status requests
                                     without reading a reply (for at most 10 s:
                                     the daemon may stop reading it, and close it
                                     once it has been idle)
  idle-tcp PORT N SECONDS            N TCP connections to 127.0.0.1:PORT sending nothing
  junk-udp PORT N SECONDS            N junk datagrams to 127.0.0.1:PORT: random bytes,
                                     and bbd's envelope header over a garbage body

Each holds its sockets for SECONDS (or until killed), prints "ready" once
they are connected (and, for pipeline, how many bytes the daemon took
before it stopped reading), then exits 0.
"""
import socket
import sys
import time


def unix(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s


def main(argv):
    mode = argv[1]
    if mode == "idle-control":
        socks = [unix(argv[2]) for _ in range(int(argv[3]))]
    elif mode == "watch-control":
        socks = []
        for _ in range(int(argv[3])):
            s = unix(argv[2])
            s.sendall(b'{"cmd":"watch"}\n')
            socks.append(s)
    elif mode == "pipeline-control":
        s = unix(argv[2])
        s.setblocking(False)
        req = b'{"cmd":"status"}\n'
        total, want = 0, int(argv[3])
        deadline = time.time() + 10
        closed = ""
        while total < want and time.time() < deadline:
            try:
                total += s.send(req * 64)
            except BlockingIOError:
                time.sleep(0.01)
            except (BrokenPipeError, ConnectionResetError):
                closed = " (then the daemon closed it)"
                break
        socks = [s]
        print("sent %d%s" % (total, closed), flush=True)
    elif mode == "junk-udp":
        import os
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for i in range(int(argv[3])):
            body = os.urandom(40 + i % 200)
            s.sendto(body if i % 2 else b"\xbb\x03" + body, ("127.0.0.1", int(argv[2])))
        socks = [s]
    elif mode == "idle-tcp":
        socks = [socket.create_connection(("127.0.0.1", int(argv[2]))) for _ in range(int(argv[3]))]
    else:
        raise SystemExit(__doc__)
    print("ready", flush=True)
    time.sleep(float(argv[-1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

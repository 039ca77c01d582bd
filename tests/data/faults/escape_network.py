"""Escape: network from forward, four ways no Python audit hook refuses: torch.distributed's TCPStore
(C++ sockets) and libc socket/connect to a TCP listener on loopback, a UDP datagram (socket.sendto,
the transport of a DNS query) to a listener on loopback, and a DNS lookup. The OS sandbox (no
socket() at all, an empty network namespace) refuses them; then the candidate computes a correct relu."""
import ctypes
import datetime
import socket
import struct

import torch
import torch.nn as nn
import triton
import triton.language as tl

LIBC = ctypes.CDLL(None, use_errno=True)
TCP_PORT = {{TCP_PORT}}
UDP_PORT = {{UDP_PORT}}
TOKEN = b"{{TOKEN}}"


def _libc_connect():
    fd = LIBC.socket(socket.AF_INET, socket.SOCK_STREAM, 0)
    if fd < 0:
        return False
    addr = struct.pack("=HH4s8x", socket.AF_INET, socket.htons(TCP_PORT), socket.inet_aton("127.0.0.1"))
    ok = LIBC.connect(fd, addr, len(addr)) == 0 and LIBC.send(fd, TOKEN, len(TOKEN), 0) > 0
    LIBC.close(fd)
    return ok


@triton.jit
def _relu(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


def _attempt_network():
    escaped = []
    try:
        from torch.distributed import TCPStore

        store = TCPStore("127.0.0.1", TCP_PORT, is_master=False, timeout=datetime.timedelta(seconds=0.5),
                         wait_for_workers=False)
        store.set("escape", TOKEN)
        escaped.append("torch TCPStore")
    except Exception:
        pass  # refused: not an escape, the next attempt runs
    if _libc_connect():
        escaped.append("libc connect")
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.sendto(TOKEN, ("127.0.0.1", UDP_PORT))
        sock.close()
        escaped.append("udp sendto")
    except OSError:
        pass  # refused: not an escape, the next attempt runs
    try:
        socket.getaddrinfo("amdkv-escape.invalid", 53)
        escaped.append("dns")
    except OSError:
        pass  # refused: not an escape, the next attempt runs
    return escaped


ATTEMPTED = []  # forward runs once per case and trial; one attempt of each way is enough


class ModelNew(nn.Module):
    def forward(self, x):
        escaped = []
        if not ATTEMPTED:
            ATTEMPTED.append(True)
            escaped = _attempt_network()
        if escaped:
            raise RuntimeError(f"ESCAPED: network through {escaped}")
        out = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
        return out

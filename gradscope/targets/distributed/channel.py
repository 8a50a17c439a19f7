"""The coordinator's line to one rank: a pair of OS pipes, each message a length and the bytes
`torch.save` makes of it — tensors by value, never shared memory or passed descriptors (a rank
that dies could leave those half-received). The ranks are plain processes (`python -c`), never
multiprocessing's spawn, which would import the caller's `__main__` again in every rank (a
script that calls gradscope.check at its top level would run itself in each)."""

from __future__ import annotations

import io
import os
import struct
from contextlib import suppress
from typing import Any

import torch

HEADER = struct.Struct("!Q")


class Channel:
    """One end: reads from `inbound`, writes to `outbound` (file descriptors it owns)."""

    def __init__(self, inbound: int, outbound: int) -> None:
        self.inbound, self.outbound = inbound, outbound

    def fileno(self) -> int:
        """What multiprocessing.connection.wait watches: readable when a message (or the
        other end's closing) arrived."""
        return self.inbound

    def send_bytes(self, data: bytes) -> None:
        view = memoryview(HEADER.pack(len(data)) + data)
        while view:
            view = view[os.write(self.outbound, view):]

    def recv_bytes(self) -> bytes:
        (size,) = HEADER.unpack(self._exactly(HEADER.size))
        return self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        parts, left = [], size
        while left:
            chunk = os.read(self.inbound, min(left, 1 << 20))
            if not chunk:
                raise EOFError("the other end closed")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def close(self) -> None:
        for fd in (self.inbound, self.outbound):
            with suppress(OSError):  # (closed already)
                os.close(fd)
        self.inbound = self.outbound = -1


def put(channel: Channel, message: Any) -> None:
    buffer = io.BytesIO()
    torch.save(message, buffer)
    channel.send_bytes(buffer.getvalue())


def get(channel: Channel) -> Any:
    return torch.load(io.BytesIO(channel.recv_bytes()), weights_only=False)

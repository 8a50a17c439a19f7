"""The coordinator's line to one rank: a pair of OS pipes, each message a length and the bytes
`torch.save` makes of it — tensors by value, never shared memory or passed descriptors (a rank
that dies could leave those half-received). The ranks are plain processes (`python -c`), never
multiprocessing's spawn, which would import the caller's `__main__` again in every rank (a
script that calls gradscope.check at its top level would run itself in each)."""

from __future__ import annotations

import io
import os
import select
import struct
import time
from contextlib import suppress
from typing import Any

import torch

HEADER = struct.Struct("!Q")


def _memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 1 << 36


# the largest message a coordinator reads: half the machine's memory (it must hold a message
# whole to load it; a header past this is not gradscope's — a rank's code wrote into its
# channel — and is refused before anything is buffered)
MAX_MESSAGE = _memory() // 2


class NotAMessage(EOFError):
    """What arrived is not a message of gradscope's (a rank's own code wrote into its
    channel): its size past MAX_MESSAGE, or bytes that do not load."""


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

    def recv_bytes(self, deadline: float | None = None) -> bytes:
        """One message's bytes; where `deadline` (monotonic) is given, whole by then or
        TimeoutError (a header and then nothing hangs no one), and at most MAX_MESSAGE."""
        (size,) = HEADER.unpack(self._exactly(HEADER.size, deadline))
        if deadline is not None and size > MAX_MESSAGE:
            raise NotAMessage(f"a message header of {size:,} bytes (at most {MAX_MESSAGE:,})")
        return self._exactly(size, deadline)

    def _exactly(self, size: int, deadline: float | None = None) -> bytes:
        parts, left = [], size
        while left:
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0 or not select.select([self.inbound], [], [], wait)[0]:
                    raise TimeoutError(f"{size - left:,} of {size:,} bytes of a message came, "
                                       "then nothing")
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


def get(channel: Channel, deadline: float | None = None) -> Any:
    """The next message (`deadline`: the coordinator's reading of a rank's reply, bounded in
    time and size; a reply that does not load is NotAMessage)."""
    data = channel.recv_bytes(deadline)
    try:
        return torch.load(io.BytesIO(data), weights_only=False)
    except Exception as exc:  # (not gradscope's bytes: whatever the loader says of them)
        if deadline is None:  # (the coordinator's own message to a rank: as it is)
            raise
        raise NotAMessage(f"{len(data):,} bytes that are no message "
                          f"({type(exc).__name__})") from None

"""Reading a PNG's pixels with the standard library (zlib), for screenshots of a headless
browser: 8-bit greyscale, RGB or RGBA, not interlaced (what Chromium writes)."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from pathlib import Path

_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def pixels(path: Path) -> tuple[int, int, Counter[tuple[int, int, int]]]:
    """(width, height, how many pixels of each RGB colour)."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    if depth != 8 or colour not in _CHANNELS or interlace:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {colour}")
    n = _CHANNELS[colour]
    raw = zlib.decompress(idat)
    stride = width * n
    counts: Counter[tuple[int, int, int]] = Counter()
    previous = bytearray(stride)
    at = 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1 : at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            left = line[i - n] if i >= n else 0
            up = previous[i]
            corner = previous[i - n] if i >= n else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + _paeth(left, up, corner)) & 0xFF
        for x in range(0, stride, n):
            rgb = (line[x], line[x], line[x]) if n <= 2 else (line[x], line[x + 1], line[x + 2])
            counts[rgb] += 1
        previous = line
    return width, height, counts

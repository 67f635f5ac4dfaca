"""Read the edges of a running fastio pipeline with plain Zenoh (no fastio).

    python read_edge.py ENDPOINT PIPELINE [--run RUN] [--count N] [--timeout S]

connects to a host of the run (``tcp/10.0.0.1:7447``) as a Zenoh peer,
subscribes to every entry that crosses hosts (``fastio/<pipeline>/<run>/entry/**``:
one key ``entry/<from>/<to>`` per pair of hosts, the header naming the entry),
puts each entry's pieces together, and prints one line per entry:

    entry <key> <element type> <shape> <bytes> <checksum>

The header of each piece is the sample's attachment (docs/hosts.md):

    0     4   magic b"FIOX"
    4     1   version (2)
    5     1   kind: 0 array, 1 string, 2 scalar
    6     1   number of dimensions n
    7     1   length k of the entry's key
    8     16  element type name, ASCII, NUL-padded ("float32", ...)
    24    8   total bytes of the entry
    32    8   offset of this piece's bytes
    40    8   transfer id
    48    8n  the shape
    48+8n k   the entry's key, "<operator>/<output>"

A sending starts at offset 0: with the entry's first bytes (an entry of up
to 1 MiB), or with none (an announcement of a larger one); the bytes then
follow in order. An entry read by two hosts is sent to each (two keys): it
is printed once. ``numpy.frombuffer(data, dtype=element).reshape(shape)``
turns an entry into an array (bfloat16 aside, the names are numpy's).
"""

import argparse
import struct
import sys
import time

import zenoh

HEADER = struct.Struct("<4sBBBB16sQQQ")
MASK = (1 << 64) - 1


def checksum(data: bytes) -> str:
    """The checksum fastio's test operator prints (fio-testop checksum)."""
    h = (0xCBF29CE484222325 ^ len(data)) & MASK
    words = len(data) // 8
    for (v,) in struct.iter_unpack("<Q", data[: words * 8]):
        h = ((h ^ v) * 0x00000100000001B3) & MASK
        h = ((h << 29) | (h >> 35)) & MASK
    for b in data[words * 8 :]:
        h = ((h ^ b) * 0x00000100000001B3) & MASK
    return f"{h:016x}"


def parse_header(att: bytes):
    magic, version, kind, ndim, keylen, name, total, offset, transfer = HEADER.unpack_from(att)
    if magic != b"FIOX" or version != 2 or keylen == 0 or len(att) != 48 + 8 * ndim + keylen:
        raise ValueError(f"not a fastio header: {att[:8]!r}")
    shape = list(struct.unpack_from(f"<{ndim}Q", att, 48))
    element = name.rstrip(b"\0").decode("ascii")
    entry = att[48 + 8 * ndim :].decode("ascii")
    return entry, kind, element, shape, total, offset, transfer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("endpoint")
    ap.add_argument("pipeline")
    ap.add_argument("--run", default="run")
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()

    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("connect/endpoints", f'["{args.endpoint}"]')
    conf.insert_json5("scouting/multicast/enabled", "false")
    session = zenoh.open(conf)
    key = f"fastio/{args.pipeline}/{args.run}/entry/**"
    sub = session.declare_subscriber(key)
    # Said once a host of the run answered a liveliness query: it has then
    # read the subscription too (one link, read in order), so no entry it
    # sends from now on misses this reader.
    hosts = f"fastio/{args.pipeline}/{args.run}/host/**"
    deadline = time.monotonic() + args.timeout
    answered = False
    while not answered and time.monotonic() < deadline:
        for reply in session.liveliness().get(hosts, timeout=1.0):
            answered = answered or reply.ok is not None
        if not answered:
            time.sleep(0.05)
    if not answered:
        print(f"no host of the run answered on {hosts}", file=sys.stderr)
        session.close()
        return 1
    print(f"subscribed {key}", flush=True)

    partial = {}
    printed = set()
    done = 0
    while done < args.count and time.monotonic() < deadline:
        sample = sub.try_recv()
        if sample is None:
            time.sleep(0.005)
            continue
        entry, kind, element, shape, total, offset, transfer = parse_header(
            sample.attachment.to_bytes()
        )
        # One sending per pair of hosts: its key and the entry.
        sending = (str(sample.key_expr), entry)
        payload = sample.payload.to_bytes()
        if offset == 0:
            partial[sending] = (transfer, bytearray(total), 0)  # a sending starts
        if sending not in partial or partial[sending][0] != transfer:
            continue
        _, buf, got = partial[sending]
        buf[offset : offset + len(payload)] = payload
        got += len(payload)
        partial[sending] = (transfer, buf, got)
        if got == total:
            del partial[sending]
            if (entry, transfer) in printed:
                continue  # the same sending, to another host
            printed.add((entry, transfer))
            print(f"entry {entry} {element} {shape} {total} {checksum(bytes(buf))}", flush=True)
            done += 1
    session.close()
    return 0 if done >= args.count else 1


if __name__ == "__main__":
    sys.exit(main())

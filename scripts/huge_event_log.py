#!/usr/bin/env python3
"""Writes an intact agent-eval log that holds one enormous event, as a log from elsewhere could.

    python3 scripts/huge_event_log.py SOURCE.jsonl.gz OUT.jsonl.gz [--mib 1023] [--seq 4]

The events of SOURCE (a version 3 log, e.g. Fixtures/runs/support-refund.jsonl.gz) are written
again, with the `raw` reply of the decision at `--seq` grown by MIB MiB of "a" (the state does not
hold a decision's raw text, so every state digest still checks). Members follow section 3.1 of
docs/log-format.md: the events before the huge one, the huge one alone, the rest, and the stop in
a member of its own; each member's first line links to the content of the member before. The
huge member is streamed, never held: the script takes a few MB whatever MIB is, and the file is a
few MB (the fill compresses about 1000:1). With the default 1023 MiB, the largest event a reader
can be allowed (`agent-eval log verify --max-member-mib 1024` finds the log intact); every reader
at the default limit (64 MiB) stops at its member with an error.
"""
import argparse
import gzip
import hashlib
import json
import os
import struct
import sys
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from agent_eval_log import GENESIS, envelope_line  # noqa: E402


class MemberWriter:
    """Writes gzip members whose content is hashed for the next member's link."""

    def __init__(self, out):
        self.out = out
        self.link = GENESIS
        self.member = None

    def open(self):
        header = bytes([0x1F, 0x8B, 0x08, 0x02, 0, 0, 0, 0, 0, 0xFF])
        self.out.write(header + struct.pack("<H", zlib.crc32(header) & 0xFFFF))
        self.member = (zlib.compressobj(1, zlib.DEFLATED, -15), hashlib.sha256())
        self.crc, self.size = 0, 0

    def write(self, data):
        deflate, sha = self.member
        self.out.write(deflate.compress(data))
        sha.update(data)
        self.crc = zlib.crc32(data, self.crc)
        self.size += len(data)

    def close(self):
        deflate, sha = self.member
        self.out.write(deflate.flush(zlib.Z_FINISH))
        self.out.write(struct.pack("<II", self.crc & 0xFFFFFFFF, self.size & 0xFFFFFFFF))
        self.link = sha.hexdigest()
        self.member = None


def line_of(event, prev):
    return envelope_line(event["run"], event["seq"], event["step"], event["time_us"], event["kind"], prev, event["data"],
                         event["v"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("out")
    parser.add_argument("--mib", type=int, default=1023)
    parser.add_argument("--seq", type=int, default=4)
    args = parser.parse_args()
    with gzip.open(args.source, "rb") as source:
        events = [json.loads(line) for line in source]
    if events[0]["v"] != 3:
        sys.exit("%s: a version 3 log is needed" % args.source)
    if events[args.seq]["kind"] != "decision_made":
        sys.exit("%s: event %d is %s, not decision_made" % (args.source, args.seq, events[args.seq]["kind"]))
    with open(args.out, "xb") as out:
        writer = MemberWriter(out)
        # A stop and the huge event each take a member of their own (a stop's member links to
        # everything before it, as the writer does it).
        alone = lambda event: event["kind"] == "run_stopped" or event["seq"] == args.seq
        for position, event in enumerate(events):
            if writer.member is not None and alone(event):
                writer.close()
            first = writer.member is None
            if first:
                writer.open()
            prev = writer.link if first else None
            if event["seq"] == args.seq:
                marker = "\u0001FILL\u0001"
                grown = dict(event, data=dict(event["data"], raw=marker))
                head, tail = line_of(grown, prev).split(json.dumps(marker).encode()[1:-1])
                writer.write(head)
                chunk = b"a" * (1 << 20)
                for _ in range(args.mib):
                    writer.write(chunk)
                writer.write(tail + b"\n")
            else:
                writer.write(line_of(event, prev) + b"\n")
            if alone(event):
                writer.close()
        if writer.member is not None:
            writer.close()


if __name__ == "__main__":
    main()

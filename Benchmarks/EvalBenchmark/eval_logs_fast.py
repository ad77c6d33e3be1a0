#!/usr/bin/env python3
"""The eval benchmark's faster Python peer: the same work as eval_logs.py (whose fold and driver
it uses), with each gzip member inflated whole (`zlib.decompressobj`, one call per member) and
each line parsed by `orjson` (from PyPI; `scripts/python_venv bench` makes a virtual
environment with it).

    python Benchmarks/EvalBenchmark/eval_logs_fast.py DIR [REPETITIONS]

Prints one line per repetition, as eval_logs.py does: runs, passed, seconds, runs/s, MB/s.
"""
import zlib

import orjson

from eval_logs import fold, main


def check(path):
    with open(path, "rb") as log:
        data = log.read()
    size = 0

    def events():
        nonlocal data, size
        while data:
            member = zlib.decompressobj(31)
            text = member.decompress(data)
            data = member.unused_data
            size += len(text)
            for line in text.split(b"\n"):
                if line:
                    yield orjson.loads(line)

    passed = fold(events())
    return passed, size


if __name__ == "__main__":
    main(check)

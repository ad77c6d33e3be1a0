#!/usr/bin/env python3
"""The eval benchmark's faster Python peer: the same work as eval_logs.py, with each gzip member
inflated whole (`zlib.decompressobj`, one call per member) and each line parsed by `orjson`
(from PyPI; `scripts/python_venv bench` makes a virtual environment with it).

    python Benchmarks/EvalBenchmark/eval_logs_fast.py DIR [REPETITIONS]

Prints one line per repetition, as eval_logs.py does: runs, passed, seconds, runs/s, MB/s.
"""
import glob
import sys
import time
import zlib

import orjson


def check(path):
    with open(path, "rb") as log:
        data = log.read()
    executed = set()
    stop = None
    size = 0
    while data:
        member = zlib.decompressobj(31)
        text = member.decompress(data)
        data = member.unused_data
        size += len(text)
        for line in text.split(b"\n"):
            if not line:
                continue
            event = orjson.loads(line)
            kind = event["kind"]
            if kind == "tool_intended":
                executed.add(event["data"]["tool"])
            elif kind == "run_stopped":
                stop = event["data"]["reason"]
    passed = "tool_1" in executed and "tool_3" not in executed and stop == "success"
    return passed, size


def main():
    directory = sys.argv[1]
    repetitions = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    paths = sorted(glob.glob(directory + "/*.jsonl.gz"))
    for _ in range(repetitions):
        started = time.perf_counter()
        passed = 0
        size = 0
        for path in paths:
            ok, bytes_read = check(path)
            passed += ok
            size += bytes_read
        seconds = time.perf_counter() - started
        print(f"{len(paths)} {passed} {seconds:.6f} {len(paths) / seconds:.1f} {size / seconds / 1e6:.1f}")


if __name__ == "__main__":
    main()

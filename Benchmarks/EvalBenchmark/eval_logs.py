#!/usr/bin/env python3
"""The same eval work as `agent-eval run`, in plain Python: for every log in a directory,
read the gzip, parse every JSON line, fold what the 3 expectations need, check them.

    python3 Benchmarks/EvalBenchmark/eval_logs.py DIR [REPETITIONS]

Prints one line per repetition: runs, passed, seconds, runs/s, MB/s of JSON (decompressed).
The expectations match the benchmark's case: tool_1 called, tool_3 not called, stop success.
"""
import glob
import gzip
import json
import sys
import time


def fold(events):
    """What the 3 expectations need from a run's events (dicts): whether they pass."""
    executed = set()
    stop = None
    for event in events:
        kind = event["kind"]
        if kind == "tool_intended":
            executed.add(event["data"]["tool"])
        elif kind == "run_stopped":
            stop = event["data"]["reason"]
    return "tool_1" in executed and "tool_3" not in executed and stop == "success"


def check(path):
    size = 0

    def events():
        nonlocal size
        with gzip.open(path, "rb") as log:
            for line in log:
                size += len(line)
                yield json.loads(line)

    passed = fold(events())
    return passed, size


def main(check=check, pattern="/*.jsonl.gz"):
    directory = sys.argv[1]
    repetitions = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    paths = sorted(glob.glob(directory + pattern))
    for _ in range(repetitions):
        started = time.perf_counter()
        cpu_started = time.process_time()
        passed = 0
        size = 0
        for path in paths:
            ok, bytes_read = check(path)
            passed += ok
            size += bytes_read
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu_started
        print(f"{len(paths)} {passed} {seconds:.6f} {len(paths) / seconds:.1f} {size / seconds / 1e6:.1f} {cpu_seconds:.6f}")


if __name__ == "__main__":
    main()

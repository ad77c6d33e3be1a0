"""The official `openai` Python SDK's side of `model-benchmark --requests`: N streamed chat
completions against the benchmark's local server, CONCURRENCY at a time (threads sharing one
client, as an application would), each assembled by the SDK's stream helper (the request of `openai_sdk_replies.py`).

    python scripts/openai_sdk_bench.py BASE_URL N CONCURRENCY

Prints one JSON object: {"requests", "seconds", "cpu_seconds"} (the process's user + system
time, so the per-core rate does not depend on how the threads were scheduled).
"""
import json
import resource
import sys
import threading
import time

from openai import OpenAI

from openai_sdk_replies import complete

base_url, total, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
client = OpenAI(api_key="sk-bench", base_url=base_url, max_retries=0, timeout=30)
lock = threading.Lock()
left = [total]
failures = []


def worker():
    while True:
        with lock:
            if left[0] == 0:
                return
            left[0] -= 1
        try:
            completion = complete(client)
            if not completion.choices[0].message.content:
                failures.append("no content")
        except Exception as error:
            failures.append(repr(error))


def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# One request first, so connection set-up and imports are not measured.
left[0] = 1
worker()
left[0] = total
cpu_start, start = cpu(), time.perf_counter()
threads = [threading.Thread(target=worker) for _ in range(concurrency)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
seconds, cpu_seconds = time.perf_counter() - start, cpu() - cpu_start
if failures:
    print(json.dumps({"error": failures[0], "failures": len(failures)}))
    sys.exit(1)
print(json.dumps({"requests": total, "seconds": seconds, "cpu_seconds": cpu_seconds}))

"""Instructions, not seconds: an A/B of one `eval-benchmark` stage between two builds, counted
by valgrind's callgrind, which this shared machine's noise (wall-clock figures that move by 30 to
50% between runs, and no hardware counters in the virtual machine) does not reach.

    python3 scripts/instruction_ab.py BEFORE AFTER [--stage TEXT] [--runs N]

BEFORE and AFTER are `eval-benchmark` binaries of the two release builds (copy
`.build/release/eval-benchmark` aside before building the second). For each, callgrind counts
every instruction of a run that makes the corpus and times the stage once, and of one that makes
the same corpus and times nothing; the difference, divided by the runs, is the stage's
instructions a run. They are split into SHA-256, inflating (libdeflate, zlib) and the rest: under
valgrind SHA-256 takes a software path (the CPU's SHA instructions are not emulated), so its
count says nothing about its time outside, and the rest is where a change to the decoder, the
fold or the digests shows. The functions whose count moved most are listed.

Instructions are not time (a cache miss costs many, a vector instruction does much), so this
settles "did the change take work out", and the stage benchmark, medians of runs alternated
between the builds, settles "how much faster". Needs `valgrind` (Debian: apt-get install
valgrind). The binaries' debug information is stripped into a copy first: valgrind's reader gives
up on Swift's.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile


def counts(binary, stage, runs, scratch):
    """Instructions per function (named with its library) of one callgrind run of `binary` over
    `stage`. Swift's hashing is made deterministic, so the two runs subtracted do the same work."""
    out = os.path.join(scratch, "callgrind.out")
    environment = dict(os.environ, SWIFT_DETERMINISTIC_HASHING="1")
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary,
         "--runs", str(runs), "--stages-only", "--stage", stage, "--repetitions", "1",
         "--dir", os.path.join(scratch, "corpus")],
        capture_output=True, text=True, env=environment)
    if run.returncode != 0:
        sys.exit(f"instruction_ab: callgrind of {binary} --stage {stage!r} failed:\n{run.stderr[-2000:]}")
    annotated = subprocess.run(["callgrind_annotate", "--threshold=100", out], capture_output=True, text=True, check=True)
    functions = {}
    for line in annotated.stdout.splitlines():
        # "  1,234 ( 0.5%)  file:function [library]": a function's name may hold spaces.
        match = re.match(r"^\s*([0-9,]+) \(\s*[0-9.]+%\)\s+(.+?)\s*$", line)
        if match and not match.group(2).startswith("PROGRAM"):
            name = match.group(2).split(":", 1)[-1]
            # The library by its file name alone (the binary's copy lies in a scratch folder).
            name = re.sub(r"\[(?:[^\]]*/)?([^/\]]+)\]$", r"[\1]", name)
            functions[name] = functions.get(name, 0) + int(match.group(1).replace(",", ""))
    return functions


def stage_counts(binary, stage, runs):
    with tempfile.TemporaryDirectory() as scratch:
        stripped = os.path.join(scratch, "eval-benchmark")
        subprocess.run(["objcopy", "--strip-debug", binary, stripped], check=True)
        # The bundles beside the binary (resources), where it looks for them.
        folder = os.path.dirname(os.path.abspath(binary))
        for entry in os.listdir(folder):
            if entry.endswith(".resources"):
                os.symlink(os.path.join(folder, entry), os.path.join(scratch, entry))
        timed = counts(stripped, stage, runs, scratch)
        untimed = counts(stripped, "\x01 no stage has this name", runs, scratch)
    return {name: (timed.get(name, 0) - untimed.get(name, 0)) / runs for name in set(timed) | set(untimed)}


def split(functions):
    """By function and library name: SHA-256 (ours and swift-crypto's), inflating (libdeflate,
    zlib, whose functions the system's stripped libraries leave unnamed), the rest."""
    parts = {"SHA-256": 0.0, "inflate": 0.0, "the rest": 0.0}
    for name, count in functions.items():
        lowered = name.lower()
        if "sha256" in lowered:
            parts["SHA-256"] += count
        elif "deflate" in lowered or "inflate" in lowered or "[libz." in lowered:
            parts["inflate"] += count
        else:
            parts["the rest"] += count
    return parts


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--stage", default="LogFacts.read", help="text in the stage's name (eval-benchmark --stage)")
    parser.add_argument("--runs", type=int, default=40, help="runs in the corpus (each is 20 steps)")
    parser.add_argument("--top", type=int, default=15, help="functions to list")
    arguments = parser.parse_args()
    text_stages = [
        "text in memory: SHA-256 of all of it", "text in memory: split, check each line is JSON (a scan)",
        "text in memory: split, decode every event", "text in memory: split, decode, fold",
        "text in memory: split, decode, fold, every state digest",
    ]
    if any(arguments.stage in name for name in text_stages):
        # Those stages share a setup (every log inflated into memory) that runs only when one of
        # them is asked for: it would be counted as the stage's own work.
        sys.exit("instruction_ab: the \"text in memory\" stages share a setup that the run without the stage "
                 "does not make, so their difference would count it; A/B a stage that reads the logs "
                 "(the default, LogFacts.read, or \"read + fold\")")
    for tool in ["valgrind", "callgrind_annotate", "objcopy"]:
        if shutil.which(tool) is None:
            sys.exit(f"instruction_ab: {tool} is not installed (Debian: apt-get install valgrind binutils)")
    before = stage_counts(arguments.before, arguments.stage, arguments.runs)
    after = stage_counts(arguments.after, arguments.stage, arguments.runs)
    print(f"instructions a run of the stage {arguments.stage!r} ({arguments.runs} runs of 20 steps), callgrind:")
    split_before, split_after = split(before), split(after)
    for part in ["the rest", "inflate", "SHA-256"]:
        a, b = split_before[part], split_after[part]
        change = f"{100 * (b - a) / a:+.1f}%" if a else "n/a"
        print(f"  {part:10s} {a / 1e6:8.3f}M -> {b / 1e6:8.3f}M  {change}")
    print("the functions that moved most (thousands a run):")
    names = sorted(set(before) | set(after), key=lambda name: -abs(after.get(name, 0) - before.get(name, 0)))
    for name in names[:arguments.top]:
        print(f"  {before.get(name, 0) / 1e3:9.1f}k -> {after.get(name, 0) / 1e3:9.1f}k  {name[:110]}")


if __name__ == "__main__":
    main()

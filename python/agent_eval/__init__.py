"""agent-eval from Python: find the `agent-eval` binary and run it.

The engine is the binary; this package never re-implements it. `find_bin()` looks where the
binary can be (see its documentation), `run()` runs it and returns the finished process, and
`python -m agent_eval ARGS` is `agent-eval ARGS`, and `record()` records a team's own agent and
checks it (`agent_eval.recording`). The pytest plugin (`agent_eval.pytest_plugin`) collects case
files as tests and gives tests the `agent_eval_record` fixture.
"""

import os
import shutil
import subprocess
import sys
import sysconfig
import warnings

__all__ = [
    "AgentEvalError", "AgentEvalNotFound", "AgentEvalWarning", "ExpectationFailed", "Run", "Runs", "find_bin", "record", "run",
]

BINARY = "agent-eval"


class AgentEvalNotFound(RuntimeError):
    """The `agent-eval` binary is nowhere this package looks."""


class AgentEvalWarning(UserWarning):
    """A warning agent-eval gave a case's run, shown even when the case passes (a tool called
    whose every attempt failed, `--user frozen` answering another conversation)."""


def _candidates():
    """Where the binary can be, in the order looked at."""
    named = os.environ.get("AGENT_EVAL_BIN")
    if named:
        yield named
    # The scripts folder of this interpreter's install (a virtual environment, --prefix), then
    # of a --user install.
    yield os.path.join(sysconfig.get_path("scripts"), BINARY)
    user_scheme = {"nt": "nt_user", "posix": "posix_user"}.get(os.name)
    if user_scheme in sysconfig.get_scheme_names():
        yield os.path.join(sysconfig.get_path("scripts", scheme=user_scheme), BINARY)
    # A --target install puts scripts in TARGET/bin beside the package's folder.
    yield os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin", BINARY)
    found = shutil.which(BINARY)
    if found:
        yield found


def find_bin():
    """The path of the `agent-eval` binary: `$AGENT_EVAL_BIN` when set (and then only it), else
    the first executable among this interpreter's scripts folder, the user scripts folder, a
    --target install's `bin` and `PATH`. Raises `AgentEvalNotFound` saying where it looked."""
    looked = []
    for candidate in _candidates():
        looked.append(candidate)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            # Absolute: found here, it is run from wherever the caller runs it (pytest's rootdir).
            return os.path.abspath(candidate)
        if candidate == os.environ.get("AGENT_EVAL_BIN"):
            raise AgentEvalNotFound(
                "AGENT_EVAL_BIN is %s, which is not an executable file; point it at the agent-eval binary" % candidate)
    if shutil.which(BINARY) is None:
        looked.append("PATH (%s)" % (os.environ.get("PATH") or "not set"))
    raise AgentEvalNotFound(
        "agent-eval is not installed where this Python looks (%s); install it (scripts/install in its repository) "
        "or set AGENT_EVAL_BIN to the binary" % ", ".join(looked))


def named_bin(path, where):
    """`path`, the binary a caller named (`where` says how: `--agent-eval-bin`, `binary=`), when it
    is an executable file (made absolute: it is checked here, and may be run from another folder);
    else `AgentEvalNotFound` saying so."""
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return os.path.abspath(path)
    raise AgentEvalNotFound("%s is %s, which is not an executable file; point it at the agent-eval binary" % (where, path))


# The documents of the binary this package reads, each with the version of its form it reads:
# another version comes from a binary of another release, whose fields may mean other things.
DOCUMENT_VERSIONS = {"agent-eval/results": 1, "agent-eval/check": 1}


def document_problem(document, schema, binary):
    """None when `document` (parsed JSON the binary wrote) is `schema` in the version this package
    reads; else what differs and what to do. `agent-eval check --json` names no schema: its
    document is known by its `files` list."""
    if not isinstance(document, dict):
        return "%s wrote %s, not a JSON object" % (binary, type(document).__name__)
    named = document.get("schema", schema if schema == "agent-eval/check" else None)
    version = document.get("version")
    if named == schema and version == DOCUMENT_VERSIONS[schema]:
        return None
    if named == schema:
        said = "%s wrote version %r of %s where this Python package (agent-eval %s) reads version %d" % (
            binary, version, schema, package_version(), DOCUMENT_VERSIONS[schema])
    else:
        said = "%s wrote a document of schema %r where this Python package (agent-eval %s) reads %s version %d" % (
            binary, named, package_version(), schema, DOCUMENT_VERSIONS[schema])
    return (said + ": the binary and the package come from different releases; install the two together (the wheel "
            "carries its binary; docs/python.md), or point AGENT_EVAL_BIN (--agent-eval-bin, binary=) at the binary "
            "of this package's release")


def warn_of(case, subject):
    """Each warning the engine gave a case's runs (its results report's `runs[].warnings`, in
    the console report even when the case passes) as a Python warning, `AgentEvalWarning`: the
    pytest plugin's items and `expect()` call it, so a green test does not hide it."""
    import warnings
    for entry in case.get("runs") or []:
        for message in entry.get("warnings") or []:
            where = " (%s)" % entry["log"] if entry.get("log") else ""
            warnings.warn(AgentEvalWarning("%s: %s%s" % (subject, message, where)), stacklevel=3)


def package_version():
    """This package's version as installed (the wheel's is its binary's), or "from source"."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:
        return "from source"
    try:
        return version("agent-eval")
    except PackageNotFoundError:
        return "from source"


def run(arguments, **options):
    """Runs `agent-eval ARGUMENTS` and returns the `subprocess.CompletedProcess` (text output
    captured unless `capture_output=False` is given). The exit status is the binary's: 0 passed,
    1 failed, 2 could not run (docs/eval-results.md)."""
    options.setdefault("capture_output", True)
    options.setdefault("text", True)
    if options["text"]:
        # What the binary passes on of a program's output need not be UTF-8.
        options.setdefault("errors", "replace")
    return subprocess.run([find_bin()] + list(arguments), check=False, **options)


def __getattr__(name):
    # `record` and its types load on first use: `import agent_eval` stays as light as find_bin.
    if name in ("record", "Run", "Runs", "AgentEvalError", "ExpectationFailed"):
        from agent_eval import recording
        return getattr(recording, name)
    raise AttributeError(name)


def main(arguments=None):
    """`python -m agent_eval ARGS`: becomes `agent-eval ARGS` (the same process, its exit status)."""
    arguments = sys.argv[1:] if arguments is None else arguments
    try:
        binary = find_bin()
    except AgentEvalNotFound as error:
        sys.stderr.write("error: %s\n" % error)
        return 2
    os.execv(binary, [binary] + list(arguments))

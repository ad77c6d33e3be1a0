"""Record a team's own agent — any Python program, any framework — and check what it did, from a
test: `record()` runs the command through agent-eval's recording model gateway (`agent-eval
record`), with its model's answers in a cassette that replays offline in CI, and returns a
`Run` whose `expect(...)` takes the expectations a case file takes (docs/eval-cases.md) and has
the binary check them. The engine is the binary's: nothing here reads a log.

    from agent_eval import record

    def test_refund(agent_eval_record):          # the pytest fixture: a cassette beside the test
        run = agent_eval_record(["python3", "agent.py"], input="Order A-1042 arrived broken.")
        run.expect(toolsCalled=["lookup_order", "refund_order"], toolsNotCalled=["delete_customer"],
                   stopReason="success")
"""

import json
import math
import os
import re
import shlex
import subprocess
import tempfile

from agent_eval import document_problem

__all__ = ["AgentEvalError", "ExpectationFailed", "Run", "Runs", "record"]


class AgentEvalError(RuntimeError):
    """The harness could not record or check the run (agent-eval's exit 2: a cassette miss, a
    model that did not answer, a log that does not read); never a verdict on the agent."""


class ExpectationFailed(AssertionError):
    """The run does not do what was expected: agent-eval's explanation of each failed expectation."""


def _binary(binary):
    from agent_eval import AgentEvalNotFound, find_bin, named_bin
    try:
        return named_bin(binary, "binary=") if binary else find_bin()
    except AgentEvalNotFound as error:
        raise AgentEvalError(str(error))


def _said(summary, stderr):
    """What agent-eval said went wrong: the message and hint of its `--json` error document (an
    object), or the `error` words of a run's summary (a string), else its stderr."""
    error = summary.get("error") if isinstance(summary, dict) else None
    if isinstance(error, dict):
        words = error.get("message") or ""
        if error.get("hint"):
            words += "\nhint: " + error["hint"]
        return words or stderr.strip()
    return (error if isinstance(error, str) and error else stderr).strip()


def _camel(name):
    """`tools_called` → `toolsCalled`: a case file's key from a Python keyword (camelCase given
    as it is)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _expect(logs, expectations, extra, binary, cwd, subject):
    """Writes a case over `logs` with `expectations` (and the case keys in `extra`), runs it with
    `agent-eval run`, and returns its report entry when it passes; raises `ExpectationFailed` with
    agent-eval's explanation when it does not, `AgentEvalError` when it could not be checked."""
    if not expectations:
        raise ValueError("give at least one expectation: a case that expects nothing would pass any run")
    case = dict(extra, caseId="expect", logs=logs, expected=expectations)
    # One member a line, so that an error at a line of the case names the expectation at fault.
    text = json.dumps(case, indent=2, ensure_ascii=False)
    with tempfile.TemporaryDirectory(prefix="agent-eval-expect-") as directory:
        path = os.path.join(directory, "expect.json")
        with open(path, "w", encoding="utf-8") as file:
            file.write(text + "\n")
        report_path = os.path.join(directory, "report.json")
        process = subprocess.run(
            [_binary(binary), "run", path, "--no-catalog", "--out", os.path.join(directory, "runs"),
             "--json-out", report_path],
            cwd=cwd, capture_output=True, text=True, errors="replace", check=False)
        try:
            with open(report_path) as file:
                report = json.load(file)
        except (OSError, ValueError):
            said = (process.stderr or process.stdout).strip()
            if path in said:
                # The case was a file of expect()'s own, gone when this is read: its lines are shown.
                said = "%s\nthe case expect() wrote:\n%s" % (
                    said.replace(path, "expect.json"),
                    "\n".join("%4d  %s" % (number, line) for number, line in enumerate(text.splitlines(), 1)))
            raise AgentEvalError("agent-eval could not check %s (exit %d):\n%s" % (subject, process.returncode, said))
    problem = document_problem(report, "agent-eval/results", _binary(binary))
    if problem:
        raise AgentEvalError("agent-eval could not check %s: %s" % (subject, problem))
    entries = report.get("cases") if isinstance(report, dict) else None
    if not entries or not isinstance(entries[0], dict):
        raise AgentEvalError("agent-eval's report holds no result for %s (exit %d):\n%s" % (
            subject, process.returncode, (process.stderr or process.stdout).strip()))
    entry = entries[0]
    from agent_eval import warn_of
    warn_of(entry, subject)
    if entry.get("outcome") in ("pass", "flaky_pass"):
        return entry
    from agent_eval.pytest_plugin import explain
    if entry.get("outcome") not in ("fail", "flaky_fail"):
        raise AgentEvalError("agent-eval could not check %s:\n%s" % (subject, explain(entry)))
    raise ExpectationFailed("%s does not do what was expected:\n%s" % (subject, explain(entry)))


def _expectations(_expected, expected):
    """The case file's `expected:` from a dict and keywords. One expectation given twice (`tools_called=`
    beside `toolsCalled=`, or a keyword beside the dict's key) is an error: keeping either would
    check less than was asked."""
    expectations = dict(_expected or {})
    given = {key: "%r in the dict" % key for key in expectations}
    for name, value in expected.items():
        key = _camel(name)
        if key in expectations:
            raise ValueError("%s and %s are one expectation, %s: give it once" % (given[key], name + "=", key))
        expectations[key] = value
        given[key] = name + "="
    return expectations


class Run:
    """A recorded run: its log, and what `agent-eval record --json` said of it."""

    def __init__(self, log, summary, binary=None, cwd=None):
        self.log = log
        self.summary = summary
        self._binary = binary
        self._cwd = cwd

    @property
    def stop_reason(self):
        return self.summary.get("stop_reason")

    def expect(self, _expected=None, **expected):
        """Checks the run against expectations as a case file's `expected:` gives them —
        `toolsCalled=[...]` (or `tools_called=`), `sequence={"mode": "in_order", "calls": [...]}`,
        `arguments={...}`, `stopReason=...`, `answer={...}`, `turns={...}` — by writing a case over
        this run's log and running it with `agent-eval run`. Returns the case's report entry when
        it passes; raises `ExpectationFailed` with agent-eval's explanation when it does not, and
        `AgentEvalError` when the run cannot be checked (the case could not run). A failure names
        the run's HTML page (written beside the log) and its replay command."""
        try:
            return _expect(os.path.abspath(self.log), _expectations(_expected, expected), {}, self._binary, self._cwd,
                           "the run %s" % self.log)
        except ExpectationFailed as failure:
            raise ExpectationFailed("%s\n%s" % (failure, self.page()))

    def page(self):
        """Writes the run's HTML page beside its log (`agent-eval view`) and says where it is; says
        how to make it when it cannot be written."""
        log = os.path.abspath(self.log)
        page = (log[:-len(".jsonl.gz")] if log.endswith(".jsonl.gz") else log) + ".html"
        process = subprocess.run([_binary(self._binary), "view", log, "--output", page, "--no-catalog"],
                                 cwd=self._cwd, capture_output=True, text=True, errors="replace", check=False)
        if process.returncode == 0 and os.path.exists(page):
            return "the run's page: %s\nreplay it: agent-eval replay %s" % (page, log)
        return "see it: agent-eval view %s (its page could not be written: %s)" % (log, process.stderr.strip())


class Runs:
    """The same agent recorded several times (`record(..., repeats=N)`, the pytest marker
    `agent_eval(repeats=N, pass_rate=R)`): `expect(...)` grades the runs as repeated attempts of
    one case — the engine's repeat logic: each run checked, the pass rate held to `pass_rate`
    (a mix above it is `flaky_pass`)."""

    def __init__(self, runs, pass_rate=1.0, binary=None, cwd=None):
        self.runs = list(runs)
        self.pass_rate = pass_rate
        self._binary = binary
        self._cwd = cwd

    @property
    def logs(self):
        return [run.log for run in self.runs]

    def __len__(self):
        return len(self.runs)

    def __iter__(self):
        return iter(self.runs)

    def expect(self, _expected=None, **expected):
        """Checks every run against the expectations, as `Run.expect` does one, and passes when at
        least `pass_rate` of them pass. Returns the case's report entry (its `outcome`,
        `pass_rate`, `attempts`); raises `ExpectationFailed` when too few pass."""
        return _expect([os.path.abspath(log) for log in self.logs], _expectations(_expected, expected),
                       {"minPassRate": self.pass_rate}, self._binary, self._cwd,
                       "the %d runs (%s)" % (len(self.runs), ", ".join(self.logs)))


def _proxied(mcp_servers, policy, binary):
    """Each MCP server's command line behind `agent-eval mcp-proxy` (its policy when given), by name."""
    proxy = [_binary(binary), "mcp-proxy"] + (["--policy", os.path.abspath(policy)] if policy else []) + ["--"]
    commands = {}
    for server, command in mcp_servers.items():
        words = shlex.split(command) if isinstance(command, str) else list(command)
        if not words:
            raise ValueError("give the command of the MCP server %r" % server)
        commands[server] = proxy + words
    return commands


def _mcp_variable(server):
    """`AGENT_EVAL_MCP_<NAME>`: the variable that holds a server's proxied command line."""
    return "AGENT_EVAL_MCP_" + re.sub(r"[^A-Za-z0-9]", "_", server).upper()


def record(command, input=None, cassette=None, mode="none", name=None, out="runs", timeout=None, upstreams=(),
           environment=None, cwd=None, binary=None, repeats=1, pass_rate=None, mcp_servers=None, policy=None):
    """Runs `command` (a list, or a string split as a shell would) through agent-eval's recording
    model gateway and returns the `Run` it recorded — or, with `repeats` above 1 (or a
    `pass_rate`), records it that many times and returns the `Runs`, each repeat with a cassette
    of its own (`CASSETTE/1`, `CASSETTE/2`, …: each replays what its attempt was answered), whose
    `expect` passes when at least `pass_rate` (default 1: all) of them do.

    - `input`: given to the command on its standard input and as AGENT_EVAL_INPUT.
    - `cassette`: a cassette directory for its model's answers; `mode` `none` replays only (a
      request the cassette lacks stops the command: `AgentEvalError`), `new` records what is
      missing, `all` records everything again. Without a cassette the requests go to the
      provider (`upstreams`: `["openai=URL"]`, else OPENAI_BASE_URL / ANTHROPIC_BASE_URL).
    - `name`: the agent's name in the log; `out`: where the log goes; `timeout`: seconds.
    - `mcp_servers`: `{"shop": ["python3", "shop_server.py"]}` — MCP servers (stdio) the agent
      starts, each behind `agent-eval mcp-proxy` (with `policy`, a policy file, when given), whose
      verdicts, calls and results go into the same run. The agent gets each proxied command line
      as a word `{mcp:shop}` of `command` replaced by its words, and as JSON in the variable
      `AGENT_EVAL_MCP_SHOP`; it starts the server from there instead of the server's own command.

    Raises `AgentEvalError` when the gateway or the command could not start, the log could not be
    written, or the recording stopped the command (a cassette miss, a limit); the command's own
    failure is in the run (its stop), for `expect` to judge."""
    words = shlex.split(command) if isinstance(command, str) else list(command)
    if not words:
        raise ValueError("give the command to record")
    if mcp_servers:
        proxied = _proxied(mcp_servers, policy, binary)
        environment = dict(environment or {})
        variables = {}
        for server in sorted(proxied):
            variable = _mcp_variable(server)
            if variable in variables:
                raise ValueError("the MCP servers %r and %r would share the variable %s: name them apart by more than "
                                 "punctuation and case" % (variables[variable], server, variable))
            variables[variable] = server
        for server, line in proxied.items():
            environment[_mcp_variable(server)] = json.dumps(line)
        expanded = []
        for word in words:
            placeholder = re.fullmatch(r"\{mcp:([^}]+)\}", word)
            if placeholder and placeholder.group(1) not in proxied:
                raise ValueError("%s names no MCP server given in mcp_servers (%s)" % (word, ", ".join(sorted(proxied))))
            expanded += proxied[placeholder.group(1)] if placeholder else [word]
        words = expanded
    elif policy is not None:
        raise ValueError("policy applies to the MCP servers' proxies: give mcp_servers too")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError("repeats must be a whole number of 1 or more, not %r" % (repeats,))
    if pass_rate is not None and not 0 < pass_rate <= 1:
        raise ValueError("pass_rate must be above 0 and at most 1, not %r" % (pass_rate,))
    if repeats > 1 or pass_rate is not None:
        runs = [record(words, input=input, cassette=None if cassette is None else os.path.join(cassette, str(number)),
                       mode=mode, name=name, out=out, timeout=timeout, upstreams=upstreams, environment=environment,
                       cwd=cwd, binary=binary)
                for number in range(1, repeats + 1)]
        return Runs(runs, pass_rate=1.0 if pass_rate is None else pass_rate, binary=binary, cwd=cwd)
    if cassette is None and mode != "none":
        raise ValueError("mode %r records into a cassette: give cassette=DIR" % mode)
    arguments = [_binary(binary), "record", "--json", "--no-catalog", "--out", out]
    if input is not None:
        arguments += ["--input", input]
    if cassette is not None:
        arguments += ["--cassette", cassette, "--record", mode]
    if name:
        arguments += ["--name", name]
    if timeout is not None:
        if not timeout > 0:
            raise ValueError("timeout must be a number of seconds above 0, not %r" % (timeout,))
        # Whole seconds, never less than asked.
        arguments += ["--timeout", str(math.ceil(timeout))]
    for upstream in upstreams:
        arguments += ["--upstream", upstream]
    process = subprocess.run(
        arguments + ["--"] + words, cwd=cwd, capture_output=True, text=True, errors="replace", check=False,
        env=None if environment is None else dict(os.environ, **environment))
    try:
        summary = json.loads(process.stdout)
    except ValueError:
        summary = {}
    if not isinstance(summary, dict):
        summary = {}
    log = summary.get("log")
    if process.returncode in (2, 64) or not isinstance(log, str) or not log:
        raise AgentEvalError("agent-eval record did not record the run (exit %d):\n%s" % (
            process.returncode, _said(summary, process.stderr)))
    if cwd and not os.path.isabs(log):
        log = os.path.join(cwd, log)
    error = _said(summary, "")
    if "cassette miss" in error or "has no recording of" in error:
        # The harness could not answer the agent: nothing it did after is evidence.
        raise AgentEvalError(
            "%s\nrecord it again with the model reachable: --agent-eval-record new (pytest) or mode=\"new\"; "
            "see where the agent's request changed: agent-eval replay %s" % (error, log))
    if summary.get("limit"):
        # The recording stopped the command: what it did not get to do is not in the run.
        raise AgentEvalError("agent-eval record stopped the command at its %s limit (exit %d): %s\nthe run so far: "
                             "agent-eval replay %s" % (summary["limit"], process.returncode, error or "no more said", log))
    return Run(log, summary, binary=binary, cwd=cwd)

"""Eval cases as pytest tests: `pytest EvalCases/` collects every case of every case file it finds
as a test, runs the selected cases once through `agent-eval run` (so the engine, its speed and
every guarantee are the binary's), and maps each case's outcome:

- `pass` and `flaky_pass` pass;
- `fail` and `flaky_fail` fail, with the engine's explanation and the `look:` command of each
  failed expectation (`agent-eval replay LOG --step N`);
- a quarantined case that did not pass is an expected failure (xfail, not strict); one whose
  quarantine has expired fails, as it fails the gate;
- `error` (the harness could not run the case) is an error, not a failure;
- a case file that does not read is one failing item with agent-eval's file:line problems.

The `agent_eval_record` fixture records the team's own agent through the binary's recording
gateway, with a cassette beside the test, and checks what it did (`agent_eval.recording`).

The plugin never reads a case file or a log itself: it asks the binary (`check --json` to list
a file's cases, `run --json-out` for the results, `record --json`; docs/eval-results.md).
`-p no:agent_eval` turns it off.
"""

import json
import os
import subprocess
import tempfile

import pytest

from agent_eval import AgentEvalNotFound, find_bin

CASE_SUFFIXES = (".yaml", ".yml")


def pytest_addoption(parser):
    group = parser.getgroup("agent-eval", "eval cases as tests (agent-eval)")
    group.addoption(
        "--agent-eval-bin", default=None,
        help="the agent-eval binary (default: $AGENT_EVAL_BIN, then this Python's scripts folders and PATH)")
    group.addoption(
        "--agent-eval-arg", action="append", default=[], metavar="ARG",
        help="an argument for agent-eval run, repeatable (e.g. --agent-eval-arg=--no-catalog)")
    group.addoption(
        "--agent-eval-record", default="none", choices=("none", "new", "all"),
        help="the agent_eval_record fixture's cassette mode: none replays only (the default, for CI), "
             "new records what is missing, all records everything again")


@pytest.fixture
def agent_eval_record(request, tmp_path):
    """`record()` for this test: its cassette is `cassettes/<test name>` beside the test file
    (replayed only, unless pytest runs with --agent-eval-record new|all), its log under the
    test's tmp_path, and `--agent-eval-bin` is the binary. Returns the `Run` to `expect` on."""
    from agent_eval.recording import record
    mode = request.config.getoption("agent_eval_record")
    default_cassette = os.path.join(str(request.path.parent), "cassettes", request.node.name.replace("/", "_"))
    binary = request.config.getoption("agent_eval_bin")

    def recorder(command, cassette=None, **options):
        options.setdefault("out", str(tmp_path / "runs"))
        options.setdefault("mode", mode)
        options.setdefault("binary", binary)
        return record(command, cassette=cassette or default_cassette, **options)

    return recorder


def pytest_configure(config):
    config.stash[SUITE] = Suite(config)


def pytest_collect_file(file_path, parent):
    if file_path.suffix not in CASE_SUFFIXES:
        return None
    try:
        # A cheap look before asking the binary: a case file names its cases by caseId.
        if "caseId" not in file_path.read_text(errors="replace"):
            return None
    except OSError:
        return None
    return CaseFile.from_parent(parent, path=file_path)


class Suite:
    """The session's one run of agent-eval over the selected cases, made when the first case
    is set up, and what it said of each case."""

    def __init__(self, config):
        self.config = config
        self.results = None
        self.problem = None

    def binary(self):
        named = self.config.getoption("agent_eval_bin")
        return named if named else find_bin()

    def invoke(self, arguments):
        try:
            binary = self.binary()
        except AgentEvalNotFound as error:
            raise pytest.UsageError(str(error))
        return subprocess.run(
            [binary] + arguments, cwd=str(self.config.rootpath), capture_output=True, text=True, check=False)

    def list_cases(self, path):
        """The file's cases as `(case_id, line)`, or its problems (file:line and message)."""
        process = self.invoke(["check", "--json", str(path)])
        try:
            report = json.loads(process.stdout)
        except ValueError:
            return [], ["agent-eval check gave no report (exit %d): %s" % (process.returncode, process.stderr.strip())]
        problems, cases = [], []
        for entry in report.get("files", []):
            for problem in entry.get("problems", []):
                if problem.get("severity") != "error":
                    continue
                place = problem.get("path", entry.get("path", str(path)))
                if problem.get("line"):
                    place += ":%d:%d" % (problem["line"], problem.get("column", 1))
                text = "%s: %s" % (place, problem.get("message", ""))
                if problem.get("hint"):
                    text += "\nhint: " + problem["hint"]
                problems.append(text)
            if os.path.realpath(os.path.join(str(self.config.rootpath), entry.get("path", ""))) == os.path.realpath(str(path)):
                cases = [(case["case_id"], case.get("line", 1)) for case in entry.get("cases", [])]
        return cases, problems

    def result(self, item):
        if self.results is None:
            self.run(item.session)
        if self.problem is not None:
            raise CaseCouldNotRun(self.problem)
        if item.case_id not in self.results:
            raise CaseCouldNotRun("agent-eval's report has no case %s" % item.case_id)
        return self.results[item.case_id]

    def run(self, session):
        files = []
        for item in session.items:
            if isinstance(item, CaseItem) and str(item.path) not in files:
                files.append(str(item.path))
        self.results = {}
        with tempfile.TemporaryDirectory(prefix="agent-eval-pytest-") as directory:
            report_path = os.path.join(directory, "report.json")
            process = self.invoke(["run"] + files + ["--json-out", report_path] + self.config.getoption("agent_eval_arg"))
            try:
                with open(report_path) as report_file:
                    report = json.load(report_file)
            except (OSError, ValueError):
                self.problem = "agent-eval run wrote no report (exit %d):\n%s" % (process.returncode, process.stderr.strip())
                return
        for case in report.get("cases", []):
            self.results[case["case_id"]] = case


SUITE = pytest.StashKey[Suite]()


class CaseFailed(Exception):
    """The case ran and failed: the engine's explanation."""


class CaseCouldNotRun(Exception):
    """The harness could not run the case (agent-eval's `error` outcome)."""


class CaseFile(pytest.File):
    def collect(self):
        cases, problems = self.config.stash[SUITE].list_cases(self.path)
        if problems:
            yield CaseFileProblem.from_parent(self, name=self.path.name, problems=problems)
            return
        for case_id, line in cases:
            yield CaseItem.from_parent(self, name=case_id, case_id=case_id, line=line)


class CaseFileProblem(pytest.Item):
    def __init__(self, *, problems, **kwargs):
        super().__init__(**kwargs)
        self.problems = problems

    def runtest(self):
        raise CaseFailed("the case file does not read:\n" + "\n".join(self.problems))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, 0, "case file %s" % self.path.name


class CaseItem(pytest.Item):
    def __init__(self, *, case_id, line, **kwargs):
        super().__init__(**kwargs)
        self.case_id = case_id
        self.line = line

    def setup(self):
        # The run happens here, so a case that could not run is an error, not a failure.
        self.case = self.config.stash[SUITE].result(self)
        if self.case.get("outcome") == "error":
            raise CaseCouldNotRun(self.case.get("error") or "agent-eval could not run the case")

    def runtest(self):
        case = self.case
        quarantine = case.get("quarantine")
        if case.get("outcome") in ("pass", "flaky_pass"):
            return
        if quarantine and not quarantine.get("expired"):
            pytest.xfail("quarantined: %s (owner %s, until %s)" % (
                quarantine.get("reason", ""), quarantine.get("owner", "?"), quarantine.get("until", "?")))
        raise CaseFailed(explain(case))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, (CaseFailed, CaseCouldNotRun)):
            return "%s: %s" % (self.case_id, excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, max(0, self.line - 1), "case %s" % self.case_id


def explain(case):
    """The engine's explanation of a failed case: each run's failed expectations, as the
    console report gives them, with the command to look at each."""
    lines = ["%s (%s)" % (case.get("outcome", "fail"), "%d of %d runs passed" % (
        case.get("attempts", {}).get("passed", 0),
        case.get("attempts", {}).get("passed", 0) + case.get("attempts", {}).get("failed", 0)))]
    quarantine = case.get("quarantine")
    if quarantine and quarantine.get("expired"):
        lines.append("quarantine expired %s: it fails the gate until it is fixed or extended" % quarantine.get("until", ""))
    for run in case.get("runs", []):
        if run.get("outcome") == "pass":
            continue
        lines.append("  " + run.get("log", ""))
        if run.get("error"):
            lines.append("    error: " + run["error"])
        for failure in run.get("failures", []):
            lines.append("    ✘ %s: expected %s" % (failure.get("expectation", ""), failure.get("expected", "")))
            lines.append("        happened: %s" % failure.get("actual", ""))
            if failure.get("replay"):
                lines.append("        look: %s" % failure["replay"])
    return "\n".join(lines)

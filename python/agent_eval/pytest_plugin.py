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

With pytest-xdist (`-n N`), each worker runs its own shard of the cases (`run --shard K/N`, the
engine's stable split by case id; the plugin's scheduler gives each shard's items to one worker),
and `--agent-eval-json-out FILE` gets the shards' reports merged into one (`results merge`).

The plugin never reads a case file or a log itself: it asks the binary (`check --json` to list
a file's cases, `run --json-out` for the results, `record --json`; docs/eval-results.md).
`-p no:agent_eval` turns it off.
"""

import glob
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import warnings

import pytest

from agent_eval import AgentEvalNotFound, document_problem, find_bin, named_bin, warn_of

CASE_SUFFIXES = (".yaml", ".yml", ".json")
# A `caseId` or `expected` key anywhere in the text (block or flow style, at any indentation, quoted
# or not): every file the engine may take for a case file has one, so only these are asked about;
# the binary then says which are case files (`check --json`), by the engine's own rule.
CASE_KEY = re.compile(r"(?:^|[\s{,?\-\ufeff])[\"']?(?:caseId|expected)[\"']?[ \t]*:", re.MULTILINE)
# What that look cannot read, so the binary is asked: an escape in a double-quoted scalar (a key
# may be spelt `"case\u0049d"`) or an explicit key (`? caseId`, its `:` on the next line).
UNREADABLE_KEYS = re.compile(r"\"[^\"\n]*\\|^[ \t\-]*\?(?:[ \t]|$)", re.MULTILINE)


def pytest_addoption(parser):
    group = parser.getgroup("agent-eval", "eval cases as tests (agent-eval)")
    group.addoption(
        "--agent-eval-bin", default=None,
        help="the agent-eval binary (default: $AGENT_EVAL_BIN, then this Python's scripts folders and PATH)")
    group.addoption(
        "--agent-eval-arg", action="append", default=[], metavar="ARG",
        help="an argument for agent-eval run, repeatable (e.g. --agent-eval-arg=--no-catalog)")
    group.addoption(
        "--agent-eval-json-out", default=None, metavar="FILE",
        help="write agent-eval's report of the cases (docs/eval-results.md) to FILE; under pytest-xdist, the "
             "workers' shards merged into one")
    group.addoption(
        "--agent-eval-record", default="none", choices=("none", "new", "all"),
        help="the agent_eval_record fixture's cassette mode: none replays only (the default, for CI), "
             "new records what is missing, all records everything again")


@pytest.fixture
def agent_eval_record(request, tmp_path):
    """`record()` for this test: its cassette is `cassettes/<test file>/<test name>` beside the
    test file (`<test file>/<class>/<test name>` for a test of a class: two tests of one name never
    share one), replayed only unless pytest runs with --agent-eval-record new|all; its log under
    the test's tmp_path, and `--agent-eval-bin` is the binary. Returns the `Run` to `expect` on.

    A test marked `@pytest.mark.agent_eval(repeats=5, pass_rate=0.8)` records its agent five
    times (a cassette each: `…/<test name>/1` …) and gets the `Runs`, whose `expect` passes when
    at least 80% of them meet the expectations — the engine's repeat logic."""
    from agent_eval.recording import AgentEvalError, record
    mode = request.config.getoption("agent_eval_record")
    cassettes = os.path.join(str(request.path.parent), "cassettes")
    name = request.node.name.replace("/", "_")
    default_cassette = os.path.join(
        cassettes, request.path.stem, *([request.cls.__name__] if request.cls is not None else []), name)
    # Where a cassette was kept before (`cassettes/<test name>`, shared by every test of that
    # name in the folder): replaying, say where it goes now rather than that nothing is recorded.
    earlier = os.path.join(cassettes, name)
    binary = request.config.getoption("agent_eval_bin")
    marker = request.node.get_closest_marker("agent_eval")
    statistics = {}
    if marker is not None:
        unknown = set(marker.kwargs) - {"repeats", "pass_rate"}
        if marker.args or unknown:
            raise pytest.UsageError(
                "@pytest.mark.agent_eval takes repeats= and pass_rate= (keywords), not %s" % (
                    ", ".join(sorted(unknown)) if unknown else "positional arguments"))
        statistics = dict(marker.kwargs)

    def recorder(command, cassette=None, **options):
        options.setdefault("out", str(tmp_path / "runs"))
        options.setdefault("mode", mode)
        options.setdefault("binary", binary)
        for key, value in statistics.items():
            options.setdefault(key, value)
        # A cassette (its index, or a repeat's) where an older agent-eval kept this test's, and none
        # where it goes now: replaying, an error that says where it goes; recording, a warning.
        if cassette is None and not os.path.exists(default_cassette) and any(
                os.path.isfile(os.path.join(earlier, *place, "index.json")) for place in ((), ("1",))):
            said = ("this test's cassette is %s now (one per test file and class), and it is not there; %s is where an "
                    "older agent-eval kept it: move it there if it is this test's (mv %s %s)" % (
                        default_cassette, earlier, earlier, default_cassette))
            if options["mode"] == "none":
                raise AgentEvalError(said + ", or record it again with --agent-eval-record new")
            warnings.warn(said + "; recording a new one", stacklevel=2)
        return record(command, cassette=cassette or default_cassette, **options)

    return recorder


def run_forwarding_signals(command, **options):
    """`subprocess.run(command, **options)` with the command in a session of its own, and a
    SIGTERM or SIGINT this process gets (a CI job cancelled, a container stopped, Ctrl-C) passed
    on to it once: `agent-eval run` then stops its agents and records the stop. (Once it was left
    running with them; and, in pytest's process group, a signal sent to the whole group reached it
    twice, and a second signal stops it at once.) Its output goes on being read meanwhile; it is
    killed if it has not ended 30 s after the signal. Then this process ends as the signal ends it (KeyboardInterrupt for
    SIGINT, as pytest expects)."""
    if threading.current_thread() is not threading.main_thread():
        return subprocess.run(command, check=False, **options)
    captured = subprocess.PIPE if options.pop("capture_output", False) else None
    process = subprocess.Popen(command, stdout=captured, stderr=captured, start_new_session=True, **options)
    received = []
    watchdog = []

    def forward(signum, frame):
        if received:
            return
        received.append(signum)
        try:
            process.send_signal(signum)
        except ProcessLookupError:
            pass
        timer = threading.Timer(30, lambda: process.poll() is None and process.kill())
        timer.daemon = True
        timer.start()
        watchdog.append(timer)

    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {number: signal.signal(number, forward) for number in signals}
    try:
        stdout, stderr = process.communicate()
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler if handler is not None else signal.SIG_DFL)
        for timer in watchdog:
            timer.cancel()
    if received:
        if received[0] == signal.SIGINT:
            raise KeyboardInterrupt
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def shard_of(case_id, count):
    """The shard (1…count) `agent-eval run --shard K/count` puts a case in: FNV-1a (64 bits) of
    its id, as the engine computes it (EvalSuite.stableHash)."""
    value = 0xCBF29CE484222325
    for byte in case_id.encode("utf-8"):
        value ^= byte
        value = (value * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value % count + 1


def xdist_workers(config):
    """The number of pytest-xdist workers when this process is one of them, else None."""
    if not hasattr(config, "workerinput"):
        return None
    return int(config.workerinput.get("workercount") or os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def case_of(nodeid):
    """The case id of a case item's node id (`support.yaml::refunds`), or None for another test."""
    path, _, rest = nodeid.partition("::")
    return rest if path.lower().endswith(CASE_SUFFIXES) and rest else None


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    """Under `-n` (xdist's `load`): each shard's cases go to one worker, which runs that shard
    once; every other test is scheduled on its own, as `load` does. Node ids stay as they are."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ShardScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            case_id = case_of(nodeid)
            return nodeid if case_id is None else "agent-eval-shard-%d" % shard_of(case_id, self.numnodes)

    return ShardScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """The controller tells each worker where the shards' reports go, and how it schedules."""
    node.workerinput["agent_eval_reports"] = node.config.stash[SUITE].reports_directory()
    node.workerinput["agent_eval_dist"] = node.config.getvalue("dist")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A worker is done: the case files it saw, the shards it ran and how many workers there were."""
    output = getattr(node, "workeroutput", None) or {}
    suite = node.config.stash[SUITE]
    if output.get("agent_eval_files"):
        suite.files = output["agent_eval_files"]
    if output.get("agent_eval_workers"):
        suite.workers = output["agent_eval_workers"]
    suite.shards_run.update(output.get("agent_eval_shards") or [])


def pytest_sessionfinish(session):
    suite = session.config.stash[SUITE]
    if hasattr(session.config, "workerinput"):
        session.config.workeroutput["agent_eval_files"] = suite.files
        session.config.workeroutput["agent_eval_shards"] = sorted(suite.shards)
        session.config.workeroutput["agent_eval_workers"] = xdist_workers(session.config)
        return
    stopped = session.shouldstop or session.shouldfail or session.exitstatus == pytest.ExitCode.INTERRUPTED
    problem = suite.write_report(stopped=bool(stopped))
    if problem:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("agent-eval: " + problem, red=True)
        if session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "agent_eval(repeats=1, pass_rate=1.0): the agent_eval_record fixture records the agent `repeats` times "
        "and its expect() passes when at least `pass_rate` of the runs do (agent-eval's repeat logic)")
    config.stash[SUITE] = Suite(config)
    named = config.getoption("agent_eval_bin")
    if named:
        # A binary asked for by name must be there: said once, before anything is collected.
        try:
            named_bin(named, "--agent-eval-bin")
        except AgentEvalNotFound as error:
            raise pytest.UsageError(str(error))


def pytest_collect_file(file_path, parent):
    if file_path.suffix.lower() not in CASE_SUFFIXES:
        return None
    try:
        text = file_path.read_text(errors="replace")
    except OSError:
        # Unreadable: it may be a case file, and agent-eval run stops on it. The binary says why,
        # as a failing item.
        return CaseFile.from_parent(parent, path=file_path)
    # A cheap look before asking the binary: a file that cannot be a case file is left alone. The
    # binary decides about the rest (`check --json`, the engine's rule): a case file's cases are
    # items, a broken one is a failing item, any other file is left alone.
    if not may_be_case_file(file_path.suffix, text):
        return None
    return CaseFile.from_parent(parent, path=file_path)


def may_be_case_file(suffix, text):
    """False when the file cannot be a case file for agent-eval (no `caseId` or `expected` key);
    True when it may be one, which the binary then decides."""
    if suffix == ".json":
        try:
            value = json.loads(text)
        except ValueError:
            # Not JSON: a broken case file if it names a case's keys (the engine refuses it).
            return "caseId" in text or "expected" in text
        entries = value if isinstance(value, list) else [value]
        return any(isinstance(entry, dict) and ("caseId" in entry or "expected" in entry) for entry in entries)
    return CASE_KEY.search(text) is not None or UNREADABLE_KEYS.search(text) is not None


class Suite:
    """The session's one run of agent-eval over the selected cases, made when the first case
    is set up, and what it said of each case."""

    def __init__(self, config):
        self.config = config
        self.results = None
        self.problem = None
        # The case files of the session's selected cases (every worker collects the same).
        self.files = []
        # Under xdist: the shards this worker ran, and what each said or why it could not.
        self.shards = {}
        # On the controller: the shards the workers ran, and how many workers split them.
        self.shards_run = set()
        self.workers = None
        self._reports = None

    def binary(self):
        named = self.config.getoption("agent_eval_bin")
        return named_bin(named, "--agent-eval-bin") if named else find_bin()

    def invoke(self, arguments):
        try:
            binary = self.binary()
        except AgentEvalNotFound as error:
            raise pytest.UsageError(str(error))
        return run_forwarding_signals(
            [binary] + arguments, cwd=str(self.config.rootpath), capture_output=True, text=True, errors="replace")

    def list_cases(self, path):
        """The file's cases as `(case_id, line)` and its problems (file:line and message), or None
        when the binary says the file is not a case file (another kind of agent-eval's, or none)."""
        process = self.invoke(["check", "--json", str(path)])
        try:
            report = json.loads(process.stdout)
        except ValueError:
            return [], ["agent-eval check gave no report (exit %d): %s" % (process.returncode, process.stderr.strip())]
        if not isinstance(report, dict) or not isinstance(report.get("files"), list):
            # An error document (a usage error, an interruption): the file was not checked.
            error = report.get("error") if isinstance(report, dict) else None
            said = error.get("message") if isinstance(error, dict) else None
            return [], ["agent-eval check did not check the file (exit %d): %s" % (
                process.returncode, said or process.stderr.strip() or process.stdout.strip())]
        problem = document_problem(report, "agent-eval/check", self.binary())
        if problem:
            return [], [problem]
        problems, cases, own = [], [], None
        for entry in report["files"]:
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
                own = entry
        if own is None:
            return [], ["agent-eval check's report says nothing of %s (exit %d): is %s older than this plugin?\n%s" % (
                path, process.returncode, self.binary(), process.stderr.strip())]
        kind = own.get("kind")
        own_codes = {problem.get("code") for problem in own.get("problems", [])}
        if kind not in ("cases", None) or (kind is None and own_codes == {"config.unknown_kind"}):
            return None  # an agent file, a pipeline, a model script… or nothing of agent-eval's
        if kind == "cases" and "cases" not in own:
            problems.append("agent-eval check lists no cases of %s: %s is older than this plugin (it needs the "
                            "\"cases\" of check --json)" % (path, self.binary()))
        cases = [(case["case_id"], case.get("line", 1)) for case in own.get("cases", [])]
        if not cases and not problems:
            problems.append("agent-eval check found no case in %s (exit %d)" % (path, process.returncode))
        return cases, problems

    def reports_directory(self):
        """Where the shards' reports go (made once, removed at the end of the session)."""
        if self._reports is None:
            self._reports = tempfile.mkdtemp(prefix="agent-eval-pytest-")
        return self._reports

    def result(self, item):
        workers = xdist_workers(self.config)
        if workers is not None:
            return self.shard_result(item, shard_of(item.case_id, workers), workers)
        if self.results is None:
            self.files = selected_files(item.session)
            self.results, self.problem = self.run_cases(self.files, os.path.join(self.reports_directory(), "report.json"))
        if self.problem is not None:
            raise CaseCouldNotRun(self.problem)
        if item.case_id not in self.results:
            raise CaseCouldNotRun("agent-eval's report has no case %s" % item.case_id)
        return self.results[item.case_id]

    def shard_result(self, item, shard, count):
        """Under xdist: the case's shard, run once by this worker (`run --shard K/N`), its report
        where the controller merges it."""
        dist = self.config.workerinput.get("agent_eval_dist")
        if dist != "load":
            # Another scheduling may give a shard's cases to two workers: each would run the shard.
            raise CaseCouldNotRun(
                "agent-eval's cases under pytest-xdist run a shard per worker, which needs xdist's default "
                "scheduling (-n alone, --dist load), not --dist %s" % dist)
        if shard not in self.shards:
            self.files = selected_files(item.session)
            directory = self.config.workerinput["agent_eval_reports"]
            self.shards[shard] = self.run_cases(
                self.files, os.path.join(directory, "shard-%d.json" % shard), ["--shard", "%d/%d" % (shard, count)])
        results, problem = self.shards[shard]
        if problem is not None:
            raise CaseCouldNotRun(problem)
        if item.case_id not in results:
            raise CaseCouldNotRun("agent-eval's report of shard %d/%d has no case %s" % (shard, count, item.case_id))
        return results[item.case_id]

    def run_cases(self, files, report_path, extra=()):
        """Runs the cases of `files` once, writing the report to `report_path`: each case's report
        entry by id, or why there is none."""
        process = self.invoke(["run"] + files + ["--json-out", report_path] + list(extra) + self.config.getoption("agent_eval_arg"))
        try:
            with open(report_path) as report_file:
                report = json.load(report_file)
        except (OSError, ValueError):
            return {}, "agent-eval run wrote no report (exit %d):\n%s" % (process.returncode, process.stderr.strip())
        problem = document_problem(report, "agent-eval/results", self.binary())
        if problem:
            return {}, problem
        verdict = report.get("verdict") or {}
        # The report is written first; a later output (the JUnit file, the baseline) that could not
        # be written, or an interruption, ends the run with another status than the verdict's: no
        # case of it passes then, as the run did not.
        if verdict.get("interrupted_by"):
            return {}, "agent-eval run was interrupted (%s) and decided nothing:\n%s" % (
                verdict["interrupted_by"], process.stderr.strip())
        if process.returncode != verdict.get("exit_status"):
            return {}, "agent-eval run exited %d where its report's verdict says %s:\n%s" % (
                process.returncode, verdict.get("exit_status", "nothing"), process.stderr.strip())
        # The gate's setting rides with each case: under xdist each shard's report has its own.
        fail_on = verdict.get("fail_on", "any")
        return {case["case_id"]: dict(case, _fail_on=fail_on) for case in report.get("cases", [])}, None

    def write_report(self, stopped=False):
        """At the end of the session (not in a worker): the report `--agent-eval-json-out` asks
        for — the one run's, or under xdist the workers' shards merged, every shard there (a shard
        no worker ran, because none of its cases was selected, is run here; not after -x, a
        --maxfail or an interruption stopped the session). A problem, or None."""
        target = self.config.getoption("agent_eval_json_out")
        directory = self._reports
        try:
            if not target or directory is None:
                return None
            target = os.path.abspath(target)
            if os.path.exists(target):
                os.remove(target)
            single = os.path.join(directory, "report.json")
            if os.path.exists(single):
                shutil.copyfile(single, target)
                return None
            shards = sorted(glob.glob(os.path.join(directory, "shard-*.json")))
            if not shards:
                return None
            count = self.workers or len(shards)
            for shard in range(1, count + 1):
                path = os.path.join(directory, "shard-%d.json" % shard)
                if os.path.exists(path):
                    continue
                if shard in self.shards_run:
                    return "the worker that ran shard %d/%d wrote no report: %s holds no merged report" % (shard, count, target)
                if stopped:
                    return "the session stopped before shard %d/%d ran: %s holds no merged report" % (shard, count, target)
                # No selected case fell in it: run it here, so that the merged report holds every
                # case of the selected case files.
                _, problem = self.run_cases(self.files, path, ["--shard", "%d/%d" % (shard, count)])
                if problem:
                    return "shard %d/%d could not run: %s" % (shard, count, problem)
            shards = [os.path.join(directory, "shard-%d.json" % shard) for shard in range(1, count + 1)]
            process = self.invoke(["results", "merge"] + shards + ["--json-out", target])
            # 0: the merged suite passes, 1: it fails; anything else is no merged report.
            if process.returncode not in (0, 1) or not os.path.exists(target):
                if os.path.exists(target):
                    os.remove(target)
                return "the shards' reports do not merge into %s (exit %d):\n%s" % (
                    target, process.returncode, (process.stderr or process.stdout).strip())
            return None
        finally:
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)
                self._reports = None


def selected_files(session):
    """The case files of the session's selected cases, in collection order."""
    files = []
    for item in session.items:
        if isinstance(item, CaseItem) and str(item.path) not in files:
            files.append(str(item.path))
    return files


SUITE = pytest.StashKey[Suite]()


class CaseFailed(Exception):
    """The case ran and failed: the engine's explanation."""


class CaseCouldNotRun(Exception):
    """The harness could not run the case (agent-eval's `error` outcome)."""


class CaseFile(pytest.File):
    def collect(self):
        listed = self.config.stash[SUITE].list_cases(self.path)
        if listed is None:
            return
        cases, problems = listed
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
        # An outcome this plugin does not know is what the engine counts as an error too.
        if self.case.get("outcome") not in ("pass", "flaky_pass", "fail", "flaky_fail"):
            raise CaseCouldNotRun("agent-eval's report gives this case the outcome %r, which this plugin does not know; "
                                  "use the agent-eval binary this package came with" % self.case.get("outcome"))

    def runtest(self):
        # A test is green exactly when `agent-eval run` lets the case pass: the engine says so
        # of each case (`fails_gate`, ReportCounts.failsGate, the rule its exit status counts),
        # and the plugin says only why. A report without it (another engine's) decides nothing.
        case = self.case
        warn_of(case, self.case_id)
        fails_gate = case.get("fails_gate")
        if not isinstance(fails_gate, bool):
            raise CaseCouldNotRun("agent-eval's report does not say whether this case fails the gate (no \"fails_gate\"), "
                                  "so the test cannot say it passes; use the agent-eval binary this package came with")
        quarantine = case.get("quarantine")
        baseline = case.get("baseline") or {}
        fail_on = case.get("_fail_on", "any")
        if fails_gate:
            if quarantine and quarantine.get("expired"):
                raise CaseFailed(explain(case))  # it says the quarantine expired
            if baseline.get("status") == "regressed" and fail_on != "failure":
                raise CaseFailed(explain_regression(case))
            if fail_on == "regression":
                raise CaseFailed("%s\nno baseline vouches for this failure (baseline: %s), so --fail-on regression fails "
                                 "it as the gate does" % (explain(case), baseline.get("status", "none")))
            raise CaseFailed(explain(case))
        if case.get("outcome") in ("pass", "flaky_pass"):
            return
        # It failed, and the gate lets it pass: say why.
        if quarantine:
            pytest.xfail("quarantined: %s (owner %s, until %s)" % (
                quarantine.get("reason", ""), quarantine.get("owner", "?"), quarantine.get("until", "?")))
        if fail_on == "regression":
            pytest.xfail("fails, but the gate fails only regressions (--fail-on regression) and this is not one "
                         "(baseline: %s)\n%s" % (baseline.get("status", "none"), explain(case)))
        pytest.xfail("fails, but agent-eval's gate lets it pass (--fail-on %s, baseline: %s)\n%s" % (
            fail_on, baseline.get("status", "none"), explain(case)))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, (CaseFailed, CaseCouldNotRun)):
            return "%s: %s" % (self.case_id, excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, max(0, self.line - 1), "case %s" % self.case_id


def explain_regression(case):
    """Why a case regressed against its baseline, as the engine said it (`baseline.regressions`),
    then the case's own explanation when it failed."""
    lines = ["regressed against the baseline (%s)" % case.get("outcome", "?")]
    for regression in (case.get("baseline") or {}).get("regressions") or []:
        lines.append("  %s: %s" % (regression.get("kind", "?"), regression.get("message", "")))
    if case.get("outcome") not in ("pass", "flaky_pass"):
        lines.append(explain(case))
    return "\n".join(lines)


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

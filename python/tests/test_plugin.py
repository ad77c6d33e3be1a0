"""The pytest plugin, driven through pytester against the real agent-eval binary
($AGENT_EVAL_BIN) and the repository's fixture logs. Run by the Swift test PytestPluginTests,
or by hand: AGENT_EVAL_BIN=.build/debug/agent-eval PYTHONPATH=python pytest python/tests -p pytester
"""

import json
import os
import re
import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE = os.path.join(REPOSITORY, "Fixtures", "samples", "support-sample.jsonl.gz")
def _installed():
    """Whether the plugin is installed (the wheel's pytest11 entry point loads it by itself)."""
    from importlib.metadata import entry_points
    found = entry_points()
    group = found.select(group="pytest11") if hasattr(found, "select") else found.get("pytest11", [])
    return any(entry.value == "agent_eval.pytest_plugin" for entry in group)


PLUGIN = ([] if _installed() else ["-p", "agent_eval.pytest_plugin"]) + ["-p", "no:cacheprovider", "--agent-eval-arg=--no-catalog"]


def case(case_id, expected, logs=SAMPLE, extra=""):
    return "caseId: %s\nlogs: %s\n%sexpected:\n%s\n" % (case_id, logs, extra, expected)


def quarantine(reason, until):
    """A case's quarantine: block, for `case(extra=…)`."""
    return "quarantine:\n  owner: ana@example.com\n  reason: %s\n  until: %s\n" % (reason, until)


@pytest.fixture(autouse=True)
def binary():
    path = os.environ.get("AGENT_EVAL_BIN")
    if not path or not os.access(path, os.X_OK):
        pytest.fail("AGENT_EVAL_BIN must name the agent-eval binary these tests drive (it is %r)" % path)
    return path


def test_cases_are_collected_as_items_and_outcomes_map(pytester):
    pytester.makefile(
        ".yaml",
        support="---\n".join([
            "- " + case("refunds", "  toolsCalled: [lookup_order, refund_order]").replace("\n", "\n  ").rstrip() + "\n",
        ]),
    )
    # The suffix in any case: a `.YAML` file was skipped without a word.
    pytester.makefile(".YAML", never=case("never-refunds", "  toolsNotCalled: [refund_order]"))
    result = pytester.runpytest(*PLUGIN, "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*never.YAML::never-refunds FAILED*",
        "*support.yaml::refunds PASSED*",
        "*never-refunds: fail*",
        "*✘ toolsNotCalled: expected refund_order*",
        "*look: agent-eval replay *support-sample.jsonl.gz --step *",
    ])


def test_a_case_that_could_not_run_is_an_error_not_a_failure(pytester):
    missing = os.path.join(str(pytester.path), "gone.jsonl.gz")
    # A log that is there when the cases are listed and gone when they run.
    with open(missing, "wb") as copy, open(SAMPLE, "rb") as source:
        copy.write(source.read())
    pytester.makefile(".yaml", gone=case("log-gone", "  toolsCalled: [lookup_order]", logs=missing))
    pytester.makeconftest(
        "import os\n"
        "def pytest_collection_finish(session):\n"
        "    os.remove(%r)\n" % missing)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*log-gone*"])


def test_a_quarantined_failing_case_is_an_expected_failure(pytester):
    pytester.makefile(
        ".yaml", held=case("held", "  toolsNotCalled: [refund_order]", extra=quarantine("the refund flow is being rebuilt", "2099-01-01")))
    result = pytester.runpytest(*PLUGIN, "-rx")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*quarantined: the refund flow is being rebuilt*"])


V3_SAMPLE = os.path.join(REPOSITORY, "Fixtures", "samples", "support-sample-v3.jsonl.gz")
REFUND_RUN = os.path.join(REPOSITORY, "Fixtures", "runs", "support-refund.jsonl.gz")


def write_baseline(pytester, binary, name, status=0):
    """The baseline of the case file `name` as it stands, written by the binary itself (which
    exits `status`: 1 when the case fails)."""
    baseline = str(pytester.path / "baseline")
    wrote = subprocess.run(
        [binary, "run", name, "--no-catalog", "--update-baseline", "--baseline", baseline],
        cwd=str(pytester.path), capture_output=True, text=True, check=False)
    assert wrote.returncode == status, wrote.stdout + wrote.stderr
    return baseline


def test_a_passing_case_that_regressed_against_its_baseline_fails_as_the_gate_does(pytester, binary):
    # Passing with lookup_order and refund_order; then the run also calls get_customer: a new tool.
    pytester.makefile(".yaml", grows=case("grows", "  toolsCalled: [lookup_order]", logs=V3_SAMPLE))
    baseline = write_baseline(pytester, binary, "grows.yaml")
    pytester.makefile(".yaml", grows=case("grows", "  toolsCalled: [lookup_order]", logs=REFUND_RUN))
    gate = subprocess.run(
        [binary, "run", "grows.yaml", "--no-catalog", "--baseline", baseline], cwd=str(pytester.path),
        capture_output=True, text=True, check=False)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    result = pytester.runpytest(*PLUGIN, "--agent-eval-arg=--baseline", "--agent-eval-arg=" + baseline)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*grows: regressed against the baseline (pass)*", "*get_customer*"])
    # Only failures fail the gate: the same case passes, as `run --fail-on failure` says.
    only_failures = pytester.runpytest(
        *PLUGIN, "--agent-eval-arg=--baseline", "--agent-eval-arg=" + baseline, "--agent-eval-arg=--fail-on=failure")
    only_failures.assert_outcomes(passed=1)


def test_under_fail_on_regression_a_known_failure_is_expected_not_a_failure(pytester, binary):
    pytester.makefile(".yaml", known=case("known", "  toolsNotCalled: [refund_order]", logs=V3_SAMPLE))
    baseline = write_baseline(pytester, binary, "known.yaml", status=1)
    result = pytester.runpytest(
        *PLUGIN, "-rx", "--agent-eval-arg=--baseline", "--agent-eval-arg=" + baseline, "--agent-eval-arg=--fail-on=regression")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*the gate fails only regressions*baseline: known_failure*"])


def test_under_fail_on_regression_a_failing_case_no_baseline_knows_fails_as_the_gate_does(pytester, binary):
    # The baseline knows `known` (failing); `fresh` is new and fails: the gate fails it.
    pytester.makefile(".yaml", known=case("known", "  toolsNotCalled: [refund_order]", logs=V3_SAMPLE))
    baseline = write_baseline(pytester, binary, "known.yaml", status=1)
    pytester.makefile(".yaml", fresh=case("fresh", "  toolsNotCalled: [refund_order]", logs=V3_SAMPLE))
    arguments = ["--baseline", baseline, "--fail-on=regression"]
    gate = subprocess.run(
        [binary, "run", ".", "--no-catalog"] + arguments, cwd=str(pytester.path), capture_output=True, text=True, check=False)
    assert gate.returncode == 1, gate.stdout + gate.stderr
    result = pytester.runpytest(*PLUGIN, "-rx", *["--agent-eval-arg=" + argument for argument in arguments])
    result.assert_outcomes(failed=1, xfailed=1)
    result.stdout.fnmatch_lines(["*fresh: fail*", "*no baseline vouches for this failure (baseline: new)*"])
    assert result.ret != 0
    # With no baseline at all (--allow-no-baseline), a failing case fails too.
    alone = pytester.runpytest(
        *PLUGIN, "-k", "fresh", "--agent-eval-arg=--fail-on=regression", "--agent-eval-arg=--allow-no-baseline")
    alone.assert_outcomes(failed=1)


def test_a_report_that_does_not_say_whether_a_case_fails_the_gate_passes_nothing(pytester, binary):
    # The engine's own answer decides each test; a report without it (a stale or foreign
    # binary) must not turn into green tests by the plugin guessing the rule.
    pytester.makefile(".yaml", refunds=case("refunds", "  toolsCalled: [lookup_order, refund_order]"))
    wrapper = pytester.path / "agent-eval-without-fails-gate"
    wrapper.write_text(
        "#!%s\n"
        "import json, subprocess, sys\n"
        "status = subprocess.run([%r] + sys.argv[1:]).returncode\n"
        "if '--json-out' in sys.argv:\n"
        "    path = sys.argv[sys.argv.index('--json-out') + 1]\n"
        "    report = json.load(open(path))\n"
        "    for entry in report.get('cases', []):\n"
        "        entry.pop('fails_gate', None)\n"
        "    json.dump(report, open(path, 'w'))\n"
        "sys.exit(status)\n" % (sys.executable, binary))
    wrapper.chmod(0o755)
    result = pytester.runpytest(*PLUGIN, "--agent-eval-bin=" + str(wrapper))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*does not say whether this case fails the gate*"])
    # The same case with the engine's answer in the report passes.
    pytester.runpytest(*PLUGIN).assert_outcomes(passed=1)


def test_a_passing_case_whose_quarantine_ended_fails(pytester):
    pytester.makefile(".yaml", lapsed=case("lapsed", "  toolsCalled: [lookup_order]", extra=quarantine("flaky lookups", "2001-01-01")))
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the quarantine of case lapsed ended on 2001-01-01*"])


def test_json_case_files_and_files_without_caseid_are_collected_as_the_engine_reads_them(pytester):
    pytester.makefile(".json", listed=json.dumps([{"caseId": "from-json", "logs": SAMPLE, "expected": {"toolsCalled": ["lookup_order"]}}]))
    pytester.makefile(".json", package=json.dumps({"name": "not-a-case", "version": "1.0.0"}))
    # No caseId, but a case file all the same (agent-eval run refuses it): one failing item, not silence.
    pytester.makefile(".yaml", nameless="logs: %s\nexpected:\n  toolsCalled: [lookup_order]\n" % SAMPLE)
    result = pytester.runpytest(*PLUGIN, "-v")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*listed.json::from-json PASSED*", "*nameless.yaml*caseId*"])


def test_a_case_file_that_does_not_read_is_one_failure_naming_file_and_line(pytester):
    pytester.makefile(".yaml", bad="caseId: bad\nlogs: %s\nexpected:\n  toolsCaled: [lookup_order]\n" % SAMPLE)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*bad.yaml:4:*toolsCaled*", "*toolsCalled*"])


def test_k_selects_cases_by_id_and_junit_xml_names_them(pytester):
    pytester.makefile(".yaml", one=case("first-case", "  toolsCalled: [lookup_order]"))
    pytester.makefile(".yaml", two=case("second-case", "  toolsCalled: [lookup_order]"))
    result = pytester.runpytest(*PLUGIN, "-k", "second", "--junitxml", "out.xml")
    result.assert_outcomes(passed=1, deselected=1)
    xml = (pytester.path / "out.xml").read_text()
    assert 'name="second-case"' in xml and "first-case" not in xml


FAILING_TOOL_AGENT = """name: failing
instructions: Look the order up.
model:
  script: failing.model.yaml
tools:
  - name: lookup_order
    description: Finds an order.
    side_effect: read
    input_schema: {type: object, properties: {order_id: {type: string}}}
    fixture:
      - fail_attempts: 5
        error: order service down
        output: {}
"""
FAILING_TOOL_MODEL = """name: failing-script
decisions:
  - tool_calls: [{name: lookup_order, arguments: {order_id: A-1}}]
  - answer: The order service is down.
"""


def test_a_passing_cases_warnings_are_python_warnings_not_lost(pytester):
    pytester.makefile(".yaml", agent=FAILING_TOOL_AGENT)
    pytester.makefile(".model.yaml", failing=FAILING_TOOL_MODEL)
    pytester.makefile(".yaml", cases="caseId: looked-up\nagent: agent.yaml\ninput: where is A-1?\n"
                      "expected:\n  toolsCalled: [lookup_order]\n")
    result = pytester.runpytest(*PLUGIN, "-W", "default")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*AgentEvalWarning: looked-up: lookup_order was called, but every attempt failed*",
    ])


def test_python_m_agent_eval_is_the_binary():
    process = subprocess.run(
        [sys.executable, "-m", "agent_eval", "--version"], capture_output=True, text=True, check=False)
    direct = subprocess.run([os.environ["AGENT_EVAL_BIN"], "--version"], capture_output=True, text=True, check=False)
    assert process.returncode == 0, process.stderr
    assert process.stdout == direct.stdout


def test_find_bin_says_where_it_looked_when_agent_eval_bin_is_wrong(monkeypatch):
    import agent_eval

    monkeypatch.setenv("AGENT_EVAL_BIN", "/nonexistent/agent-eval")
    with pytest.raises(agent_eval.AgentEvalNotFound, match="AGENT_EVAL_BIN is /nonexistent/agent-eval"):
        agent_eval.find_bin()



def test_find_bin_names_path_among_the_places_it_looked(monkeypatch, tmp_path):
    """Nowhere to be found: the error lists every place looked, PATH (and what it is) included."""
    import agent_eval

    monkeypatch.delenv("AGENT_EVAL_BIN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    # This interpreter's scripts folders are a folder of the test's own, with no binary in it.
    monkeypatch.setattr(agent_eval.sysconfig, "get_path", lambda *args, **kwargs: str(tmp_path))
    beside = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(agent_eval.__file__))), "bin", "agent-eval")
    monkeypatch.setattr(agent_eval.os.path, "isfile", lambda path: path != beside and os.path.exists(path) and not os.path.isdir(path))
    with pytest.raises(agent_eval.AgentEvalNotFound, match=r"PATH \(%s\)" % re.escape(str(tmp_path / "empty"))):
        agent_eval.find_bin()


AGENT = '''
import json, os, sys, urllib.request
base = os.environ["OPENAI_BASE_URL"].rstrip("/")
goal = sys.stdin.read().strip()
tools = [{"type": "function", "function": {"name": name, "description": name,
          "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}}}}
         for name in ("lookup_order", "refund_order")]
messages = [{"role": "user", "content": goal}]
for _ in range(8):
    body = json.dumps({"model": "shop-model", "messages": messages, "tools": tools}).encode()
    request = urllib.request.Request(base + "/chat/completions", data=body, headers={
        "content-type": "application/json", "authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")})
    reply = json.load(urllib.request.urlopen(request))["choices"][0]["message"]
    messages.append(reply)
    if not reply.get("tool_calls"):
        print(reply["content"])
        break
    for call in reply["tool_calls"]:
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps({"ok": True})})
'''


@pytest.fixture
def model_server_port():
    """scripts/model_server.py on 127.0.0.1, its port; stopped by closing its standard input."""
    server = subprocess.Popen([sys.executable, os.path.join(REPOSITORY, "scripts", "model_server.py")],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(server.stdout.readline().split()[1])
    yield port
    server.stdin.close()
    server.wait(timeout=10)


@pytest.fixture
def model_server(model_server_port):
    """The model server's `refund` scenario: it looks the order up, refunds it and answers."""
    return "http://127.0.0.1:%d/refund/v1" % model_server_port


def test_record_a_python_agent_then_replay_it_offline_and_expect(pytester, model_server):
    pytester.makepyfile(agent=AGENT)
    pytester.makepyfile(test_refund='''
AGENT = ["%s", "agent.py"]
OPTIONS = dict(input="Order A-1042 arrived broken.", upstreams=["openai=%s"], environment={"OPENAI_API_KEY": "key"})

def test_refunds(agent_eval_record):
    run = agent_eval_record(AGENT, **OPTIONS)
    assert run.stop_reason == "success"
    run.expect(toolsCalled=["lookup_order", "refund_order"], stop_reason="success",
               sequence={"mode": "in_order", "calls": ["lookup_order", "refund_order"]})

def test_never_refunds(agent_eval_record):
    agent_eval_record(AGENT, **OPTIONS).expect(tools_not_called=["refund_order"])
''' % (sys.executable, model_server))
    recorded = pytester.runpytest(*PLUGIN, "--agent-eval-record", "new")
    recorded.assert_outcomes(passed=1, failed=1)
    recorded.stdout.fnmatch_lines([
        "*ExpectationFailed: the run * does not do what was expected:*",
        "*✘ toolsNotCalled: expected refund_order*",
        "*the run's page: *.html*",
        "*replay it: agent-eval replay *.jsonl.gz*",
    ])
    assert (pytester.path / "cassettes" / "test_refund" / "test_refunds").is_dir()
    # Offline: nothing listens where the agent's requests went; the cassettes answer.
    os.environ["OPENAI_BASE_URL"] = "http://127.0.0.1:9/v1"
    try:
        replayed = pytester.runpytest(*PLUGIN)
    finally:
        del os.environ["OPENAI_BASE_URL"]
    replayed.assert_outcomes(passed=1, failed=1)


def test_a_request_the_cassette_lacks_is_an_agent_eval_error_not_a_verdict(pytester, model_server):
    pytester.makepyfile(agent=AGENT)
    pytester.makepyfile(test_refund='''
def test_refunds(agent_eval_record):
    agent_eval_record(["%s", "agent.py"], input="Order A-7 never came.", environment={"OPENAI_API_KEY": "key"})
''' % sys.executable)
    (pytester.path / "cassettes" / "test_refund" / "test_refunds").mkdir(parents=True)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AgentEvalError*", "*--agent-eval-record new*"])


def test_a_statistical_gate_records_repeats_and_the_engine_grades_the_pass_rate(pytester, model_server_port):
    """@pytest.mark.agent_eval(repeats=5, pass_rate=0.8): five recordings (a cassette each), graded
    by agent-eval's repeat logic — four of five pass: a flaky pass at 0.8, a failure at 1.0 — and
    the same again offline from the cassettes."""
    pytester.makepyfile(agent=AGENT)
    pytester.makepyfile(test_gate='''
import pytest

AGENT = ["%s", "agent.py"]
OPTIONS = dict(input="Order A-1042 arrived broken.", upstreams=["openai=http://127.0.0.1:%d/refund-sometimes/v1"],
               environment={"OPENAI_API_KEY": "key"})

@pytest.mark.agent_eval(repeats=5, pass_rate=0.8)
def test_mostly_refunds(agent_eval_record):
    runs = agent_eval_record(AGENT, **OPTIONS)
    assert len(runs) == 5
    entry = runs.expect(toolsCalled=["refund_order"])
    assert entry["outcome"] == "flaky_pass", entry["outcome"]
    assert entry["attempts"] == {"passed": 4, "failed": 1, "could_not_run": 0}

@pytest.mark.agent_eval(repeats=5)
def test_always_refunds(agent_eval_record):
    agent_eval_record(AGENT, **OPTIONS).expect(toolsCalled=["refund_order"])
''' % (sys.executable, model_server_port))
    recorded = pytester.runpytest(*PLUGIN, "--agent-eval-record", "new")
    recorded.assert_outcomes(passed=1, failed=1)
    recorded.stdout.fnmatch_lines(["*ExpectationFailed: the 5 runs * does not do what was expected:*", "*flaky_fail (4 of 5 runs passed)*"])
    assert sorted(os.listdir(pytester.path / "cassettes" / "test_gate" / "test_mostly_refunds")) == ["1", "2", "3", "4", "5"]
    # Offline, from the five cassettes: the same verdicts.
    replayed = pytester.runpytest(*PLUGIN)
    replayed.assert_outcomes(passed=1, failed=1)


def test_the_marker_takes_only_repeats_and_pass_rate(pytester):
    pytester.makepyfile(test_bad='''
import pytest

@pytest.mark.agent_eval(5)
def test_positional(agent_eval_record):
    pass
''')
    result = pytester.runpytest(*PLUGIN)
    result.stdout.fnmatch_lines(["*agent_eval takes repeats= and pass_rate=*"])


def test_xdist_workers_each_run_their_own_shard_and_the_report_is_merged(pytester):
    """-n 2: each worker runs `agent-eval run --shard K/2` for the cases it was given (each shard's
    cases on one worker), and --agent-eval-json-out gets the two shards merged into one report."""
    pytest.importorskip("xdist", reason="pytest-xdist is installed by scripts/python_venv pytest")
    ids = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
    for case_id in ids:
        expected = "  toolsNotCalled: [refund_order]" if case_id == "delta" else "  toolsCalled: [lookup_order]"
        pytester.makefile(".yaml", **{case_id: case(case_id, expected)})
    from agent_eval.pytest_plugin import shard_of
    assert {shard_of(case_id, 2) for case_id in ids} == {1, 2}, "the cases fall in both shards"
    result = pytester.runpytest_subprocess(*PLUGIN, "-n", "2", "--agent-eval-json-out", "merged.json", "--junitxml", "out.xml")
    result.assert_outcomes(passed=5, failed=1)
    merged = json.loads((pytester.path / "merged.json").read_text())
    assert sorted(entry["case_id"] for entry in merged["cases"]) == sorted(ids)
    assert merged["shards"]["count"] == 2 and merged["shards"]["merged"] == [1, 2], merged["shards"]
    assert merged["summary"]["failed"] == 1
    assert all('name="%s"' % case_id in (pytester.path / "out.xml").read_text() for case_id in ids)


def test_two_mcp_servers_whose_names_differ_only_in_punctuation_are_refused_before_anything_runs(tmp_path, binary):
    # Both would be AGENT_EVAL_MCP_SHOP_A: the second's command line would replace the first's.
    from agent_eval import record
    with pytest.raises(ValueError, match="would share the variable AGENT_EVAL_MCP_SHOP_A"):
        record(["true", "{mcp:shop-a}", "{mcp:shop_a}"], mcp_servers={"shop-a": ["true"], "shop_a": ["false"]},
               out=str(tmp_path / "runs"), binary=binary)
    assert not (tmp_path / "runs").exists()


def test_the_fixture_puts_an_mcp_proxy_in_front_of_the_agents_server(pytester, model_server):
    """mcp_servers=: the agent starts its MCP server from `{mcp:shop}`, which is the server behind
    `agent-eval mcp-proxy` with the policy given: the proxy's verdicts are in the same run, and a
    denied refund never reaches the server. The agent and the server use the official `mcp` package
    (the Python of $AGENT_EVAL_AGENTS_PYTHON: scripts/python_venv agents)."""
    python = os.environ.get("AGENT_EVAL_AGENTS_PYTHON")
    if not python or not os.access(python, os.X_OK):
        pytest.fail("AGENT_EVAL_AGENTS_PYTHON must name a Python with the openai and mcp packages "
                    "(scripts/python_venv agents; PytestPluginTests sets it), not %r" % python)
    (pytester.path / "refund.policy.yaml").write_text(
        "policy:\n  default: allow\n  rules:\n    - id: refunds-need-a-person\n      when: {tool: refund_order}\n"
        "      verdict: deny\n      reason: a person refunds\n")
    pytester.makepyfile(test_shop='''
import os

AGENT = ["%(python)s", "%(agent)s", "Order A-1042 arrived broken.", "--", "{mcp:shop}"]
SHOP = ["%(python)s", "%(shop)s", "--journal", os.path.abspath("journal")]

def test_refund_is_gated(agent_eval_record):
    run = agent_eval_record(AGENT, mcp_servers={"shop": SHOP}, policy="refund.policy.yaml",
                            upstreams=["openai=%(base)s"], environment={"OPENAI_API_KEY": "key"})
    run.expect(toolsCalled=["lookup_order"], verdicts={"denied": ["refund_order"], "noUnapprovedExecution": True})
    assert not os.path.exists("journal"), "the denied refund never reached the server"
''' % {"python": python, "agent": os.path.join(REPOSITORY, "Fixtures", "external", "mcp_sdk_agent.py"),
       "shop": os.path.join(REPOSITORY, "scripts", "mcp_shop_server.py"), "base": model_server})
    result = pytester.runpytest(*PLUGIN, "--agent-eval-record", "new")
    result.assert_outcomes(passed=1)


def test_every_case_file_the_engine_runs_is_collected_and_no_other(pytester):
    """The binary says which files are case files (the engine's rule), whatever their layout: a
    list whose items start with another key, flow style, an indented list, a byte-order mark.
    A file that only mentions `expected:` deeper down is not one, as `agent-eval run` skips it."""
    pytester.makefile(".yaml", later="- logs: %s\n  caseId: later-key\n  expected: {toolsNotCalled: [refund_order]}\n" % SAMPLE)
    pytester.makefile(".yaml", flow="- {caseId: flow-style, logs: %s, expected: {toolsCalled: [lookup_order]}}\n" % SAMPLE)
    pytester.makefile(".yaml", indented="  - caseId: indented\n    logs: %s\n    expected: {toolsCalled: [lookup_order]}\n" % SAMPLE)
    (pytester.path / "marked.yaml").write_bytes(
        b"\xef\xbb\xbfcaseId: marked\nlogs: " + SAMPLE.encode() + b"\nexpected: {toolsCalled: [lookup_order]}\n")
    # Keys spelt with YAML's escapes, and explicit keys: case files all the same.
    pytester.makefile(".yaml", escaped='"case\\u0049d": escaped-key\nlogs: %s\n"expect\\x65d": {toolsNotCalled: [lookup_order]}\n' % SAMPLE)
    pytester.makefile(".yaml", explicit="? caseId\n: explicit-key\nlogs: %s\n? expected\n: {toolsCalled: [lookup_order]}\n" % SAMPLE)
    pytester.makefile(".yaml", settings="service:\n  retries: 3\n  expected: 200\n")
    result = pytester.runpytest(*PLUGIN, "-v")
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(["*escaped.yaml::escaped-key FAILED*", "*explicit.yaml::explicit-key PASSED*"])
    result.stdout.fnmatch_lines(["*later.yaml::later-key FAILED*"])
    assert "settings.yaml" not in result.stdout.str()
    engine = subprocess.run([os.environ["AGENT_EVAL_BIN"], "run", ".", "--no-catalog"], cwd=str(pytester.path),
                            capture_output=True, text=True, check=False)
    assert "6 cases, 4 passed, 2 failed" in engine.stdout, engine.stdout + engine.stderr


def wrap_binary(path, change):
    """Writes at `path` an agent-eval of another release in one respect: it runs the real binary
    ($AGENT_EVAL_BIN), then `change` (Python, with `process`, the finished run, and `sys`, `os`,
    `json` at hand) alters what it wrote, which is passed on with its exit status."""
    path.write_text(
        "#!%s\nimport json, os, subprocess, sys\n"
        "process = subprocess.run([%r] + sys.argv[1:], capture_output=True, text=True)\n"
        "%s"
        "sys.stdout.write(process.stdout)\n"
        "sys.stderr.write(process.stderr)\nsys.exit(process.returncode)\n" % (sys.executable, os.environ["AGENT_EVAL_BIN"], change))
    path.chmod(0o755)


def test_a_binary_that_does_not_list_a_files_cases_fails_the_file_never_passes_it(pytester):
    """An agent-eval older than the plugin (its `check --json` lists no cases) must not make a
    case file collect nothing and the session green: the file fails, saying why."""
    older = pytester.path / "older-agent-eval"
    wrap_binary(older,
                "if sys.argv[1:2] == ['check']:\n"
                "    report = json.loads(process.stdout)\n"
                "    for entry in report['files']:\n"
                "        entry.pop('cases', None)\n"
                "    process.stdout = json.dumps(report) + '\\n'\n")
    pytester.makefile(".yaml", one=case("one", "  toolsCalled: [lookup_order]"))
    result = pytester.runpytest(*PLUGIN, "--agent-eval-bin", str(older))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*lists no cases of*older than this plugin*"])
    missing = pytester.runpytest(*PLUGIN, "--agent-eval-bin", str(pytester.path / "no-such-binary"))
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["*--agent-eval-bin is *no-such-binary, which is not an executable file*"])


def test_a_run_that_exits_otherwise_than_its_verdict_passes_no_case(pytester):
    """A JUnit file whose folder cannot be made makes `run` exit 2 after its JSON report was
    written; `run` removes that report again (no report of a run that exited 2 says it passed),
    and the plugin passes no case of that run: each is an error with agent-eval's words."""
    pytester.makefile(".yaml", one=case("one", "  toolsCalled: [lookup_order]"))
    (pytester.path / "taken").write_text("a file where the JUnit file's folder would be made")
    result = pytester.runpytest(*PLUGIN, "--agent-eval-arg=--junit=taken/out.xml")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*agent-eval run wrote no report (exit 2)*", "*cannot write taken/out.xml*"])


def test_a_binary_of_another_release_gives_no_verdict_and_says_so(pytester, monkeypatch):
    """A binary whose results report (or `check --json`) is another version of its form than the
    plugin reads — an older or newer agent-eval on PATH — must not have its fields read as this
    version's: a case that passes with the matching binary is an error naming both versions."""
    other = pytester.path / "other-agent-eval"
    wrap_binary(other,
                "form = os.environ['BUMPED']\n"
                "if sys.argv[1:2] == ['check'] and form == 'check':\n"
                "    report = json.loads(process.stdout)\n"
                "    report['version'] = 2\n"
                "    process.stdout = json.dumps(report)\n"
                "if sys.argv[1:2] == ['run'] and form == 'results':\n"
                "    path = sys.argv[sys.argv.index('--json-out') + 1]\n"
                "    report = json.load(open(path))\n"
                "    report['version'] = 2\n"
                "    json.dump(report, open(path, 'w'))\n")
    pytester.makefile(".yaml", one=case("one", "  toolsCalled: [lookup_order]"))
    monkeypatch.setenv("BUMPED", "none")
    pytester.runpytest(*PLUGIN, "--agent-eval-bin", str(other)).assert_outcomes(passed=1)
    monkeypatch.setenv("BUMPED", "results")
    result = pytester.runpytest(*PLUGIN, "--agent-eval-bin", str(other))
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*wrote version 2 of agent-eval/results where this Python package*reads version 1*"])
    monkeypatch.setenv("BUMPED", "check")
    result = pytester.runpytest(*PLUGIN, "--agent-eval-bin", str(other))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*wrote version 2 of agent-eval/check where*"])
    # record()'s expect() reads the same report: an AgentEvalError, not a verdict.
    from agent_eval.recording import AgentEvalError, Run

    monkeypatch.setenv("BUMPED", "results")
    with pytest.raises(AgentEvalError, match="wrote version 2 of agent-eval/results"):
        Run(SAMPLE, {}, binary=str(other)).expect(toolsCalled=["lookup_order"])
    monkeypatch.setenv("BUMPED", "none")
    assert Run(SAMPLE, {}, binary=str(other)).expect(toolsCalled=["lookup_order"])["outcome"] == "pass"


def test_record_says_what_went_wrong_as_an_agent_eval_error(tmp_path):
    """The binary's error document, a program's output that is not UTF-8, and a limit that stopped
    the command: each an AgentEvalError (or a Run) with the binary's words, never a traceback of
    ours."""
    from agent_eval.recording import AgentEvalError, record

    binary = os.environ["AGENT_EVAL_BIN"]
    with pytest.raises(AgentEvalError, match=r"(?s)does not exist.*hint: "):
        record([sys.executable, "-c", "pass"], cassette=str(tmp_path / "none-yet"), binary=binary, out=str(tmp_path / "runs"))
    garbled = record([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'caf\\xe9\\n'); sys.stderr.buffer.write(b'\\xff\\n')"],
                     cassette=str(tmp_path / "cassette"), mode="new", binary=binary, out=str(tmp_path / "runs"))
    assert os.path.exists(garbled.log)
    with pytest.raises(AgentEvalError, match="stopped the command at its timeout limit"):
        record([sys.executable, "-c", "import time; time.sleep(30)"], cassette=str(tmp_path / "slow"), mode="new",
               timeout=0.5, binary=binary, out=str(tmp_path / "runs"))
    with pytest.raises(AgentEvalError, match="binary= is .*not an executable file"):
        record([sys.executable, "-c", "pass"], binary=str(tmp_path / "nothing"))
    # An expectation agent-eval refuses is named at its line of the case expect() wrote, which
    # the error shows: not a temporary file that is gone by then.
    with pytest.raises(AgentEvalError) as refused:
        garbled.expect(stopReason="success", sequence={"mode": "whenever", "calls": ["lookup_order"]})
    said = str(refused.value)
    assert "agent-eval-expect-" not in said, said
    assert re.search(r"expect\.json:(\d+)", said), said
    line = int(re.search(r"expect\.json:(\d+)", said).group(1))
    assert re.search(r'(?m)^ *%d  +"mode": "whenever"' % line, said), said


def test_one_expectation_given_twice_is_refused_never_one_of_them_dropped(tmp_path):
    """`tools_not_called=` beside `toolsNotCalled=` (or beside the dict's key) is one expectation
    given twice: keeping either would check less than was asked, and a run that breaks the other
    would pass."""
    from agent_eval.recording import Run

    import shutil

    # A copy: a failure writes the run's page beside its log.
    log = str(tmp_path / "run.jsonl.gz")
    shutil.copyfile(SAMPLE, log)
    run = Run(log, {}, binary=os.environ["AGENT_EVAL_BIN"], cwd=str(tmp_path))
    with pytest.raises(ValueError, match="toolsNotCalled: give it once"):
        run.expect(toolsNotCalled=["lookup_order"], tools_not_called=["delete_customer"])
    with pytest.raises(ValueError, match="'toolsNotCalled' in the dict and tools_not_called="):
        run.expect({"toolsNotCalled": ["lookup_order"]}, tools_not_called=["delete_customer"])
    # Each alone is checked: the sample run called lookup_order.
    from agent_eval.recording import ExpectationFailed

    with pytest.raises(ExpectationFailed):
        run.expect(tools_not_called=["lookup_order"])


def test_a_relative_binary_is_the_one_checked_wherever_it_is_run(tmp_path, monkeypatch):
    """A relative --agent-eval-bin, AGENT_EVAL_BIN or binary= is checked from the current folder:
    it is the binary run, also from another folder (pytest's rootdir, record's cwd=)."""
    from agent_eval import find_bin, named_bin

    binary = os.environ["AGENT_EVAL_BIN"]
    (tmp_path / "bin").mkdir()
    (tmp_path / "elsewhere").mkdir()
    os.symlink(os.path.abspath(binary), str(tmp_path / "bin" / "agent-eval"))
    monkeypatch.chdir(tmp_path)
    for path in (named_bin("bin/agent-eval", "binary="), named_bin("./bin/agent-eval", "--agent-eval-bin")):
        assert path == str(tmp_path / "bin" / "agent-eval")
        ran = subprocess.run([path, "--version"], cwd=str(tmp_path / "elsewhere"), capture_output=True, text=True)
        assert ran.returncode == 0, ran.stderr
    monkeypatch.setenv("AGENT_EVAL_BIN", "bin/agent-eval")
    assert find_bin() == str(tmp_path / "bin" / "agent-eval")


def test_tests_of_one_name_in_two_files_or_classes_get_cassettes_of_their_own(pytester, model_server):
    """`test_x` in two files, and in two classes of one file, records into four cassettes (they
    once shared one: the second recording went into the first's); a cassette where an older
    agent-eval kept it (`cassettes/<test name>`) is named, with where it goes now."""
    pytester.makepyfile(agent=AGENT)
    body = '''
AGENT = ["%s", "agent.py"]
OPTIONS = dict(input="Order A-1042 arrived broken.", upstreams=["openai=%s"], environment={"OPENAI_API_KEY": "key"})

def test_refunds(agent_eval_record):
    agent_eval_record(AGENT, **OPTIONS).expect(toolsCalled=["refund_order"])

class TestOne:
    def test_refunds(self, agent_eval_record):
        agent_eval_record(AGENT, **OPTIONS).expect(toolsCalled=["refund_order"])

class TestTwo:
    def test_refunds(self, agent_eval_record):
        agent_eval_record(AGENT, **OPTIONS).expect(toolsCalled=["refund_order"])
''' % (sys.executable, model_server)
    pytester.makepyfile(test_first=body, test_second=body)
    pytester.runpytest(*PLUGIN, "--agent-eval-record", "new").assert_outcomes(passed=6)
    cassettes = pytester.path / "cassettes"
    for place in ("test_first/test_refunds", "test_second/test_refunds", "test_first/TestOne/test_refunds",
                  "test_first/TestTwo/test_refunds"):
        assert (cassettes / place).is_dir(), place
    assert not (cassettes / "test_refunds").exists()
    # An older layout's cassette: named, with where it goes, instead of "nothing recorded".
    (cassettes / "test_first" / "test_refunds").rename(cassettes / "test_refunds")
    old = pytester.runpytest(*PLUGIN, "test_first.py::test_refunds")
    old.assert_outcomes(failed=1)
    old.stdout.fnmatch_lines(["*AgentEvalError*cassettes/test_first/test_refunds now*mv *cassettes/test_refunds *"])


@pytest.mark.parametrize("whole_group", [False, True])
def test_sigterm_to_pytest_stops_the_run_and_its_agent(pytester, whole_group):
    """A CI job cancelled signals pytest alone, or its whole process group: the plugin passes the
    SIGTERM on to `agent-eval run` (in a session of its own) once, which stops the agent it
    started, and waits for it; neither is left running."""
    import signal
    import time

    pidfile = pytester.path / "agent.pid"
    pytester.makefile(".py", slow="import os, time\nopen(%r, 'w').write(str(os.getpid()))\ntime.sleep(60)\n" % str(pidfile))
    pytester.makefile(".yaml", slow="caseId: slow\ncommand: [%s, slow.py]\ninput: hi\ntimeout: 120\n"
                      "expected: {toolsNotCalled: [delete_customer]}\n" % sys.executable)
    pytest_run = subprocess.Popen([sys.executable, "-m", "pytest", "slow.yaml"] + PLUGIN, cwd=str(pytester.path),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline, "the agent never started"
        assert pytest_run.poll() is None, "pytest ended before the agent started"
        time.sleep(0.1)
    agent = int(pidfile.read_text())
    try:
        if whole_group:
            os.killpg(pytest_run.pid, signal.SIGTERM)
        else:
            pytest_run.send_signal(signal.SIGTERM)
        assert pytest_run.wait(timeout=45) == -signal.SIGTERM
        deadline = time.monotonic() + 15
        while True:
            try:
                os.kill(agent, 0)
            except ProcessLookupError:
                break
            assert time.monotonic() < deadline, "the agent (pid %d) is still running after pytest ended" % agent
            time.sleep(0.1)
    finally:
        # Whatever the outcome, nothing of the test is left running.
        for pid in (agent, pytest_run.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


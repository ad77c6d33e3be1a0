import Foundation
import TestSupport
import TestTags
import Testing

/// The Python wheel (`scripts/build-wheel`, docs/python.md): built around the binary under test
/// (or the release build, `AGENT_EVAL_WHEEL_RELEASE=1`), its platform checked by auditwheel, then installed with `pip install --no-index` into a fresh
/// virtual environment inside a clean Debian root that has Python and nothing of the toolchain
/// (`scripts/debian-root`: debootstrap's minimal base, entered with chroot), where the binary, the
/// bundled cases, a recording against a local model server and the plugin's own tests run.
@Suite("the Python wheel on a machine with only Python", .tags(.python), .needsPython, .ownThread, .timeLimit(.minutes(30)))
struct WheelTests {
    /// Runs `script` with /bin/sh inside `root` (chroot), in a mount namespace of its own
    /// (`unshare --mount`) where /proc is mounted: the mount goes with the process, however the
    /// test ends. The root's /dev is debootstrap's own device nodes.
    static func inRoot(_ root: String, _ script: String, environment: [String: String] = [:]) async throws -> ProcessResult {
        // Only what a machine with Python has on its PATH: the root's own /usr/bin and /bin.
        var variables = ["PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root", "LANG": "C.UTF-8"]
        for (name, value) in environment { variables[name] = value }
        let assignments = variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        let enter = #"root="$1"; shift; mount -t proc proc "$root/proc" && exec /usr/bin/env -i "$@""#
        return try await Subprocess.run(
            "/usr/bin/unshare",
            ["--mount", "--propagation", "private", "/bin/sh", "-c", enter, "sh", root] + assignments
                + ["/usr/sbin/chroot", root, "/bin/sh", "-c", "set -e\n" + script])
    }

    @Test(
        "the wheel carries a binary that runs where only Python is: --version, the bundled cases, a recording, the plugin's tests; auditwheel agrees with its tag"
    )
    func wheelOnACleanMachine() async throws {
        guard getuid() == 0 else {
            Issue.record("the wheel's test enters a Debian root with chroot, which needs root: run the tests as root (CI does)")
            return
        }
        try await TemporaryDirectory.with { directory in
            // The wheel of the binary under test (a debug build: the Swift runtime is carried as
            // libraries, by the same code that carries libcurl), or with AGENT_EVAL_WHEEL_RELEASE=1
            // the release wheel scripts/build-wheel makes by default (a release build: 10 minutes more).
            let release = ProcessInfo.processInfo.environment["AGENT_EVAL_WHEEL_RELEASE"] == "1"
            let built = try await Subprocess.run(
                repositoryRoot.appendingPathComponent("scripts/build-wheel").path,
                ["--out", directory.path("dist")] + (release ? [] : ["--binary", try agentEvalBinary()]))
            #expect(built.status == 0, "\(built.stderr)")
            let wheel = built.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
            let name = (wheel as NSString).lastPathComponent
            #expect(name.hasPrefix("agent_eval-0.4.0-py3-none-manylinux_2_"), "\(name)")
            let size = try FileManager.default.attributesOfItem(atPath: wheel)[.size] as? Int ?? 0
            // The release wheel is 46 MB; a debug build's carries the Swift runtime beside it.
            #expect(size < (release ? 60_000_000 : 250_000_000), "the wheel is \(size) bytes")
            // auditwheel reads the same platform from what the binary and its libraries need.
            let tools = try await PythonEnvironment.wheel.path()
            let shown = try await Subprocess.run(tools + "/bin/auditwheel", ["show", wheel])
            #expect(shown.status == 0, "\(shown.stdoutText)\(shown.stderr)")
            let tag = String(name.dropFirst("agent_eval-0.4.0-py3-none-".count).dropLast(".whl".count))
            #expect(shown.stdoutText.contains("\"\(tag)\""), "auditwheel: \(shown.stdoutText)")
            // pytest and pytest-xdist for the root, as wheels (it has no network of its own to use).
            let wheelhouse = directory.path("wheelhouse")
            let downloaded = try await Subprocess.run(
                tools + "/bin/python",
                [
                    "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", wheelhouse, "pytest==9.2.0", "pytest-xdist==3.8.0",
                    "iniconfig==2.3.1", "packaging==26.4", "pluggy==1.7.0", "pygments==2.21.0", "execnet==2.1.2",
                ])
            #expect(downloaded.status == 0, "\(downloaded.stderr)")

            let made = try await Subprocess.run(repositoryRoot.appendingPathComponent("scripts/debian-root").path, [])
            try #require(made.status == 0, "the clean Debian root could not be made: \(made.stderr)")
            let root = made.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
            // Nothing of the toolchain in it: what the wheel carries is all the binary has.
            for absent in ["usr/bin/swift", "usr/lib/x86_64-linux-gnu/libcurl.so.4", "usr/lib/x86_64-linux-gnu/libdeflate.so.0"] {
                #expect(!FileManager.default.fileExists(atPath: "\(root)/\(absent)"), "the root has \(absent)")
            }
            // The test's own corner of the root: the wheel, the repository's cases and the plugin's tests.
            let corner = "/tmp/agent-eval-wheel-\(UUID().uuidString)"
            let inside = root + corner
            defer { try? FileManager.default.removeItem(atPath: inside) }
            try FileManager.default.createDirectory(atPath: inside + "/repo/python", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: inside + "/repo/scripts", withIntermediateDirectories: true)
            for (from, to) in [
                (wheel, "/\(name)"), (wheelhouse, "/wheelhouse"), (repositoryRoot.path + "/EvalCases", "/repo/EvalCases"),
                (repositoryRoot.path + "/Fixtures", "/repo/Fixtures"), (repositoryRoot.path + "/python/tests", "/repo/python/tests"),
                (repositoryRoot.path + "/scripts/model_server.py", "/repo/scripts/model_server.py"),
            ] {
                try FileManager.default.copyItem(atPath: from, toPath: inside + to)
            }
            try """
            import json, os, sys, urllib.request
            base = os.environ["OPENAI_BASE_URL"].rstrip("/")
            goal = sys.stdin.read().strip()
            tools = [{"type": "function", "function": {"name": n, "description": n, "parameters": {"type": "object", "properties": {}}}}
                     for n in ("lookup_order", "refund_order")]
            messages = [{"role": "user", "content": goal}]
            for _ in range(6):
                body = json.dumps({"model": "m", "messages": messages, "tools": tools}).encode()
                request = urllib.request.Request(base + "/chat/completions", data=body, headers={"content-type": "application/json"})
                reply = json.load(urllib.request.urlopen(request))["choices"][0]["message"]
                messages.append(reply)
                if not reply.get("tool_calls"):
                    print(reply["content"])
                    break
                for call in reply["tool_calls"]:
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": "{}"})
            """.write(toFile: inside + "/agent.py", atomically: true, encoding: .utf8)

            let installed = try await Self.inRoot(
                root,
                """
                python3 -m venv \(corner)/venv
                \(corner)/venv/bin/pip install --no-index --find-links \(corner)/wheelhouse \(corner)/\(name) pytest pytest-xdist
                """)
            try #require(installed.status == 0, "pip install in the root: \(installed.stdoutText)\(installed.stderr)")
            let version = try await Self.inRoot(root, "\(corner)/venv/bin/agent-eval --version")
            #expect(version.status == 0 && version.stdoutText.hasPrefix("0.4.0 (commit "), "\(version.stdoutText)\(version.stderr)")
            // `python -m agent_eval` finds the binary where pip put it (no AGENT_EVAL_BIN), and the
            // README's main job runs: the bundled cases, offline.
            let cases = try await Self.inRoot(
                root, "cd \(corner)/repo && \(corner)/venv/bin/python -m agent_eval run EvalCases/ --no-catalog --out \(corner)/runs")
            #expect(cases.status == 0, "\(cases.stdoutText)\(cases.stderr)")
            #expect(cases.stdoutText.contains("PASS: 11 cases, 11 passed"), "\(cases.stdoutText)")
            // A recording through the gateway, against a model server on the host's 127.0.0.1.
            let server = try LocalModelServer()
            defer { server.stop() }
            let recorded = try await Self.inRoot(
                root,
                """
                cd \(corner) && \(corner)/venv/bin/agent-eval record --no-catalog --json --out \(corner)/runs \\
                    --upstream openai=\(server.baseURL("refund")) --input 'Order A-1042 arrived broken.' -- \(corner)/venv/bin/python agent.py
                """)
            #expect(recorded.status == 0, "\(recorded.stdoutText)\(recorded.stderr)")
            #expect(recorded.stdoutText.contains("\"stop_reason\":\"success\""), "\(recorded.stdoutText)")
            // The plugin's own tests, with the installed binary.
            let plugin = try await Self.inRoot(
                // Less the MCP proxy's test, whose agent needs the openai and mcp packages the root has not.
                root, "cd \(corner)/repo/python && \(corner)/venv/bin/python -m pytest tests -p no:cacheprovider -q -k 'not mcp_proxy'",
                environment: ["AGENT_EVAL_BIN": "\(corner)/venv/bin/agent-eval"])
            #expect(plugin.status == 0, "\(plugin.stdoutText)\(plugin.stderr)")
            #expect(plugin.stdoutText.contains("31 passed, 1 deselected"), "\(plugin.stdoutText)")
        }
    }
}

// swift-tools-version: 6.1
import PackageDescription

/// Strict settings for every target, in one place.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "agent-eval",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "agent-eval", targets: ["agent-eval"]),
        .library(name: "TraceCore", targets: ["TraceCore"]),
        .library(name: "TraceLog", targets: ["TraceLog"]),
        .library(name: "AgentRuntime", targets: ["AgentRuntime"]),
        .library(name: "EvalEngine", targets: ["EvalEngine"]),
        .library(name: "Replay", targets: ["Replay"]),
        .library(name: "ModelClients", targets: ["ModelClients"]),
        .library(name: "MCPTools", targets: ["MCPTools"]),
        .library(name: "Catalog", targets: ["Catalog"]),
        .library(name: "Interop", targets: ["Interop"]),
        .library(name: "Pipelines", targets: ["Pipelines"]),
        .library(name: "Viewer", targets: ["Viewer"]),
        .library(name: "Recording", targets: ["Recording"]),
        .library(name: "Workflows", targets: ["Workflows"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.3"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ],
    // Layers import only downward. docs/architecture.md lists what each module may import, and
    // ArchitectureTests fails on an import it does not allow: change both together.
    targets: [
        // Layer 0: the system zlib, seen through a module map. Only TraceLog imports it.
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        // Layer 0: libdeflate, for inflating whole gzip members at once (about twice zlib's
        // speed); zlib stays the writer and the reader of torn or damaged members. Only TraceLog
        // imports it.
        .systemLibrary(
            name: "CLibdeflate",
            pkgConfig: "libdeflate",
            providers: [.apt(["libdeflate-dev"]), .brew(["libdeflate"])]
        ),
        // Layer 0: libzstd, for the zstd entries (zip method 93) of Inspect AI's `.eval` archives.
        // Only Interop imports it.
        .systemLibrary(
            name: "CZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]
        ),
        // Layer 0: SHA-256 on the x86-64 SHA extensions, for the many short messages the log
        // hashes (lines, state digests). Only TraceCore's ContentHash calls it.
        .target(name: "CSHA256"),
        // Layer 1: pure core. Event types, JSON values, run state, the fold, trajectory queries.
        // No I/O, no clock.
        .target(
            name: "TraceCore",
            dependencies: ["CSHA256", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strictSettings
        ),
        // Layer 2: the compressed JSONL log: writer, reader, verification, repair.
        .target(
            name: "TraceLog",
            dependencies: ["TraceCore", "CZlib", "CLibdeflate", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strictSettings
        ),
        // Layer 0: starting processes: the few libc calls Swift cannot see without _GNU_SOURCE.
        // Only AgentRuntime imports it.
        .target(name: "CProcess"),
        // Layer 3: config files (agent files, model scripts, eval cases) read with positions, so
        // every error names file:line:column.
        .target(
            name: "ConfigFile",
            dependencies: ["TraceCore", "TraceLog", .product(name: "Yams", package: "Yams")],
            swiftSettings: strictSettings
        ),
        // Layer 4: the agent runtime: the loop, tools and their hosts, policy, context, models.
        .target(
            name: "AgentRuntime",
            dependencies: ["TraceCore", "TraceLog", "ConfigFile", "CProcess"],
            swiftSettings: strictSettings
        ),
        // Layer 5: model clients over HTTP (OpenAI-compatible Chat Completions, Anthropic Messages):
        // streaming, retries, rate limits, cassettes. The only module that imports the HTTP stack.
        .target(
            name: "ModelClients",
            dependencies: [
                "TraceCore", "TraceLog", "AgentRuntime", .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // Layer 6: MCP servers as tools, over stdio or Streamable HTTP (through ModelClients'
        // HTTPExchange, the one HTTP client), behind the runtime's ToolServerConnector: a client
        // of both eras of MCP on the runtime's JSONRPCPeer (no MCP SDK: docs/mcp.md).
        .target(
            name: "MCPTools",
            dependencies: ["TraceCore", "AgentRuntime", "ModelClients"],
            swiftSettings: strictSettings
        ),
        // Layer 6: the eval engine: case files, trajectory matchers, the runner, reports, baselines;
        // it runs and checks pipelines too (above Pipelines, which never imports it).
        .target(
            name: "EvalEngine",
            dependencies: ["TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "Pipelines"],
            swiftSettings: strictSettings
        ),
        // Layer 7: the SQLite catalog: runs, tool calls, eval results and the eval fact cache,
        // derived from logs. The only module that imports GRDB.
        .target(
            name: "Catalog",
            dependencies: [
                "TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "EvalEngine", "Replay",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // Layer 3: interop: importers of other tools' records (OpenTelemetry traces, Inspect logs,
        // message transcripts) that write ordinary logs through TraceLog, and the OTLP exporter.
        .target(
            name: "Interop",
            dependencies: ["TraceCore", "TraceLog", "CZstd"],
            swiftSettings: strictSettings
        ),
        // Layer 5, above the runtime: pipelines — a DAG of tasks, each an isolated child run,
        // with checkpoints, resume, rollback, retries and circuit breakers, all in a pipeline log.
        .target(
            name: "Pipelines",
            dependencies: ["TraceCore", "TraceLog", "ConfigFile", "AgentRuntime"],
            swiftSettings: strictSettings
        ),
        // Layer 5: replay: step-by-step rebuild with digest checks, step tables (kept by the
        // catalog, behind StepRecordStore), diff, re-run.
        .target(
            name: "Replay",
            dependencies: ["TraceCore", "TraceLog", "AgentRuntime"],
            swiftSettings: strictSettings
        ),
        // Layer 6, above replay and pipelines: the HTML viewer. Runs, pipelines,
        // eval reports and diffs as self-contained pages made from the replay, pipeline, report
        // and diff documents; the page template, style and script are files in Sources/Viewer/Assets.
        .target(
            name: "Viewer",
            dependencies: ["TraceCore", "TraceLog", "Replay", "Pipelines", .product(name: "Crypto", package: "swift-crypto")],
            resources: [.copy("Assets")],
            swiftSettings: strictSettings
        ),
        // Layer 6, above ModelClients, AgentRuntime and Interop: recording agents written with
        // other frameworks — the model gateway (swift-nio's HTTP server), `record`, the MCP proxy.
        .target(
            name: "Recording",
            dependencies: [
                "TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "ModelClients", "Interop", "Replay",
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // Layer 8: what one command does end to end, composed from the modules below — a suite
        // run with its catalog history, export and report files (`SuiteRun`), a new project whose
        // agent is a program (`ExternalProject`) — so the executable only parses and prints.
        .target(
            name: "Workflows",
            dependencies: [
                "TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "EvalEngine", "ModelClients", "Catalog", "Interop", "Pipelines",
                "Viewer", "Recording",
            ],
            swiftSettings: strictSettings
        ),
        // Layer 9: `agent-eval serve`, the live web UI over the catalog and its logs: the runs
        // list, run pages filled in as their logs grow, compare, approvals (docs/serve.md).
        .target(
            name: "WebUI",
            dependencies: [
                "TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "EvalEngine", "Replay", "Viewer", "Recording", "Catalog",
                "Workflows", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // Layer 10: the command-line interface.
        .executableTarget(
            name: "agent-eval",
            dependencies: [
                "TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "EvalEngine", "Replay", "ModelClients", "MCPTools",
                "Catalog", "Interop", "Pipelines", "Viewer", "Recording", "Workflows", "WebUI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            // What `init` writes and `help` shows, installed beside the binary (scripts/install).
            resources: [.copy("Templates")],
            swiftSettings: strictSettings,
            plugins: ["BuildInfo"]
        ),
        // The commit `agent-eval --version` prints, recorded at build time.
        .plugin(name: "BuildInfo", capability: .buildTool(), path: "Plugins/BuildInfo"),
        // Benchmarks: `swift run -c release log-benchmark` (see README, Performance).
        .executableTarget(
            name: "log-benchmark",
            dependencies: ["TraceCore", "TraceLog", "CZlib", "TestSupport"],
            path: "Benchmarks/LogBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release runtime-benchmark` (see README, Performance).
        .executableTarget(
            name: "runtime-benchmark",
            dependencies: ["TraceCore", "TraceLog", "AgentRuntime"],
            path: "Benchmarks/RuntimeBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release eval-benchmark` (see README, Performance).
        .executableTarget(
            name: "eval-benchmark",
            dependencies: ["TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "EvalEngine", "TestSupport", "BenchmarkSupport"],
            path: "Benchmarks/EvalBenchmark",
            exclude: ["eval_logs.py", "eval_logs_fast.py", "eval_logs_inspect.py"],
            swiftSettings: strictSettings
        ),
        // `swift run -c release gate-benchmark` (see docs/performance.md).
        .executableTarget(
            name: "gate-benchmark",
            dependencies: ["TraceCore", "AgentRuntime", "EvalEngine", "TestSupport"],
            path: "Benchmarks/GateBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release replay-benchmark` (see README, Performance).
        .executableTarget(
            name: "replay-benchmark",
            dependencies: ["TraceCore", "TraceLog", "Replay", "Catalog", "TestSupport"],
            path: "Benchmarks/ReplayBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release conversation-benchmark` (docs/performance.md, "Conversations").
        .executableTarget(
            name: "conversation-benchmark",
            dependencies: ["TraceCore", "TraceLog", "AgentRuntime", "ModelClients", "TestSupport"],
            path: "Benchmarks/ConversationBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release pipeline-benchmark` (see README, Performance).
        .executableTarget(
            name: "pipeline-benchmark",
            dependencies: ["TraceCore", "TraceLog", "AgentRuntime", "Pipelines", "BenchmarkSupport"],
            path: "Benchmarks/PipelineBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release catalog-benchmark` (see docs/catalog.md).
        .executableTarget(
            name: "catalog-benchmark",
            dependencies: ["TraceCore", "TraceLog", "EvalEngine", "Catalog", "TestSupport"],
            path: "Benchmarks/CatalogBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release model-benchmark` (see docs/models.md).
        .executableTarget(
            name: "model-benchmark",
            dependencies: ["TraceCore", "AgentRuntime", "ModelClients", "BenchmarkSupport"],
            path: "Benchmarks/ModelBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release gateway-benchmark` (see docs/record.md).
        .executableTarget(
            name: "gateway-benchmark",
            dependencies: ["TraceCore", "TraceLog", "AgentRuntime", "ModelClients", "Recording", "BenchmarkSupport"],
            path: "Benchmarks/GatewayBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release serve-benchmark` (see docs/serve.md).
        .executableTarget(
            name: "serve-benchmark",
            dependencies: ["TraceCore", "TraceLog", "Catalog", "TestSupport"],
            path: "Benchmarks/ServeBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release mcp-proxy-benchmark` (see docs/mcp.md).
        .executableTarget(
            name: "mcp-proxy-benchmark",
            dependencies: ["TraceCore", "TraceLog", "AgentRuntime", "Recording"],
            path: "Benchmarks/MCPProxyBenchmark",
            swiftSettings: strictSettings
        ),
        // What several benchmarks share: a local model server in a child process, the process's CPU time.
        .target(
            name: "BenchmarkSupport",
            dependencies: [
                "TraceCore", .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Benchmarks/Support",
            swiftSettings: strictSettings
        ),
        // `swift run -c release interop-benchmark` (see docs/interop.md).
        .executableTarget(
            name: "interop-benchmark",
            dependencies: ["TraceCore", "Interop"],
            path: "Benchmarks/InteropBenchmark",
            swiftSettings: strictSettings
        ),
        // `swift run -c release viewer-benchmark` (see docs/viewer.md).
        .executableTarget(
            name: "viewer-benchmark",
            dependencies: ["TraceCore", "TraceLog", "Viewer", "TestSupport"],
            path: "Benchmarks/ViewerBenchmark",
            swiftSettings: strictSettings
        ),
        .target(
            name: "TestSupport",
            dependencies: ["TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "EvalEngine", "Pipelines", "CZlib", "CLibdeflate"],
            swiftSettings: strictSettings
        ),
        // The tests' traits: the tags of the tests that need more than the build (a PyPI
        // component, a browser), for `AGENT_EVAL_TEST_SKIP=python swift test` (README), and
        // `.ownThread` for the tests that measure time; only the test targets depend on it.
        .target(name: "TestTags", dependencies: ["AgentRuntime", "TestSupport"], path: "Tests/TestTags", swiftSettings: strictSettings),
        // `swift run -c release fuzz [--seconds N] [--target T] [--seed S]`: the seeded mutation
        // fuzzer for the readers of untrusted input (docs in Fuzz/main.swift).
        .executableTarget(
            name: "fuzz",
            dependencies: ["TestSupport"],
            path: "Fuzz",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TraceCoreTests",
            dependencies: ["TraceCore", "TestSupport", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "TraceLogTests",
            dependencies: ["TraceCore", "TraceLog", "TestSupport", "TestTags", "CZlib"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ConfigFileTests",
            dependencies: ["TraceCore", "ConfigFile", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "AgentRuntimeTests",
            dependencies: ["TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "TestSupport", "TestTags"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ModelClientsTests",
            dependencies: ["TraceCore", "TraceLog", "AgentRuntime", "ModelClients", "TestSupport", "TestTags"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "WorkflowsTests",
            dependencies: ["TraceCore", "ConfigFile", "AgentRuntime", "EvalEngine", "ModelClients", "Catalog", "Workflows", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "RecordingTests",
            dependencies: ["TraceCore", "TraceLog", "AgentRuntime", "ModelClients", "Recording", "TestSupport", "TestTags"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "MCPToolsTests",
            dependencies: [
                "TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "ModelClients", "MCPTools", "Replay", "TestSupport", "TestTags",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "EvalEngineTests",
            dependencies: ["TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "EvalEngine", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CatalogTests",
            dependencies: [
                "TraceCore", "TraceLog", "AgentRuntime", "EvalEngine", "Catalog", "Replay", "TestSupport",
                // Two raw connections, to make SQLite's own busy errors (CatalogBusyTests).
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ReplayTests",
            dependencies: ["TraceCore", "TraceLog", "AgentRuntime", "Replay", "TestSupport", "TestTags"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "ViewerTests",
            dependencies: ["TraceCore", "TraceLog", "Replay", "Pipelines", "Viewer", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "InteropTests",
            dependencies: ["TraceCore", "TraceLog", "EvalEngine", "Interop", "ModelClients", "TestSupport", "TestTags"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "PipelinesTests",
            dependencies: ["TraceCore", "TraceLog", "ConfigFile", "AgentRuntime", "Pipelines", "TestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "CLITests",
            dependencies: [
                "TraceCore", "TraceLog", "ConfigFile", "TestSupport", "TestTags", "CProcess", "Pipelines", "Recording", "agent-eval",
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)

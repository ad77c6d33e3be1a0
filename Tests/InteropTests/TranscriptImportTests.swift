import Foundation
import Interop
import TestSupport
import TestTags
import Testing
import TraceCore

@Suite("Importing message transcripts")
struct TranscriptImportTests {
    static let openAI = """
        [
         {"role": "system", "content": "You are a support agent."},
         {"role": "user", "content": "Refund order 42"},
         {"role": "assistant", "content": "Let me look.", "tool_calls": [
           {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": "{\\"order_id\\": 42}"}},
           {"id": "call_2", "type": "function", "function": {"name": "get_policy", "arguments": {"topic": "refunds"}}}]},
         {"role": "tool", "tool_call_id": "call_2", "content": "{\\"window_days\\": 30}"},
         {"role": "tool", "tool_call_id": "call_1", "content": "{\\"order_id\\": 42, \\"total\\": 19.99}"},
         {"role": "assistant", "content": null, "tool_calls": [
           {"id": "call_1", "type": "function", "function": {"name": "refund_order", "arguments": "{\\"order_id\\": 42, \\"amount\\": 19.9"}}]},
         {"role": "tool", "tool_call_id": "call_1", "content": "Error: amount must be a number"},
         {"role": "assistant", "content": "I could not refund order 42."}
        ]
        """

    @Test("a reused id beside a source id shaped like the renamed one (a, a, a#2): three calls, three ids, each with its own result")
    func renamedIdsNeverCollide() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-ids")
        defer { scratch.remove() }
        let transcript = """
            [{"role": "user", "content": "go"},
             {"role": "assistant", "content": null, "tool_calls": [
               {"id": "a", "type": "function", "function": {"name": "pay", "arguments": "{\\"amt\\": 1}"}},
               {"id": "a", "type": "function", "function": {"name": "pay", "arguments": "{\\"amt\\": 2}"}},
               {"id": "a#2", "type": "function", "function": {"name": "pay", "arguments": "{\\"amt\\": 3}"}}]},
             {"role": "tool", "tool_call_id": "a", "content": "paid 1"},
             {"role": "tool", "tool_call_id": "a", "content": "paid 2"},
             {"role": "tool", "tool_call_id": "a#2", "content": "paid 3"},
             {"role": "assistant", "content": "done"}]
            """
        let (_, states) = try await importRuns([try write(transcript, to: scratch.url.path, "ids.json")])
        let state = try #require(states.first)
        #expect(state.anomalies.isEmpty, "\(state.anomalies)")
        #expect(state.calls.map(\.id) == ["a", "a#2", "a#2#2"])
        #expect(state.calls.map { $0.lastResult?.output } == [.string("paid 1"), .string("paid 2"), .string("paid 3")])
    }

    @Test(
        "results go to the calls they name: numeric ids out of order pair by id, a result naming no call is kept as a record and said, one without an id pairs by position and is said; calls that are no list are an error"
    )
    func resultsGoWhereTheyPoint() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-pairs")
        defer { scratch.remove() }
        let numeric = try write(
            #"""
            [{"role": "user", "content": "weather in A and B"},
             {"role": "assistant", "content": null, "tool_calls": [
               {"id": 1, "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"A\"}"}},
               {"id": 2, "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"B\"}"}}]},
             {"role": "tool", "tool_call_id": 2, "content": "B: rain"},
             {"role": "tool", "tool_call_id": 1, "content": "A: sun"},
             {"role": "assistant", "content": "A sunny, B rainy"}]
            """#, to: scratch.url.path, "numeric.json")
        let (_, numericStates) = try await importRuns([numeric])
        #expect(numericStates.first?.calls.map { $0.lastResult?.output } == [.string("A: sun"), .string("B: rain")])
        let loose = try write(
            #"""
            [{"role": "user", "content": "two lookups"},
             {"role": "assistant", "content": null, "tool_calls": [
               {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
               {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
             {"role": "tool", "content": "first"},
             {"role": "tool", "tool_call_id": "ghost", "content": "refunded everything"},
             {"role": "assistant", "content": "done"}]
            """#, to: scratch.url.path, "loose.json")
        let (looseOutcome, looseStates) = try await importRuns([loose])
        let state = try #require(looseStates.first)
        #expect(state.calls.map { $0.lastResult?.output } == [.string("first"), nil], "the ghost's result is no call's")
        let notes = looseOutcome.runs.first?.warnings ?? []
        #expect(
            notes.contains { $0.contains("names no call (no tool_call_id): paired with the oldest unanswered call, \"c1\"") }, "\(notes)")
        #expect(
            notes.contains { $0.contains("a result for call id \"ghost\", which no unanswered call has: kept as a record only") },
            "\(notes)")
        let object = try write(
            #"[{"role": "user", "content": "go"}, {"role": "assistant", "content": null, "tool_calls": {"id": "c1", "function": {"name": "pay"}}}]"#,
            to: scratch.url.path, "object.json")
        let (refused, _) = try await importRuns([object])
        #expect(refused.runs.first?.error?.message.contains("message 2: tool_calls is no list") == true, "\(refused.runs)")
    }

    @Test(
        "an Anthropic reply with calls the API ran itself (a web search, an MCP connector's tool): calls with their results, then the answer"
    )
    func serverRunCalls() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-server-tools")
        defer { scratch.remove() }
        let transcript = try write(
            #"""
            {"model": "claude-x", "system": "s", "messages": [
             {"role": "user", "content": "Who won yesterday?"},
             {"role": "assistant", "content": [
               {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "match result"}},
               {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "web_search_result", "url": "https://x", "title": "t"}]},
               {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "delete_repo", "server_name": "gh", "input": {"repo": "a/b"}},
               {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "is_error": false, "content": [{"type": "text", "text": "deleted"}]},
               {"type": "text", "text": "Team A won."}], "stop_reason": "end_turn"}]}
            """#, to: scratch.url.path, "server.json")
        let (outcome, states) = try await importRuns([transcript])
        #expect(outcome.runs.first?.format == "anthropic.messages")
        let state = try #require(states.first)
        #expect(state.calls.map(\.tool) == ["web_search", "delete_repo"])
        #expect(state.calls.allSatisfy { $0.lastResult?.status == .ok }, "\(state.calls)")
        #expect(state.calls.last?.lastResult?.output == .string("deleted"))
        #expect(state.stop?.reason == .success && state.stop?.answer == "Team A won.", "\(String(describing: state.stop))")
    }

    @Test("an OpenAI transcript: results paired by id out of order, a reused id, text beside calls, bad JSON, failure in the content")
    func openAITraps() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-openai")
        defer { scratch.remove() }
        let directory = scratch.url.path
        let (outcome, states) = try await importRuns([try write(Self.openAI, to: directory, "chat.json")])
        #expect(outcome.importedCount == 1 && outcome.failedCount == 0)
        let state = try #require(states.first)
        #expect(state.anomalies.isEmpty)
        #expect(state.start?.source?.format == "openai.messages")
        #expect(state.start?.source?.importer == ImportWriter.importer)
        #expect(state.start?.goal == "Refund order 42")
        #expect(state.calls.map(\.id) == ["call_1", "call_2", "call_1#2"])
        #expect(state.calls.map(\.tool) == ["lookup_order", "get_policy", "refund_order"])
        // Results went to the calls they name, though they came in the other order.
        #expect(state.calls[0].lastResult?.output == ["order_id": 42, "total": 19.99])
        #expect(state.calls[1].lastResult?.output == ["window_days": 30])
        // Arguments that are not JSON are kept as the string the model wrote, and reported.
        #expect(state.calls[2].arguments == .string(#"{"order_id": 42, "amount": 19.9"#))
        #expect(state.calls[2].lastResult?.status == .error)
        #expect(outcome.runs[0].warnings.contains { $0.contains("used again") })
        #expect(outcome.runs[0].warnings.contains { $0.contains("not valid JSON") })
        #expect(state.stop == RunStopped(reason: .success, answer: "I could not refund order 42."))
        // The source's records are kept as stored content.
        #expect(state.contents.count == 3)
    }

    @Test("an Anthropic transcript: tool_use and tool_result blocks, is_error, max_tokens at the end")
    func anthropic() async throws {
        let text = """
            {"model": "claude-x", "system": "Be brief.", "messages": [
              {"role": "user", "content": "Weather in Paris and Rome?"},
              {"role": "assistant", "content": [{"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2", "content": [{"type": "text", "text": "offline"}], "is_error": true},
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]},
              {"role": "assistant", "content": [{"type": "text", "text": "Paris is 18"}], "stop_reason": "max_tokens"}
            ]}
            """
        let scratch = try TemporaryDirectory("agent-eval-interop-anthropic")
        defer { scratch.remove() }
        let directory = scratch.url.path
        let (outcome, states) = try await importRuns([try write(text, to: directory, "claude.json")])
        let state = try #require(states.first)
        #expect(outcome.runs.first?.format == "anthropic.messages")
        #expect(state.start?.model == ModelIdentity(provider: "anthropic", name: "claude-x"))
        #expect(state.calls.map(\.arguments) == [["city": "Paris"], ["city": "Rome"]])
        #expect(state.calls.map { $0.lastResult?.status } == [.ok, .error])
        #expect(state.calls[0].lastResult?.output == .string("18 C"))
        #expect(state.stop?.reason == .budgetExhausted && state.stop?.limit == .tokenBudget)
        #expect(state.start?.source?.stop == "max_tokens")
    }

    @Test(
        "a stop token in a user message the agent answered is what the user said, with a warning: not an ending followed by more of the run"
    )
    func stopTokenMidConversation() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-mid-stop")
        defer { scratch.remove() }
        let transcript = """
            [
             {"role": "user", "content": "My order A-1042 arrived broken."},
             {"role": "assistant", "content": "Sorry to hear it. Shall I refund it?"},
             {"role": "user", "content": "yes ###STOP###"},
             {"role": "assistant", "content": null, "tool_calls": [
               {"id": "c1", "type": "function", "function": {"name": "refund_order", "arguments": "{\\"order_id\\": \\"A-1042\\"}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "{\\"refunded\\": true}"},
             {"role": "assistant", "content": "Refunded.", "finish_reason": "stop"},
             {"role": "user", "content": "thanks ###STOP###"}
            ]
            """
        let (outcome, states) = try await importRuns([try write(transcript, to: scratch.url.path, "mid.json")])
        let state = try #require(states.first)
        #expect(state.anomalies.isEmpty, "\(state.anomalies)")
        #expect(state.userTurns.map(\.turn.ends) == [nil, nil, .userStop])
        #expect(state.userTurns[1].turn.text == "yes ###STOP###")
        #expect(state.stop?.reason == .userStop)
        #expect(state.executedToolNames == ["refund_order"])
        #expect(
            outcome.runs[0].warnings.contains {
                $0.hasPrefix("user turn 2 holds the stop token of a user_stop, but the agent went on after it")
            },
            "\(outcome.runs[0].warnings)")
        // A stop token in a closing message another follows: only the last message may end it.
        let trailing = transcript.replacingOccurrences(
            of: #"{"role": "user", "content": "thanks ###STOP###"}"#,
            with: #"{"role": "user", "content": "thanks ###STOP###"}, {"role": "user", "content": "bye"}"#)
        let (then, thenStates) = try await importRuns([try write(trailing, to: scratch.url.path, "trailing.json")])
        let followed = try #require(thenStates.first)
        #expect(followed.anomalies.isEmpty, "\(followed.anomalies)")
        #expect(followed.userTurns.map(\.turn.ends) == [nil, nil, nil, nil])
        #expect(
            then.runs[0].warnings.contains { $0.hasPrefix("user turn 3 holds the stop token of a user_stop, but user turn 4 follows it") },
            "\(then.runs[0].warnings)")
    }

    @Test("a transcript that ends on a user turn is unfinished, with a note: not a success on the agent's last reply")
    func endsOnUserTurn() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-user-turn")
        defer { scratch.remove() }
        let directory = scratch.url.path
        // The agent answered, the user asked again, and the transcript stops there: the agent was cut off.
        let openAI = """
            [
             {"role": "user", "content": "Where is order 42?"},
             {"role": "assistant", "content": null, "tool_calls": [
               {"id": "c1", "type": "function", "function": {"name": "lookup_order", "arguments": "{\\"order_id\\": 42}"}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "{\\"status\\": \\"shipped\\"}"},
             {"role": "assistant", "content": "It has shipped.", "finish_reason": "stop"},
             {"role": "user", "content": "And when will it arrive?"},
             {"role": "system", "content": "(session closed)"}
            ]
            """
        let (outcome, states) = try await importRuns([try write(openAI, to: directory, "cut.json")])
        #expect(outcome.importedCount == 1)
        let state = try #require(states.first)
        #expect(state.anomalies.isEmpty)
        #expect(state.stop == nil)
        #expect(outcome.runs[0].stop == nil)
        #expect(state.start?.source?.stop == "ends on a user turn")
        #expect(state.executedToolNames == ["lookup_order"])
        #expect(
            outcome.runs[0].warnings.contains {
                $0.hasPrefix("the transcript ends on a user turn (message 5)") && $0.contains("unfinished")
            },
            "\(outcome.runs[0].warnings)")

        // Anthropic: a user message of text blocks is a user turn; one of tool results is not.
        let anthropic = """
            {"messages": [
              {"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]},
              {"role": "assistant", "content": [{"type": "text", "text": "18 C in Paris."}], "stop_reason": "end_turn"},
              {"role": "user", "content": [{"type": "text", "text": "And in Rome?"}]}
            ]}
            """
        let afterResult = """
            {"messages": [
              {"role": "user", "content": "Weather in Paris?"},
              {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
              {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"}]}
            ]}
            """
        let (both, bothStates) = try await importRuns([
            try write(anthropic, to: directory, "claude-cut.json"), try write(afterResult, to: directory, "claude-calls.json"),
        ])
        #expect(both.importedCount == 2)
        #expect(bothStates[0].stop == nil && bothStates[0].start?.source?.stop == "ends on a user turn")
        #expect(both.runs[0].warnings.contains { $0.hasPrefix("the transcript ends on a user turn (message 5)") })
        #expect(bothStates[1].stop?.reason == .blocked)
        #expect(!both.runs[1].warnings.contains { $0.contains("user turn") })

        // Episodes of a JSON Lines file (read a line at a time): only the cut-off one is unfinished;
        // one with no assistant message at all is still "no assistant message".
        let lines = """
            {"id": "done", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}
            {"id": "cut", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}, {"role": "user", "content": "z?"}]}
            {"id": "input-only", "messages": [{"role": "user", "content": "x"}]}
            """
        let (streamed, streamedStates) = try await importRuns([try write(lines, to: directory, "episodes.jsonl")])
        #expect(streamed.runs.map(\.stop) == [.success, nil, .blocked])
        #expect(streamedStates.map { $0.start?.source?.stop } == ["final answer", "ends on a user turn", "no assistant message"])
        #expect(streamed.runs.map { $0.warnings.contains { $0.hasPrefix("the transcript ends on a user turn") } } == [false, true, false])
    }

    @Test("a result file of episodes: one run per episode with its id and trial, rewards kept, a bad episode reported")
    func episodes() async throws {
        let text = """
            {"results": [
              {"task_id": 7, "trial": 0, "reward": 1.0, "traj": [
                {"role": "user", "content": "hi"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {"name": "ping", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "pong"}, {"role": "assistant", "content": "done"}]},
              {"task_id": 7, "trial": 1, "reward": 0.0, "traj": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "no"}]},
              {"task_id": 8, "trial": 0, "reward": 0.0, "steps": []}
            ]}
            """
        let scratch = try TemporaryDirectory("agent-eval-interop-episodes")
        defer { scratch.remove() }
        let directory = scratch.url.path
        let (outcome, states) = try await importRuns(
            [try write(text, to: directory, "results.json")], format: .messages, episodesPath: "results")
        #expect(outcome.importedCount == 2)
        #expect(outcome.failedCount == 1)
        #expect(outcome.runs.compactMap(\.error).first?.message.contains("results[2]") == true)
        #expect(states.map { $0.start?.source?.id } == ["7:0", "7:1"])
        // An index past either end is no place in the list (a negative one once trapped; one past
        // the end was read as a null there).
        for index in ["-1", "9"] {
            let (outside, _) = try await importRuns(
                [(directory as NSString).appendingPathComponent("results.json")], format: .messages, episodesPath: "results.\(index)")
            #expect(outside.importedCount == 0)
            #expect(
                outside.failedInputs.first?.message.contains(#"(results): --episodes-path results.\#(index): there is no "\#(index)""#)
                    == true,
                "\(outside.failedInputs)")
        }
        #expect(states[0].start?.source?.metadata?["reward"] == .double(1.0))
        #expect(states[0].executedToolNames == ["ping"])
        // The same episodes as JSON Lines, found without --episodes-path.
        let lines = """
            {"id": "a", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}
            {"id": "b", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "z"}]}
            """
        let (jsonl, _) = try await importRuns([try write(lines, to: directory, "episodes.jsonl")])
        #expect(jsonl.runs.map(\.sourceId) == ["a", "b"])
    }

    @Test(
        "public sample data: Inspect's example datasets (from its PyPI wheel) import one run per sample; Q&A files are refused",
        .tags(.python), .needsPython)
    func inspectExampleDatasets() async throws {
        let lib = try await PythonEnvironment.interop.path() + "/lib"
        let python = try #require(try FileManager.default.contentsOfDirectory(atPath: lib).first { $0.hasPrefix("python") })
        let examples = "\(lib)/\(python)/site-packages/inspect_ai/dataset/_examples"
        let files = try FileManager.default.contentsOfDirectory(atPath: examples).filter { $0.hasSuffix(".jsonl") }.sorted()
        #expect(files.count >= 5, "\(files)")
        var transcripts = 0
        for name in files {
            let path = "\(examples)/\(name)"
            let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n").filter {
                !$0.trimmingCharacters(in: .whitespaces).isEmpty
            }
            let first = try JSONParser.parse(Array(try #require(lines.first).utf8))
            let (outcome, states) = try await importRuns([path])
            guard let input = first["input"]?.arrayValue else {
                // Questions and answers, no messages: not a transcript, said of the file.
                #expect(outcome.failedInputs.first?.code == .wrongFormat, "\(name)")
                #expect(outcome.failedInputs.first?.message.contains(name) == true)
                continue
            }
            transcripts += 1
            #expect(outcome.importedCount == lines.count && outcome.failedCount == 0, "\(name)")
            // Every sample its own run: its own id, run id and file.
            #expect(Set(states.compactMap(\.runId)).count == lines.count, "\(name)")
            #expect(Set(outcome.runs.compactMap(\.log)).count == lines.count)
            #expect(outcome.runs.first?.sourceId == "line 1")
            #expect(states.first?.start?.goal == input.first?["content"]?.stringValue)
            #expect(states.allSatisfy { $0.start?.source?.metadata?["target"] != nil })
            // A dataset sample is an input with no reply yet.
            #expect(states.allSatisfy { $0.stop?.reason == .blocked && $0.stop?.error == "the transcript has no assistant message" })
        }
        #expect(transcripts >= 3)
    }

    @Test("JSON Lines of episodes import a line at a time: a broken line and a cut last line are failures; the others import")
    func episodeLines() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-stream")
        defer { scratch.remove() }
        let directory = scratch.url.path
        func episode(_ id: String) -> String {
            #"{"id": "\#(id)", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a \#(id)"}]}"#
        }
        let text = [episode("a"), "", #"{"id": "b", "messages": [}"#, episode("c"), #"{"id": "d"}"#, String(episode("e").prefix(40))]
            .joined(separator: "\n")
        let (outcome, states) = try await importRuns([try write(text, to: directory, "episodes.jsonl")])
        #expect(states.map { $0.start?.source?.id } == ["a", "c"])
        #expect(states.map(\.finalAnswer) == ["a a", "a c"])
        let errors = outcome.runs.compactMap(\.error)
        #expect(errors.map(\.location?.line) == [3, 5, 6])
        #expect(errors[0].code == .invalidJSON && !errors[0].message.contains("cut short"))
        #expect(errors[2].code == .invalidJSON && errors[2].message.contains("line 6") && errors[2].message.contains("cut short"))
        #expect(outcome.failedInputs.isEmpty && outcome.failedCount == 3)
        // JSON Lines of single messages are one episode, read whole as before.
        let messages = [#"{"role": "user", "content": "q"}"#, #"{"role": "assistant", "content": "one"}"#].joined(separator: "\n")
        let (whole, wholeStates) = try await importRuns([try write(messages, to: directory, "messages.jsonl")])
        #expect(whole.importedCount == 1 && wholeStates.first?.finalAnswer == "one")
    }

    @Test("bad input names the file and the position, and imports nothing")
    func badInput() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-bad")
        defer { scratch.remove() }
        let directory = scratch.url.path
        let cut = try write(String(Self.openAI.prefix(200)), to: directory, "cut.json")
        let (outcome, _) = try await importRuns([cut])
        let error = try #require(outcome.failedInputs.first)
        #expect(error.code == .invalidJSON)
        #expect(error.location?.path == cut && (error.location?.line ?? 0) > 1)
        let other = try write(#"{"hello": "world"}"#, to: directory, "other.json")
        let wrong = try #require(try await importRuns([other]).outcome.failedInputs.first)
        #expect(wrong.code == .wrongFormat)
        // Every format auto-detection knows is named, in the message and the hint.
        #expect(wrong.message.contains("an ATIF trajectory") && wrong.hint?.contains("otlp|jaeger|inspect|atif|messages") == true)
        let zip = try write("PK\u{3}\u{4} not a zip", to: directory, "broken.eval")
        #expect(try await importRuns([zip]).outcome.failedInputs.first?.code == .badArchive)
    }

    /// An input with nothing in it is an error that says so, never "0 runs imported" alone.
    @Test("an input with no messages or no spans is an error that says so, not a run with nothing in it")
    func emptyInputs() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-empty")
        defer { scratch.remove() }
        let directory = scratch.url.path
        let noMessages = try await importRuns([try write("[]", to: directory, "empty.json")], format: .messages).outcome
        #expect(noMessages.importedCount == 0 && noMessages.failedCount == 1)
        let runError = try #require(noMessages.runs.first?.error)
        #expect(runError.code == .badRun && runError.message.contains("has no messages"))

        let cases: [(format: ImportFormat, text: String, message: String)] = [
            (.otlp, #"{"resourceSpans": []}"#, "holds no spans"),
            (.auto, #"{"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}"#, "holds no spans"),
            (
                .otlp, #"{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "chat"}, {"name": "tool"}]}]}]}"#,
                #"has 2 spans, but none with both "traceId" and "spanId""#
            ),
            (.jaeger, #"{"data": []}"#, "holds no spans"),
            (.jaeger, #"{"data": [{"spans": [{"operationName": "chat"}]}]}"#, #"has 1 span, but none with both "traceID" and "spanID""#),
        ]
        for (index, item) in cases.enumerated() {
            let file = try write(item.text, to: directory, "traces-\(index).json")
            let outcome = try await importRuns([file], format: item.format).outcome
            let error = try #require(outcome.failedInputs.first, "\(item.text)")
            #expect(outcome.importedCount == 0)
            #expect(error.code == .wrongFormat && error.location?.path == file)
            #expect(error.message.contains(item.message), "\(error.message)")
        }
    }

    @Test("an item of a message list that is not a message is an error at that item, not a list of episodes without messages")
    func aBadItemIsNamedWhereItIs() async throws {
        let scratch = try TemporaryDirectory("agent-eval-interop-bad-item")
        defer { scratch.remove() }
        let directory = scratch.url.path
        let cases: [(name: String, text: String, message: String)] = [
            ("list.json", #"[{"role": "user", "content": "hi"}, 42, {"role": "assistant", "content": "x"}]"#, "[1]: not a chat message"),
            (
                "object.json", #"{"messages": [{"role": "user", "content": "hi"}, "oops", {"role": "assistant", "content": "x"}]}"#,
                "messages[1]: not a chat message"
            ),
            (
                "lines.jsonl", "{\"role\":\"user\",\"content\":\"hi\"}\n{\"content\":\"x\"}\n{\"role\":\"assistant\",\"content\":\"y\"}\n",
                "line 2: not a chat message"
            ),
            (
                "results.json",
                #"{"results": [{"id": "a", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}, {"id": "b", "messages": [{"role": "user", "content": "hi"}, 5]}]}"#,
                "results[1].messages[1]: not a chat message"
            ),
        ]
        for item in cases {
            let outcome = try await importRuns([try write(item.text, to: directory, item.name)], format: .messages).outcome
            let messages = outcome.failedInputs.map(\.message) + outcome.runs.compactMap(\.error?.message)
            #expect(messages.count == 1 && messages[0].contains(item.message), "\(item.name): \(messages)")
            #expect(!messages.joined().contains("no message list"), "\(item.name): \(messages)")
            // The good episode beside the bad one is still imported.
            #expect(outcome.importedCount == (item.name == "results.json" ? 1 : 0), "\(item.name)")
        }
        // Episodes that name the agent's role beside their messages are episodes, not messages.
        let episodes = try write(
            #"[{"role": "support-agent", "id": "e1", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}, {"id": "e2", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "y"}]}]"#,
            to: directory, "episodes.json")
        let both = try await importRuns([episodes], format: .messages).outcome
        #expect(both.importedCount == 2, "\(both.runs.compactMap(\.error?.message)) \(both.failedInputs.map(\.message))")
    }
}

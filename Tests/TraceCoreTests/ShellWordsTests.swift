import TestSupport
import Testing
import TraceCore

/// The commands agent-eval prints are pasted into a shell: the real `sh` must read each word back.
@Suite("Shell words")
struct ShellWordsTests {
    @Test("every quoted word reads back through the real sh as itself")
    func roundTrip() async throws {
        let words = [
            "runs/plain.jsonl.gz", "my run.jsonl.gz", "it's", "'", "''", "", "a\"b", "$HOME", "`date`", "a\\b", "semi;colon",
            "glob*?[x]", "new\nline", "tab\there", "ünïcödé", "~user", "#comment", "a&b|c", "(x)", "{a,b}", "!bang", "--step=3",
        ]
        // printf prints each word between markers, so empty words and white space show.
        let script = "printf '<%s>' " + ShellWords.command(words)
        let result = try await Subprocess.run("/bin/sh", ["-c", script])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdoutText == words.map { "<\($0)>" }.joined())
    }

    @Test("words no shell treats specially stay as they are")
    func plainWords() {
        for word in ["agent-eval", "runs/a-b_c.jsonl.gz", "--step", "key=value", "user@host:path", "50%"] {
            #expect(ShellWords.quoted(word) == word)
        }
        #expect(ShellWords.quoted("my run.jsonl.gz") == "'my run.jsonl.gz'")
        #expect(ShellWords.quoted("it's") == #"'it'\''s'"#)
        #expect(ShellWords.command(["sh", "-c", "echo 'hi'; sleep 1"]) == #"sh -c 'echo '\''hi'\''; sleep 1'"#)
    }
}

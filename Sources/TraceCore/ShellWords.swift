/// Commands and paths as a POSIX shell reads them, for the commands agent-eval prints for
/// people to paste: `agent-eval replay 'runs/my run.jsonl.gz' --step 3`.
public enum ShellWords {
    /// `text` as one shell word: unchanged when it holds only characters no shell treats
    /// specially, else in single quotes (a quote inside written `'\''`).
    public static func quoted(_ text: String) -> String {
        !text.isEmpty && text.allSatisfy { $0.isLetter || $0.isNumber || "-_./:=@+,%".contains($0) }
            ? text : "'" + text.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
    }

    /// A command's words, each quoted as needed, joined by spaces.
    public static func command(_ words: [String]) -> String {
        words.map(quoted).joined(separator: " ")
    }
}

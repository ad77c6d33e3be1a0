/// Commands and paths as a POSIX shell reads them, for the commands agent-eval prints for
/// people to paste: `agent-eval replay 'runs/my run.jsonl.gz' --step 3`.
public enum ShellWords {
    /// Whether `text` is an environment variable's name as a shell takes one: ASCII letters,
    /// digits and `_`, not starting with a digit.
    public static func isVariableName(_ text: Substring) -> Bool {
        guard let first = text.utf8.first, first == UInt8(ascii: "_") || (first | 0x20) >= 0x61 && (first | 0x20) <= 0x7A else {
            return false
        }
        return text.utf8.allSatisfy { byte in
            byte == UInt8(ascii: "_") || (0x30...0x39).contains(byte) || (0x61...0x7A).contains(byte | 0x20)
        }
    }

    /// Whether `word` sets a variable, as `env NAME=value` and a shell take it.
    public static func isAssignment(_ word: String) -> Bool {
        guard let equals = word.firstIndex(of: "=") else { return false }
        return isVariableName(word[..<equals])
    }

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

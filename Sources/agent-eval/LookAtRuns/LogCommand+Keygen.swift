import ArgumentParser
import ConfigFile
import TraceCore
import TraceLog

extension LogCommand {
    struct Keygen: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "keygen",
            abstract: "Make an Ed25519 key pair for signing logs.",
            discussion: """
                Writes KEY (the private key, readable by its owner only) and KEY.pub. Sign runs with \
                `agent-eval exec --sign-key KEY`; check them with `agent-eval log verify --key KEY.pub`.

                Exit codes: 0 written; 2 a file is in the way or cannot be written; 64 usage error.

                Examples:
                  agent-eval log keygen keys/ci
                """
        )

        @Argument(help: "The private key file to write; the public key goes to <file>.pub.")
        var file: String

        func run() throws {
            do {
                try LogSigner.generateKeyFiles(at: file)
            } catch {
                throw diagnose(error)
            }
            say("wrote \(file) (private; keep it secret) and \(file).pub (public)")
        }
    }
}

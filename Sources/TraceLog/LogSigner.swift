import Crypto
import Foundation
import TraceCore

/// Signs a log's hash chain with an Ed25519 key: a `log_signed` event at every member close
/// and after the stop covers the chain up to it (docs/log-format.md, "Signed logs"). Without a
/// key, the chain only detects accidental damage; with one, any edit, reordering, cut or
/// extension is detected by `LogVerifier.verify(path:key:)`.
public struct LogSigner: Sendable, Hashable {
    /// The key's 32 raw bytes (swift-crypto's key types are not `Sendable`).
    private let raw: [UInt8]
    /// The first 16 hex digits of the SHA-256 of the public key: which key signed.
    public let keyId: String

    /// The kind of the signature events.
    public static let kind = "log_signed"

    public init(privateKey raw: [UInt8]) throws(LogError) {
        guard let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: raw) else {
            throw LogError(.invalidKey, "the signing key is not an Ed25519 private key (32 bytes)", path: "")
        }
        self.raw = raw
        keyId = LogSigner.keyId(of: Array(key.publicKey.rawRepresentation))
    }

    /// Reads a private key file written by `generateKeyFiles(at:)`.
    public init(keyFile path: String) throws(LogError) {
        try self.init(privateKey: try LogSigner.readKeyFile(path, kind: "private"))
    }

    static func keyId(of publicKey: [UInt8]) -> String { String(ContentHash.sha256Hex(publicKey).prefix(16)) }

    /// Writes a new key pair: `path` (private, mode 0600) and `path.pub`.
    public static func generateKeyFiles(at path: String) throws(LogError) {
        let key = Curve25519.Signing.PrivateKey()
        guard !FileManager.default.fileExists(atPath: path), !FileManager.default.fileExists(atPath: path + ".pub") else {
            throw LogError(.alreadyExists, "a key file exists at \(path) or \(path).pub", path: path, hint: "choose a new path")
        }
        // The folder is made as `exec --log` makes a log's (`log keygen keys/ci` in a new project).
        let folder = (path as NSString).deletingLastPathComponent
        if !folder.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            } catch {
                throw LogError(
                    .writeFailed, "cannot make the folder \(folder) for the key files: \(FileProblem.reason(of: error))", path: path)
            }
        }
        let privateText = "agent-eval-ed25519-private \(Base64.encode(Array(key.rawRepresentation)))\n"
        let publicText = "agent-eval-ed25519-public \(Base64.encode(Array(key.publicKey.rawRepresentation)))\n"
        guard FileManager.default.createFile(atPath: path, contents: Data(privateText.utf8), attributes: [.posixPermissions: 0o600]),
            FileManager.default.createFile(atPath: path + ".pub", contents: Data(publicText.utf8))
        else { throw LogError(.writeFailed, "cannot write the key files \(path) and \(path).pub", path: path) }
    }

    static func readKeyFile(_ path: String, kind: String) throws(LogError) -> [UInt8] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw LogError(.unreadable, "cannot read the key file", path: path, hint: "make one with `log keygen`")
        }
        let parts = text.split(whereSeparator: \.isWhitespace)
        guard parts.count == 2, parts[0] == "agent-eval-ed25519-\(kind)", let raw = Base64.decode(String(parts[1])), raw.count == 32 else {
            throw LogError(.invalidKey, "the file is not an agent-eval Ed25519 \(kind) key", path: path)
        }
        return raw
    }

    /// The bytes a signature covers: the run, the last event it covers and that event's hash,
    /// and whether it is the run's final signature (after its stop).
    static func message(runId: String, sequence: Int, head: String, isFinal: Bool) -> [UInt8] {
        Array("agent-eval log_signed v1\n\(runId)\n\(sequence)\n\(head)\n\(isFinal ? "final" : "member")\n".utf8)
    }

    /// The `log_signed` event's data covering the chain up to the event `sequence` with hash `head`.
    func payload(runId: String, sequence: Int, head: String, isFinal: Bool) throws -> EventPayload {
        let key = try Curve25519.Signing.PrivateKey(rawRepresentation: raw)
        let signature = try key.signature(for: Self.message(runId: runId, sequence: sequence, head: head, isFinal: isFinal))
        return .unknown(
            kind: Self.kind,
            data: [
                "alg": "ed25519", "key_id": .string(keyId), "covers_seq": .int(sequence), "head": .string(head),
                "final": .bool(isFinal), "signature": .string(Base64.encode(Array(signature))),
            ])
    }

    public static func == (a: LogSigner, b: LogSigner) -> Bool { a.keyId == b.keyId }
    public func hash(into hasher: inout Hasher) { hasher.combine(keyId) }
}

/// The public half, for checking signatures.
public struct LogVerificationKey: Sendable {
    private let raw: [UInt8]
    public let keyId: String

    /// Reads a public key file (`<key>.pub`, written by `LogSigner.generateKeyFiles(at:)`).
    public init(keyFile path: String) throws(LogError) {
        let raw = try LogSigner.readKeyFile(path, kind: "public")
        guard (try? Curve25519.Signing.PublicKey(rawRepresentation: raw)) != nil else {
            throw LogError(.invalidKey, "the file is not an Ed25519 public key", path: path)
        }
        self.raw = raw
        keyId = LogSigner.keyId(of: raw)
    }

    func isValid(signature: [UInt8], runId: String, sequence: Int, head: String, isFinal: Bool) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: raw) else { return false }
        return key.isValidSignature(signature, for: LogSigner.message(runId: runId, sequence: sequence, head: head, isFinal: isFinal))
    }
}

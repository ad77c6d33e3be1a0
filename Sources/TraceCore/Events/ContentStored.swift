/// How a content body is written in JSON.
public enum ContentEncoding: String, JSONEnum {
    /// The body is the text itself (the bytes were valid UTF-8).
    case utf8
    /// The body is standard base64 (RFC 4648, with padding) of the bytes.
    case base64
}

/// `content_stored`: a blob written once and referenced by its hash from other events.
///
/// Prompts, documents and large tool outputs go here, so packets and results carry a
/// 71-character reference instead of a copy. Bytes that are not valid UTF-8 are kept exactly,
/// as base64.
public struct ContentStored: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// `sha256:<hex>` of the raw bytes (not of the encoded body).
    public var hash: String
    public var mediaType: String
    public var encoding: ContentEncoding
    public var body: String

    /// Stores bytes, as text when they are valid UTF-8 and as base64 otherwise.
    public init(bytes: [UInt8], mediaType: String) {
        hash = ContentHash.sha256(bytes)
        self.mediaType = mediaType
        if let text = String(validating: bytes, as: UTF8.self) {
            encoding = .utf8
            body = text
        } else {
            encoding = .base64
            body = Base64.encode(bytes)
        }
    }

    /// Stores text.
    public init(text: String, mediaType: String = "text/plain; charset=utf-8") {
        self.init(bytes: Array(text.utf8), mediaType: mediaType)
    }

    /// The raw bytes, or nil when a base64 body does not decode.
    public var bytes: [UInt8]? {
        switch encoding {
        case .utf8: return Array(body.utf8)
        case .base64: return Base64.decode(body)
        }
    }

    /// The number of raw bytes, without decoding a base64 body.
    public var byteCount: Int {
        switch encoding {
        case .utf8: return body.utf8.count
        case .base64:
            let padding = body.utf8.reversed().prefix(2).count { $0 == UInt8(ascii: "=") }
            return body.utf8.count / 4 * 3 - padding
        }
    }

    /// Whether the body's bytes hash to `hash`.
    public var isIntact: Bool {
        guard let bytes else { return false }
        return ContentHash.sha256(bytes) == hash
    }

    public init(from scanner: inout JSONScanner) throws {
        var hash: String?
        var mediaType: String?
        var encoding: ContentEncoding?
        var body: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "hash": hash = try scanner.readHash()
            case "media_type": mediaType = try scanner.read()
            case "encoding": encoding = try scanner.read()
            case "body": body = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.hash = try required(hash, "hash")
        self.mediaType = try required(mediaType, "media_type")
        self.encoding = try required(encoding, "encoding")
        self.body = try required(body, "body")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("body", body)
        object.set("encoding", encoding)
        object.set("hash", hash)
        object.set("media_type", mediaType)
    }
}

/// How much text a log holds, without keeping it.
extension LogReader {
    /// The bytes of text the log's gzip members inflate to, counted up to `atMost` (then
    /// `atMost`): a page tells a long log by its text, not only by its file's size — a file of a
    /// few MB can hold members that each inflate up to the member limit. Damage, or a file that
    /// cannot be read, ends the count where it is (the read that follows says what is wrong).
    /// Inflates into a buffer of 256 KiB that it reuses: the memory is that, whatever the log.
    public static func inflatedSize(of path: String, atMost limit: Int) -> Int {
        guard let file = try? FileDescriptor.openForReading(path), let inflater = try? Inflater() else { return 0 }
        let chunk = 256 * 1024
        let output = ByteBuffer(capacity: chunk)
        var input = [UInt8](repeating: 0, count: 64 * 1024)
        var total = 0
        while total < limit {
            let count = input.withUnsafeMutableBytes { buffer in
                buffer.baseAddress.map { (try? file.read(into: $0, count: buffer.count)) ?? 0 } ?? 0
            }
            if count <= 0 { return total }
            let ended = input.withUnsafeBytes { bytes -> Bool in
                guard let base = bytes.baseAddress else { return true }
                var offset = 0
                while offset < count {
                    inflater.setInput(base + offset, count: count - offset)
                    output.count = 0
                    let (status, _) = inflater.inflate(into: output, limit: chunk)
                    total += output.count
                    offset = count - inflater.availableInput
                    switch status {
                    case .memberEnded:
                        // The next member, if any, starts in what is left of the input.
                        inflater.reset()
                    case .corrupt:
                        return true
                    case .needsInput:
                        if total >= limit { return true }
                    }
                }
                return false
            }
            if ended { return min(total, limit) }
        }
        return min(total, limit)
    }
}

/// An append-only file of text lines, each on disk (fsynced) before `append` returns: for
/// records taken in before they can become a log, such as the spans `agent-eval collect`
/// acknowledges while their trace is still arriving. A crash can leave only a torn last line —
/// one whose append never returned, so nobody was told it was kept — and `sealTornTail` cuts it.
public enum LineJournal {
    /// Appends `lines` (each without its newline) as one write, fsynced; a new file's directory
    /// is fsynced too, so the file itself survives a power loss. Answers the file's size after
    /// the append. A write or fsync that fails is undone (the file cut back to its size before):
    /// the next append never follows a partial line.
    @discardableResult
    public static func append(_ lines: [[UInt8]], to path: String) throws -> Int {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(lines.reduce(0) { $0 + $1.count + 1 })
        for line in lines {
            bytes += line
            bytes.append(0x0A)
        }
        let isNew = !FileDescriptor.exists(path)
        if isNew { try FileDescriptor.createParentDirectories(of: path) }
        let file = try FileDescriptor.openForJournal(path)
        let before = try file.size()
        do {
            try bytes.withUnsafeBytes { try file.write($0) }
            try file.sync()
        } catch {
            try? file.truncate(to: before)
            throw error
        }
        if isNew { try FileDescriptor.syncDirectory(of: path) }
        return before + bytes.count
    }

    /// Cuts what follows the last newline (a line a crash tore, never acknowledged); answers how
    /// many bytes were cut.
    @discardableResult
    public static func sealTornTail(of path: String) throws -> Int {
        let file = try FileDescriptor.openForUpdate(path)
        let size = try file.size()
        guard size > 0 else { return 0 }
        // Back from the end, a block at a time, to the last newline.
        var end = size
        var block = [UInt8](repeating: 0, count: 64 * 1024)
        while end > 0 {
            let start = max(0, end - block.count)
            let got = try block.withUnsafeMutableBytes { buffer in
                guard let base = buffer.baseAddress else { return 0 }
                return try file.read(into: base, count: end - start, at: start)
            }
            if let newline = block[0..<got].lastIndex(of: 0x0A) {
                let keep = start + newline + 1
                if keep < size {
                    try file.truncate(to: keep)
                    try file.sync()
                }
                return size - keep
            }
            end = start
        }
        try file.truncate(to: 0)
        try file.sync()
        return size
    }
}

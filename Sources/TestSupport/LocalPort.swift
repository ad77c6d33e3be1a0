#if canImport(Glibc)
    import Glibc
#endif

/// Ports of 127.0.0.1 for tests.
public enum LocalPort {
    /// A port nothing listens on now, from the kernel (a socket bound to port 0, then closed).
    public static func free() throws -> Int {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw LocalPort.Failure(message: "no socket for a free port: errno \(errno)") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                Glibc.bind(socket, raw, length) == 0 && getsockname(socket, raw, &length) == 0
            }
        }
        guard bound else { throw LocalPort.Failure(message: "cannot bind a socket to 127.0.0.1:0: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    public struct Failure: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }
}

import Foundation
import TraceCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What stands in the way of reading or writing a file, in words a user can act on, found by
/// looking at the path itself: every command says the same of a folder given as a file, a
/// file that is not there, or a folder that cannot be written (where Foundation's own error
/// says only "the operation could not be completed"). It looks at the file system, so it lives
/// in TraceLog, not in the pure core.
public enum FileProblem {
    /// Why `path` cannot be read: a folder, missing, not readable. Nil when the path looks
    /// readable (the caller's error then says more).
    public static func reading(_ path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return errno == ENOENT ? "it does not exist" : String(cString: strerror(errno))
        }
        if info.st_mode & S_IFMT == S_IFDIR { return "it is a folder, not a file" }
        if access(path, R_OK) != 0 { return "it cannot be read (\(String(cString: strerror(errno))))" }
        return nil
    }

    /// Why something is at `path` that is no regular file a log could be — a folder, a named
    /// pipe, a device, a symbolic link that leads nowhere or round in a loop — or nil when the
    /// path is a regular file, or nothing at all is there.
    public static func notARegularFile(_ path: String) -> String? {
        var link = stat()
        guard lstat(path, &link) == 0 else { return nil }
        var info = stat()
        guard stat(path, &info) == 0 else {
            switch errno {
            case ELOOP: return "it is a symbolic link that leads round in a loop"
            case ENOENT, ENOTDIR: return "it is a symbolic link to nothing"
            default: return "it cannot be looked at (\(String(cString: strerror(errno))))"
            }
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "it is a folder, not a file"
        case S_IFIFO: return "it is a named pipe (FIFO), not a file"
        case S_IFSOCK: return "it is a socket, not a file"
        case S_IFCHR, S_IFBLK: return "it is a device, not a file"
        default: return "it is not a regular file"
        }
    }

    /// Why `path` cannot be written: a folder in its place, or a folder above it that is a file
    /// or cannot be written. Nil when the path looks writable.
    public static func writing(_ path: String) -> String? {
        var info = stat()
        if stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFDIR { return "it is a folder, not a file" }
        var folder = path
        while let slash = folder.lastIndex(of: "/") {
            folder = slash == folder.startIndex ? "/" : String(folder[..<slash])
            if stat(folder, &info) == 0 {
                if info.st_mode & S_IFMT != S_IFDIR { return "\(folder) is a file, not a folder" }
                if access(folder, W_OK) != 0 { return "its folder \(folder) cannot be written (\(String(cString: strerror(errno))))" }
                return nil
            }
            if folder == "/" { break }
        }
        return nil
    }

    /// Why a file operation failed, in the system's words (`strerror`) or a short phrase: never
    /// Foundation's "The operation could not be completed." sentences or its types.
    public static func reason(of error: any Error) -> String {
        if let diagnostic = error as? any Diagnostic { return diagnostic.message }
        let nsError = error as NSError
        if nsError.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(nsError.code))) }
        if let underlying = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(underlying.code)))
        }
        if nsError.domain == NSCocoaErrorDomain {
            switch nsError.code {
            case NSFileNoSuchFileError, NSFileReadNoSuchFileError: return "no such file or folder"
            case NSFileReadNoPermissionError, NSFileWriteNoPermissionError: return "permission denied"
            case NSFileWriteOutOfSpaceError: return "no space left on the device"
            case NSFileWriteVolumeReadOnlyError: return "the file system is read-only"
            case NSFileWriteFileExistsError: return "a file is there already"
            case NSFileReadCorruptFileError: return "the file is damaged"
            case NSFileReadInapplicableStringEncodingError, NSFileReadUnknownStringEncodingError: return "the file is not UTF-8 text"
            default: break
            }
        }
        return nsError.localizedDescription
    }
}

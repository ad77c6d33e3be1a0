import Foundation
public import TraceCore

extension FileProblem {
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

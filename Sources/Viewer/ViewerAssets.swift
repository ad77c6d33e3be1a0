import Foundation
public import TraceCore

/// The page template, style sheet and script the pages are made of: files in
/// `Sources/Viewer/Assets`, installed with the binary as a resource bundle.
public struct ViewerAssets: Sendable {
    public var page: String
    public var style: String
    public var script: String

    public static let files = ["page.html", "viewer.css", "viewer.js"]

    public init(page: String, style: String, script: String) {
        self.page = page
        self.style = style
        self.script = script
    }

    /// Reads the assets from `folder` (the `Assets` folder).
    public static func load(from folder: String) throws -> ViewerAssets {
        var texts: [String] = []
        for name in files {
            let path = folder + "/" + name
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ViewerError.assets("cannot read \(path), a file of the viewer that comes with agent-eval")
            }
            texts.append(String(decoding: data, as: UTF8.self))
        }
        return ViewerAssets(page: texts[0], style: texts[1], script: texts[2])
    }
}

/// Why a page could not be made.
public enum ViewerError: Diagnostic, Hashable {
    case assets(String)
    case template(String)

    public var diagnosticCode: String {
        switch self {
        case .assets: "viewer.assets_unreadable"
        case .template: "viewer.broken_template"
        }
    }

    public var message: String {
        switch self {
        case .assets(let message): message
        case .template(let message): "the viewer's page template is broken: \(message)"
        }
    }

    public var place: SourceLocation? { nil }
}

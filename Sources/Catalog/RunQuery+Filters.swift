public import Foundation
public import TraceCore

extension RunQuery {
    /// Where the next page starts: the last row shown, as `newestFirst` orders the rows.
    public struct Cursor: Sendable, Hashable {
        public var startedAtUs: Int?
        public var path: String

        public init(startedAtUs: Int?, path: String) {
            self.startedAtUs = startedAtUs
            self.path = path
        }

        /// After `row`.
        public init(after row: RunRow) { self.init(startedAtUs: row.startedAtUs, path: row.path) }

        /// `STARTED:PATH` (STARTED empty for a run that never started), as a URL carries it.
        public var text: String { (startedAtUs.map(String.init) ?? "") + ":" + path }

        public init?(text: String) {
            guard let colon = text.firstIndex(of: ":") else { return nil }
            let started = text[..<colon]
            let path = String(text[text.index(after: colon)...])
            guard !path.isEmpty else { return nil }
            if started.isEmpty {
                self.init(startedAtUs: nil, path: path)
            } else {
                guard let value = Int(started) else { return nil }
                self.init(startedAtUs: value, path: path)
            }
        }
    }

    /// A filter that does not read: which one, and what it takes.
    public struct FilterError: Error, Sendable, Hashable, CustomStringConvertible {
        public var name: String
        public var message: String
        public var description: String { message }

        public init(name: String, message: String) {
            self.name = name
            self.message = message
        }
    }

    /// The filters' names, as `agent-eval runs` takes them (without the dashes) and `agent-eval
    /// serve` reads them from a page's address.
    public static let filterNames = [
        "tool", "not-tool", "stop", "agent", "model", "since", "until", "status", "denied", "approval", "min-cost", "forks-of",
        "text",
    ]
    /// The filters that may be given more than once (each adds one).
    public static let repeatableFilters: Set<String> = ["tool", "not-tool", "stop", "status"]

    /// The query the named filters describe, in the order given; one reader for the command line
    /// and the web page, so both refuse the same mistakes with the same words. `--name` in a
    /// message is the filter's name.
    public init(filters: [(name: String, value: String)], limit: Int = 50, now: Date = Date()) throws(FilterError) {
        self.init()
        self.limit = limit
        for (name, value) in filters {
            func refuse(_ message: String) -> FilterError { FilterError(name: name, message: message) }
            switch name {
            case "tool": tools.append(value)
            case "not-tool": notTools.append(value)
            case "stop":
                let reasons = Set(StopReason.allCases.map(\.rawValue) + ["running"])
                guard reasons.contains(value) else {
                    throw refuse("--stop \(value) is not a stop reason (one of: \(reasons.sorted().joined(separator: ", ")))")
                }
                stopReasons.append(value)
            case "agent": agent = value
            case "model": model = value
            case "since": sinceUs = try Self.time(value, option: "--since", now: now)
            case "until": untilUs = try Self.time(value, option: "--until", now: now)
            case "status":
                guard let status = LogStatus(rawValue: value) else {
                    throw refuse("--status \(value) is not one of: \(LogStatus.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                statuses.append(status)
            case "denied":
                guard
                    ["", "1", "true", "yes", "on"].contains(value.lowercased()) || ["0", "false", "no", "off"].contains(value.lowercased())
                else { throw refuse("--denied takes no value (or true/false), not \(value)") }
                hasDenied = !["0", "false", "no", "off"].contains(value.lowercased())
            case "approval":
                guard let filter = ApprovalFilter(rawValue: value) else {
                    throw refuse("--approval \(value) is not one of: \(ApprovalFilter.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                approval = filter
            case "min-cost":
                guard let cost = Double(value), cost.isFinite, cost >= 0 else {
                    throw refuse("--min-cost must be a number of US dollars, 0 or more (got \(value))")
                }
                minCostUSD = cost
            case "forks-of": forksOf = value
            case "text": text = value
            default:
                throw refuse("\(name) is not a filter of runs (one of: \(Self.filterNames.joined(separator: ", ")))")
            }
        }
    }

    /// The filters of this query by name, in `filterNames`' order: what `init(filters:)` reads
    /// back into the same query (times as microseconds since 1970, which it reads too).
    public var filters: [(name: String, value: String)] {
        var pairs: [(name: String, value: String)] = []
        pairs += tools.map { ("tool", $0) }
        pairs += notTools.map { ("not-tool", $0) }
        pairs += stopReasons.map { ("stop", $0) }
        if let agent { pairs.append(("agent", agent)) }
        if let model { pairs.append(("model", model)) }
        if let sinceUs { pairs.append(("since", "\(sinceUs)us")) }
        if let untilUs { pairs.append(("until", "\(untilUs)us")) }
        pairs += statuses.map { ("status", $0.rawValue) }
        if hasDenied { pairs.append(("denied", "true")) }
        if let approval { pairs.append(("approval", approval.rawValue)) }
        if let minCostUSD { pairs.append(("min-cost", String(minCostUSD))) }
        if let forksOf { pairs.append(("forks-of", forksOf)) }
        if let text { pairs.append(("text", text)) }
        return pairs
    }

    /// Microseconds since 1970 for `2026-11-01`, `2026-11-01T09:30:00Z`, `7d` / `12h` / `30m` /
    /// `10s` ago, or an exact `1764000000000000us`.
    public static func time(_ text: String, option: String, now: Date = Date()) throws(FilterError) -> Int {
        if text.hasSuffix("us"), let exact = Int(text.dropLast(2)) { return exact }
        if let unit = text.last, let amount = Int(text.dropLast()), amount >= 0,
            let scale = ["d": 86_400, "h": 3_600, "m": 60, "s": 1][unit]
        {
            // An amount so large that the time is before 1970 by more than any run could be
            // (`999999999999999999d`) is refused, not an overflow trap.
            let (seconds, overflows) = amount.multipliedReportingOverflow(by: scale)
            guard !overflows, seconds <= JSONScanner.maximumMeasure / 1_000_000 else {
                throw FilterError(
                    name: String(option.drop { $0 == "-" }),
                    message:
                        "\(option) \(text) reaches back further than any time a log holds: give at most \(JSONScanner.maximumMeasure / 1_000_000 / scale)\(unit)"
                )
            }
            return Int(saturating: now.timeIntervalSince1970 * 1_000_000) - seconds * 1_000_000
        }
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return Int(date.timeIntervalSince1970 * 1_000_000) }
        formatter.formatOptions = [.withFullDate]
        if let date = formatter.date(from: text) { return Int(date.timeIntervalSince1970 * 1_000_000) }
        throw FilterError(
            name: String(option.drop { $0 == "-" }),
            message: "\(option) \(text) is not a time: give 2026-11-01, 2026-11-01T09:30:00Z, or 7d, 12h, 30m (ago)")
    }
}

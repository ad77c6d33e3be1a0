/// A count with its noun in the right number, for every sentence a person reads: "1 call",
/// "2 calls", "0 calls"; `plural` for a noun that does not take an "s" ("1 entry", "2 entries").
public func counted(_ count: Int, _ noun: String, plural: String? = nil) -> String {
    "\(count) \(count == 1 ? noun : plural ?? noun + "s")"
}

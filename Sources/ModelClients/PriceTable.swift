public import AgentRuntime

/// List prices in dollars per million tokens, by model name prefix (the longest prefix
/// wins), as published by the providers when this table was written (2026-11). An agent
/// file's `model.prices` overrides it; a model not listed has no cost recorded.
/// `docs/models.md` shows the table.
public enum PriceTable {
    public static let builtIn: [(prefix: String, prices: ModelSettings.Prices)] = [
        ("gpt-4o-mini", .init(inputPerMillion: 0.15, outputPerMillion: 0.60)),
        ("gpt-4o", .init(inputPerMillion: 2.50, outputPerMillion: 10.00)),
        ("gpt-4.1-nano", .init(inputPerMillion: 0.10, outputPerMillion: 0.40)),
        ("gpt-4.1-mini", .init(inputPerMillion: 0.40, outputPerMillion: 1.60)),
        ("gpt-4.1", .init(inputPerMillion: 2.00, outputPerMillion: 8.00)),
        ("o4-mini", .init(inputPerMillion: 1.10, outputPerMillion: 4.40)),
        ("claude-3-5-haiku", .init(inputPerMillion: 0.80, outputPerMillion: 4.00)),
        ("claude-haiku-4", .init(inputPerMillion: 1.00, outputPerMillion: 5.00)),
        ("claude-3-5-sonnet", .init(inputPerMillion: 3.00, outputPerMillion: 15.00)),
        ("claude-3-7-sonnet", .init(inputPerMillion: 3.00, outputPerMillion: 15.00)),
        ("claude-sonnet-4", .init(inputPerMillion: 3.00, outputPerMillion: 15.00)),
        ("claude-opus-4", .init(inputPerMillion: 15.00, outputPerMillion: 75.00)),
    ]

    /// The prices for `model`: the settings' own, else the longest matching prefix.
    public static func prices(for settings: ModelSettings) -> ModelSettings.Prices? {
        if let prices = settings.prices { return prices }
        return builtIn.filter { settings.name.hasPrefix($0.prefix) }.max { $0.prefix.count < $1.prefix.count }?.prices
    }
}

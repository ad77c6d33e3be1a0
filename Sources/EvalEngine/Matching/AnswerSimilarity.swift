/// How much an answer says in the words of a reference answer: the ROUGE-1 F-measure (the
/// harmonic mean of unigram precision and recall), which Google ADK's `response_match_score`
/// uses (at 0.8 by default). Tokens are runs of letters and digits, lowercased; no stemming
/// (ADK's scorer stems English words, so a plural against a singular scores lower here).
public enum AnswerSimilarity {
    public static func rouge1(_ candidate: String, _ reference: String) -> Double {
        let candidateTokens = tokens(candidate)
        let referenceTokens = tokens(reference)
        // No words on a side is no overlap (as ROUGE scores it): two texts of emoji or punctuation
        // alone are not alike for lack of words to tell them apart.
        guard !candidateTokens.isEmpty, !referenceTokens.isEmpty else { return 0 }
        var counts: [String: Int] = [:]
        for token in referenceTokens { counts[token, default: 0] += 1 }
        var overlap = 0
        for token in candidateTokens {
            if let left = counts[token], left > 0 {
                overlap += 1
                counts[token] = left - 1
            }
        }
        guard overlap > 0 else { return 0 }
        let precision = Double(overlap) / Double(candidateTokens.count)
        let recall = Double(overlap) / Double(referenceTokens.count)
        return 2 * precision * recall / (precision + recall)
    }

    static func tokens(_ text: String) -> [String] {
        var tokens: [String] = []
        var current = ""
        for character in text.lowercased() {
            if character.isLetter || character.isNumber {
                current.append(character)
            } else if !current.isEmpty {
                tokens.append(current)
                current = ""
            }
        }
        if !current.isEmpty { tokens.append(current) }
        return tokens
    }
}

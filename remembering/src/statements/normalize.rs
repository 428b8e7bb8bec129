//! The text two statements must share to be the same statement, so a restatement is recognised
//! (the extractor derives a statement's document id from it).

/// The text two statements must share to be the same statement: case-folded, whitespace collapsed to
/// single spaces, typographic apostrophes made plain, and leading and trailing punctuation (list
/// markers, quotes, full stops, emoji) stripped.
pub fn normalize(sentence: &str) -> String {
    let lowered = sentence
        .to_lowercase()
        .replace(['\u{2019}', '\u{2018}'], "'");
    let collapsed = lowered.split_whitespace().collect::<Vec<_>>().join(" ");
    collapsed
        .trim_matches(|c: char| !c.is_alphanumeric())
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalized_text_ignores_case_spacing_and_trailing_punctuation() {
        assert_eq!(normalize("I moved to  Lisbon."), "i moved to lisbon");
        assert_eq!(
            normalize("i moved to lisbon"),
            normalize(" I MOVED\nto Lisbon!! ")
        );
        assert_eq!(normalize("- I’m vegetarian."), normalize("I'm vegetarian"));
        assert_ne!(
            normalize("I moved to Lisbon."),
            normalize("I moved to Porto.")
        );
    }
}

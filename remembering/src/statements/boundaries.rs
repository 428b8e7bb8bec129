//! Sentence boundaries within one prose paragraph: `.`, `!`, `?` and `…` runs followed by whitespace
//! (not after abbreviations, initials, list numbers, or an ellipsis the sentence continues after),
//! CJK full stops, and line breaks that do not merely wrap a sentence.

fn is_terminal(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…' | '。' | '！' | '？')
}

fn is_closer(c: char) -> bool {
    matches!(
        c,
        ')' | ']' | '}' | '"' | '\'' | '”' | '’' | '»' | '›' | '」' | '』' | '）'
    )
}

/// Titles and other abbreviations whose full stop does not end a sentence.
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "approx", "fig", "inc", "ltd",
    "dept", "gen", "gov", "lt", "col", "capt", "sgt", "ave", "rd", "blvd", "jan", "feb", "mar",
    "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
];

/// Byte ranges of the sentences of a paragraph (untrimmed; they tile the paragraph).
pub(super) fn sentence_ranges(paragraph: &str) -> Vec<(usize, usize)> {
    let chars: Vec<(usize, char)> = paragraph.char_indices().collect();
    let mut ranges = Vec::new();
    let mut start = 0;
    let mut index = 0;
    while index < chars.len() {
        let (offset, c) = chars[index];
        if c == '\n' {
            if !is_wrapped_line(&chars, start, index) {
                ranges.push((start, offset));
                start = offset + 1;
            }
            index += 1;
            continue;
        }
        if !is_terminal(c) {
            index += 1;
            continue;
        }
        let mut after = index;
        while after < chars.len() && is_terminal(chars[after].1) {
            after += 1;
        }
        let terminals = after - index;
        while after < chars.len() && is_closer(chars[after].1) {
            after += 1;
        }
        let closed = after - index > terminals;
        let end = chars
            .get(after)
            .map_or(paragraph.len(), |&(offset, _)| offset);
        let cjk = chars[index..index + terminals]
            .iter()
            .any(|&(_, c)| matches!(c, '。' | '！' | '？'));
        let at_space = chars.get(after).is_none_or(|&(_, c)| c.is_whitespace());
        if (cjk || at_space) && (closed || !continues(paragraph, &chars, start, index, after)) {
            ranges.push((start, end));
            start = end;
        }
        index = after;
    }
    if start < paragraph.len() {
        ranges.push((start, paragraph.len()));
    }
    ranges
}

/// Whether the line break at `newline` only wraps a sentence: the line ends in a lower-case letter
/// or a comma and the next one starts with a lower-case letter.
fn is_wrapped_line(chars: &[(usize, char)], start: usize, newline: usize) -> bool {
    let before = chars[..newline]
        .iter()
        .rev()
        .take_while(|&&(offset, _)| offset >= start)
        .map(|&(_, c)| c)
        .find(|c| !c.is_whitespace());
    let after = chars[newline + 1..]
        .iter()
        .map(|&(_, c)| c)
        .find(|c| !c.is_whitespace());
    matches!(before, Some(c) if c.is_lowercase() || c == ',')
        && matches!(after, Some(c) if c.is_lowercase())
}

/// Whether the terminal run at `chars[at..after]` does not end the sentence: an ellipsis followed by
/// lower case, or a single full stop after an abbreviation, an initial, a dotted token (`e.g`,
/// `U.S`) or a list number opening the sentence.
fn continues(
    paragraph: &str,
    chars: &[(usize, char)],
    start: usize,
    at: usize,
    after: usize,
) -> bool {
    let run: String = chars[at..after].iter().map(|&(_, c)| c).collect();
    let next = chars[after..]
        .iter()
        .map(|&(_, c)| c)
        .find(|c| !c.is_whitespace());
    if run == "..." || run == "…" {
        return next.is_some_and(char::is_lowercase);
    }
    if run != "." {
        return false;
    }
    let token_start = chars[..at]
        .iter()
        .rev()
        .take_while(|&&(offset, c)| offset >= start && (c.is_alphanumeric() || c == '.'))
        .last()
        .map_or(chars[at].0, |&(offset, _)| offset);
    let token = paragraph.get(token_start..chars[at].0).unwrap_or("");
    if token.is_empty() {
        return false;
    }
    if token.contains('.') {
        return true;
    }
    let mut letters = token.chars();
    if let (Some(first), None) = (letters.next(), letters.next())
        && first.is_alphabetic()
    {
        return true;
    }
    if ABBREVIATIONS.contains(&token.to_lowercase().as_str()) {
        return true;
    }
    // "1. Buy milk": a list number, with nothing but list markers before it in the sentence.
    token.chars().all(|c| c.is_ascii_digit())
        && paragraph
            .get(start..token_start)
            .unwrap_or("")
            .chars()
            .all(|c| c.is_whitespace() || matches!(c, '-' | '*' | '•' | '(' | '#'))
}

#[cfg(test)]
mod tests {
    use crate::statements::test_support::kept;

    #[test]
    fn sentence_boundaries_respect_abbreviations_lists_and_wrapping() {
        assert_eq!(
            kept("Dr. Silva is my doctor. She works at St. Mary's."),
            vec!["Dr. Silva is my doctor.", "She works at St. Mary's."]
        );
        assert_eq!(
            kept("I like fruit, e.g. apples and pears. J. K. Rowling is my favourite author."),
            vec![
                "I like fruit, e.g. apples and pears.",
                "J. K. Rowling is my favourite author."
            ]
        );
        assert_eq!(
            kept("My goals:\n1. Run a marathon\n2. Learn Portuguese"),
            vec!["My goals:", "1. Run a marathon", "2. Learn Portuguese"]
        );
        assert_eq!(
            kept("I moved to Lisbon\nlast spring and I love it"),
            vec!["I moved to Lisbon\nlast spring and I love it"]
        );
        assert_eq!(
            kept("I was thinking... maybe I'll paint again. I sold a painting for 3.5 euros."),
            vec![
                "I was thinking... maybe I'll paint again.",
                "I sold a painting for 3.5 euros."
            ]
        );
        assert_eq!(
            kept("我住在里斯本。我喜欢茶。"),
            vec!["我住在里斯本。", "我喜欢茶。"]
        );
        assert_eq!(
            kept("She said \"I'm moving to Faro.\" Then she left."),
            vec!["She said \"I'm moving to Faro.\"", "Then she left."]
        );
    }
}

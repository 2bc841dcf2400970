//! Learning BPE merges from a small built-in text, so a synthetic vocabulary holds pieces
//! that real text is made of (and tokenizes into more than single bytes).
//!
//! The classic algorithm: every word is a sequence of symbols, counted by how often the word
//! occurs; the most frequent adjacent pair is merged everywhere and recorded, and again,
//! until enough merges are found. Ties go to the smallest pair, so the result depends on the
//! text alone.

use std::collections::BTreeMap;

/// The text the merges are learned from: a few paragraphs of plain English with digits and
/// punctuation.
pub(crate) const CORPUS: &str = include_str!("corpus.txt");

/// The words of [`CORPUS`]: split at white space, with trailing punctuation as words of its
/// own (most pre-tokenizers split it off), in order of first appearance.
pub(crate) fn words() -> Vec<String> {
    let mut out = Vec::new();
    for word in CORPUS.split_whitespace() {
        let body = word.trim_end_matches(|c: char| c.is_ascii_punctuation());
        if !body.is_empty() {
            out.push(body.to_string());
        }
        out.extend(word[body.len()..].chars().map(String::from));
    }
    out
}

/// Up to `n` merges learned from `words` (each a sequence of symbols), most frequent pair
/// first; pairs seen once are never merged.
pub(crate) fn learn_merges(words: &[Vec<String>], n: usize) -> Vec<(String, String)> {
    let mut counted: BTreeMap<Vec<String>, usize> = BTreeMap::new();
    for word in words {
        *counted.entry(word.clone()).or_default() += 1;
    }
    let mut words: Vec<(Vec<String>, usize)> = counted.into_iter().collect();
    let mut merges = Vec::with_capacity(n);
    while merges.len() < n {
        let mut pairs: BTreeMap<(&str, &str), usize> = BTreeMap::new();
        for (symbols, count) in &words {
            for pair in symbols.windows(2) {
                *pairs.entry((&pair[0], &pair[1])).or_default() += count;
            }
        }
        // The first of the most frequent pairs in order (`max_by_key` keeps the last maximum,
        // so go through them in reverse).
        let best = pairs
            .into_iter()
            .rev()
            .max_by_key(|&(_, count)| count)
            .filter(|&(_, count)| count > 1);
        let Some(((left, right), _)) = best else {
            break;
        };
        let (left, right) = (left.to_string(), right.to_string());
        for (symbols, _) in &mut words {
            merge_pair(symbols, &left, &right);
        }
        merges.push((left, right));
    }
    merges
}

/// Every occurrence of `left` followed by `right` in `symbols` becomes one symbol, left to
/// right.
fn merge_pair(symbols: &mut Vec<String>, left: &str, right: &str) {
    let mut out = Vec::with_capacity(symbols.len());
    let mut i = 0;
    while i < symbols.len() {
        if i + 1 < symbols.len() && symbols[i] == left && symbols[i + 1] == right {
            out.push(format!("{left}{right}"));
            i += 2;
        } else {
            out.push(std::mem::take(&mut symbols[i]));
            i += 1;
        }
    }
    *symbols = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spelled(words: &[&str]) -> Vec<Vec<String>> {
        words
            .iter()
            .map(|w| w.chars().map(String::from).collect())
            .collect()
    }

    #[test]
    fn most_frequent_pair_first_and_smallest_on_ties() {
        let merges = learn_merges(&spelled(&["abc", "abc", "bcd", "xy"]), 10);
        let merges: Vec<String> = merges.iter().map(|(l, r)| format!("{l} {r}")).collect();
        // `b c` three times; then `a bc` twice (`bc d` once: never merged).
        assert_eq!(merges, ["b c", "a bc"]);
        let tie = learn_merges(&spelled(&["ab", "ab", "cd", "cd"]), 1);
        assert_eq!(tie, [("a".to_string(), "b".to_string())]);
    }

    #[test]
    fn punctuation_is_split_off() {
        let words = words();
        assert!(words.contains(&"text".to_string()));
        assert!(words.contains(&".".to_string()));
        assert!(words.iter().all(|w| !w.ends_with(',') || w == ","));
    }
}

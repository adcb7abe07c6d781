//! Go's `path/filepath.Match` for one host label: `*` any run of characters, `?` one, `[...]`
//! a class (`^` negates, `a-z` ranges), `\` escapes. A malformed pattern matches nothing, as
//! upstream ignores the error and treats it as no match.

/// Whether `pattern` matches all of `name`.
pub(super) fn matches(pattern: &str, name: &str) -> bool {
    let pattern: Vec<char> = pattern.chars().collect();
    let name: Vec<char> = name.chars().collect();
    match_from(&pattern, &name)
}

fn match_from(pattern: &[char], name: &[char]) -> bool {
    let Some((&first, rest)) = pattern.split_first() else {
        return name.is_empty();
    };
    match first {
        '*' => (0..=name.len()).take_while(|&i| i == 0 || name[i - 1] != '/').any(|i| match_from(rest, &name[i..])),
        '?' => name.first().is_some_and(|&c| c != '/') && match_from(rest, &name[1..]),
        '[' => match class(rest) {
            Some((set, after)) => {
                name.first().is_some_and(|&c| c != '/' && set.contains(c)) && match_from(after, &name[1..])
            }
            None => false,
        },
        '\\' => match rest.split_first() {
            Some((&escaped, after)) => name.first() == Some(&escaped) && match_from(after, &name[1..]),
            None => false,
        },
        c => name.first() == Some(&c) && match_from(rest, &name[1..]),
    }
}

/// A character class after its `[`: the class and what follows its `]`; None when malformed.
struct Class {
    negated: bool,
    ranges: Vec<(char, char)>,
}

impl Class {
    fn contains(&self, c: char) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != self.negated
    }
}

fn class(pattern: &[char]) -> Option<(Class, &[char])> {
    let (negated, mut rest) = match pattern.split_first() {
        Some(('^', after)) => (true, after),
        _ => (false, pattern),
    };
    let mut ranges = Vec::new();
    loop {
        if let Some((']', after)) = rest.split_first()
            && !ranges.is_empty()
        {
            return Some((Class { negated, ranges }, after));
        }
        let (lo, after) = class_char(rest)?;
        let (hi, after) = match after.split_first() {
            Some(('-', after)) => class_char(after)?,
            _ => (lo, after),
        };
        if lo > hi {
            return None;
        }
        ranges.push((lo, hi));
        rest = after;
    }
}

/// One possibly escaped character of a class; None for a bare `-` or `]`, or the end.
fn class_char(pattern: &[char]) -> Option<(char, &[char])> {
    match pattern.split_first()? {
        ('-' | ']', _) => None,
        ('\\', after) => after.split_first().map(|(&c, after)| (c, after)),
        (&c, after) => Some((c, after)),
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn go_filepath_match_cases() {
        let cases = [
            ("abc", "abc", true),
            ("*", "abc", true),
            ("*c", "abc", true),
            ("a*", "a", true),
            ("a*", "abc", true),
            ("a*/b", "abc/b", true),
            ("a*b*c*d*e*/f", "axbxcxdxe/f", true),
            ("a*b?c*x", "abxbbxdbxebxczzx", true),
            ("a*b?c*x", "abxbbxdbxebxczzy", false),
            ("ab[c]", "abc", true),
            ("ab[b-d]", "abc", true),
            ("ab[e-g]", "abc", false),
            ("ab[^c]", "abc", false),
            ("ab[^b-d]", "abc", false),
            ("ab[^e-g]", "abc", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "ab", false),
            ("a?b", "a☺b", true),
            ("a[^a]b", "a☺b", true),
            ("a???b", "a☺b", false),
            ("[a-ζ]*", "α", true),
            ("*[a-ζ]", "A", false),
            ("a?b", "a/b", false),
            ("a*b", "a/b", false),
            ("[\\]a]", "]", true),
            ("[\\-]", "-", true),
            ("[x\\-]", "x", true),
            ("[\\-x]", "a", false),
            ("[]a]", "]", false),
            ("[-]", "-", false),
            ("[x-]", "x", false),
            ("[a-b-c]", "a", false),
            ("[", "a", false),
            ("[^", "a", false),
            ("[^bc", "a", false),
            ("a[", "a", false),
            ("*x", "xxx", true),
            ("*-good", "prefix-good", true),
            ("prefix", "prefix-good", false),
        ];
        for (pattern, name, want) in cases {
            assert_eq!(matches(pattern, name), want, "{pattern:?} against {name:?}");
        }
    }
}

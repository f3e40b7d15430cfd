//! Arithmetic operators. kyverno-json uses jmespath-community, whose grammar has `+ - * / %`
//! (`$index + \`1\``); the `jmespath` crate does not. Before compiling, each top-level arithmetic
//! expression between JMESPath's lower-precedence operators (`,` `|` `||` `&&` comparisons `:` `!`) is
//! rewritten into calls of kyverno's `add`/`subtract`/`multiply`/`divide`/`modulo` functions. `+` is always
//! an operator; `-`, `*`, `/` and `%` only between blanks, since `*` is also a wildcard and `-` starts
//! negative numbers.

/// The expression text with arithmetic rewritten into function calls (unchanged when there is none).
pub fn rewrite(s: &str) -> String {
    if !s.contains(['+', '-', '*', '/', '%']) {
        return s.to_string();
    }
    let chars: Vec<char> = s.chars().collect();
    group(&chars, 0, None).0
}

fn skip_quoted(c: &[char], mut i: usize, out: &mut String) -> usize {
    let q = c[i];
    out.push(q);
    i += 1;
    while i < c.len() {
        out.push(c[i]);
        if c[i] == '\\' && i + 1 < c.len() {
            out.push(c[i + 1]);
            i += 2;
            continue;
        }
        i += 1;
        if c[i - 1] == q {
            break;
        }
    }
    i
}

fn closing(open: char) -> char {
    match open {
        '(' => ')',
        '[' => ']',
        _ => '}',
    }
}

/// Rewrites from `i` up to the `close` character; returns the text and the index after `close`.
fn group(c: &[char], mut i: usize, close: Option<char>) -> (String, usize) {
    let mut out = String::new();
    let mut seg = String::new();
    while i < c.len() {
        let ch = c[i];
        if Some(ch) == close {
            out.push_str(&arith(&seg));
            return (out, i + 1);
        }
        match ch {
            '\'' | '"' | '`' => i = skip_quoted(c, i, &mut seg),
            '(' | '[' | '{' => {
                let (inner, j) = group(c, i + 1, Some(closing(ch)));
                seg.push(ch);
                seg.push_str(&inner);
                seg.push(closing(ch));
                i = j;
            }
            ',' | '|' | '&' | '=' | '!' | '<' | '>' | ':' => {
                out.push_str(&arith(&seg));
                seg.clear();
                out.push(ch);
                i += 1;
            }
            _ => {
                seg.push(ch);
                i += 1;
            }
        }
    }
    out.push_str(&arith(&seg));
    (out, i)
}

/// One segment without lower-precedence operators: `a + b * c` → `add(a, multiply(b, c))`.
fn arith(seg: &str) -> String {
    let c: Vec<char> = seg.chars().collect();
    let mut operands: Vec<String> = Vec::new();
    let mut ops: Vec<char> = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        match ch {
            '\'' | '"' | '`' => {
                i = skip_quoted(&c, i, &mut cur);
                continue;
            }
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        let blank_before = i > 0 && c[i - 1].is_whitespace();
        let blank_after = i + 1 < c.len() && c[i + 1].is_whitespace();
        let is_op =
            depth == 0 && (ch == '+' || (matches!(ch, '-' | '*' | '/' | '%') && blank_before && blank_after));
        if is_op {
            operands.push(cur.trim().to_string());
            ops.push(ch);
            cur.clear();
        } else {
            cur.push(ch);
        }
        i += 1;
    }
    if ops.is_empty() {
        return seg.to_string();
    }
    operands.push(cur.trim().to_string());
    if operands.iter().any(String::is_empty) {
        return seg.to_string();
    }
    // Multiplicative first, then additive, each left to right.
    let mut terms: Vec<String> = vec![operands[0].clone()];
    let mut add_ops: Vec<char> = Vec::new();
    for (op, rhs) in ops.iter().zip(operands.iter().skip(1)) {
        match op {
            '*' | '/' | '%' => {
                let lhs = terms.pop().unwrap_or_default();
                let f = match op {
                    '*' => "multiply",
                    '/' => "divide",
                    _ => "modulo",
                };
                terms.push(format!("{f}({lhs}, {rhs})"));
            }
            _ => {
                add_ops.push(*op);
                terms.push(rhs.clone());
            }
        }
    }
    let leading = &seg[..seg.len() - seg.trim_start().len()];
    let trailing = &seg[seg.trim_end().len()..];
    let mut acc = terms[0].clone();
    for (op, rhs) in add_ops.iter().zip(terms.iter().skip(1)) {
        let f = if *op == '+' { "add" } else { "subtract" };
        acc = format!("{f}({acc}, {rhs})");
    }
    format!("{leading}{acc}{trailing}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_becomes_function_calls() {
        let table: &[(&str, &str)] = &[
            ("a.b", "a.b"),
            ("`1` + `2`", "add(`1`, `2`)"),
            ("to_string($index + `1`)", "to_string(add($index, `1`))"),
            ("a + b * c", "add(a, multiply(b, c))"),
            ("a - b - c", "subtract(subtract(a, b), c)"),
            ("items[*].name", "items[*].name"),
            ("a-b", "a-b"),
            ("x == a + `1`", "x == add(a, `1`)"),
            ("'a + b'", "'a + b'"),
            ("[a + b, c]", "[add(a, b), c]"),
            ("`-1`", "`-1`"),
        ];
        for (input, want) in table {
            assert_eq!(rewrite(input), *want, "{input}");
        }
    }
}

//! kuttl's step file naming and grouping (`internal/file/name.go`, `internal/utils/files/files.go`), pure:
//! a name matches `^(\d+-)?([^-.]+)(-[^.]+)?((?:\.gotmpl)?\.yaml)?$`; the index is a 32-bit integer; the
//! type is the first name component (`assert`, `errors`, else applied), case-insensitively; `.yml` does not
//! match; a directory with an index is a step whose files all load, typed by their own names.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::LazyLock;

/// What a file in a step is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// Objects to apply (and the step's `TestStep`).
    Apply,
    /// Objects to assert (and the step's `TestAssert`).
    Assert,
    /// Objects that must not exist.
    Errors,
}

/// A parsed file name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileName {
    /// The index, if the name starts with one.
    pub index: Option<i32>,
    /// The type from the first name component.
    pub kind: FileKind,
    /// The name after the index without the extension (`install` for `00-install.yaml`).
    pub name: String,
    /// Whether it is a `.gotmpl.yaml` template.
    pub template: bool,
}

static NAME: LazyLock<regex::Regex> =
    LazyLock::new(|| regex::Regex::new(r"^(\d+-)?([^-.]+)(-[^.]+)?((?:\.gotmpl)?\.yaml)?$").expect("regex"));

/// Parses a file name by kuttl's grammar; `None` when it does not match (or the index overflows 32 bits).
pub fn parse_any(file: &str) -> Option<FileName> {
    let c = NAME.captures(file)?;
    let index = match c.get(1) {
        Some(m) => Some(m.as_str().trim_end_matches('-').parse::<i32>().ok()?),
        None => None,
    };
    let first = c.get(2).map_or("", |m| m.as_str());
    let kind = match first.to_ascii_lowercase().as_str() {
        "assert" => FileKind::Assert,
        "errors" => FileKind::Errors,
        _ => FileKind::Apply,
    };
    let name = format!("{first}{}", c.get(3).map_or("", |m| m.as_str()));
    let template = c.get(4).is_some_and(|m| m.as_str().starts_with(".gotmpl"));
    Some(FileName {
        index,
        kind,
        name,
        template,
    })
}

/// A step file name: it matches and has an index.
pub fn parse_name(file: &str) -> Option<FileName> {
    parse_any(file).filter(|n| n.index.is_some())
}

/// Shell-style glob matching (`*`, `?`) of a file name, as Go's `filepath.Match` for kuttl's `ignoreFiles`.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// One file of a step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepFile {
    /// Its path.
    pub path: PathBuf,
    /// Its type.
    pub kind: FileKind,
    /// Whether it is a template.
    pub template: bool,
}

/// The files of one step, in order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StepFiles {
    /// The step's index.
    pub index: i32,
    /// The name from the first applied file (or directory), empty when it has none.
    pub name: String,
    /// Its files, sorted by name.
    pub files: Vec<StepFile>,
}

/// An entry of a test case directory: its name, whether it is a directory, and (for a directory) the
/// names of the files in it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The file or directory name.
    pub name: String,
    /// The files inside, for a directory.
    pub dir_files: Option<Vec<String>>,
}

/// Groups a test case directory's entries into steps sorted by index; also returns the names skipped and
/// why (kuttl logs them). `ignore` holds kuttl's `ignoreFiles` globs (default `README*`), which do not
/// apply inside step directories.
pub fn group(base: &std::path::Path, entries: &[Entry], ignore: &[String]) -> (Vec<StepFiles>, Vec<String>) {
    let mut steps: BTreeMap<i32, StepFiles> = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut sorted: Vec<&Entry> = entries.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for e in sorted {
        if e.dir_files.is_none() && ignore.iter().any(|g| glob_match(g, &e.name)) {
            continue;
        }
        let Some(n) = parse_name(&e.name) else {
            skipped.push(format!(
                "Ignoring {:?}: does not begin with a number followed by a dash.",
                e.name
            ));
            continue;
        };
        let index = n.index.expect("parse_name has an index");
        let step = steps.entry(index).or_insert_with(|| StepFiles {
            index,
            ..Default::default()
        });
        match &e.dir_files {
            None => {
                if step.name.is_empty() && n.kind == FileKind::Apply {
                    step.name = n.name.clone();
                }
                step.files.push(StepFile {
                    path: base.join(&e.name),
                    kind: n.kind,
                    template: n.template,
                });
            }
            Some(files) => {
                if step.name.is_empty() {
                    step.name = n.name.clone();
                }
                let mut files = files.clone();
                files.sort();
                for f in files {
                    let (kind, template) =
                        parse_any(&f).map_or((FileKind::Apply, false), |m| (m.kind, m.template));
                    step.files.push(StepFile {
                        path: base.join(&e.name).join(&f),
                        kind,
                        template,
                    });
                }
            }
        }
    }
    (steps.into_values().collect(), skipped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn names_table() {
        let cases = [
            ("00-install.yaml", Some((0, FileKind::Apply, "install", false))),
            ("1-foo.yaml", Some((1, FileKind::Apply, "foo", false))),
            ("01-foo", Some((1, FileKind::Apply, "foo", false))),
            ("00-assert.yaml", Some((0, FileKind::Assert, "assert", false))),
            (
                "00-assert-pods.yaml",
                Some((0, FileKind::Assert, "assert-pods", false)),
            ),
            ("02-Errors.yaml", Some((2, FileKind::Errors, "Errors", false))),
            (
                "00-assert.gotmpl.yaml",
                Some((0, FileKind::Assert, "assert", true)),
            ),
            (
                "03-install-pods.yaml",
                Some((3, FileKind::Apply, "install-pods", false)),
            ),
            ("01-foo.yml", None),
            ("README.md", None),
            ("install.yaml", None),
            ("99999999999-x.yaml", None),
        ];
        for (file, want) in cases {
            let got = parse_name(file).map(|n| (n.index.unwrap(), n.kind, n.name, n.template));
            assert_eq!(got, want.map(|(i, k, n, t)| (i, k, n.to_string(), t)), "{file}");
        }
    }

    #[test]
    fn globs() {
        assert!(glob_match("README*", "README.md"));
        assert!(glob_match("*.txt", "a.txt"));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("README*", "00-readme.yaml"));
        assert!(!glob_match("*.txt", "a.yaml"));
    }

    #[test]
    fn files_are_grouped_into_steps() {
        let f = |n: &str| Entry {
            name: n.into(),
            dir_files: None,
        };
        let entries = vec![
            f("01-assert.yaml"),
            f("00-install.yaml"),
            f("00-assert.yaml"),
            f("01-errors.yaml"),
            f("10-last.yaml"),
            f("README.md"),
            f("notes.txt"),
            f("2-run.yaml"),
            Entry {
                name: "03-directory".into(),
                dir_files: Some(vec!["pod.yaml".into(), "assert.yaml".into()]),
            },
        ];
        let (steps, skipped) = group(Path::new("/t"), &entries, &["README*".into()]);
        type Summary = (i32, String, Vec<(String, FileKind)>);
        let summary: Vec<Summary> = steps
            .iter()
            .map(|s| {
                let files = s
                    .files
                    .iter()
                    .map(|f| (f.path.strip_prefix("/t").unwrap().display().to_string(), f.kind))
                    .collect();
                (s.index, s.name.clone(), files)
            })
            .collect();
        assert_eq!(
            summary,
            vec![
                (
                    0,
                    "install".into(),
                    vec![
                        ("00-assert.yaml".into(), FileKind::Assert),
                        ("00-install.yaml".into(), FileKind::Apply)
                    ]
                ),
                (
                    1,
                    "".into(),
                    vec![
                        ("01-assert.yaml".into(), FileKind::Assert),
                        ("01-errors.yaml".into(), FileKind::Errors)
                    ]
                ),
                (2, "run".into(), vec![("2-run.yaml".into(), FileKind::Apply)]),
                (
                    3,
                    "directory".into(),
                    vec![
                        ("03-directory/assert.yaml".into(), FileKind::Assert),
                        ("03-directory/pod.yaml".into(), FileKind::Apply)
                    ]
                ),
                (10, "last".into(), vec![("10-last.yaml".into(), FileKind::Apply)]),
            ]
        );
        assert_eq!(
            skipped,
            vec!["Ignoring \"notes.txt\": does not begin with a number followed by a dash."]
        );
    }
}

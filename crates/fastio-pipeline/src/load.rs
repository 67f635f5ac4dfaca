//! Reading a definition: size limit, `${{ name }}` parameters, and the
//! YAML parse with budgets, every problem a [`Diagnostic`] with the file,
//! line, column and YAML path.

use std::collections::BTreeMap;
use std::fmt;

use serde_saphyr::{DuplicateKeyPolicy, Location, alias_limits, budget, options};

use crate::model::{ParametersOnly, PipelineDoc};

/// Largest definition accepted, in bytes.
pub const MAX_DEFINITION_BYTES: usize = 1 << 20;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Reported; the pipeline still runs.
    Warning,
    /// The pipeline does not run.
    Error,
}

/// One finding about a definition, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// The file (as given).
    pub file: String,
    /// 1-based line (0: the whole file).
    pub line: u64,
    /// 1-based column (0: the whole line).
    pub column: u64,
    /// The YAML path, e.g. `operators[1].input[0].from` (empty: top).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{}:{}:{}: {sev}: ", self.file, self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Collects diagnostics for one file.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) file: String,
    pub(crate) items: Vec<Diagnostic>,
}

impl Report {
    pub(crate) fn new(file: &str) -> Report {
        Report {
            file: file.to_owned(),
            items: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, severity: Severity, at: Location, path: &str, message: String) {
        self.items.push(Diagnostic {
            severity,
            file: self.file.clone(),
            line: at.line(),
            column: at.column(),
            path: path.to_owned(),
            message,
        });
    }

    pub(crate) fn error(&mut self, at: Location, path: &str, message: impl Into<String>) {
        self.push(Severity::Error, at, path, message.into());
    }

    pub(crate) fn warn(&mut self, at: Location, path: &str, message: impl Into<String>) {
        self.push(Severity::Warning, at, path, message.into());
    }

    pub(crate) fn error_count(&self) -> usize {
        self.items
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    pub(crate) fn has_errors(&self) -> bool {
        self.items.iter().any(|d| d.severity == Severity::Error)
    }

    fn yaml(&mut self, e: &serde_saphyr::Error) {
        let at = e.location().unwrap_or(Location::UNKNOWN);
        let inner = e.without_snippet();
        // The first line of the message; the snippet adds nothing here.
        let text = inner.to_string();
        let text = text.lines().next().unwrap_or("invalid YAML").to_owned();
        self.error(at, "", text);
    }
}

/// A `${{ name }}` placeholder in the text.
struct Placeholder {
    start: usize,
    end: usize,
    name: String,
    line: u64,
    column: u64,
}

/// The byte ranges of YAML comments in `text`: from a `#` at the start of
/// a line or after white space, outside quotes and block scalars (`|`,
/// `>`), to the end of its line. Comments are not substituted: a
/// placeholder mentioned there is text.
fn comments(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    // The indentation of the line that opened a block scalar: lines
    // indented deeper (or blank) are its content.
    let mut block: Option<usize> = None;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let start = at;
        at += line.len();
        let body = line.trim_end_matches(['\n', '\r']);
        let indent = body.len() - body.trim_start_matches(' ').len();
        if let Some(parent) = block {
            if body.trim().is_empty() || indent > parent {
                continue;
            }
            block = None;
        }
        let mut quote: Option<char> = None;
        let mut prev = ' ';
        let mut last_token = None::<char>;
        let mut end_of_code = body.len();
        let mut chars = body.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match quote {
                Some('\'') if c == '\'' => {
                    if chars.peek().map(|&(_, n)| n) == Some('\'') {
                        chars.next();
                    } else {
                        quote = None;
                    }
                }
                Some('"') if c == '\\' => {
                    chars.next();
                }
                Some('"') if c == '"' => quote = None,
                Some(_) => {}
                None if c == '#' && prev.is_whitespace() => {
                    out.push((start + i, start + body.len()));
                    end_of_code = i;
                    break;
                }
                None if (c == '\'' || c == '"')
                    && matches!(last_token, None | Some(':' | '-' | '[' | '{' | ',' | '?')) =>
                {
                    quote = Some(c)
                }
                None => {}
            }
            if !c.is_whitespace() {
                last_token = Some(c);
            }
            prev = c;
        }
        // A block scalar's header: `key: |`, `- >-`, `|2` ...
        let code = body[..end_of_code].trim_end();
        let header = code.trim_end_matches(|c: char| c == '-' || c == '+' || c.is_ascii_digit());
        if quote.is_none() && (header.ends_with('|') || header.ends_with('>')) {
            let before = header[..header.len() - 1].trim_end();
            if before.is_empty() || before.ends_with(':') || before.ends_with('-') {
                block = Some(indent);
            }
        }
    }
    out
}

fn placeholders(text: &str) -> Vec<Placeholder> {
    let comments = comments(text);
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = text[from..].find("${{") {
        let start = from + k;
        if let Some(&(_, end)) = comments.iter().find(|&&(a, b)| a <= start && start < b) {
            from = end;
            continue;
        }
        let Some(close) = text[start..].find("}}") else {
            // An unclosed `${{`: reported as a placeholder without a name.
            let before = &text[..start];
            out.push(Placeholder {
                start,
                end: text.len(),
                name: String::new(),
                line: before.matches('\n').count() as u64 + 1,
                column: before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u64 + 1,
            });
            break;
        };
        let end = start + close + 2;
        let name = text[start + 3..end - 2].trim().to_owned();
        let before = &text[..start];
        let line = before.matches('\n').count() as u64 + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u64 + 1;
        out.push(Placeholder {
            start,
            end,
            name,
            line,
            column,
        });
        from = end;
    }
    out
}

fn parse_options() -> serde_saphyr::Options {
    options! {
        budget: budget! {
            max_depth: 32,
            max_nodes: 100_000,
            max_events: 400_000,
            max_documents: 1,
            max_aliases: 1_000,
            max_anchors: 1_000,
            max_total_scalar_bytes: MAX_DEFINITION_BYTES,
        },
        alias_limits: alias_limits! { max_total_replayed_events: 100_000 },
        duplicate_keys: DuplicateKeyPolicy::Error,
    }
}

/// A definition read and parsed, with its parameters filled in.
#[derive(Debug)]
pub struct Loaded {
    /// The parsed document (of the text after substitution: positions in
    /// diagnostics refer to it; a line without placeholders reads the same
    /// as in the file).
    pub doc: PipelineDoc,
    /// The value of every declared parameter.
    pub parameters: BTreeMap<String, String>,
}

/// Reads `text` (the report names its file) with `params` (`--param k=v`)
/// overriding declared defaults. Returns the document and the warnings so
/// far, or every error found.
pub(crate) fn load(text: &str, params: &[(String, String)], report: &mut Report) -> Option<Loaded> {
    let whole = Location::UNKNOWN;
    if text.len() > MAX_DEFINITION_BYTES {
        report.error(
            whole,
            "",
            format!(
                "the definition has {} bytes; at most {MAX_DEFINITION_BYTES} are read",
                text.len()
            ),
        );
        return None;
    }
    let holes = placeholders(text);
    // Placeholders masked by as many `x`s, so that positions stay and any
    // YAML context accepts them, to read the declared parameters first.
    let mut masked = text.to_owned();
    for h in holes.iter().rev() {
        masked.replace_range(h.start..h.end, &"x".repeat(h.end - h.start));
    }
    let declared =
        match serde_saphyr::from_str_with_options::<ParametersOnly>(&masked, parse_options()) {
            Ok(p) => p.parameters.unwrap_or_default(),
            Err(e) => {
                report.yaml(&e);
                return None;
            }
        };
    let mut values: BTreeMap<String, String> = declared
        .iter()
        .map(|(k, v)| (k.clone(), v.value.0.clone()))
        .collect();
    for (k, v) in params {
        match values.get_mut(k) {
            Some(slot) => *slot = v.clone(),
            None => report.error(
                whole,
                "parameters",
                format!(
                    "--param {k}: no such parameter (declared: {})",
                    if declared.is_empty() {
                        "none".to_owned()
                    } else {
                        declared.keys().cloned().collect::<Vec<_>>().join(", ")
                    }
                ),
            ),
        }
    }
    let mut expanded = text.to_owned();
    for h in holes.iter().rev() {
        match values.get(&h.name) {
            Some(v) if !v.contains('\n') => expanded.replace_range(h.start..h.end, v),
            Some(_) => report.error(
                whole,
                "parameters",
                format!("parameter {} has a line break in its value", h.name),
            ),
            None => report.items.push(Diagnostic {
                severity: Severity::Error,
                file: report.file.clone(),
                line: h.line,
                column: h.column,
                path: String::new(),
                message: if h.name.is_empty() {
                    "`${{` without a closing `}}`, or without a parameter name".to_owned()
                } else {
                    format!(
                        "placeholder ${{{{ {} }}}} has no value: no such parameter",
                        h.name
                    )
                },
            }),
        }
    }
    for (name, v) in &declared {
        if !holes.iter().any(|h| &h.name == name) {
            report.warn(
                v.referenced,
                &format!("parameters.{name}"),
                format!("parameter {name} is declared but nothing uses it"),
            );
        }
    }
    if report.has_errors() {
        return None;
    }
    match serde_saphyr::from_str_with_options::<PipelineDoc>(&expanded, parse_options()) {
        Ok(doc) => Some(Loaded {
            doc,
            parameters: values,
        }),
        Err(e) => {
            report.yaml(&e);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unclosed_placeholder_is_an_error() {
        let mut r = Report::new("f.yaml");
        assert!(load("a: ${{ x\n", &[], &mut r).is_none());
        assert_eq!(r.items.len(), 1);
        assert_eq!((r.items[0].line, r.items[0].column), (1, 4));
        assert!(r.items[0].message.contains("without a closing"));
    }

    #[test]
    fn placeholders_in_comments_are_text_but_not_in_strings_or_block_scalars() {
        let text = "# every ${{ a }} has a default\n\
x: ${{ b }} # but ${{ c }} here is a comment\n\
y: 'a # ${{ d }}'\n\
z: \"it's # ${{ e }}\"\n\
w: don't#${{ f }}\n\
s: |\n  echo # ${{ g }}\n\n  more # ${{ h }}\n\
t: after # ${{ i }}\n\
  # ${{ j }} indented comment\n";
        let names: Vec<String> = placeholders(text).into_iter().map(|p| p.name).collect();
        assert_eq!(names, ["b", "d", "e", "f", "g", "h"]);
    }

    #[test]
    fn placeholders_are_found_with_positions() {
        let h = placeholders("a: 1\nb: [${{ n }}, ${{m}}]\n");
        assert_eq!(h.len(), 2);
        assert_eq!((h[0].name.as_str(), h[0].line, h[0].column), ("n", 2, 5));
        assert_eq!((h[1].name.as_str(), h[1].line, h[1].column), ("m", 2, 15));
    }
}

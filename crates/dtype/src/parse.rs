//! The datashape parser.
//!
//! Grammar (the concrete subset of Blaze datashape this crate represents):
//!
//! ```text
//! datashape  := '?' plain | plain
//! plain      := dim '*' datashape | dtype
//! dim        := INTEGER | 'var' | 'strided'
//! dtype      := NAME | NAME '[' args ']' | '{' field (',' field)* ','? '}'
//!             | '(' datashape (',' datashape)* ','? ')'
//! field      := (NAME | STRING) ':' datashape
//! ```
//!
//! `#` starts a comment that runs to the end of the line. Nesting is
//! bounded by [`MAX_DEPTH`]: deeper input is an error, never a stack overflow.

use std::fmt;

use thiserror::Error;

use crate::encoding::StringEncoding;
use crate::error::TypeError;
use crate::primitive::{Endianness, Primitive};
use crate::types::{Field, Type};

/// The deepest nesting of dimensions, records, tuples and constructors the
/// parser accepts.
pub const MAX_DEPTH: usize = 64;

/// What went wrong while parsing datashape text.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// A token other than what the grammar allows here.
    #[error("expected {expected}, found {found}")]
    Unexpected {
        /// What the grammar allows here.
        expected: &'static str,
        /// What was found.
        found: String,
    },
    /// A lower-case name that is not a type we know.
    #[error("unknown type name '{0}'")]
    UnknownType(String),
    /// A datashape feature this crate does not represent (type variables,
    /// ellipses, function prototypes, dimension constructors, ...).
    #[error("{0}")]
    Unsupported(String),
    /// A negative dimension size.
    #[error("dimension size must be zero or more, found {0}")]
    NegativeDimension(String),
    /// An integer that does not fit.
    #[error("integer {0} is too large")]
    IntegerTooLarge(String),
    /// An unknown string encoding.
    #[error(
        "unknown string encoding '{0}' (expected one of ascii, utf8, utf16, ucs2, utf32, A, U8, U16, U32)"
    )]
    UnknownEncoding(String),
    /// A malformed string literal or character.
    #[error("{0}")]
    Lexical(String),
    /// Nesting deeper than [`MAX_DEPTH`].
    #[error("nesting deeper than {MAX_DEPTH} levels")]
    TooDeep,
    /// The text describes a type that cannot exist.
    #[error(transparent)]
    Type(#[from] TypeError),
}

/// A datashape parse error: where (byte offset), what, and the source line
/// with a caret under the offending position when displayed.
///
/// ```
/// let err = dtype::parse("3 * int33").unwrap_err();
/// assert_eq!(err.offset(), 4);
/// assert_eq!(
///     err.to_string(),
///     "invalid datashape at byte 4: unknown type name 'int33'\n  3 * int33\n      ^"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    offset: usize,
    kind: ParseErrorKind,
    source_text: String,
}

impl ParseError {
    /// Byte offset into the input where the error was found.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// What went wrong.
    pub fn kind(&self) -> &ParseErrorKind {
        &self.kind
    }

    /// The message without the caret lines.
    pub fn message(&self) -> String {
        format!("invalid datashape at byte {}: {}", self.offset, self.kind)
    }

    /// The offending source line and a caret line under the error position.
    pub fn caret(&self) -> String {
        let at = self.offset.min(self.source_text.len());
        let line_start = self.source_text[..at].rfind('\n').map_or(0, |i| i + 1);
        let line_end = self.source_text[at..]
            .find('\n')
            .map_or(self.source_text.len(), |i| at + i);
        let line = &self.source_text[line_start..line_end];
        let column = self.source_text[line_start..at].chars().count();
        format!("  {line}\n  {}^", " ".repeat(column))
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}\n{}", self.message(), self.caret())
    }
}

impl std::error::Error for ParseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.kind)
    }
}

/// Parses datashape text into a [`Type`].
///
/// ```
/// let t = dtype::parse("var * {name: string, 'x y': ?float32}")?;
/// assert_eq!(t.to_string(), "var * {name: string, 'x y': ?float32}");
/// assert!(dtype::parse("??int32").is_err());
/// # Ok::<(), dtype::ParseError>(())
/// ```
pub fn parse(text: &str) -> Result<Type, ParseError> {
    let mut parser = Parser {
        src: text,
        pos: 0,
        depth: 0,
    };
    let result = parser.datashape().and_then(|t| {
        parser.skip_trivia();
        match parser.peek()? {
            Token::End => Ok(t),
            tok => Err(parser.unexpected("end of input", tok, parser.pos)),
        }
    });
    result.map_err(|(offset, kind)| ParseError {
        offset,
        kind,
        source_text: text.to_owned(),
    })
}

impl std::str::FromStr for Type {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Type, ParseError> {
        parse(s)
    }
}

type PResult<T> = Result<T, (usize, ParseErrorKind)>;

#[derive(Clone, Debug, PartialEq)]
enum Token<'a> {
    Name(&'a str),
    Integer(&'a str),
    Str(String),
    Punct(&'static str),
    End,
}

impl Token<'_> {
    fn describe(&self) -> String {
        match self {
            Token::Name(n) => format!("'{n}'"),
            Token::Integer(n) => format!("integer {n}"),
            Token::Str(s) => format!("string {s:?}"),
            Token::Punct(p) => format!("'{p}'"),
            Token::End => "end of input".to_owned(),
        }
    }
}

const PUNCTS: [&str; 13] = [
    "...", "->", "*", ",", "=", ":", "[", "]", "{", "}", "(", ")", "?",
];

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn skip_trivia(&mut self) {
        let bytes = self.src.as_bytes();
        while self.pos < bytes.len() {
            match bytes[self.pos] {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'#' => {
                    while self.pos < bytes.len() && bytes[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    /// Reads the next token without consuming it; returns it and its end.
    fn lex(&mut self) -> PResult<(Token<'a>, usize, usize)> {
        self.skip_trivia();
        let start = self.pos;
        let rest = &self.src[start..];
        let bytes = rest.as_bytes();
        let Some(&first) = bytes.first() else {
            return Ok((Token::End, start, start));
        };
        if first == b'_' || first.is_ascii_alphabetic() {
            let len = bytes
                .iter()
                .position(|b| !(*b == b'_' || b.is_ascii_alphanumeric()))
                .unwrap_or(bytes.len());
            return Ok((Token::Name(&rest[..len]), start, start + len));
        }
        if first.is_ascii_digit() || (first == b'-' && bytes.get(1).is_some_and(u8::is_ascii_digit))
        {
            let len = 1 + bytes[1..]
                .iter()
                .position(|b| !b.is_ascii_digit())
                .unwrap_or(bytes.len() - 1);
            return Ok((Token::Integer(&rest[..len]), start, start + len));
        }
        if first == b'\'' || first == b'"' {
            let (text, len) = lex_string(rest)
                .map_err(|(off, msg)| (start + off, ParseErrorKind::Lexical(msg)))?;
            return Ok((Token::Str(text), start, start + len));
        }
        for p in PUNCTS {
            if rest.starts_with(p) {
                return Ok((Token::Punct(p), start, start + p.len()));
            }
        }
        let c = rest.chars().next().unwrap_or('\u{fffd}');
        Err((
            start,
            ParseErrorKind::Lexical(format!("unexpected character {c:?}")),
        ))
    }

    fn peek(&mut self) -> PResult<Token<'a>> {
        let save = self.pos;
        let (tok, _, _) = self.lex()?;
        self.pos = save;
        Ok(tok)
    }

    fn next(&mut self) -> PResult<(Token<'a>, usize)> {
        let (tok, start, end) = self.lex()?;
        self.pos = end;
        Ok((tok, start))
    }

    fn unexpected(
        &self,
        expected: &'static str,
        found: Token<'_>,
        at: usize,
    ) -> (usize, ParseErrorKind) {
        (
            at,
            ParseErrorKind::Unexpected {
                expected,
                found: found.describe(),
            },
        )
    }

    fn expect(&mut self, punct: &'static str, expected: &'static str) -> PResult<()> {
        match self.next()? {
            (Token::Punct(p), _) if p == punct => Ok(()),
            (tok, at) => Err(self.unexpected(expected, tok, at)),
        }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            self.skip_trivia();
            return Err((self.pos, ParseErrorKind::TooDeep));
        }
        Ok(())
    }

    fn datashape(&mut self) -> PResult<Type> {
        self.enter()?;
        let result = self.datashape_inner();
        self.depth -= 1;
        result
    }

    fn datashape_inner(&mut self) -> PResult<Type> {
        self.skip_trivia();
        let start = self.pos;
        if self.peek()? == Token::Punct("?") {
            self.next()?;
            let here = self.pos_after_trivia();
            if self.peek()? == Token::Punct("?") {
                return Err((here, TypeError::NestedOption.into()));
            }
            let inner = self.plain()?;
            return Type::option(inner).map_err(|e| (start, e.into()));
        }
        self.plain()
    }

    /// `dim '*' datashape | dtype`
    fn plain(&mut self) -> PResult<Type> {
        let (tok, at) = self.next()?;
        match tok {
            Token::Integer(digits) => {
                let size = parse_dim_size(digits).map_err(|k| (at, k))?;
                self.expect("*", "'*' after a dimension size")?;
                let element = self.datashape()?;
                Type::fixed_dim(size, element).map_err(|e| (at, e.into()))
            }
            Token::Name(name @ ("var" | "strided")) => {
                match self.peek()? {
                    Token::Punct("*") => {}
                    Token::Punct("[") => {
                        return Err((
                            at,
                            ParseErrorKind::Unsupported(format!(
                                "dimension constructors like '{name}[...]' are not supported"
                            )),
                        ));
                    }
                    tok => {
                        let here = self.pos_after_trivia();
                        return Err(self.unexpected("'*' after a dimension", tok, here));
                    }
                }
                self.next()?;
                let element = self.datashape()?;
                Ok(if name == "var" {
                    Type::var_dim(element)
                } else {
                    Type::strided_dim(element)
                })
            }
            Token::Name(name) => self.named(name, at),
            Token::Punct("{") => self.record(),
            Token::Punct("(") => self.tuple(at),
            Token::Punct("...") => Err((
                at,
                ParseErrorKind::Unsupported("ellipsis dimensions ('...') are not supported".into()),
            )),
            tok => Err(self.unexpected("a type or a dimension", tok, at)),
        }
    }

    fn pos_after_trivia(&mut self) -> usize {
        self.skip_trivia();
        self.pos
    }

    /// After a NAME that is not a dimension: a type or a type constructor.
    fn named(&mut self, name: &'a str, at: usize) -> PResult<Type> {
        if name.starts_with(|c: char| c.is_ascii_uppercase()) {
            return Err((
                at,
                ParseErrorKind::Unsupported(format!(
                    "type variables like '{name}' are not supported; use a size, 'strided' or 'var'"
                )),
            ));
        }
        let has_args = self.peek()? == Token::Punct("[");
        let ty = match (name, has_args) {
            ("string", false) => Type::string(StringEncoding::Utf8),
            ("string", true) => self.string_args()?,
            ("bytes", false) => Type::bytes(),
            ("complex", true) => {
                self.next()?;
                let (tok, arg_at) = self.next()?;
                let part = match tok {
                    Token::Name("float32") => Primitive::Complex64,
                    Token::Name("float64" | "real") => Primitive::Complex128,
                    tok => return Err(self.unexpected("float32 or float64", tok, arg_at)),
                };
                self.expect("]", "']'")?;
                Type::primitive(part)
            }
            ("unaligned", true) => {
                self.next()?;
                let inner = self.datashape()?;
                self.expect("]", "']' after the type")?;
                Type::unaligned(inner).map_err(|e| (at, e.into()))?
            }
            ("option", true) => {
                self.next()?;
                let inner = self.datashape()?;
                self.expect("]", "']' after the type")?;
                Type::option(inner).map_err(|e| (at, e.into()))?
            }
            ("big_endian" | "little_endian", true) => {
                self.next()?;
                let inner_at = self.pos_after_trivia();
                let inner = self.datashape()?;
                self.expect("]", "']' after the type")?;
                let order = if name == "big_endian" {
                    Endianness::Big
                } else {
                    Endianness::Little
                };
                Type::byte_order(&inner, order).map_err(|e| (inner_at, e.into()))?
            }
            ("fixed", _) => {
                return Err((
                    at,
                    ParseErrorKind::Unsupported(
                        "dimension constructors like 'fixed[3]' are not supported; write '3 * T'"
                            .into(),
                    ),
                ));
            }
            (
                "json" | "date" | "time" | "datetime" | "timedelta" | "null" | "void" | "object"
                | "decimal" | "categorical" | "map" | "units" | "pointer" | "int128" | "uint128"
                | "float128" | "char" | "typevar" | "funcproto" | "struct" | "tuple",
                _,
            ) => {
                return Err((
                    at,
                    ParseErrorKind::Unsupported(format!(
                        "datashape type '{name}' is not supported"
                    )),
                ));
            }
            (_, _) => match Primitive::from_name(name) {
                Some(p) if !has_args => Type::primitive(p),
                Some(_) => {
                    return Err((
                        self.pos_after_trivia(),
                        ParseErrorKind::Unsupported(format!("'{name}' takes no arguments")),
                    ));
                }
                None => return Err((at, ParseErrorKind::UnknownType(name.to_owned()))),
            },
        };
        if let Token::Punct("*") = self.peek()? {
            let here = self.pos_after_trivia();
            return Err((
                here,
                ParseErrorKind::Unsupported(format!(
                    "'{ty}' is not a dimension; dimensions are sizes, 'strided' or 'var'"
                )),
            ));
        }
        Ok(ty)
    }

    /// `string[...]` after the name: `[N]`, `['enc']` or `[N, 'enc']`.
    fn string_args(&mut self) -> PResult<Type> {
        self.next()?; // '['
        let (tok, at) = self.next()?;
        let (size, size_at) = match tok {
            Token::Integer(digits) => (Some(parse_dim_size(digits).map_err(|k| (at, k))?), at),
            Token::Str(enc) => {
                let encoding = parse_encoding(&enc).map_err(|k| (at, k))?;
                self.expect("]", "']' after the encoding")?;
                return Ok(Type::string(encoding));
            }
            tok => return Err(self.unexpected("a size or an encoding", tok, at)),
        };
        let encoding = match self.next()? {
            (Token::Punct("]"), _) => StringEncoding::Utf8,
            (Token::Punct(","), _) => {
                let (tok, at) = self.next()?;
                let Token::Str(enc) = tok else {
                    return Err(self.unexpected("an encoding string", tok, at));
                };
                let encoding = parse_encoding(&enc).map_err(|k| (at, k))?;
                self.expect("]", "']' after the encoding")?;
                encoding
            }
            (tok, at) => return Err(self.unexpected("',' or ']'", tok, at)),
        };
        let size = size.unwrap_or_default();
        Type::fixed_string(size, encoding).map_err(|e| (size_at, e.into()))
    }

    fn record(&mut self) -> PResult<Type> {
        let mut fields = Vec::new();
        loop {
            let (tok, at) = self.next()?;
            let name = match tok {
                Token::Punct("}") if !fields.is_empty() => break,
                Token::Name(n) => n.to_owned(),
                Token::Str(s) => s,
                tok => return Err(self.unexpected("a field name", tok, at)),
            };
            self.expect(":", "':' after the field name")?;
            let ty = self.datashape()?;
            if fields.iter().any(|f: &Field| f.name == name) {
                return Err((at, TypeError::DuplicateField(name).into()));
            }
            fields.push(Field::new(name, ty));
            match self.next()? {
                (Token::Punct(","), _) => {}
                (Token::Punct("}"), _) => break,
                (tok, at) => return Err(self.unexpected("',' or '}'", tok, at)),
            }
        }
        let start = self.pos;
        Type::record(fields).map_err(|e| (start, e.into()))
    }

    fn tuple(&mut self, open_at: usize) -> PResult<Type> {
        let mut items = Vec::new();
        loop {
            if self.peek()? == Token::Punct(")") && !items.is_empty() {
                self.next()?;
                break;
            }
            items.push(self.datashape()?);
            match self.next()? {
                (Token::Punct(","), _) => {}
                (Token::Punct(")"), _) => break,
                (tok, at) => return Err(self.unexpected("',' or ')'", tok, at)),
            }
        }
        if self.peek()? == Token::Punct("->") {
            return Err((
                open_at,
                ParseErrorKind::Unsupported(
                    "function prototypes ('(...) -> T') are not data types".into(),
                ),
            ));
        }
        Type::tuple(items).map_err(|e| (open_at, e.into()))
    }
}

fn parse_dim_size(digits: &str) -> Result<usize, ParseErrorKind> {
    if digits.starts_with('-') {
        return Err(ParseErrorKind::NegativeDimension(digits.to_owned()));
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return Err(ParseErrorKind::Lexical(format!(
            "integer {digits} has a leading zero"
        )));
    }
    digits
        .parse::<usize>()
        .ok()
        .filter(|n| *n <= isize::MAX as usize)
        .ok_or_else(|| ParseErrorKind::IntegerTooLarge(digits.to_owned()))
}

fn parse_encoding(name: &str) -> Result<StringEncoding, ParseErrorKind> {
    StringEncoding::from_name(name).ok_or_else(|| ParseErrorKind::UnknownEncoding(name.to_owned()))
}

/// Lexes a quoted string at the start of `s`; returns (text, byte length).
/// Errors carry a byte offset relative to `s`.
fn lex_string(s: &str) -> Result<(String, usize), (usize, String)> {
    let quote = s.as_bytes()[0] as char;
    let mut out = String::new();
    let mut chars = s.char_indices().skip(1).peekable();
    let mut pending_high: Option<(usize, u16)> = None;
    while let Some((i, c)) = chars.next() {
        if let Some((at, _)) = pending_high
            && c != '\\'
        {
            return Err((at, "unpaired UTF-16 surrogate in \\u escape".into()));
        }
        match c {
            c if c == quote => return Ok((out, i + 1)),
            '\n' | '\r' => return Err((i, "newline in string literal".into())),
            '\\' => {
                let Some((_, e)) = chars.next() else { break };
                if let Some((at, _)) = pending_high
                    && e != 'u'
                {
                    return Err((at, "unpaired UTF-16 surrogate in \\u escape".into()));
                }
                match e {
                    '\'' | '"' | '\\' | '/' => out.push(e),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'u' => {
                        let mut unit = 0u32;
                        for _ in 0..4 {
                            let digit = chars
                                .next()
                                .and_then(|(_, d)| d.to_digit(16))
                                .ok_or((i, "\\u needs four hex digits".to_owned()))?;
                            unit = unit * 16 + digit;
                        }
                        match (pending_high.take(), unit) {
                            (None, 0xD800..=0xDBFF) => pending_high = Some((i, unit as u16)),
                            (Some((_, hi)), 0xDC00..=0xDFFF) => {
                                let cp =
                                    0x10000 + ((u32::from(hi) - 0xD800) << 10) + (unit - 0xDC00);
                                out.push(
                                    char::from_u32(cp)
                                        .ok_or((i, "invalid surrogate pair".to_owned()))?,
                                );
                            }
                            (Some((at, _)), _) => {
                                return Err((at, "unpaired UTF-16 surrogate in \\u escape".into()));
                            }
                            (None, 0xDC00..=0xDFFF) => {
                                return Err((i, "unpaired UTF-16 surrogate in \\u escape".into()));
                            }
                            (None, u) => out.push(
                                char::from_u32(u).ok_or((i, "invalid \\u escape".to_owned()))?,
                            ),
                        }
                    }
                    other => return Err((i, format!("unknown escape '\\{other}'"))),
                }
            }
            c => out.push(c),
        }
    }
    Err((0, "unterminated string literal".into()))
}

//! How `fastio params inspect` shows a file's index: an aligned table, or
//! JSON.

use params_io::ParamIndex;
use serde_json::{Value, json};

/// The index as JSON values: an array of objects with exactly the keys
/// `name`, `dtype`, `shape`, `nbytes`, `offset` (what `fastio params
/// inspect --json` prints).
pub(crate) fn json_value(index: &ParamIndex) -> Value {
    Value::Array(
        index
            .entries
            .iter()
            .map(|e| {
                json!({
                    "name": e.name(),
                    "dtype": e.dtype_name(),
                    "shape": e.shape,
                    "nbytes": e.nbytes,
                    "offset": e.offset,
                })
            })
            .collect(),
    )
}

/// [`json_value`] as text.
pub(crate) fn json(index: &ParamIndex) -> String {
    json_value(index).to_string()
}

/// One aligned text row per tensor, under a header row: name, dtype,
/// shape, bytes, offset (what `fastio params inspect` prints).
pub(crate) fn table(index: &ParamIndex) -> String {
    let rows: Vec<[String; 5]> = index
        .entries
        .iter()
        .map(|e| {
            let shape = e
                .shape
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            [
                format!("{:?}", e.name()),
                e.dtype_name().to_owned(),
                format!("({shape})"),
                e.nbytes.to_string(),
                e.offset.to_string(),
            ]
        })
        .collect();
    let head = ["name", "dtype", "shape", "bytes", "offset"].map(str::to_owned);
    let mut widths = head.clone().map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&head).chain(&rows) {
        let mut line = String::new();
        for (i, (c, w)) in r.iter().zip(widths).enumerate() {
            let pad = w - c.chars().count();
            if i >= 3 {
                line.push_str(&" ".repeat(pad));
                line.push_str(c);
            } else {
                line.push_str(c);
                line.push_str(&" ".repeat(pad));
            }
            line.push_str("  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use dtype::Primitive;
    use params_io::{ParamDict, ReadOptions, Tensor};

    #[test]
    fn json_and_table_show_name_type_shape_size_and_offset() {
        let mut d = ParamDict::new();
        d.insert(
            "x",
            Tensor::new(Primitive::Int32, &[2, 3], vec![0; 24]).unwrap(),
        );
        let idx = ReadOptions::new()
            .index_bytes(&d.to_bytes().unwrap())
            .unwrap();
        assert_eq!(
            super::json(&idx),
            r#"[{"dtype":"int32","name":"x","nbytes":24,"offset":97,"shape":[2,3]}]"#
        );
        let table = super::table(&idx);
        let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
        assert_eq!(row, ["\"x\"", "int32", "(2,", "3)", "24", "97"], "{table}");
    }
}

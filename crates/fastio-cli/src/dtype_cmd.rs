//! `fastio dtype ...`

use std::fmt::Write;

use clap::Subcommand;
use dtype::{Type, dlpack, numpy};
use serde_json::{Value, json};

use crate::Failure;

#[derive(Subcommand)]
pub(crate) enum DtypeCommand {
    /// Print the canonical datashape on the first line, then size,
    /// alignment, field offsets and the metadata layout.
    Show {
        /// Datashape text, e.g. '3 * {x: int32, y: float64}'.
        datashape: String,
        /// Print one JSON object instead (with a "canonical" key).
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn run(cmd: DtypeCommand) -> Result<(), Failure> {
    match cmd {
        DtypeCommand::Show { datashape, json } => {
            let ty = dtype::parse(&datashape).map_err(|e| Failure {
                message: e.to_string(),
                code: 2,
            })?;
            if json {
                println!("{}", show_json(&ty));
            } else {
                print!("{}", show_text(&ty));
            }
            Ok(())
        }
    }
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn show_text(ty: &Type) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{ty}");
    match ty.data_size() {
        Some(size) => {
            let _ = writeln!(out, "size: {size}");
        }
        None => {
            let _ = writeln!(out, "size: variable (depends on the array's metadata)");
        }
    }
    let _ = writeln!(out, "alignment: {}", ty.alignment());
    let _ = writeln!(out, "fixed-size: {}", yes_no(ty.is_fixed_size()));
    let _ = writeln!(out, "pod: {}", yes_no(ty.is_pod()));
    let _ = writeln!(out, "ndim: {}", ty.ndim());
    let fields = ty.field_layout();
    if !fields.is_empty() {
        let _ = writeln!(out, "fields:");
        for f in &fields {
            let size = f.ty.data_size().unwrap_or_default();
            let _ = writeln!(
                out,
                "  {}: offset {}, size {}, {}",
                f.path, f.offset, size, f.ty
            );
        }
    }
    let md = ty.metadata_layout();
    if md.is_empty() {
        let _ = writeln!(out, "metadata: none");
    } else {
        let _ = writeln!(out, "metadata: {} bytes", ty.metadata_size());
        for e in &md {
            let _ = writeln!(
                out,
                "  {:>4}  {} {}: {}",
                e.offset,
                e.path,
                e.kind.name(),
                e.kind.fields().join(", ")
            );
        }
    }
    if let Ok(np) = numpy::to_numpy(ty) {
        let _ = writeln!(out, "numpy: {np}");
    }
    if let Ok(dl) = dlpack::to_dlpack(ty) {
        let _ = writeln!(
            out,
            "dlpack: code {}, bits {}, lanes {}",
            dl.code, dl.bits, dl.lanes
        );
    }
    out
}

fn show_json(ty: &Type) -> Value {
    let fields: Vec<Value> = ty
        .field_layout()
        .iter()
        .map(|f| json!({"path": f.path, "offset": f.offset, "size": f.ty.data_size(), "type": f.ty.to_string()}))
        .collect();
    let metadata: Vec<Value> = ty
        .metadata_layout()
        .iter()
        .map(|e| json!({"path": e.path, "offset": e.offset, "kind": e.kind.name(), "fields": e.kind.fields()}))
        .collect();
    json!({
        "canonical": ty.to_string(),
        "size": ty.data_size(),
        "alignment": ty.alignment(),
        "fixed_size": ty.is_fixed_size(),
        "pod": ty.is_pod(),
        "ndim": ty.ndim(),
        "fields": fields,
        "metadata_size": ty.metadata_size(),
        "metadata": metadata,
        "numpy": numpy::to_numpy(ty).ok(),
        "dlpack": dlpack::to_dlpack(ty).ok().map(|d| json!({"code": d.code, "bits": d.bits, "lanes": d.lanes})),
    })
}

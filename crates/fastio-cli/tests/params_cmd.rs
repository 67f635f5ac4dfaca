//! `fastio params inspect | export | pack | verify` as a user runs them,
//! on real files in a temporary directory.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dtype::Primitive;
use params_io::{ParamDict, ReadOptions, Tensor};

fn fastio(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fastio"))
        .args(args)
        .output()
        .expect("run fastio")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let d =
            std::env::temp_dir().join(format!("fastio-cli-params-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }

    fn arg(&self, p: &str) -> String {
        self.join(p).to_str().unwrap().to_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn le<T: Copy, const N: usize>(values: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| f(v)).collect()
}

/// Four tensors: a matrix, a bool vector, a scalar and a name that needs
/// escaping in a file name.
fn sample() -> ParamDict {
    let mut d = ParamDict::new();
    let w = le(&[0.5f32, 1.0, -2.0, 3.25, 4.0, 5.5], f32::to_le_bytes);
    d.insert("w", Tensor::new(Primitive::Float32, &[2, 3], w).unwrap());
    d.insert(
        "Mask/ü",
        Tensor::new(Primitive::Bool, &[2], vec![1, 0]).unwrap(),
    );
    d.insert("s", Tensor::new(Primitive::Int8, &[], vec![0xfd]).unwrap());
    let h = le(&[-1i16, 2, 300], i16::to_le_bytes);
    d.insert(
        "conv.bias",
        Tensor::new(Primitive::Int16, &[3, 1], h).unwrap(),
    );
    d
}

/// Data offsets of the tensors of `d`, computed from the byte layout
/// (docs/params-format.md), not from the library.
fn data_offsets(d: &ParamDict) -> Vec<u64> {
    let mut at = 24
        + d.iter()
            .map(|p| 8 + p.name_bytes().len() as u64)
            .sum::<u64>()
        + 8;
    let mut out = Vec::new();
    for p in d.iter() {
        at += 40 + 8 * p.tensor().shape().len() as u64;
        out.push(at);
        at += p.tensor().nbytes() as u64;
    }
    out
}

#[test]
fn inspect_prints_one_row_per_tensor_and_exact_json() {
    let dir = TempDir::new("inspect");
    let file = dir.arg("m.params");
    let d = sample();
    d.write_path(&file).unwrap();
    let offsets = data_offsets(&d);

    let out = fastio(&["params", "inspect", &file]);
    assert!(out.status.success(), "{out:?}");
    let table = text(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 1 + d.len(), "{table}");
    let head: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(head, ["name", "dtype", "shape", "bytes", "offset"]);
    let expected = [
        ("\"w\"", "float32", "(2, 3)", "24"),
        ("\"Mask/ü\"", "bool", "(2)", "2"),
        ("\"s\"", "int8", "()", "1"),
        ("\"conv.bias\"", "int16", "(3, 1)", "6"),
    ];
    for ((line, (name, dtype, shape, bytes)), offset) in
        lines[1..].iter().zip(expected).zip(&offsets)
    {
        assert!(line.starts_with(name), "{line}");
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            cells,
            [name, dtype, shape, bytes, &offset.to_string()],
            "{line}"
        );
    }

    let out = fastio(&["params", "inspect", &file, "--json"]);
    assert!(out.status.success(), "{out:?}");
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), d.len());
    for ((row, p), offset) in rows.iter().zip(d.iter()).zip(&offsets) {
        let obj = row.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["dtype", "name", "nbytes", "offset", "shape"]);
        assert_eq!(obj["name"], p.name().as_ref());
        assert_eq!(obj["dtype"], p.tensor().primitive().name());
        assert_eq!(obj["shape"], serde_json::json!(p.tensor().shape()));
        assert_eq!(obj["nbytes"], p.tensor().nbytes());
        assert_eq!(obj["offset"], *offset);
    }
    assert_eq!(rows[1]["dtype"], "bool");
    assert_eq!(rows[0]["dtype"], "float32");
}

/// Parses a version 1.0 `.npy` file the way numpy does: returns the header
/// dictionary text and the data.
fn parse_npy(bytes: &[u8]) -> (String, &[u8]) {
    assert_eq!(&bytes[..6], b"\x93NUMPY", "magic");
    assert_eq!(&bytes[6..8], [1, 0], "version 1.0");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let end = 10 + len;
    assert_eq!(end % 64, 0, "header padded to 64 bytes");
    assert_eq!(bytes[end - 1], b'\n');
    let dict = std::str::from_utf8(&bytes[10..end]).unwrap();
    (dict.trim_end().to_owned(), &bytes[end..])
}

#[test]
fn export_writes_npy_files_numpy_reads_and_an_index() {
    let dir = TempDir::new("export");
    let file = dir.arg("m.params");
    let d = sample();
    d.write_path(&file).unwrap();
    let out_dir = dir.join("npy");

    let out = fastio(&["params", "export", &file, out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    // No progress bar: stderr is not a terminal (and the file is small).
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("exported 4 tensor(s)"));

    let index: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out_dir.join("index.json")).unwrap()).unwrap();
    let index = index.as_array().unwrap();
    assert_eq!(index.len(), d.len());
    let headers = [
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '|i1', 'fortran_order': False, 'shape': (), }",
        "{'descr': '<i2', 'fortran_order': False, 'shape': (3, 1), }",
    ];
    let mut files = Vec::new();
    for ((entry, p), header) in index.iter().zip(d.iter()).zip(headers) {
        let obj = entry.as_object().unwrap();
        let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["file", "name"]);
        assert_eq!(obj["name"], p.name().as_ref());
        let name = obj["file"].as_str().unwrap();
        assert!(name.ends_with(".npy"), "{name}");
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_-.%".contains(&b)),
            "not file-safe: {name}"
        );
        // The name is recoverable from the file name alone.
        let stem = name.strip_suffix(".npy").unwrap();
        assert_eq!(
            params_io::names::decode_file_stem(stem).as_deref(),
            Some(p.name_bytes()),
            "{name}"
        );
        let bytes = fs::read(out_dir.join(name)).unwrap();
        let (dict, data) = parse_npy(&bytes);
        assert_eq!(dict, header, "{name}");
        assert_eq!(data, p.tensor().data(), "{name}");
        files.push(name.to_owned());
    }
    assert_eq!(files[0], "w.npy");
    assert_eq!(files[3], "conv.bias.npy");
    // Distinct files, and nothing else in the directory.
    let mut listed: Vec<String> = fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    listed.sort();
    files.push("index.json".to_owned());
    files.sort();
    assert_eq!(listed, files);
}

/// A version 1.0 `.npy` file as numpy writes it.
fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
    let order = if fortran { "True" } else { "False" };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((dict.len() as u16).to_le_bytes());
    out.extend(dict.as_bytes());
    out.extend(data);
    out
}

#[test]
fn pack_writes_a_file_params_io_reads_back() {
    let dir = TempDir::new("pack");
    let f32s = le(&[1.5f32, -2.0, 0.25, 8.0, 9.0, 10.0], f32::to_le_bytes);
    fs::write(dir.join("a.npy"), npy("<f4", false, "(2, 3)", &f32s)).unwrap();
    // Big-endian int32: packed little-endian.
    let be = le(&[1i32, -2, 70000], i32::to_be_bytes);
    fs::write(dir.join("b.npy"), npy(">i4", false, "(3,)", &be)).unwrap();
    fs::write(dir.join("c.npy"), npy("|b1", false, "()", &[1])).unwrap();
    // Fortran order [[1, 2, 3], [4, 5, 6]] is stored column by column.
    let fortran = le(&[1i16, 4, 2, 5, 3, 6], i16::to_le_bytes);
    fs::write(dir.join("d.npy"), npy("<i2", true, "(2, 3)", &fortran)).unwrap();

    let out_file = dir.arg("out.params");
    let out = fastio(&[
        "params",
        "pack",
        &out_file,
        &format!("dense/w={}", dir.arg("a.npy")),
        &format!("k=v={}", dir.arg("b.npy")),
        &format!("flag={}", dir.arg("c.npy")),
        &format!("f={}", dir.arg("d.npy")),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    let size = fs::metadata(&out_file).unwrap().len();
    assert!(
        text(&out.stdout).contains(&format!(
            "packed 4 tensor(s) into {out_file} ({size} bytes)"
        )),
        "{}",
        text(&out.stdout)
    );

    let back = ReadOptions::new().read_path(&out_file).unwrap();
    let names: Vec<String> = back.iter().map(|p| p.name().into_owned()).collect();
    assert_eq!(names, ["dense/w", "k=v", "flag", "f"]);
    let t = |n: &str| back.get(n).unwrap();
    assert_eq!(t("dense/w").primitive(), Primitive::Float32);
    assert_eq!(t("dense/w").shape(), [2, 3]);
    assert_eq!(t("dense/w").data(), f32s.as_slice());
    assert_eq!(t("k=v").primitive(), Primitive::Int32);
    assert_eq!(
        t("k=v").data(),
        le(&[1i32, -2, 70000], i32::to_le_bytes).as_slice()
    );
    assert_eq!(t("flag").primitive(), Primitive::Bool);
    assert_eq!(t("flag").shape(), [] as [usize; 0]);
    assert_eq!(t("flag").data(), [1]);
    assert_eq!(t("f").shape(), [2, 3]);
    assert_eq!(
        t("f").data(),
        le(&[1i16, 2, 3, 4, 5, 6], i16::to_le_bytes).as_slice()
    );

    // Export then pack gives the same bytes back.
    let npy_dir = dir.arg("again");
    assert!(
        fastio(&["params", "export", &out_file, &npy_dir])
            .status
            .success()
    );
    let index: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(dir.join("again/index.json")).unwrap()).unwrap();
    let args: Vec<String> = index
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let file = Path::new(&npy_dir).join(e["file"].as_str().unwrap());
            format!("{}={}", e["name"].as_str().unwrap(), file.display())
        })
        .collect();
    let repacked = dir.arg("repacked.params");
    let mut argv = vec!["params", "pack", &repacked];
    argv.extend(args.iter().map(String::as_str));
    let out = fastio(&argv);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(fs::read(&repacked).unwrap(), fs::read(&out_file).unwrap());
}

/// The one line a failed command printed, checked to be exactly one.
fn one_error_line(out: &Output) -> String {
    assert!(out.stdout.is_empty(), "{out:?}");
    let err = text(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("fastio: "), "{err}");
    err
}

#[test]
fn pack_errors_are_one_line_and_write_nothing() {
    let dir = TempDir::new("packerr");
    fs::write(dir.join("a.npy"), npy("<f4", false, "(1,)", &[0; 4])).unwrap();
    let out_file = dir.arg("out.params");
    let a = format!("x={}", dir.arg("a.npy"));

    let out = fastio(&["params", "pack", &out_file, "no-equals-sign"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_error_line(&out).contains("expected NAME=FILE.npy"));

    let missing = dir.arg("missing.npy");
    let out = fastio(&["params", "pack", &out_file, &a, &format!("y={missing}")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains(&missing));

    let out = fastio(&["params", "pack", &out_file, &a, &a]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_error_line(&out).contains("name given twice"));

    // A truncated .npy: the data is shorter than its shape.
    fs::write(dir.join("short.npy"), npy("<f4", false, "(4,)", &[0; 6])).unwrap();
    let out = fastio(&[
        "params",
        "pack",
        &out_file,
        &format!("z={}", dir.arg("short.npy")),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(one_error_line(&out).contains("short.npy"));

    assert!(!dir.join("out.params").exists());
    let leftovers: Vec<_> = fs::read_dir(&dir.0).unwrap().collect();
    assert_eq!(leftovers.len(), 2, "{leftovers:?}");
}

#[test]
fn verify_accepts_a_good_file_and_names_the_byte_of_a_bad_one() {
    let dir = TempDir::new("verify");
    let file = dir.arg("m.params");
    let d = sample();
    d.write_path(&file).unwrap();
    let good = fs::read(&file).unwrap();
    let offsets = data_offsets(&d);

    let out = fastio(&["params", "verify", &file]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stderr.is_empty());
    assert!(text(&out.stdout).contains("ok (4 tensor(s)"), "{out:?}");

    let bad = dir.arg("bad.params");
    let check = |bytes: &[u8], offset: u64, what: &str| {
        fs::write(&bad, bytes).unwrap();
        let out = fastio(&["params", "verify", &bad]);
        assert_eq!(out.status.code(), Some(2), "{what}: {out:?}");
        let line = one_error_line(&out);
        assert!(line.contains(&bad), "{what}: {line}");
        assert!(
            line.contains(&format!("at byte {offset} ")),
            "{what}: expected byte {offset}: {line}"
        );
    };
    // Cut inside the data of the last tensor.
    check(
        &good[..offsets[3] as usize + 1],
        offsets[3],
        "truncated data",
    );
    // Cut so short that the tensor records cannot fit: the count's byte.
    let count_at = 24 + d.iter().map(|p| 8 + p.name_bytes().len()).sum::<usize>();
    check(&good[..offsets[1] as usize], count_at as u64, "cut records");
    // Corrupt the tensor magic of tensor 2 (its record starts 40 bytes
    // before its data: a scalar has no shape).
    let mut flipped = good.clone();
    let record = offsets[2] as usize - 40;
    flipped[record + 3] ^= 0x10;
    check(&flipped, record as u64, "tensor magic");
    // A bool byte that is neither 0 nor 1.
    let mut bad_bool = good.clone();
    bad_bool[offsets[1] as usize + 1] = 7;
    check(&bad_bool, offsets[1] + 1, "bool byte");
    // Trailing garbage.
    let mut trailing = good.clone();
    trailing.push(0);
    check(&trailing, good.len() as u64, "trailing byte");
    // The list magic.
    let mut magic = good.clone();
    magic[0] = 0;
    check(&magic, 0, "list magic");

    let out = fastio(&["params", "verify", &dir.arg("missing.params")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(one_error_line(&out).contains("missing.params"));
}

#[test]
fn verify_cvm_profile_rejects_float32_and_accepts_int8_int32() {
    let dir = TempDir::new("cvm");
    let file = dir.arg("m.params");
    let d = sample();
    d.write_path(&file).unwrap();
    let out = fastio(&["params", "verify", &file, "--profile", "cvm"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let line = one_error_line(&out);
    // The dtype field of the first (float32) record: 28 bytes into it.
    let dtype_at = data_offsets(&d)[0] - 40 - 16 + 28;
    assert!(line.contains(&format!("at byte {dtype_at} ")), "{line}");
    assert!(line.contains("CVM"), "{line}");
    // The same file passes the default (TVM) profile.
    assert!(fastio(&["params", "verify", &file]).status.success());

    let mut ints = ParamDict::new();
    ints.insert(
        "a",
        Tensor::new(Primitive::Int8, &[3], vec![1, 2, 3]).unwrap(),
    );
    ints.insert(
        "b",
        Tensor::new(Primitive::Int32, &[1], 7i32.to_le_bytes().to_vec()).unwrap(),
    );
    let ok = dir.arg("ints.params");
    ints.write_path(&ok).unwrap();
    let out = fastio(&["params", "verify", &ok, "--profile", "cvm"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(text(&out.stdout).contains("loadable by CVM"));

    let out = fastio(&["params", "verify", &ok, "--profile", "tflite"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown profile"));
}

#[test]
fn inspect_and_export_report_a_bad_file_in_one_line() {
    let dir = TempDir::new("bad");
    let file = dir.arg("m.params");
    sample().write_path(&file).unwrap();
    let bytes = fs::read(&file).unwrap();
    fs::write(&file, &bytes[..20]).unwrap();
    for args in [
        vec!["params", "inspect", &file],
        vec!["params", "inspect", &file, "--json"],
    ] {
        let out = fastio(&args);
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        assert!(one_error_line(&out).contains("at byte 16 "), "{out:?}");
    }
    let out_dir = dir.arg("out");
    let out = fastio(&["params", "export", &file, &out_dir]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(one_error_line(&out).contains("at byte 16 "));
    assert!(!Path::new(&out_dir).join("index.json").exists());
}

/// Quotes a path for `sh -c`.
fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Runs `fastio ARGS` with a pseudo-terminal as stdin, stdout and stderr
/// (util-linux `script`), returning everything the terminal received.
fn in_terminal(args: &[&str]) -> String {
    let cmd = std::iter::once(env!("CARGO_BIN_EXE_fastio"))
        .chain(args.iter().copied())
        .map(sh_quote)
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run script (util-linux)");
    assert!(out.status.success(), "{out:?}");
    text(&out.stdout)
}

#[test]
fn large_exports_and_packs_show_a_progress_bar_on_a_terminal_only() {
    let dir = TempDir::new("progress");
    let file = dir.arg("big.params");
    let mut d = ParamDict::new();
    for i in 0..5u8 {
        let data = vec![i; 8 << 20];
        d.insert(
            format!("t{i}"),
            Tensor::new(Primitive::UInt8, &[8 << 20], data).unwrap(),
        );
    }
    d.write_path(&file).unwrap();
    let npy_dir = dir.arg("npy");

    let screen = in_terminal(&["params", "export", &file, &npy_dir]);
    assert!(screen.contains("export ["), "{screen:?}");
    assert!(screen.contains("MiB"), "{screen:?}");
    assert!(screen.contains("exported 5 tensor(s)"), "{screen:?}");

    let packed = dir.arg("packed.params");
    let inputs: Vec<String> = (0..5).map(|i| format!("t{i}={npy_dir}/t{i}.npy")).collect();
    let mut args = vec!["params", "pack", &packed];
    args.extend(inputs.iter().map(String::as_str));
    let screen = in_terminal(&args);
    assert!(screen.contains("pack ["), "{screen:?}");
    assert!(screen.contains("packed 5 tensor(s)"), "{screen:?}");
    assert_eq!(fs::read(&packed).unwrap(), fs::read(&file).unwrap());

    // Not a terminal: no bar, nothing on stderr.
    let out = fastio(&args);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
    // A small file on a terminal: no bar either.
    let small = dir.arg("small.params");
    sample().write_path(&small).unwrap();
    let screen = in_terminal(&["params", "export", &small, &dir.arg("small")]);
    assert!(!screen.contains("export ["), "{screen:?}");
    assert!(screen.contains("exported 4 tensor(s)"), "{screen:?}");
}

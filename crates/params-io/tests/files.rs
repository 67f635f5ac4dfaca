//! Files: atomic path writes, reading from paths, mmap views, the index,
//! and the export / pack / verify tools.

mod common;

use std::fs;

use common::{i32s, mixed, temp_dir};
use dtype::Primitive;
use params_io::{ParamDict, Profile, ReadOptions, Tensor, WriteOptions, files, npy};

#[test]
fn write_path_is_atomic_and_reads_back_every_way() {
    let dir = temp_dir("files");
    let path = dir.join("m.params");
    let d = mixed();
    let mut seen = Vec::new();
    let n = d
        .write_path_with(&path, &WriteOptions::default(), &mut |b| seen.push(b))
        .unwrap();
    assert_eq!(n, fs::metadata(&path).unwrap().len());
    assert_eq!(seen.last(), Some(&n), "progress ends at the file size");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]));
    // No temporary file is left behind.
    let names: Vec<_> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["m.params"]);

    assert_eq!(ReadOptions::new().read_path(&path).unwrap(), d);
    let mapped = ReadOptions::new().map_path(&path).unwrap();
    assert_eq!(mapped, d);
    assert!(mapped.iter().all(|p| p.tensor().is_view()));
    let x = mapped.get("x").unwrap().clone();
    drop(mapped);
    assert_eq!(
        x.data(),
        &i32s(&[0, 1, 2, 3, 4, 5])[..],
        "views outlive the dict"
    );
    let idx = ReadOptions::new().index_path(&path).unwrap();
    assert_eq!(idx.file_len, n);
    assert_eq!(idx.len(), d.len());

    // A failing write leaves the old file in place.
    let mut bad = ParamDict::new();
    bad.insert("z", Tensor::new(Primitive::Float32, &[0], vec![]).unwrap());
    let opts = WriteOptions::default().profile(Profile::Cvm);
    assert!(bad.write_path_with(&path, &opts, &mut |_| {}).is_err());
    assert_eq!(ReadOptions::new().read_path(&path).unwrap(), d);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mmap_views_report_alignment_and_copies_fix_it() {
    let dir = temp_dir("align");
    let path = dir.join("a.params");
    let mut d = ParamDict::new();
    d.insert(
        "x",
        Tensor::new(Primitive::Int32, &[2], i32s(&[1, 2])).unwrap(),
    );
    d.write_path(&path).unwrap();
    let m = ReadOptions::new().map_path(&path).unwrap();
    let t = m.get("x").unwrap();
    // Data at file offset 89 (24 + 9 + 8 + 48): not 4-aligned in a page-aligned map.
    assert_eq!(
        ReadOptions::new().index_path(&path).unwrap().entries[0].offset,
        89
    );
    assert!(!t.is_aligned());
    let a = t.to_array().unwrap();
    assert_eq!(a.element_type().to_string(), "unaligned[int32]");
    assert_eq!(
        a.to_contiguous().unwrap().element_type().to_string(),
        "int32"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn errors_on_paths_carry_path_and_offset() {
    let dir = temp_dir("errs");
    let path = dir.join("bad.params");
    let mut b = mixed().to_bytes().unwrap();
    b.truncate(b.len() - 1);
    fs::write(&path, &b).unwrap();
    for e in [
        ReadOptions::new().read_path(&path).unwrap_err(),
        ReadOptions::new().map_path(&path).unwrap_err(),
        ReadOptions::new().index_path(&path).unwrap_err(),
        files::verify(&path, Profile::Tvm).unwrap_err(),
    ] {
        let line = e.to_string();
        assert!(
            line.contains("bad.params") && line.contains("at byte"),
            "{line}"
        );
        assert!(!line.contains('\n'));
        assert!(e.offset().is_some());
    }
    fs::write(&path, b"").unwrap();
    assert!(ReadOptions::new().map_path(&path).is_err());
    assert!(ReadOptions::new().read_path(dir.join("missing")).is_err());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn export_then_pack_gives_the_same_file() {
    let dir = temp_dir("export");
    let src = dir.join("m.params");
    let d = mixed();
    d.write_path(&src).unwrap();
    let out = dir.join("npy");
    let mut last = 0;
    let files = files::export_npy(&src, &out, &ReadOptions::default(), &mut |b| last = b).unwrap();
    assert_eq!(last, d.data_bytes());
    assert_eq!(files.len(), d.len());
    let index: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(out.join("index.json")).unwrap()).unwrap();
    let arr = index.as_array().unwrap();
    assert_eq!(arr.len(), d.len());
    for (entry, p) in arr.iter().zip(d.iter()) {
        let obj = entry.as_object().unwrap();
        assert_eq!(obj.len(), 2);
        assert_eq!(obj["name"], p.name().as_ref());
        let file = obj["file"].as_str().unwrap();
        assert_eq!(&npy::read_npy(out.join(file)).unwrap(), p.tensor());
    }
    let inputs: Vec<(String, std::path::PathBuf)> = files
        .iter()
        .map(|f| (f.name.clone(), out.join(&f.file)))
        .collect();
    let packed = dir.join("packed.params");
    let planned = files::pack_len(&inputs, &WriteOptions::default()).unwrap();
    let mut last = 0;
    let written = files::pack_npy(&packed, &inputs, &WriteOptions::default(), &mut |b| {
        last = b
    })
    .unwrap();
    assert_eq!(fs::read(&packed).unwrap(), fs::read(&src).unwrap());
    assert_eq!(planned, written);
    assert_eq!(last, written);
    assert_eq!(written, fs::metadata(&src).unwrap().len());
    let report = files::verify(&packed, Profile::Tvm).unwrap();
    assert_eq!(report.tensors, d.len());
    let cvm = files::verify(&packed, Profile::Cvm).unwrap_err();
    assert!(cvm.to_string().contains("not loadable by CVM"), "{cvm}");
    // Duplicate names in pack are refused.
    let twice = vec![inputs[0].clone(), inputs[0].clone()];
    assert!(files::pack_len(&twice, &WriteOptions::default()).is_err());
    assert!(
        files::pack_npy(
            dir.join("t.params"),
            &twice,
            &WriteOptions::default(),
            &mut |_| {}
        )
        .is_err()
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn verify_rejects_bad_bool_bytes() {
    let dir = temp_dir("bool");
    let path = dir.join("b.params");
    let mut d = ParamDict::new();
    d.insert("m", Tensor::new(Primitive::Bool, &[2], vec![1, 2]).unwrap());
    d.write_path(&path).unwrap();
    let e = files::verify(&path, Profile::Tvm).unwrap_err();
    assert_eq!(e.offset(), Some(89 + 1), "{e}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn long_names_export_to_numbered_files() {
    assert_eq!(
        files::export_file_name(3, &[b'a'; 300]).len(),
        "~3-".len() + 120 + 4
    );
}

//! Helpers shared by the integration tests.
#![allow(dead_code)]

use dtype::Primitive;
use params_io::{ParamDict, Tensor};

/// The 121 bytes `tvm.runtime.save_param_dict({'x': int32 [[0,1,2],[3,4,5]]})`
/// writes (TVM 0.27, from the research notes' worked example).
pub fn tvm_example() -> Vec<u8> {
    let hex = concat!(
        "b79c04054f8de5f7",
        "0000000000000000",
        "0100000000000000",
        "0100000000000000",
        "78",
        "0100000000000000",
        "3fa1b496f0405edd",
        "0000000000000000",
        "01000000",
        "00000000",
        "02000000",
        "00",
        "20",
        "0100",
        "0200000000000000",
        "0300000000000000",
        "1800000000000000",
        "000000000100000002000000030000000400000005000000",
    );
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

pub fn i32s(v: &[i32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// A small dict with several types, a scalar, an empty tensor and odd names.
pub fn mixed() -> ParamDict {
    let mut d = ParamDict::new();
    d.insert(
        "x",
        Tensor::new(Primitive::Int32, &[2, 3], i32s(&[0, 1, 2, 3, 4, 5])).unwrap(),
    );
    d.insert(
        "",
        Tensor::new(Primitive::Float64, &[], 1.5f64.to_le_bytes().to_vec()).unwrap(),
    );
    d.insert(
        "flags/ü",
        Tensor::new(Primitive::Bool, &[3], vec![1, 0, 1]).unwrap(),
    );
    d.insert(
        "empty",
        Tensor::new(Primitive::Float32, &[2, 0, 3], vec![]).unwrap(),
    );
    d.insert(
        "c",
        Tensor::new(Primitive::Complex64, &[1], vec![7; 8]).unwrap(),
    );
    d
}

pub fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("params-io-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

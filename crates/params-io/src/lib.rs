//! # params-io: the TVM/CVM parameter-dictionary file
//!
//! Real models ship their weights as "params" files: the format that
//! Apache TVM (`tvm.runtime.save_param_dict`, every version since 0.7) and
//! the CVM runtime write and read. This layer exchanges those files with
//! them byte for byte, and reads them more safely and faster:
//!
//! * **strict**: every malformed file is a typed [`FormatError`] naming the
//!   field and its byte offset; no allocation is sized from a field before
//!   it is checked against the bytes that remain; reading never panics;
//! * **streaming**: reading from a `Read` or writing to a `Write` or a path
//!   (atomically) never holds more than the tensors themselves;
//! * **zero-copy**: [`ReadOptions::map_path`] parses only the headers and
//!   gives each tensor as a view into the mapped file (every way of reading
//!   starts from the one builder, [`ReadOptions`]);
//! * **whole files**: an [`index`](ParamIndex) without data, a CVM
//!   [`Profile`], `.npy` [export and pack](files), and [`verify`](files::verify).
//!
//! ```
//! use dtype::Primitive;
//! use params_io::{ParamDict, ReadOptions, Tensor};
//!
//! let mut params = ParamDict::new();
//! let w: Vec<u8> = [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect();
//! params.insert("dense0_weight", Tensor::new(Primitive::Float32, &[2, 2], w)?);
//! params.insert("flag", Tensor::new(Primitive::Bool, &[], vec![1])?);
//!
//! let bytes = params.to_bytes()?;              // what TVM writes for the same dict
//! let back = ReadOptions::new().read_bytes(&bytes)?;   // strict read
//! assert_eq!(back, params);
//! assert_eq!(back.get("dense0_weight").unwrap().datashape(), "2 * 2 * float32");
//!
//! // A corrupted file is a typed error with the byte offset of the field.
//! let mut bad = bytes.clone();
//! bad[0] ^= 1;
//! let err = ReadOptions::new().read_bytes(&bad).unwrap_err();
//! assert_eq!(err.offset(), Some(0));
//! # Ok::<(), params_io::Error>(())
//! ```
//!
//! The byte layout, the strictness rules and every difference from TVM and
//! CVM are described in `docs/params-format.md`.

#![warn(missing_docs)]

mod array;
pub mod error;
pub mod files;
pub mod format;
mod index;
mod input;
mod mmap;
pub mod names;
pub mod npy;
mod profile;
mod read;
mod tensor;
mod write;

pub use array::{ArraySource, write_arrays, write_arrays_to_path};
pub use error::{Error, Field, FormatError, FormatErrorKind, NpyError};
pub use index::{IndexEntry, ParamIndex};
pub use profile::{CVM_MAX_FILE_LEN, Profile, UnknownProfile};
pub use read::{Duplicates, ReadOptions};
pub use tensor::{Param, ParamDict, Tensor, datashape};
pub use write::{
    BoolTag, Entry, TensorSource, WriteOptions, encoded_len, write_params, write_params_to_path,
};

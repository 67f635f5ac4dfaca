//! Profiles: which runtime must be able to load a file.
//!
//! [`Profile::Tvm`] accepts everything this crate reads. [`Profile::Cvm`]
//! adds the limits of the CVM runtime, so that a file that passes will load
//! there: `int8`/`int32` tensors only (lanes 1), no zero-element tensor (CVM
//! insists on reading at least one data byte), no NUL byte in a name (its C
//! API passes names as C strings) and a file of at most `i32::MAX` bytes
//! (its loader takes the length as an `int`).

use std::fmt;
use std::str::FromStr;

use dtype::dlpack::DLDataType;

/// The largest file the CVM runtime loads (`datalen` is a C `int`).
pub const CVM_MAX_FILE_LEN: u64 = i32::MAX as u64;

/// A consumer whose loading rules a file must satisfy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Profile {
    /// Apache TVM >= 0.7 (the default): the format's own rules.
    #[default]
    Tvm,
    /// CVM runtime: additionally int8/int32 only, no zero-element tensors,
    /// no NUL in names, files under 2 GiB.
    Cvm,
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Profile::Tvm => "TVM",
            Profile::Cvm => "CVM",
        })
    }
}

/// The text is not a profile name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown profile {0:?} (expected \"tvm\" or \"cvm\")")]
pub struct UnknownProfile(pub String);

impl FromStr for Profile {
    type Err = UnknownProfile;

    fn from_str(s: &str) -> Result<Profile, UnknownProfile> {
        match s.to_ascii_lowercase().as_str() {
            "tvm" => Ok(Profile::Tvm),
            "cvm" => Ok(Profile::Cvm),
            _ => Err(UnknownProfile(s.to_owned())),
        }
    }
}

impl Profile {
    /// Checks a tensor's type tag and element count.
    pub fn check_tensor(self, dl: DLDataType, elements: u64) -> Result<(), String> {
        self.check_dtype(dl)?;
        self.check_elements(elements)
    }

    /// Checks a tensor's type tag.
    pub fn check_dtype(self, dl: DLDataType) -> Result<(), String> {
        match self {
            Profile::Cvm if !(dl.code == 0 && (dl.bits == 8 || dl.bits == 32) && dl.lanes == 1) => {
                Err(format!(
                    "dtype (code {}, bits {}, lanes {}) is not int8 or int32",
                    dl.code, dl.bits, dl.lanes
                ))
            }
            _ => Ok(()),
        }
    }

    /// Checks a tensor's element count.
    pub fn check_elements(self, elements: u64) -> Result<(), String> {
        match self {
            Profile::Cvm if elements == 0 => {
                Err("zero-element tensors cannot be loaded".to_owned())
            }
            _ => Ok(()),
        }
    }

    /// Checks a name.
    pub fn check_name(self, name: &[u8]) -> Result<(), String> {
        match self {
            Profile::Cvm if name.contains(&0) => {
                Err("names containing a NUL byte are truncated by the C API".to_owned())
            }
            _ => Ok(()),
        }
    }

    /// Checks the total file length.
    pub fn check_file_len(self, len: u64) -> Result<(), String> {
        match self {
            Profile::Cvm if len > CVM_MAX_FILE_LEN => Err(format!(
                "file of {len} bytes exceeds the {CVM_MAX_FILE_LEN}-byte limit"
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cvm_accepts_only_int8_and_int32() {
        assert!(
            Profile::Cvm
                .check_tensor(DLDataType::new(0, 8, 1), 3)
                .is_ok()
        );
        assert!(
            Profile::Cvm
                .check_tensor(DLDataType::new(0, 32, 1), 1)
                .is_ok()
        );
        assert!(
            Profile::Cvm
                .check_tensor(DLDataType::new(0, 64, 1), 1)
                .is_err()
        );
        assert!(
            Profile::Cvm
                .check_tensor(DLDataType::new(2, 32, 1), 1)
                .is_err()
        );
        assert!(
            Profile::Cvm
                .check_tensor(DLDataType::new(0, 32, 1), 0)
                .is_err()
        );
        assert!(
            Profile::Tvm
                .check_tensor(DLDataType::new(2, 32, 1), 0)
                .is_ok()
        );
    }

    #[test]
    fn cvm_limits_names_and_size() {
        assert!(Profile::Cvm.check_name(b"a\0b").is_err());
        assert!(Profile::Tvm.check_name(b"a\0b").is_ok());
        assert!(Profile::Cvm.check_file_len(CVM_MAX_FILE_LEN).is_ok());
        assert!(Profile::Cvm.check_file_len(CVM_MAX_FILE_LEN + 1).is_err());
        assert!(Profile::Tvm.check_file_len(u64::MAX).is_ok());
    }

    #[test]
    fn profiles_parse() {
        assert_eq!("CVM".parse::<Profile>(), Ok(Profile::Cvm));
        assert_eq!("tvm".parse::<Profile>(), Ok(Profile::Tvm));
        assert!("onnx".parse::<Profile>().is_err());
    }
}

//! Property tests: random dictionaries of every element type (scalars,
//! zero-size dimensions, unicode and empty names) survive write -> read
//! through every reader, and writing is byte-stable across a cycle.

use dtype::Primitive;
use params_io::{ParamDict, ReadOptions, Tensor};
use proptest::prelude::*;

fn tensor() -> impl Strategy<Value = Tensor> {
    (
        0..Primitive::ALL.len(),
        prop::collection::vec(0usize..4, 0..4),
    )
        .prop_flat_map(|(k, shape)| {
            let p = Primitive::ALL[k];
            let n: usize = shape.iter().product::<usize>() * p.size();
            prop::collection::vec(any::<u8>(), n).prop_map(move |mut data| {
                if p == Primitive::Bool {
                    data.iter_mut().for_each(|b| *b &= 1);
                }
                Tensor::new(p, &shape, data).unwrap()
            })
        })
}

fn dict() -> impl Strategy<Value = ParamDict> {
    prop::collection::vec(("\\PC{0,6}", tensor()), 0..6)
        .prop_map(|entries| entries.into_iter().collect::<ParamDict>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn write_read_equal_and_byte_stable(d in dict()) {
        let bytes = d.to_bytes().unwrap();
        prop_assert_eq!(bytes.len() as u64, d.encoded_len().unwrap());
        let a = ReadOptions::new().read_bytes(&bytes).unwrap();
        prop_assert_eq!(&a, &d);
        let b = ReadOptions::new().read(&bytes[..]).unwrap();
        prop_assert_eq!(&b, &d);
        let c = ReadOptions::default().read_block(ndobject::MemoryBlock::from_owner(bytes.clone())).unwrap();
        prop_assert_eq!(&c, &d);
        prop_assert!(c.iter().all(|p| p.tensor().is_view()));
        prop_assert_eq!(a.to_bytes().unwrap(), bytes.clone());
        prop_assert_eq!(c.to_bytes().unwrap(), bytes.clone());

        let idx = ReadOptions::default().index_bytes(&bytes).unwrap();
        prop_assert_eq!(idx.len(), d.len());
        for (e, p) in idx.entries.iter().zip(d.iter()) {
            prop_assert_eq!(&e.name[..], p.name_bytes());
            prop_assert_eq!(&e.shape[..], p.tensor().shape());
            let at = e.offset as usize;
            prop_assert_eq!(&bytes[at..at + e.nbytes as usize], p.tensor().data());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = ReadOptions::new().read_bytes(&data);
        let _ = ReadOptions::new().read(&data[..]);
        let _ = ReadOptions::tvm_compatible().index_bytes(&data);
    }

    #[test]
    fn mutated_valid_files_never_panic(d in dict(), at in any::<prop::sample::Index>(), v in any::<u8>()) {
        let mut bytes = d.to_bytes().unwrap();
        let i = at.index(bytes.len());
        bytes[i] = v;
        let r1 = ReadOptions::new().read_bytes(&bytes);
        let r2 = ReadOptions::new().read(&bytes[..]);
        prop_assert_eq!(r1.is_ok(), r2.is_ok());
        if let (Ok(a), Ok(b)) = (r1, r2) {
            prop_assert_eq!(a, b);
        }
    }
}

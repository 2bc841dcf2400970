//! The runtime API: layouts, dispatch, errors that name the sizes, and the tensor helpers.

use rullama_gguf::GgmlType;
use rullama_quant::{
    Format, FormatOps, QuantError, block_layout, dequantize, dequantize_row, dequantize_tensor,
    dequantize_to_vec, dot, is_supported, quantize, row_bytes,
};

const Q8: Format = Format::Ggml(GgmlType::Q8_0);

#[test]
fn every_supported_layout_matches_the_gguf_table() {
    for t in GgmlType::ALL {
        let f = Format::Ggml(t);
        assert_eq!(block_layout(f), t.layout(), "{t}");
        if let Ok(ops) = FormatOps::of(f) {
            assert_eq!(ops.layout(), t.layout(), "{t}");
            assert_eq!(ops.format(), f);
        }
    }
    let nf4 = FormatOps::of(Format::Nf4).unwrap().layout();
    assert_eq!((nf4.block_size, nf4.type_size), (64, 36));
}

#[test]
fn unimplemented_types_say_so() {
    use GgmlType::*;
    for t in [
        Iq2Xxs, Iq2Xs, Iq2S, Iq3Xxs, Iq3S, Iq1S, Iq1M, Tq1_0, Tq2_0, Mxfp4, Nvfp4, I8, I16, I32,
        I64, F64,
    ] {
        let f = Format::Ggml(t);
        assert!(!is_supported(f), "{t}");
        let n = t.layout().block_size;
        assert_eq!(quantize(f, &vec![0.0; n]), Err(QuantError::Unsupported(f)));
        let bytes = vec![0u8; t.layout().type_size];
        assert_eq!(
            dequantize_to_vec(f, &bytes),
            Err(QuantError::Unsupported(f))
        );
        assert_eq!(
            dot(f, &bytes, &vec![0.0; n]),
            Err(QuantError::Unsupported(f))
        );
    }
    for t in [
        F32, F16, Bf16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Iq4Nl, Iq4Xs, Q1_0G128,
    ] {
        assert!(is_supported(Format::Ggml(t)), "{t}");
    }
    assert!(is_supported(Format::Nf4));
}

#[test]
fn size_mismatches_are_errors_that_name_the_sizes() {
    let err = dequantize_to_vec(Q8, &[0u8; 35]).unwrap_err();
    assert_eq!(
        err,
        QuantError::PartialBlockBytes {
            format: Q8,
            bytes: 35,
            block_bytes: 34
        }
    );
    assert!(
        err.to_string().contains("35") && err.to_string().contains("34"),
        "{err}"
    );

    let err = dequantize(Q8, &[0u8; 68], &mut [0.0; 63]).unwrap_err();
    let expected = QuantError::ValueCount {
        format: Q8,
        bytes: 68,
        expected: 64,
        actual: 63,
    };
    assert_eq!(err, expected);
    assert!(
        err.to_string().contains("64") && err.to_string().contains("63"),
        "{err}"
    );

    let err = quantize(Q8, &[0.0; 33]).unwrap_err();
    assert_eq!(
        err,
        QuantError::PartialBlockValues {
            format: Q8,
            values: 33,
            block_size: 32
        }
    );
    assert!(dot(Q8, &[0u8; 34], &[0.0; 31]).is_err());
    assert_eq!(quantize(Q8, &[]).unwrap(), Vec::<u8>::new());
}

#[test]
fn rows_and_tensors_agree() {
    let (row_len, rows) = (64usize, 3usize);
    let x: Vec<f32> = (0..row_len * rows)
        .map(|i| (i as f32 * 0.37).sin())
        .collect();
    let data = quantize(Q8, &x).unwrap();
    assert_eq!(row_bytes(Q8, row_len).unwrap(), 68);
    let whole = dequantize_tensor(Q8, &data, &[row_len as u64, rows as u64]).unwrap();
    for r in 0..rows {
        let row = dequantize_row(Q8, &data, row_len, r).unwrap();
        assert_eq!(row, whole[r * row_len..(r + 1) * row_len]);
        let w = &whole[r * row_len..(r + 1) * row_len];
        let expect: f32 = w.iter().zip(&x[..row_len]).map(|(w, x)| w * x).sum();
        let got = dot(Q8, &data[r * 68..(r + 1) * 68], &x[..row_len]).unwrap();
        assert!(
            (got - expect).abs() <= 1e-4 * expect.abs().max(1.0),
            "{got} vs {expect}"
        );
    }
    assert_eq!(
        dequantize_row(Q8, &data, row_len, 3),
        Err(QuantError::RowOutOfRange { row: 3, rows: 3 })
    );
    assert!(matches!(
        row_bytes(Q8, 48),
        Err(QuantError::PartialBlockValues { .. })
    ));
    assert!(matches!(
        dequantize_tensor(Q8, &data, &[64, 4]),
        Err(QuantError::TensorBytes {
            expected: 272,
            actual: 204,
            ..
        })
    ));
    assert!(matches!(
        dequantize_tensor(Q8, &data, &[]),
        Err(QuantError::BadDims { .. })
    ));
    assert!(matches!(
        dequantize_tensor(Q8, &data, &[u64::MAX, 4]),
        Err(QuantError::BadDims { .. })
    ));
}

#[test]
fn known_blocks_decode_as_documented() {
    // Q1_0_g128: d = 0.5, bits 0b0000_0101 in the first byte: +d, -d, +d, then -d.
    let mut block = [0u8; 18];
    block[..2].copy_from_slice(&half::f16::from_f32(0.5).to_le_bytes());
    block[2] = 0b0000_0101;
    let w = dequantize_to_vec(Format::Ggml(GgmlType::Q1_0G128), &block).unwrap();
    assert_eq!(&w[..4], &[0.5, -0.5, 0.5, -0.5]);
    assert!(w[8..].iter().all(|&v| v == -0.5));

    // NF4: absmax 2.0, byte 0 = 0xf0: weight 0 is code 0 (-1.0), weight 1 code 15 (+1.0).
    let mut block = [0u8; 36];
    block[..4].copy_from_slice(&2.0f32.to_le_bytes());
    block[4] = 0xf0;
    block[5] = 0x77;
    let w = dequantize_to_vec(Format::Nf4, &block).unwrap();
    assert_eq!(&w[..4], &[-2.0, 2.0, 0.0, 0.0]);

    // Q4_0 from llama.cpp's rule: the largest magnitude (-4, first of the tie) gets code 0
    // and d = -4 / -8 = 0.5, so +4 saturates at code 15 = 3.5.
    let mut x = [0.0f32; 32];
    (x[1], x[2], x[20]) = (-4.0, 4.0, 1.0);
    let q = quantize(Format::Ggml(GgmlType::Q4_0), &x).unwrap();
    assert_eq!(half::f16::from_le_bytes([q[0], q[1]]).to_f32(), 0.5);
    let w = dequantize_to_vec(Format::Ggml(GgmlType::Q4_0), &q).unwrap();
    assert_eq!((w[1], w[2], w[20], w[0]), (-4.0, 3.5, 1.0, 0.0));

    // Q1_0_g128 quantizes to the mean magnitude and the signs (0.0 counts as positive).
    let x: Vec<f32> = (0..128)
        .map(|i| if i % 2 == 0 { 1.0 } else { -3.0 })
        .collect();
    let q = quantize(Format::Ggml(GgmlType::Q1_0G128), &x).unwrap();
    assert_eq!(half::f16::from_le_bytes([q[0], q[1]]).to_f32(), 2.0);
    assert!(q[2..].iter().all(|&b| b == 0b0101_0101));
}

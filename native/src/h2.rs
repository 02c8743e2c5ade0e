//! HTTP/2: a run of DATA frames of one stream gathered into one buffer.
//!
//! Mirrors `streamwire.transport.h2grpc.gather_data_pure`: from `start`, each whole DATA
//! frame of `stream` without END_STREAM, at most `max_frame` long, whose padding is valid and
//! that fits the flow-control `budget` left, has its payload (padding removed) appended to
//! `out`; the walk stops before the first frame that is anything else (the Python code deals
//! with it, raising what it raises).

use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyByteArrayMethods};

const DATA: u8 = 0x0;
const END_STREAM: u8 = 0x1;
const PADDED: u8 = 0x8;

/// `(position after the last frame taken, the frames' lengths summed)`.
#[pyfunction]
pub fn h2_gather_data(
    buf: &Bound<'_, PyByteArray>,
    start: usize,
    stream: u32,
    out: &Bound<'_, PyByteArray>,
    budget: i64,
    max_frame: usize,
) -> PyResult<(usize, i64)> {
    if buf.is(out) {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "buf and out must differ",
        ));
    }
    // SAFETY: `buf` is the caller's private receive bytearray (`GrpcStreamProtocol` in
    // `streamwire.transport.h2grpc`), and the GIL is held (a #[pyfunction]). No Python code
    // runs while `data` is used: only slice reads, `out.resize` (a C call on another object:
    // `buf.is(out)` is checked above) and copies, so nothing resizes or writes `buf`.
    let data = unsafe { buf.as_bytes() };
    let mut pos = start;
    let mut counted: i64 = 0;
    let mut spans: Vec<(usize, usize)> = Vec::new();
    let mut total = 0usize;
    while data.len().saturating_sub(pos) >= 9 {
        let length =
            (data[pos] as usize) << 16 | (data[pos + 1] as usize) << 8 | data[pos + 2] as usize;
        let (kind, flags) = (data[pos + 3], data[pos + 4]);
        let sid = u32::from_be_bytes([data[pos + 5], data[pos + 6], data[pos + 7], data[pos + 8]])
            & 0x7fff_ffff;
        if kind != DATA
            || sid != stream
            || flags & END_STREAM != 0
            || length > max_frame
            || data.len() - pos - 9 < length
            || counted + length as i64 > budget
        {
            break;
        }
        let (mut s, mut e) = (pos + 9, pos + 9 + length);
        if flags & PADDED != 0 {
            if length < 1 || data[s] as usize >= length {
                break;
            }
            e -= data[s] as usize;
            s += 1;
        }
        spans.push((s, e));
        total += e - s;
        counted += length as i64;
        pos += 9 + length;
    }
    if total > 0 {
        let old = out.len();
        out.resize(old + total)?;
        // SAFETY: `out` was just resized to `old + total` bytes, and nothing else runs before the
        // last write through `dst` (no Python code, no other reference to the storage); `out` is
        // not `buf` (checked above), so `dst` and `data` cannot overlap.
        let dst = unsafe { out.as_bytes_mut() };
        let mut at = old;
        for (s, e) in spans {
            dst[at..at + e - s].copy_from_slice(&data[s..e]);
            at += e - s;
        }
    }
    Ok((pos, counted))
}

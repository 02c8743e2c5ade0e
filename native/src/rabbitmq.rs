//! RabbitMQ Streams: the entries of an Osiris chunk → received messages.
//!
//! Mirrors `streamwire.rabbitmq._amqp_map.decode_chunk` after its header checks.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::buffer::filled_bytes;
use crate::{bytes_of, int_u128, new_dict, new_ref, none, state, untracked, Owned, State};

/// An AMQP 1.0 message that is one data section with a 1-byte length (`vbin8`).
const DATA8: [u8; 4] = [0x00, 0x53, 0x75, 0xa0];
/// The same with a 4-byte big-endian length (`vbin32`: bodies above 255 bytes).
const DATA32: [u8; 4] = [0x00, 0x53, 0x75, 0xb0];

/// The chunk's CRC-32 over its entries, when the broker sent one.
fn check_crc(py: Python<'_>, st: &State, entries: &[u8], crc: Option<u32>) -> PyResult<()> {
    if let Some(expected) = crc {
        let actual = crc32fast::hash(entries);
        if actual != expected {
            return Err(st.checksum_error(
                py,
                "chunk CRC-32".to_owned(),
                expected as u64,
                actual as u64,
            ));
        }
    }
    Ok(())
}

/// The size word of the entry at ``pos`` (its top bit marks a sub-batch).
fn entry_size(py: Python<'_>, st: &State, data: &[u8], pos: usize, end: usize) -> PyResult<u32> {
    if pos + 4 > end {
        return Err(st.decode_error(py, "entry size".to_owned(), pos, "Deliver"));
    }
    Ok(u32::from_be_bytes(data[pos..pos + 4].try_into().unwrap()))
}

/// Where a simple entry of ``size`` bytes starting at ``pos`` (after its size word) ends.
fn entry_end(py: Python<'_>, st: &State, pos: usize, size: usize, end: usize) -> PyResult<usize> {
    let stop = pos + size;
    if stop > end {
        return Err(st.decode_error(py, format!("entry of {size} bytes"), pos - 4, "Deliver"));
    }
    Ok(stop)
}

/// The body of an entry that is exactly one data section (`decode_data_body`), if it is.
#[inline]
fn data_body(entry: &[u8]) -> Option<&[u8]> {
    let n = entry.len();
    if n >= 5 && entry[..4] == DATA8 && entry[4] as usize == n - 5 {
        return Some(&entry[5..]);
    }
    if n >= 8
        && entry[..4] == DATA32
        && u32::from_be_bytes(entry[4..8].try_into().unwrap()) as usize == n - 8
    {
        return Some(&entry[8..]);
    }
    None
}

/// Where the sub-batch entry at `pos` ends, its records' spans pushed to `out`; `None` when it
/// is compressed or malformed (`expand_sub_batch` decodes or refuses it). Mirrors
/// `streamwire.rabbitmq._columns._sub_batch_records`.
fn sub_batch_records(
    data: &[u8],
    pos: usize,
    end: usize,
    out: &mut Vec<(usize, usize)>,
) -> Option<usize> {
    const HEADER: usize = 11; // flags, records (u16), uncompressed size, stored size (u32)
    if pos + HEADER > end {
        return None;
    }
    let flags = data[pos];
    let count = u16::from_be_bytes(data[pos + 1..pos + 3].try_into().unwrap());
    let size = u32::from_be_bytes(data[pos + 7..pos + 11].try_into().unwrap()) as usize;
    let mut inner = pos + HEADER;
    let stop = inner + size;
    if stop > end || (flags >> 4) & 0x7 != 0 {
        return None;
    }
    for _ in 0..count {
        if inner + 4 > stop {
            return None;
        }
        let n = u32::from_be_bytes(data[inner..inner + 4].try_into().unwrap()) as usize;
        inner += 4;
        if inner + n > stop {
            return None;
        }
        out.push((inner, inner + n));
        inner += n;
    }
    (inner == stop).then_some(stop)
}

/// The messages of a chunk whose entries are `buf[start:end]` and whose first record has
/// offset `first_offset`: records below `skip_below` are skipped. With `crc`, the entries'
/// CRC-32 must equal it. The plain records' messages are made here, untracked by the garbage
/// collector (`untracked`). `record(pos, stop, offset)` decodes any record that is not a plain
/// data section (AMQP mode), `sub_batch(pos, offset)` a sub-batch entry, returning
/// `(position after it, records in it, messages)`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (buf, start, end, first_offset, num_records, ts, stream, skip_below, amqp, crc, record, sub_batch))]
pub fn rmq_decode_records(
    py: Python<'_>,
    buf: &Bound<'_, PyBytes>,
    start: usize,
    end: usize,
    first_offset: u64,
    num_records: u64,
    ts: &Bound<'_, PyAny>,
    stream: &Bound<'_, PyAny>,
    skip_below: i128,
    amqp: bool,
    crc: Option<u32>,
    record: &Bound<'_, PyAny>,
    sub_batch: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let st = state(py)?;
    let data = buf.as_bytes();
    if start > end || end > data.len() {
        return Err(PyValueError::new_err("entries outside the buffer"));
    }
    check_crc(py, st, &data[start..end], crc)?;
    let mut out = Owned::with_capacity(num_records.min(1 << 20) as usize);
    let mut offset: u128 = first_offset as u128;
    let ts = ts.as_ptr();
    let stream = stream.as_ptr();
    let mut pos = start;
    while pos < end {
        let size = entry_size(py, st, data, pos, end)?;
        if size & 0x8000_0000 != 0 {
            let got = sub_batch.call1((pos, offset))?;
            let (next, count, messages): (usize, u64, Bound<'_, PyList>) = got.extract()?;
            for m in messages.iter() {
                out.push(m.into_ptr());
            }
            if next <= pos || next > end {
                return Err(PyValueError::new_err("sub-batch callback went astray"));
            }
            pos = next;
            offset += count as u128;
            continue;
        }
        let size = size as usize;
        pos += 4;
        let stop = entry_end(py, st, pos, size, end)?;
        if offset as i128 >= skip_below {
            let value = if !amqp {
                Some(&data[pos..stop])
            } else {
                data_body(&data[pos..stop])
            };
            match value {
                Some(value) => {
                    let v = bytes_of(py, value)?;
                    let headers = match new_dict(py) {
                        Ok(h) => h,
                        Err(e) => {
                            // SAFETY: `v` is the owned reference `bytes_of` just returned, stored
                            // nowhere else; `py` proves the GIL is held.
                            unsafe { ffi::Py_DECREF(v) };
                            return Err(e);
                        }
                    };
                    let off = match int_u128(py, offset) {
                        Ok(o) => o,
                        Err(e) => {
                            // SAFETY: `v` and `headers` are the owned references just made, stored
                            // nowhere else; `py` proves the GIL is held.
                            unsafe {
                                ffi::Py_DECREF(v);
                                ffi::Py_DECREF(headers);
                            }
                            return Err(e);
                        }
                    };
                    let values = [
                        v,
                        none(),
                        headers,
                        new_ref(ts),
                        off,
                        new_ref(stream),
                        none(),
                        none(),
                    ];
                    // SAFETY: `py` proves the GIL is held; each of the eight values is an owned,
                    // non-null reference (`bytes_of`, `none`, `new_dict`, `new_ref`, `int_u128`),
                    // as `State::message` requires, and what it returns is a new, live `Message`.
                    out.push(unsafe { untracked(st.message(py, values)?) });
                }
                None => out.push(record.call1((pos, stop, offset))?.into_ptr()),
            }
        }
        offset += 1;
        pos = stop;
    }
    let held = offset - first_offset as u128;
    if held != num_records as u128 {
        return Err(st.decode_error(
            py,
            format!("chunk announces {num_records} records, holds {held}"),
            4,
            "Deliver",
        ));
    }
    out.into_list(py)
}

/// The records of a chunk whose entries are `buf[start:end]` as column buffers, in Arrow's
/// layout and native byte order: `(value offsets as int32 × (n + 1), the values end to end,
/// offsets as int64 × n)`, for records at or after `skip_below`, uncompressed sub-batches'
/// included. `None` as soon as a record is not a plain body (a compressed or malformed
/// sub-batch, or in AMQP mode anything but one data section): the caller
/// decodes that chunk message by message. Errors as `rmq_decode_records`, in the same order.
/// Mirrors `streamwire.rabbitmq._columns.chunk_columns_py`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (buf, start, end, first_offset, num_records, skip_below, amqp, crc))]
pub fn rmq_chunk_columns<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyBytes>,
    start: usize,
    end: usize,
    first_offset: u64,
    num_records: u64,
    skip_below: i128,
    amqp: bool,
    crc: Option<u32>,
) -> PyResult<
    Option<(
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
        Bound<'py, PyBytes>,
    )>,
> {
    let st = state(py)?;
    let data = buf.as_bytes();
    if start > end || end > data.len() || end - start > i32::MAX as usize {
        return Err(PyValueError::new_err("entries outside the buffer"));
    }
    check_crc(py, st, &data[start..end], crc)?;
    // First the walk: every check, the value ends and offsets, and where each value is; then
    // the values are copied once, straight into the `bytes` handed out.
    let cap = num_records.min(1 << 20) as usize;
    let mut ends: Vec<u8> = Vec::with_capacity((cap + 1) * 4);
    let mut offsets: Vec<u8> = Vec::with_capacity(cap * 8);
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(cap);
    let mut total: usize = 0;
    ends.extend_from_slice(&0i32.to_ne_bytes());
    let mut offset: u128 = first_offset as u128;
    let mut records: Vec<(usize, usize)> = Vec::new(); // the records of one entry
    let mut pos = start;
    while pos < end {
        let size = entry_size(py, st, data, pos, end)?;
        records.clear();
        if size & 0x8000_0000 != 0 {
            match sub_batch_records(data, pos, end, &mut records) {
                Some(next) => pos = next,
                None => return Ok(None), // compressed or malformed: left to the messages
            }
        } else {
            pos += 4;
            let stop = entry_end(py, st, pos, size as usize, end)?;
            records.push((pos, stop));
            pos = stop;
        }
        for &(first, stop) in &records {
            if offset as i128 >= skip_below {
                let from = if !amqp {
                    first
                } else if let Some(body) = data_body(&data[first..stop]) {
                    stop - body.len() // one data section, of either length form
                } else {
                    return Ok(None);
                };
                spans.push((from, stop));
                total += stop - from;
                ends.extend_from_slice(&(total as i32).to_ne_bytes());
                offsets.extend_from_slice(&(offset as i64).to_ne_bytes());
            }
            offset += 1;
        }
    }
    let held = offset - first_offset as u128;
    if held != num_records as u128 {
        return Err(st.decode_error(
            py,
            format!("chunk announces {num_records} records, holds {held}"),
            4,
            "Deliver",
        ));
    }
    // `total` fits in an i32: the values are a part of `data[start..end]`, checked above.
    let values = filled_bytes(py, total, |out| {
        let mut at = 0;
        for &(from, stop) in &spans {
            let n = stop - from;
            out[at..at + n].copy_from_slice(&data[from..stop]);
            at += n;
        }
    })?;
    Ok(Some((
        PyBytes::new(py, &ends),
        values,
        PyBytes::new(py, &offsets),
    )))
}

//! Liftbridge: a subscribed `liftbridge.Message` (protobuf, one per Subscribe response) →
//! a received `Message`.
//!
//! Mirrors `streamwire.liftbridge.protocol.messages.decode_message` (protobuf's parser, then
//! `to_message` without the server's headers) for the messages subscriptions carry: the
//! fields of `api.proto`'s `Message`, each with its own wire type, and headers that are only
//! the `subject` and `reply` the server adds (dropped). Anything else (another header, an
//! unknown field, a field with another wire type, a string that is not UTF-8, a truncated
//! or overlong varint, truncated data) returns `None`: the Python code then decodes the
//! message, or raises what protobuf raises.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyByteArrayMethods, PyBytes, PyList, PyListMethods};

use crate::{
    bytes_of, new_dict, none, state, HEADERS, ID, KEY, OFFSET, PARTITION, STREAM, TIMESTAMP, VALUE,
};

const VARINT: u8 = 0;
const LEN: u8 = 2;

/// A varint at `*pos` (at most 10 bytes, the 10th at most 1: a u64), or None.
#[inline]
fn varint(data: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let byte = *data.get(*pos)?;
        *pos += 1;
        if i == 9 && byte > 1 {
            return None;
        }
        value |= ((byte & 0x7f) as u64) << (7 * i);
        if byte < 0x80 {
            return Some(value);
        }
    }
    None
}

/// The bytes of a length-delimited field at `*pos`, or None.
#[inline]
fn delimited<'a>(data: &'a [u8], pos: &mut usize) -> Option<&'a [u8]> {
    let len = varint(data, pos)?;
    let start = *pos;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    let slice = data.get(start..end)?;
    *pos = end;
    Some(slice)
}

/// The key of a map entry `headers`, if the entry is one the server adds (`subject`,
/// `reply`) and well formed: field 1 the key (a string), field 2 the value (bytes).
fn server_header(entry: &[u8]) -> Option<()> {
    let mut pos = 0;
    let mut key: &[u8] = b"";
    while pos < entry.len() {
        let tag = varint(entry, &mut pos)?;
        match (tag >> 3, (tag & 7) as u8) {
            (1, LEN) => key = delimited(entry, &mut pos)?,
            (2, LEN) => {
                delimited(entry, &mut pos)?;
            }
            _ => return None,
        }
    }
    (key == b"subject" || key == b"reply").then_some(())
}

struct Fields<'a> {
    offset: i64,
    key: &'a [u8],
    value: &'a [u8],
    timestamp: i64,
    stream: &'a [u8],
    partition: i32,
}

fn parse(data: &[u8]) -> Option<Fields<'_>> {
    let mut f = Fields {
        offset: 0,
        key: b"",
        value: b"",
        timestamp: 0,
        stream: b"",
        partition: 0,
    };
    let mut pos = 0;
    while pos < data.len() {
        let tag = varint(data, &mut pos)?;
        match (tag >> 3, (tag & 7) as u8) {
            (1, VARINT) => f.offset = varint(data, &mut pos)? as i64,
            (2, LEN) => f.key = delimited(data, &mut pos)?,
            (3, LEN) => f.value = delimited(data, &mut pos)?,
            (4, VARINT) => f.timestamp = varint(data, &mut pos)? as i64,
            (5, LEN) => {
                let s = delimited(data, &mut pos)?;
                std::str::from_utf8(s).ok()?;
                f.stream = s;
            }
            (6, VARINT) => f.partition = varint(data, &mut pos)? as i32,
            (7 | 8 | 10 | 11, LEN) => {
                std::str::from_utf8(delimited(data, &mut pos)?).ok()?;
            }
            (9, LEN) => server_header(delimited(data, &mut pos)?)?,
            (12, VARINT) => {
                varint(data, &mut pos)?;
            }
            _ => return None,
        }
    }
    Some(f)
}

#[inline]
fn owned(py: Python<'_>, obj: *mut ffi::PyObject) -> PyResult<*mut ffi::PyObject> {
    if obj.is_null() {
        Err(PyErr::fetch(py))
    } else {
        Ok(obj)
    }
}

/// The received `Message` of one subscribed message (a new reference), or null when the
/// native decoder does not take it (see the module's text).
fn build(py: Python<'_>, data: &[u8]) -> PyResult<*mut ffi::PyObject> {
    let st = state(py)?;
    let Some(f) = parse(data) else {
        return Ok(std::ptr::null_mut());
    };
    let mut values = [std::ptr::null_mut(); 8];
    let made = (|| -> PyResult<()> {
        values[VALUE] = bytes_of(py, f.value)?;
        values[KEY] = if f.key.is_empty() {
            none()
        } else {
            bytes_of(py, f.key)?
        };
        values[HEADERS] = new_dict(py)?;
        // Python's floor division: timestamp // 1000
        // SAFETY: `py` proves the GIL is held; the argument is a plain integer and `owned`
        // checks the new reference for NULL.
        values[TIMESTAMP] = owned(py, unsafe {
            ffi::PyLong_FromLongLong(f.timestamp.div_euclid(1000))
        })?;
        // SAFETY: as for `TIMESTAMP`: the GIL is held, a plain integer, the result checked.
        values[OFFSET] = owned(py, unsafe { ffi::PyLong_FromLongLong(f.offset) })?;
        // SAFETY: the GIL is held; `f.stream` is a live slice of `len` bytes of valid UTF-8
        // (checked in `parse`) that the call only copies; `owned` checks the result.
        values[STREAM] = owned(py, unsafe {
            ffi::PyUnicode_FromStringAndSize(
                f.stream.as_ptr() as *const _,
                f.stream.len() as ffi::Py_ssize_t,
            )
        })?;
        // SAFETY: as for `TIMESTAMP`: the GIL is held, a plain integer, the result checked.
        values[PARTITION] = owned(py, unsafe { ffi::PyLong_FromLong(f.partition as _) })?;
        values[ID] = none();
        Ok(())
    })();
    if let Err(err) = made {
        for v in values {
            if !v.is_null() {
                // SAFETY: each non-null `v` is an owned reference the closure made and that did not
                // reach a message (the closure failed); it is released once, with the GIL held
                // (`py`).
                unsafe { ffi::Py_DECREF(v) };
            }
        }
        return Err(err);
    }
    // SAFETY: `py` proves the GIL is held; the closure succeeded, so all eight values are owned,
    // non-null references (`bytes_of`, `none`, `new_dict`, `owned`), as `State::message` requires.
    unsafe { st.message(py, values) }
}

/// The received `Message` of one subscribed message, or None (see the module's text).
#[pyfunction]
pub fn lb_decode_message(py: Python<'_>, raw: &Bound<'_, PyBytes>) -> PyResult<Py<PyAny>> {
    let msg = build(py, raw.as_bytes())?;
    if msg.is_null() {
        return Ok(py.None());
    }
    // SAFETY: `msg` is non-null (checked above) and a new reference from `build`, whose ownership
    // moves to the `Bound`; `py` proves the GIL is held.
    unsafe { Ok(Bound::from_owned_ptr(py, msg).unbind()) }
}

/// gRPC messages (a flag byte, a 4-byte big-endian length, the message) from `start` in
/// `buf`, each a subscribed message decoded as `lb_decode_message` decodes it: the list of
/// `Message`s and the position after the last one taken. The walk stops (before it) at an
/// incomplete message, a flagged (compressed) one, one longer than `limit`, or one the
/// native decoder does not take: the Python code deals with those (the pure twin,
/// `streamwire.liftbridge._h2_subscription`, raises the same errors and decodes the rest).
#[pyfunction]
pub fn lb_decode_grpc(
    py: Python<'_>,
    buf: &Bound<'_, PyByteArray>,
    start: usize,
    limit: usize,
) -> PyResult<(Py<PyList>, usize)> {
    let out = PyList::empty(py);
    // SAFETY: `buf` is the caller's private message bytearray (`GrpcStreamProtocol`'s
    // `_msgbuf`, walked by `streamwire.liftbridge._h2_subscription`), and the GIL is held (a
    // #[pyfunction]). No code that holds `buf` runs while `data` is used: `build` and
    // `out.append` only make objects (a garbage collection their allocations may start runs
    // only finalizers and weak-reference callbacks, none of which can reach `buf`), so
    // nothing resizes or writes `buf` meanwhile.
    let data = unsafe { buf.as_bytes() };
    let mut pos = start;
    while data.len().saturating_sub(pos) >= 5 {
        let size = u32::from_be_bytes([data[pos + 1], data[pos + 2], data[pos + 3], data[pos + 4]])
            as usize;
        if data[pos] != 0 || size > limit || data.len() - pos - 5 < size {
            break;
        }
        let msg = build(py, &data[pos + 5..pos + 5 + size])?;
        if msg.is_null() {
            break;
        }
        // SAFETY: `msg` is non-null (checked above) and a new reference from `build`, whose
        // ownership moves to the `Bound`; `py` proves the GIL is held.
        out.append(unsafe { Bound::from_owned_ptr(py, msg) })?;
        pos += 5 + size;
    }
    Ok((out.unbind(), pos))
}

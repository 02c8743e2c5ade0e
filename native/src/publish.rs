//! RabbitMQ Streams producers: a run of a group's bodies written as Publish (v1) entries in
//! one call — `PublishBuilder.add_range_py` of `streamwire.rabbitmq.protocol.publishing`,
//! byte for byte: the entries of `bodies[start..]` with publishing ids `first + index`,
//! indexes where `skip[index]` is non-zero left out, until the next entry would take the
//! frame past `room` bytes or `max_count` entries were added. With `wrap` each body is
//! written as an AMQP 1.0 message of one data section (`vbin8` up to 255 bytes, `vbin32`
//! above), as `encode_data_body` makes it.
//!
//! Anything else — a body that is not exactly `bytes`, `bodies` neither a list nor a tuple,
//! `skip` neither `bytes` nor `bytearray` or too short, a negative `start`, an id outside
//! u64 — gives `None`: the Python code then runs and raises what it raises.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyTuple};

const DATA_PREFIX_SHORT: [u8; 4] = [0x00, 0x53, 0x75, 0xa0];
const DATA_PREFIX_LONG: [u8; 4] = [0x00, 0x53, 0x75, 0xb0];

/// The entry header's size in front of a body of `n` bytes.
#[inline]
fn head_size(n: usize, wrap: bool) -> usize {
    if !wrap {
        12
    } else if n <= 0xFF {
        17
    } else {
        20
    }
}

/// Write one record at `out[at..]`: its 32-bit size, then `body` (with `wrap`, as an AMQP
/// 1.0 message of one data section); returns where it ends. `out` has room for it
/// (`head_size`).
#[inline]
fn write_record(out: &mut [u8], mut at: usize, body: &[u8], wrap: bool) -> usize {
    let n = body.len();
    if !wrap {
        out[at..at + 4].copy_from_slice(&(n as u32).to_be_bytes());
        at += 4;
    } else if n <= 0xFF {
        out[at..at + 4].copy_from_slice(&((n + 5) as u32).to_be_bytes());
        out[at + 4..at + 8].copy_from_slice(&DATA_PREFIX_SHORT);
        out[at + 8] = n as u8;
        at += 9;
    } else {
        out[at..at + 4].copy_from_slice(&((n + 8) as u32).to_be_bytes());
        out[at + 4..at + 8].copy_from_slice(&DATA_PREFIX_LONG);
        out[at + 8..at + 12].copy_from_slice(&(n as u32).to_be_bytes());
        at += 12;
    }
    out[at..at + n].copy_from_slice(body);
    at += n;
    at
}

/// A borrowed view of an exact `bytes` object's data (immutable; the caller's sequence
/// keeps the object alive for the call, and no Python code runs meanwhile).
#[inline]
fn body_of<'a>(obj: *mut ffi::PyObject) -> Option<&'a [u8]> {
    // SAFETY: `obj` is an item of the caller's list or tuple: live, with the GIL held, for as long
    // as the caller's call (no Python code runs in it). It is checked to be an exact `bytes`, whose
    // `Py_SIZE` bytes at `PyBytes_AS_STRING` never change. The caller chooses `'a` and uses the
    // slice only during that call; the signature does not enforce this.
    unsafe {
        if ffi::PyBytes_CheckExact(obj) == 0 {
            return None;
        }
        let data = ffi::PyBytes_AS_STRING(obj) as *const u8;
        let len = ffi::Py_SIZE(obj) as usize;
        Some(std::slice::from_raw_parts(data, len))
    }
}

/// The items of `values` when it is an exact list or tuple, borrowed for the caller's call.
///
/// # Safety
/// The GIL must be held and no Python code may run while the slice is used (reads, and
/// allocations of objects that are not garbage-collected, are fine): an exact list's
/// `ob_item` or an exact tuple's inline items hold `len()` live pointers only as long as
/// nothing resizes the list or replaces its items. An empty list's `ob_item` is NULL, which
/// `from_raw_parts` does not take even for length 0: it gets the empty slice.
unsafe fn items_of<'a>(values: &'a Bound<'_, PyAny>) -> Option<&'a [*mut ffi::PyObject]> {
    if let Ok(list) = values.cast_exact::<PyList>() {
        let p = list.as_ptr() as *mut ffi::PyListObject;
        match list.len() {
            0 => Some(&[]),
            // SAFETY: as the function's contract says.
            n => Some(unsafe { std::slice::from_raw_parts((*p).ob_item, n) }),
        }
    } else if let Ok(tuple) = values.cast_exact::<PyTuple>() {
        let p = tuple.as_ptr() as *mut ffi::PyTupleObject;
        // SAFETY: as the function's contract says.
        Some(unsafe { std::slice::from_raw_parts((*p).ob_item.as_ptr(), tuple.len()) })
    } else {
        None
    }
}

/// The Publish (v1) frame header: size (what follows it), key, version, publisher id, count.
const FRAME_HEAD: usize = 13;
const PUBLISH_KEY: u16 = 0x0002;

/// `(entries, next index, entries added, bytes added, body bytes added)`, or `None` (see
/// the module's documentation). With `head` (a publisher id, 0..=255) the entries come
/// after a Publish v1 frame header of `head` holding exactly them: a whole frame, without
/// a copy to join one; `head = -1`: the entries alone (any other value gives `None`).
#[pyfunction]
#[pyo3(signature = (first, bodies, skip, start, room, max_count, wrap, head=-1))]
#[allow(clippy::too_many_arguments)]
#[allow(clippy::type_complexity)]
pub fn rmq_publish_entries<'py>(
    py: Python<'py>,
    first: &Bound<'py, PyAny>,
    bodies: &Bound<'py, PyAny>,
    skip: &Bound<'py, PyAny>,
    start: &Bound<'py, PyAny>,
    room: &Bound<'py, PyAny>,
    max_count: &Bound<'py, PyAny>,
    wrap: bool,
    head: i64,
) -> PyResult<Option<(Bound<'py, PyBytes>, usize, usize, usize, usize)>> {
    let head: Option<u8> = match head {
        -1 => None,
        0..=255 => Some(head as u8),
        _ => return Ok(None),
    };
    let (first, start, room, max_count): (u64, usize, i64, i64) = match (
        first.extract(),
        start.extract(),
        room.extract(),
        max_count.extract(),
    ) {
        (Ok(f), Ok(s), Ok(r), Ok(m)) => (f, s, r, m),
        _ => return Ok(None),
    };
    // The items of a list or tuple, borrowed: no Python code runs during this call, so
    // nothing can change the sequence under us.
    // SAFETY: the GIL is held (a #[pyfunction]) and `bodies` is borrowed for the call.
    // Nothing after this runs Python code (reads, and one `bytes` allocation, which is not
    // a garbage-collected type and so cannot start a collection).
    let items = match unsafe { items_of(bodies) } {
        Some(items) => items,
        None => return Ok(None),
    };
    let skip: &[u8] = if let Ok(b) = skip.cast_exact::<PyBytes>() {
        b.as_bytes()
    } else if let Ok(b) = skip.cast_exact::<PyByteArray>() {
        // SAFETY: the GIL is held and no Python code runs while `skip` is read (as for
        // `items` above), so nothing can resize or write the bytearray meanwhile.
        unsafe { b.as_bytes() } // no Python code runs while it is read
    } else {
        return Ok(None);
    };
    let max_count = max_count.max(0) as usize;
    // First pass: how far the entries go, and how many bytes they take.
    let (mut i, mut count, mut size, mut payload) = (start, 0usize, 0i64, 0usize);
    while i < items.len() && count < max_count {
        match skip.get(i) {
            Some(0) => {}
            Some(_) => {
                i += 1;
                continue;
            }
            None => return Ok(None),
        }
        let body = match body_of(items[i]) {
            Some(b) => b,
            None => return Ok(None),
        };
        // what the Python code cannot pack it refuses before it looks at the frame's room
        if first.checked_add(i as u64).is_none() || body.len() > u32::MAX as usize - 8 {
            return Ok(None);
        }
        let need = (head_size(body.len(), wrap) + body.len()) as i64;
        if size.saturating_add(need) > room {
            break;
        }
        size += need;
        payload += body.len();
        count += 1;
        i += 1;
    }
    let end = i;
    let lead = if head.is_some() { FRAME_HEAD } else { 0 };
    if head.is_some()
        && (size as usize + FRAME_HEAD - 4 > i32::MAX as usize || count > i32::MAX as usize)
    {
        return Ok(None); // a frame size or count the header cannot hold: Python decides
    }
    let out = PyBytes::new_with(py, lead + size as usize, |out| {
        if let Some(publisher) = head {
            out[0..4].copy_from_slice(&((size as usize + FRAME_HEAD - 4) as u32).to_be_bytes());
            out[4..6].copy_from_slice(&PUBLISH_KEY.to_be_bytes());
            out[6..8].copy_from_slice(&1u16.to_be_bytes());
            out[8] = publisher;
            out[9..13].copy_from_slice(&(count as u32).to_be_bytes());
        }
        let mut at = lead;
        for (j, &item) in items.iter().enumerate().take(end).skip(start) {
            if skip[j] != 0 {
                continue;
            }
            let body = body_of(item).unwrap_or(&[]); // checked in the first pass
            out[at..at + 8].copy_from_slice(&(first + j as u64).to_be_bytes());
            at = write_record(out, at + 8, body, wrap);
        }
        Ok(())
    })?;
    Ok(Some((out, end, count, size as usize, payload)))
}

/// The total length of `values` when it is a non-empty list or tuple of exact `bytes`
/// objects, else `None` — `bytes_total_py` of `streamwire.rabbitmq.protocol.publishing`:
/// what a producer's fast path for plain bodies checks before it accepts them.
#[pyfunction]
pub fn rmq_bytes_total(values: &Bound<'_, PyAny>) -> Option<usize> {
    // SAFETY: the GIL is held (`values` is bound, and borrowed for the call); the loop
    // below only calls `PyBytes_CheckExact` and `Py_SIZE`, so no Python code runs.
    let items = unsafe { items_of(values) }?;
    if items.is_empty() {
        return None;
    }
    let mut total = 0usize;
    for &item in items {
        // SAFETY: `item` is a live item of the exact list or tuple (see `items`), GIL held.
        if unsafe { ffi::PyBytes_CheckExact(item) } == 0 {
            return None;
        }
        // SAFETY: `item` is live and checked just above to be an exact `bytes` (a variable-size
        // object whose `ob_size` is its length); the GIL is held.
        total += unsafe { ffi::Py_SIZE(item) } as usize;
    }
    Some(total)
}

/// Whether `ids`, a tuple of ints in u64, runs consecutively (`ids[k] == ids[0] + k`; a
/// tuple of fewer than two is a run); `None` for anything else (a list, an item that is
/// not an exact int in u64) — `is_id_run_py` of `streamwire.rabbitmq.protocol.publishing`:
/// how a producer tells the usual confirm, a run of ids, from the rest.
#[pyfunction]
pub fn rmq_id_run(ids: &Bound<'_, PyAny>) -> Option<bool> {
    let tuple = ids.cast_exact::<PyTuple>().ok()?;
    // borrowed items: no Python code runs during this call
    // SAFETY: the GIL is held and `ids` keeps the exact tuple alive for the call; a tuple's
    // inline `ob_item` array holds `len()` live pointers (never NULL, even when empty) and
    // its items are never replaced.
    let items: &[*mut ffi::PyObject] = unsafe {
        let p = tuple.as_ptr() as *mut ffi::PyTupleObject;
        std::slice::from_raw_parts((*p).ob_item.as_ptr(), tuple.len())
    };
    let mut next: Option<u64> = None; // what the next id must be (None: the first, or past u64)
    let mut run = true;
    for (k, &item) in items.iter().enumerate() {
        // SAFETY: `item` is a live item of the tuple (see `items`), and the GIL is held.
        if unsafe { ffi::PyLong_CheckExact(item) } == 0 {
            return None;
        }
        // SAFETY: `item` is live and checked to be an exact `int`, so the conversion runs no Python
        // code; a failure returns `u64::MAX` with an error set, which is checked below.
        let id = unsafe { ffi::PyLong_AsUnsignedLongLong(item) };
        // SAFETY: the GIL is held; this reads this thread's error indicator, which only the
        // conversion just above can have set (no error is pending when a #[pyfunction] starts).
        if id == u64::MAX && unsafe { !ffi::PyErr_Occurred().is_null() } {
            // SAFETY: the GIL is held; this clears the conversion's error, set just above.
            unsafe { ffi::PyErr_Clear() };
            return None; // negative or above u64: Python decides
        }
        if k > 0 && next != Some(id) {
            run = false; // keep going: a later item may still be outside what this takes
        }
        next = id.checked_add(1);
    }
    Some(run)
}

/// The records of an uncompressed sub-batch entry holding `bodies` (a list or tuple of exact
/// `bytes`), each a 32-bit size and the record: with `wrap` the body as an AMQP 1.0 message
/// of one data section (as `encode_data_body` makes it), else the body itself. `None` for
/// anything else, or a body too large for a record: the Python code then runs.
#[pyfunction]
pub fn rmq_sub_batch_records<'py>(
    py: Python<'py>,
    bodies: &Bound<'py, PyAny>,
    wrap: bool,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    // SAFETY: the GIL is held (a #[pyfunction]) and `bodies` is borrowed for the call; what
    // follows only reads and allocates one `bytes` (not garbage-collected): no Python code.
    let items = match unsafe { items_of(bodies) } {
        Some(items) => items,
        None => return Ok(None),
    };
    let mut size = 0usize;
    for &item in items {
        let body = match body_of(item) {
            Some(b) if b.len() <= u32::MAX as usize - 8 => b,
            _ => return Ok(None),
        };
        size += head_size(body.len(), wrap) - 8 + body.len(); // no publishing id in a record
    }
    let out = PyBytes::new_with(py, size, |out| {
        let mut at = 0;
        for &item in items {
            let body = body_of(item).unwrap_or(&[]); // checked above
            at = write_record(out, at, body, wrap);
        }
        Ok(())
    })?;
    Ok(Some(out))
}

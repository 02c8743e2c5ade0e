//! Iggy 0.9 message batches: encode (producer) and poll-reply decode (consumer).
//!
//! Mirrors `streamwire.iggy.protocol.batch.encode_batch` / `locate_frames` and
//! `streamwire.iggy.protocol.mapping.received_messages`.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PySlice, PyTuple};
use xxhash_rust::xxh3::xxh3_64;

use crate::received::{Lazy, PENDING_HEADERS, PENDING_ID, PENDING_OFFSET};
use crate::{bytes_of, new_ref, none, pair, state, untracked, Owned};

const BATCH_HEADER_SIZE: usize = 256;
const BATCH_FIELDS: usize = 52; // "<QQQQQQI"
const FRAME_HEADER_SIZE: usize = 48;
const MAX_PAYLOAD_BYTES: usize = 64_000_000;

#[inline]
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// One located message frame (see `FrameRef` in `streamwire.iggy.protocol.batch`).
#[derive(Clone, Copy)]
struct Frame {
    base: u64,
    base_ts: u64,
    origin: u64,
    id: u128,
    checksum: u64,
    at: usize,
    p_end: usize,
    f_end: usize,
    pid: u64,
    o_delta: u32,
    t_delta: u32,
}

impl Frame {
    fn offset(&self) -> u128 {
        self.base as u128 + self.o_delta as u128
    }

    fn as_tuple<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(
            py,
            [
                self.offset().into_pyobject(py)?,
                (self.base_ts as u128).into_pyobject(py)?,
                (self.origin as u128 + self.t_delta as u128).into_pyobject(py)?,
                self.id.into_pyobject(py)?,
                (self.checksum as u128).into_pyobject(py)?,
                (self.at as u128).into_pyobject(py)?,
                (self.p_end as u128).into_pyobject(py)?,
                (self.f_end as u128).into_pyobject(py)?,
                (self.pid as u128).into_pyobject(py)?,
                (self.o_delta as u128).into_pyobject(py)?,
                (self.t_delta as u128).into_pyobject(py)?,
            ],
        )
    }
}

/// The frames of a poll reply: one buffer and a compact index, a read-only sequence of
/// `FrameRef` tuples made on access.
#[pyclass(frozen, sequence, module = "streamwire._native._core")]
pub struct FrameIndex {
    /// `bytes`, or a contiguous memoryview of `bytes` (a slice of the received frame).
    buf: Py<PyAny>,
    frames: Vec<Frame>,
}

/// The bytes of `bytes` or of a read-only, contiguous, one-byte-item buffer (a memoryview
/// slice of an immutable `bytes`: the Python wrapper passes only those).
enum Bytes<'py> {
    Whole(Bound<'py, PyBytes>),
    View(PyBuffer<u8>),
}

impl<'py> Bytes<'py> {
    fn of(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.cast_exact::<PyBytes>() {
            return Ok(Bytes::Whole(b.clone()));
        }
        let view = PyBuffer::<u8>::get(obj)?;
        if !view.readonly() || !view.is_c_contiguous() || view.dimensions() != 1 {
            return Err(PyTypeError::new_err(
                "a read-only contiguous byte buffer is required",
            ));
        }
        Ok(Bytes::View(view))
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Whole(b) => b.as_bytes(),
            // SAFETY: `v` is a buffer export `self` holds (released only when `self` drops;
            // the slice borrows `self`), checked in `of` to be C-contiguous, one-dimensional
            // and of one-byte items, so `buf_ptr` points to `len_bytes` initialised bytes. It
            // is read-only, and the Python wrapper passes only memoryviews of an immutable
            // `bytes` (`bytes_view` in `streamwire.iggy.protocol.batch`), so nothing writes
            // the memory while the slice lives.
            Bytes::View(v) => unsafe {
                std::slice::from_raw_parts(v.buf_ptr() as *const u8, v.len_bytes())
            },
        }
    }
}

#[pymethods]
impl FrameIndex {
    fn __len__(&self) -> usize {
        self.frames.len()
    }

    fn __getitem__<'py>(&self, py: Python<'py>, index: &Bound<'py, PyAny>) -> PyResult<Py<PyAny>> {
        if let Ok(slice) = index.cast::<PySlice>() {
            let ind = slice.indices(self.frames.len() as isize)?;
            let mut items = Vec::with_capacity(ind.slicelength);
            let mut i = ind.start;
            for _ in 0..ind.slicelength {
                items.push(self.frames[i as usize].as_tuple(py)?);
                i += ind.step;
            }
            return Ok(PyList::new(py, items)?.into_any().unbind());
        }
        let i: isize = index.extract()?;
        let n = self.frames.len() as isize;
        let j = if i < 0 { i + n } else { i };
        if j < 0 || j >= n {
            return Err(PyIndexError::new_err("frame index out of range"));
        }
        Ok(self.frames[j as usize].as_tuple(py)?.into_any().unbind())
    }

    fn __iter__(slf: Bound<'_, Self>) -> FrameIter {
        FrameIter {
            index: slf.unbind(),
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The buffer the positions refer to.
    #[getter]
    fn buf(&self, py: Python<'_>) -> Py<PyAny> {
        self.buf.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        format!("<FrameIndex of {} frames>", self.frames.len())
    }
}

#[pyclass(frozen, module = "streamwire._native._core")]
pub struct FrameIter {
    index: Py<FrameIndex>,
    next: std::sync::atomic::AtomicUsize,
}

#[pymethods]
impl FrameIter {
    fn __iter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let frames = &self.index.get().frames;
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match frames.get(i) {
            Some(f) => Ok(Some(f.as_tuple(py)?)),
            None => {
                self.next
                    .store(frames.len(), std::sync::atomic::Ordering::Relaxed);
                Ok(None)
            }
        }
    }
}

/// Check the structure of the batch records in `buf[start:end]` and index every message
/// frame (`locate_frames`).
#[pyfunction]
#[pyo3(signature = (buf, start, end, frame))]
pub fn iggy_locate_frames(
    py: Python<'_>,
    buf: &Bound<'_, PyAny>,
    start: usize,
    end: Option<isize>,
    frame: &str,
) -> PyResult<FrameIndex> {
    let st = state(py)?;
    let held = Bytes::of(buf)?;
    let b = held.as_slice();
    let stop_all: isize = match end {
        None => b.len() as isize,
        Some(e) => e.min(b.len() as isize),
    };
    let err = |what: String, at: usize| st.decode_error(py, what, at, frame);
    let mut frames = Vec::new();
    let mut pos = start;
    while (pos as isize) < stop_all {
        let stop_all = stop_all as usize;
        if stop_all - pos < BATCH_HEADER_SIZE {
            return Err(err(
                format!("batch header: need 256 bytes, {} left", stop_all - pos),
                pos,
            ));
        }
        let pid = u64_at(b, pos);
        let base = u64_at(b, pos + 8);
        let base_ts = u64_at(b, pos + 16);
        let origin = u64_at(b, pos + 24);
        let length = u64_at(b, pos + 32);
        let count = u32_at(b, pos + 48) as u64;
        if b[pos + BATCH_FIELDS..pos + BATCH_HEADER_SIZE]
            .iter()
            .any(|&x| x != 0)
        {
            return Err(err(
                "non-zero reserved bytes in a batch header".to_owned(),
                pos + 52,
            ));
        }
        if !(BATCH_HEADER_SIZE as u64 <= length && length <= (stop_all - pos) as u64) {
            return Err(err(format!("batch length {length}"), pos + 32));
        }
        let length = length as usize;
        let stop = pos + length;
        if count * FRAME_HEADER_SIZE as u64 > (length - BATCH_HEADER_SIZE) as u64 {
            return Err(err(format!("batch of {count} messages"), pos + 48));
        }
        frames.reserve(count as usize);
        let mut at = pos + BATCH_HEADER_SIZE;
        for _ in 0..count {
            if stop - at < FRAME_HEADER_SIZE {
                return Err(err(
                    format!("message frame: need 48 bytes, {} left", stop - at),
                    at,
                ));
            }
            let checksum = u64_at(b, at);
            let lo = u64_at(b, at + 8);
            let hi = u64_at(b, at + 16);
            let o_delta = u32_at(b, at + 24);
            let t_delta = u32_at(b, at + 28);
            let h_len = u32_at(b, at + 32) as usize;
            let p_len = u32_at(b, at + 36) as usize;
            if u64_at(b, at + 40) != 0 {
                return Err(err(
                    "non-zero reserved bytes in a message frame".to_owned(),
                    at + 40,
                ));
            }
            let p_end = at + FRAME_HEADER_SIZE + p_len;
            let f_end = p_end + h_len;
            if f_end > stop {
                return Err(err(
                    format!(
                        "message frame of {} bytes, {} left",
                        FRAME_HEADER_SIZE + p_len + h_len,
                        stop - at
                    ),
                    at,
                ));
            }
            frames.push(Frame {
                base,
                base_ts,
                origin,
                id: lo as u128 | (hi as u128) << 64,
                checksum,
                at,
                p_end,
                f_end,
                pid,
                o_delta,
                t_delta,
            });
            at = f_end;
        }
        if at != stop {
            return Err(err(format!("{} trailing bytes", stop - at), at));
        }
        pos = stop;
    }
    Ok(FrameIndex {
        buf: buf.clone().unbind(),
        frames,
    })
}

/// A poll reply's messages (`received_messages`): checksums verified (with `verify`),
/// `headers_and_key(raw, key_header)` decoding the user headers of the frames that have any.
/// Each is a `ReceivedMessage` (`received.rs`): its offset, id and, without user headers,
/// its empty headers are made when first read.
#[pyfunction]
#[pyo3(signature = (frames, stream, key_header, verify, headers_and_key))]
pub fn iggy_received_messages(
    py: Python<'_>,
    frames: &Bound<'_, FrameIndex>,
    stream: &Bound<'_, PyAny>,
    key_header: &Bound<'_, PyAny>,
    verify: bool,
    headers_and_key: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let st = state(py)?;
    let index = frames.get();
    let held = Bytes::of(index.buf.bind(py))?;
    let b = held.as_slice();
    let mut out = Owned::with_capacity(index.frames.len());
    let stream = stream.as_ptr();
    // consecutive frames mostly share their batch's timestamp and partition: reuse the ints
    let mut shared: Option<(u64, u64, Py<PyAny>, Py<PyAny>)> = None;
    for f in &index.frames {
        if verify {
            let actual = xxh3_64(&b[f.at + 8..f.f_end]);
            if actual != f.checksum {
                return Err(st.checksum_error(
                    py,
                    format!("message at offset {}", f.offset()),
                    f.checksum,
                    actual,
                ));
            }
        }
        let mut pending = PENDING_OFFSET | PENDING_ID;
        let (headers, key) = if f.p_end == f.f_end {
            pending |= PENDING_HEADERS; // the empty dict is made on access
            (std::ptr::null_mut(), none())
        } else {
            let raw = PyBytes::new(py, &b[f.p_end..f.f_end]);
            pair(&headers_and_key.call1((raw, key_header))?)?
        };
        let mut parts = Owned::with_capacity(4);
        if !headers.is_null() {
            parts.push(headers);
        }
        parts.push(key);
        let (ts, pid) = match &shared {
            Some((t, p, ts, pid)) if *t == f.base_ts && *p == f.pid => {
                (new_ref(ts.as_ptr()), new_ref(pid.as_ptr()))
            }
            _ => {
                let ts = (f.base_ts as u128).into_pyobject(py)?.into_any().unbind();
                let pid = (f.pid as u128).into_pyobject(py)?.into_any().unbind();
                let refs = (new_ref(ts.as_ptr()), new_ref(pid.as_ptr()));
                shared = Some((f.base_ts, f.pid, ts, pid));
                refs
            }
        };
        parts.push(ts);
        parts.push(pid);
        let value = bytes_of(py, &b[f.at + FRAME_HEADER_SIZE..f.p_end])?;
        parts.push(value);
        let null = std::ptr::null_mut();
        let values = [value, key, headers, ts, null, new_ref(stream), pid, null];
        let offset = f.offset();
        let lazy = Lazy {
            offset: [offset as u64, (offset >> 64) as u64],
            id: [f.id as u64, (f.id >> 64) as u64],
            pending,
        };
        parts.disarm(); // ownership moves into the message
                        // SAFETY: `py` proves the GIL is held. `values` holds owned references (from `bytes_of`,
                        // `pair`, `none` and `new_ref`; `parts` gave up its ownership just above), NULL only at
                        // `OFFSET` and `ID`, which `lazy` marks pending, and at `HEADERS` only with
                        // `PENDING_HEADERS`. On success `received_message` returns a new, live `ReceivedMessage`.
        out.push(unsafe { untracked(st.received_message(py, values, lazy)?) });
    }
    out.into_list(py)
}

struct Outgoing<'a> {
    id: u128,
    payload: &'a [u8],
    origin_ts: u64,
    headers: &'a [u8],
}

/// Read one `OutgoingMessage`-shaped tuple, or `None` when it is not what the native
/// encoder handles (the pure-Python encoder then decides what to do with it).
fn outgoing<'a>(item: &'a Bound<'_, PyAny>) -> Option<Outgoing<'a>> {
    let t = item.cast::<PyTuple>().ok()?;
    if t.len() != 4 {
        return None;
    }
    // SAFETY: the GIL is held (`item` is bound). `t` is a tuple of exactly 4 items (checked), so
    // `PyTuple_GET_ITEM` for 0..4 gives live, borrowed items, which `Borrowed::from_ptr` borrows no
    // longer than `t` holds them. `payload` and `headers` are checked to be exact `bytes`, which
    // never change, and a tuple's items are never replaced: the slices stay valid for `'a`, the
    // borrow of `item`, whose tuple holds them.
    unsafe {
        let at = |i: usize| ffi::PyTuple_GET_ITEM(t.as_ptr(), i as ffi::Py_ssize_t);
        let (id, payload, ts, headers) = (at(0), at(1), at(2), at(3));
        if ffi::PyLong_CheckExact(id) == 0
            || ffi::PyBytes_CheckExact(payload) == 0
            || ffi::PyLong_CheckExact(ts) == 0
            || ffi::PyBytes_CheckExact(headers) == 0
        {
            return None;
        }
        let py = item.py();
        let id: u128 = Borrowed::from_ptr(py, id).extract().ok()?;
        let origin_ts: u64 = Borrowed::from_ptr(py, ts).extract().ok()?;
        let slice = |o: *mut ffi::PyObject| -> &'a [u8] {
            std::slice::from_raw_parts(
                ffi::PyBytes_AS_STRING(o) as *const u8,
                ffi::PyBytes_Size(o) as usize,
            )
        };
        Some(Outgoing {
            id,
            payload: slice(payload),
            origin_ts,
            headers: slice(headers),
        })
    }
}

/// `encode_batch`: the batch with every checksum filled in, or `None` for input the native
/// encoder leaves to the pure-Python one (not a list/tuple of well-typed 4-tuples).
#[pyfunction]
pub fn iggy_encode_batch<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let items: Vec<Bound<'py, PyAny>> = if let Ok(list) = messages.cast_exact::<PyList>() {
        list.iter().collect()
    } else if let Ok(tuple) = messages.cast_exact::<PyTuple>() {
        tuple.iter().collect()
    } else {
        return Ok(None);
    };
    let mut msgs = Vec::with_capacity(items.len());
    for item in &items {
        match outgoing(item) {
            Some(m) => msgs.push(m),
            None => return Ok(None),
        }
    }
    encode(py, &msgs)
}

/// The bytes of an exact `bytes` object, borrowed for as long as `obj` is.
fn exact_bytes<'a>(obj: &'a Bound<'_, PyAny>) -> Option<&'a [u8]> {
    obj.cast_exact::<PyBytes>().ok().map(|b| b.as_bytes())
}

/// `encode_runs`: the batch of plain bodies in runs, each `(bodies, ids, origin)`: a list of
/// exact `bytes`, their ids as 16 little-endian bytes each, and one origin timestamp (µs) for
/// the run; the same bytes as `iggy_encode_batch` of `OutgoingMessage(id, body, origin, b"")`
/// for each, without those tuples. `None` for input of another shape (the pure-Python
/// encoder then decides).
#[pyfunction]
#[pyo3(signature = (runs, room=0))]
pub fn iggy_encode_runs<'py>(
    py: Python<'py>,
    runs: &Bound<'py, PyAny>,
    room: usize,
) -> PyResult<Option<Bound<'py, PyByteArray>>> {
    let Ok(runs) = runs.cast_exact::<PyList>() else {
        return Ok(None);
    };
    let mut parts = Vec::with_capacity(runs.len());
    for run in runs.iter() {
        let Ok(run) = run.cast_exact::<PyTuple>() else {
            return Ok(None);
        };
        if run.len() != 3 {
            return Ok(None);
        }
        let Ok(bodies) = run.get_item(0)?.cast_exact::<PyList>().map(|l| l.clone()) else {
            return Ok(None);
        };
        let ids = run.get_item(1)?;
        let Ok(origin_ts) = run.get_item(2)?.extract::<u64>() else {
            return Ok(None);
        };
        parts.push((bodies, ids, origin_ts));
    }
    let total: usize = parts.iter().map(|(b, _, _)| b.len()).sum();
    let mut keep = Vec::with_capacity(total);
    for (bodies, _, _) in &parts {
        keep.extend(bodies.iter());
    }
    let mut msgs = Vec::with_capacity(total);
    let mut at = 0;
    for (bodies, ids, origin_ts) in &parts {
        let Some(raw) = exact_bytes(ids) else {
            return Ok(None);
        };
        if raw.len() != 16 * bodies.len() {
            return Ok(None);
        }
        for (i, id) in raw.chunks_exact(16).enumerate() {
            let Some(payload) = exact_bytes(&keep[at + i]) else {
                return Ok(None);
            };
            let id = u128::from_le_bytes(id.try_into().unwrap());
            msgs.push(Outgoing {
                id,
                payload,
                origin_ts: *origin_ts,
                headers: &[],
            });
        }
        at += bodies.len();
    }
    let Some(size) = batch_size(py, &msgs)? else {
        return Ok(None);
    };
    PyByteArray::new_with(py, room + size, |out| {
        write_batch(&msgs, size, &mut out[room..]);
        Ok(())
    })
    .map(Some)
}

/// The batch of `msgs` (see `iggy_encode_batch`), or `None` for sizes the pure-Python
/// encoder decides on.
fn encode<'py>(py: Python<'py>, msgs: &[Outgoing<'_>]) -> PyResult<Option<Bound<'py, PyBytes>>> {
    let Some(size) = batch_size(py, msgs)? else {
        return Ok(None);
    };
    PyBytes::new_with(py, size, |out| {
        write_batch(msgs, size, out);
        Ok(())
    })
    .map(Some)
}

/// The size of the batch of `msgs` after checking them (the errors `encode_batch_py`
/// raises), or `None` for sizes the pure-Python encoder decides on.
fn batch_size(py: Python<'_>, msgs: &[Outgoing<'_>]) -> PyResult<Option<usize>> {
    let st = state(py)?;
    if msgs.is_empty() {
        return Err(st.local_error(py, "a batch needs at least one message".to_owned()));
    }
    if msgs.len() > u32::MAX as usize {
        return Ok(None);
    }
    let origin = msgs.iter().map(|m| m.origin_ts).min().unwrap_or(0);
    let mut size = BATCH_HEADER_SIZE + FRAME_HEADER_SIZE * msgs.len();
    for m in msgs {
        if m.id == 0 {
            return Err(st.local_error(py, "message id 0 must be in [1, 2**128)".to_owned()));
        }
        if !(1..=MAX_PAYLOAD_BYTES).contains(&m.payload.len()) {
            return Err(st.local_error(
                py,
                format!("a payload must be 1..{MAX_PAYLOAD_BYTES} bytes"),
            ));
        }
        if m.origin_ts - origin > u32::MAX as u64 {
            return Err(st.local_error(
                py,
                "messages of one batch must span under 2**32 µs".to_owned(),
            ));
        }
        if m.headers.len() > u32::MAX as usize {
            return Ok(None);
        }
        size += m.payload.len() + m.headers.len();
    }
    Ok(Some(size))
}

/// Write the batch of `msgs` (checked by `batch_size`, which gave `size`) into `out`, which
/// holds exactly `size` zeroed bytes.
fn write_batch(msgs: &[Outgoing<'_>], size: usize, out: &mut [u8]) {
    let origin = msgs.iter().map(|m| m.origin_ts).min().unwrap_or(0);
    let count = msgs.len();
    let mut signed = Vec::with_capacity(44 + 8 * count);
    signed.extend_from_slice(&[0u8; 24]); // partition, base offset, base timestamp
    signed.extend_from_slice(&origin.to_le_bytes());
    signed.extend_from_slice(&(size as u64).to_le_bytes());
    signed.extend_from_slice(&(count as u32).to_le_bytes());
    let mut at = BATCH_HEADER_SIZE;
    for (delta, m) in msgs.iter().enumerate() {
        let p_len = m.payload.len();
        let h_len = m.headers.len();
        let f = &mut out[at..at + FRAME_HEADER_SIZE + p_len + h_len];
        f[8..16].copy_from_slice(&(m.id as u64).to_le_bytes());
        f[16..24].copy_from_slice(&((m.id >> 64) as u64).to_le_bytes());
        f[24..28].copy_from_slice(&(delta as u32).to_le_bytes());
        f[28..32].copy_from_slice(&((m.origin_ts - origin) as u32).to_le_bytes());
        f[32..36].copy_from_slice(&(h_len as u32).to_le_bytes());
        f[36..40].copy_from_slice(&(p_len as u32).to_le_bytes());
        // 40..48 reserved: zero
        f[FRAME_HEADER_SIZE..FRAME_HEADER_SIZE + p_len].copy_from_slice(m.payload);
        f[FRAME_HEADER_SIZE + p_len..].copy_from_slice(m.headers);
        let checksum = xxh3_64(&f[8..]);
        f[0..8].copy_from_slice(&checksum.to_le_bytes());
        signed.extend_from_slice(&checksum.to_le_bytes());
        at += FRAME_HEADER_SIZE + p_len + h_len;
    }
    let h = &mut out[..BATCH_HEADER_SIZE];
    // partition, base offset, base timestamp: zero
    h[24..32].copy_from_slice(&origin.to_le_bytes());
    h[32..40].copy_from_slice(&(size as u64).to_le_bytes());
    h[40..48].copy_from_slice(&xxh3_64(&signed).to_le_bytes());
    h[48..52].copy_from_slice(&(count as u32).to_le_bytes());
}

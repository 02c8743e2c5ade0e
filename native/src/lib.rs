//! streamwire's optional native core: the per-message loops of the codec hot paths.
//!
//! * RabbitMQ Streams: an Osiris chunk's entries → received `Message` objects (CRC-32 of the
//!   chunk, simple entries holding one AMQP data section sliced out directly and left
//!   untracked by the garbage collector; every other record shape is handed back to the
//!   Python decoders through callbacks).
//! * Liftbridge: a subscribed protobuf `Message` → a received `Message` (the common shape
//!   only; anything else is left to the Python decoder).
//! * Iggy: a SendMessages batch encoded with its XXH3-64 checksums; poll replies checked for
//!   structure into a compact frame index (one buffer + index, tuples made on access), and
//!   turned into `Message` objects with their checksums verified.
//! * RabbitMQ producers: a run of bodies written as Publish entries in one call, and the
//!   check (with the total size) that a producer's values are plain `bytes`, and whether
//!   a confirm's ids run consecutively (`publish.rs`).
//! * Producers: `send_batch`'s per-message futures made without a Python call each and not
//!   tracked by the garbage collector until used (`futures.rs`).
//! * Consumers: `async for` over ready messages without a coroutine per message (`aiter.rs`).
//!
//! Every function mirrors a pure-Python function of the package byte for byte and error for
//! error (same exception classes and texts, raised in the same order); the property tests in
//! `tests/property/test_native_core.py` hold them to it. Where an input is outside what a
//! function handles natively (unusual argument types, out-of-range integers) it returns
//! `None` and the Python wrapper runs the pure-Python code instead.
//!
//! No call loops over unbounded input: each handles one chunk, one batch or one poll reply,
//! whose sizes the protocols and the connection's frame limit bound.

use pyo3::exceptions::{PyRuntimeError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyTuple, PyType};

mod aiter;
mod buffer;
mod futures;
mod h2;
mod iggy;
mod liftbridge;
mod publish;
mod rabbitmq;
mod received;

/// Bumped whenever a function's signature or behaviour changes; the Python side refuses an
/// extension built from other sources (`streamwire._native.ABI`).
pub const ABI: u32 = 16;

/// The slots of `streamwire.codec.message.Message`, in this order.
pub(crate) const SLOTS: [&str; 8] = [
    "value",
    "key",
    "headers",
    "timestamp_us",
    "offset",
    "stream",
    "partition",
    "id",
];
pub(crate) const VALUE: usize = 0;
pub(crate) const KEY: usize = 1;
pub(crate) const HEADERS: usize = 2;
pub(crate) const TIMESTAMP: usize = 3;
pub(crate) const OFFSET: usize = 4;
pub(crate) const STREAM: usize = 5;
pub(crate) const PARTITION: usize = 6;
pub(crate) const ID: usize = 7;

pub(crate) struct State {
    pub(crate) message: Py<PyType>,
    pub(crate) offsets: [isize; 8],
    /// `ReceivedMessage`, the Iggy poll's subclass of `message` (`received.rs`).
    pub(crate) received: Py<PyType>,
    decode_error: Py<PyAny>,
    checksum_error: Py<PyAny>,
    local_error: Py<PyAny>,
}

static STATE: PyOnceLock<State> = PyOnceLock::new();

pub(crate) fn state(py: Python<'_>) -> PyResult<&State> {
    STATE
        .get(py)
        .ok_or_else(|| PyRuntimeError::new_err("streamwire._native._core.init() was not called"))
}

/// Where each slot `names[i]` of `cls` lives in its instances: set every slot of a fresh
/// instance to a distinct sentinel and find each sentinel's word in the instance's memory
/// (exactly once).
pub(crate) fn slot_offsets<const N: usize>(
    py: Python<'_>,
    cls: &Bound<'_, PyType>,
    names: [&str; N],
) -> PyResult<[isize; N]> {
    let tp = cls.as_type_ptr();
    let mut offsets = [0isize; N];
    // SAFETY: `py` proves the GIL is held. `tp` is `cls`'s type object, kept alive by the `cls`
    // borrow for the whole call, so its fields can be read. `alloc` is that type's own `tp_alloc`
    // (`PyType_GenericAlloc` for a class defined in Python, which zeroes the instance), called with
    // the type itself and 0 items (`tp_itemsize == 0` checked just before); its result is checked
    // non-null and owned by `obj` until the end of the block. Every word read lies inside that live
    // instance: `at` starts after the object header, is a multiple of the pointer size from an
    // aligned base, and `at + word <= tp_basicsize`.
    unsafe {
        if (*tp).tp_itemsize != 0 {
            return Err(PyTypeError::new_err(
                "a slotted class must not be a variable-size type",
            ));
        }
        let basic = (*tp).tp_basicsize;
        let alloc = (*tp)
            .tp_alloc
            .ok_or_else(|| PyTypeError::new_err("a slotted class without tp_alloc"))?;
        let obj = Bound::from_owned_ptr_or_err(py, alloc(tp, 0))?;
        let mut sentinels = Vec::with_capacity(N);
        for name in names {
            let sentinel = py.eval(c"object()", None, None)?;
            obj.setattr(name, &sentinel)?;
            sentinels.push(sentinel);
        }
        let base = obj.as_ptr() as *const u8;
        let word = std::mem::size_of::<*mut ffi::PyObject>() as isize;
        let head = std::mem::size_of::<ffi::PyObject>() as isize;
        for (i, sentinel) in sentinels.iter().enumerate() {
            let mut found = None;
            let mut at = head;
            while at + word <= basic {
                let p = *(base.offset(at) as *const *mut ffi::PyObject);
                if p == sentinel.as_ptr() {
                    if found.is_some() {
                        return Err(PyTypeError::new_err("a slot found twice"));
                    }
                    found = Some(at);
                }
                at += word;
            }
            offsets[i] = found
                .ok_or_else(|| PyTypeError::new_err(format!("slot {:?} not found", names[i])))?;
        }
    }
    Ok(offsets)
}

/// Register the Python classes the core builds and raises (called once by
/// `streamwire._native` at import), and create `ReceivedMessage` (a module attribute from
/// then on).
#[pyfunction]
#[pyo3(pass_module)]
fn init(
    module: &Bound<'_, PyModule>,
    message: &Bound<'_, PyType>,
    decode_error: &Bound<'_, PyAny>,
    checksum_error: &Bound<'_, PyAny>,
    local_error: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let py = module.py();
    if let Some(st) = STATE.get(py) {
        if st.message.bind(py).is(message)
            && st.decode_error.bind(py).is(decode_error)
            && st.checksum_error.bind(py).is(checksum_error)
            && st.local_error.bind(py).is(local_error)
        {
            return Ok(());
        }
        return Err(PyRuntimeError::new_err(
            "streamwire._native._core is already initialised",
        ));
    }
    let offsets = slot_offsets(py, message, SLOTS)?;
    let received = received::create(py, message, &offsets)?;
    module.add("ReceivedMessage", received.clone_ref(py))?;
    let _ = STATE.set(
        py,
        State {
            message: message.clone().unbind(),
            offsets,
            received,
            decode_error: decode_error.clone().unbind(),
            checksum_error: checksum_error.clone().unbind(),
            local_error: local_error.clone().unbind(),
        },
    );
    Ok(())
}

impl State {
    /// A new `Message` with its eight slots set; takes ownership of the eight references
    /// (released if allocation fails).
    ///
    /// # Safety
    /// Every pointer must be a valid owned reference; called with the GIL held.
    #[inline]
    pub(crate) unsafe fn message(
        &self,
        py: Python<'_>,
        values: [*mut ffi::PyObject; 8],
    ) -> PyResult<*mut ffi::PyObject> {
        // SAFETY: `self.message` is the `Message` class `init` registered, kept alive by `State`,
        // and its `tp_alloc` makes a zeroed instance; `self.offsets` are that class's eight slot
        // offsets found by `slot_offsets` at `init`, each a pointer-sized word inside its basic
        // size, NULL in the fresh instance, so storing the caller's owned references there
        // overwrites nothing and hands their ownership to the instance.
        let tp = self.message.as_ptr() as *mut ffi::PyTypeObject;
        let obj = match (*tp).tp_alloc {
            Some(alloc) => alloc(tp, 0),
            None => std::ptr::null_mut(),
        };
        if obj.is_null() {
            for v in values {
                ffi::Py_DECREF(v);
            }
            return Err(PyErr::fetch(py));
        }
        let base = obj as *mut u8;
        for (v, off) in values.into_iter().zip(self.offsets) {
            *(base.offset(off) as *mut *mut ffi::PyObject) = v;
        }
        Ok(obj)
    }

    /// A new `ReceivedMessage`: its eight slots set as by `message` (the lazy ones NULL
    /// while pending) and its lazy part; takes ownership of the references.
    ///
    /// # Safety
    /// Every non-NULL pointer must be a valid owned reference; NULL only where `lazy` says
    /// the attribute is pending; called with the GIL held.
    #[inline]
    pub(crate) unsafe fn received_message(
        &self,
        py: Python<'_>,
        values: [*mut ffi::PyObject; 8],
        lazy: received::Lazy,
    ) -> PyResult<*mut ffi::PyObject> {
        // SAFETY: as in `message`, for `ReceivedMessage` (kept alive by `State`), which has
        // `Message`'s layout first, so `self.offsets` address the same slots in it; a NULL value
        // stores NULL, which is what an unset slot holds.
        let tp = self.received.as_ptr() as *mut ffi::PyTypeObject;
        let obj = match (*tp).tp_alloc {
            Some(alloc) => alloc(tp, 0),
            None => std::ptr::null_mut(),
        };
        if obj.is_null() {
            for v in values {
                ffi::Py_XDECREF(v);
            }
            return Err(PyErr::fetch(py));
        }
        let base = obj as *mut u8;
        for (v, off) in values.into_iter().zip(self.offsets) {
            *(base.offset(off) as *mut *mut ffi::PyObject) = v;
        }
        // SAFETY: `obj` was just allocated by `self.received`'s `tp_alloc`, and `self.received` is
        // the type `received::create` made, as `put_lazy` requires.
        received::put_lazy(obj, lazy);
        Ok(obj)
    }

    pub(crate) fn decode_error(
        &self,
        py: Python<'_>,
        what: String,
        at: usize,
        frame: &str,
    ) -> PyErr {
        let kwargs = [("frame", frame)];
        let made = (|| -> PyResult<Bound<'_, PyAny>> {
            let kw = pyo3::types::IntoPyDict::into_py_dict(kwargs, py)?;
            self.decode_error.bind(py).call((what, at), Some(&kw))
        })();
        match made {
            Ok(exc) => PyErr::from_value(exc),
            Err(err) => err,
        }
    }

    pub(crate) fn checksum_error(
        &self,
        py: Python<'_>,
        what: String,
        expected: u64,
        actual: u64,
    ) -> PyErr {
        match self.checksum_error.bind(py).call1((what, expected, actual)) {
            Ok(exc) => PyErr::from_value(exc),
            Err(err) => err,
        }
    }

    pub(crate) fn local_error(&self, py: Python<'_>, what: String) -> PyErr {
        match self.local_error.bind(py).call1((what,)) {
            Ok(exc) => PyErr::from_value(exc),
            Err(err) => err,
        }
    }
}

/// Owned references collected on the way to a list; released on early return.
pub(crate) struct Owned(Vec<*mut ffi::PyObject>);

impl Owned {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Owned(Vec::with_capacity(n))
    }

    #[inline]
    pub(crate) fn push(&mut self, obj: *mut ffi::PyObject) {
        self.0.push(obj);
    }

    /// Forget the references without releasing them (their ownership moved elsewhere).
    pub(crate) fn disarm(mut self) {
        self.0.clear();
    }

    /// Move every reference into a new list.
    pub(crate) fn into_list(mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        // SAFETY: `py` proves the GIL is held. `PyList_New` gives a new list of `len` NULL items
        // (checked non-null). Each `PyList_SET_ITEM` fills an index below `len` exactly once and
        // steals an owned reference that `drain` removes from `self.0`, so `Drop` never releases it
        // again. The filled list is a new owned reference, handed to `from_owned_ptr`.
        unsafe {
            let list = ffi::PyList_New(self.0.len() as ffi::Py_ssize_t);
            if list.is_null() {
                return Err(PyErr::fetch(py));
            }
            for (i, obj) in self.0.drain(..).enumerate() {
                ffi::PyList_SET_ITEM(list, i as ffi::Py_ssize_t, obj);
            }
            Ok(Bound::from_owned_ptr(py, list).unbind())
        }
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        for obj in self.0.drain(..) {
            // SAFETY: every pointer in `self.0` is an owned reference given to `push` and not moved
            // out (`disarm` and `into_list` empty the vector when they take them). An `Owned` is
            // only made and dropped inside a #[pyfunction], so the GIL is held here.
            unsafe { ffi::Py_DECREF(obj) };
        }
    }
}

/// `msg` no longer tracked by the garbage collector. A received message (RabbitMQ chunk
/// records, Iggy poll replies) refers only to `bytes`, `int`s, a `str`, `None` and its own
/// headers `dict`, never back to itself or to another message, so it cannot be part of a
/// reference cycle when it is made; untracked, the thousands of messages a consumer holds
/// between reads are never walked (nor promoted into older generations) by the collector,
/// which cost 0.2-0.3 µs per message (see docs/benchmarks.md). `PyObject_GC_UnTrack` is what
/// CPython does for tuples and dicts of atoms; unlike those, a message is not tracked again
/// if user code later makes it part of a cycle (a message stored into its own headers),
/// which the collector then leaves.
///
/// # Safety
/// `msg` is a valid object; called with the GIL held.
#[inline]
pub(crate) unsafe fn untracked(msg: *mut ffi::PyObject) -> *mut ffi::PyObject {
    if ffi::PyObject_GC_IsTracked(msg) != 0 {
        ffi::PyObject_GC_UnTrack(msg as *mut std::ffi::c_void);
    }
    msg
}

/// A new reference to `obj`.
#[inline]
pub(crate) fn new_ref(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: every caller passes a live object (borrowed from a `Bound` argument, a
    // slot, a list item or `Py_None`) and holds the GIL: it is inside a #[pyfunction] or
    // a type slot CPython calls with the GIL. The signature does not enforce this.
    unsafe { ffi::Py_INCREF(obj) };
    obj
}

#[inline]
pub(crate) fn none() -> *mut ffi::PyObject {
    // SAFETY: `Py_None` only takes the address of the interpreter's static `None` object, which
    // stays valid for as long as the interpreter runs.
    new_ref(unsafe { ffi::Py_None() })
}

/// A Python int for a u128, or the pending error.
#[inline]
pub(crate) fn int_u128(py: Python<'_>, v: u128) -> PyResult<*mut ffi::PyObject> {
    let obj = if v <= u64::MAX as u128 {
        // SAFETY: `py` proves the GIL is held; the argument is a plain integer and the result is
        // checked for NULL below.
        unsafe { ffi::PyLong_FromUnsignedLongLong(v as u64) }
    } else {
        return Ok(v.into_pyobject(py)?.into_ptr());
    };
    if obj.is_null() {
        Err(PyErr::fetch(py))
    } else {
        Ok(obj)
    }
}

#[inline]
pub(crate) fn bytes_of(py: Python<'_>, data: &[u8]) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: `py` proves the GIL is held; `data` is a live slice of `data.len()` bytes that the
    // call only copies; the result is checked for NULL below.
    let obj = unsafe {
        ffi::PyBytes_FromStringAndSize(data.as_ptr() as *const _, data.len() as ffi::Py_ssize_t)
    };
    if obj.is_null() {
        Err(PyErr::fetch(py))
    } else {
        Ok(obj)
    }
}

#[inline]
pub(crate) fn new_dict(py: Python<'_>) -> PyResult<*mut ffi::PyObject> {
    // SAFETY: `py` proves the GIL is held; the result is checked for NULL below.
    let obj = unsafe { ffi::PyDict_New() };
    if obj.is_null() {
        Err(PyErr::fetch(py))
    } else {
        Ok(obj)
    }
}

/// `(headers, key)` from a Python callback's 2-tuple, as two new references.
pub(crate) fn pair(got: &Bound<'_, PyAny>) -> PyResult<(*mut ffi::PyObject, *mut ffi::PyObject)> {
    let t = got.cast::<PyTuple>().map_err(PyErr::from)?;
    if t.len() != 2 {
        return Err(PyTypeError::new_err("expected a 2-tuple"));
    }
    Ok((t.get_item(0)?.into_ptr(), t.get_item(1)?.into_ptr()))
}

/// Build a `Message` from Python (used by the import-time self-check).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn make_message(
    py: Python<'_>,
    value: &Bound<'_, PyBytes>,
    key: &Bound<'_, PyAny>,
    headers: &Bound<'_, PyAny>,
    timestamp_us: &Bound<'_, PyAny>,
    offset: &Bound<'_, PyAny>,
    stream: &Bound<'_, PyAny>,
    partition: &Bound<'_, PyAny>,
    id: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    let st = state(py)?;
    let mut values = [std::ptr::null_mut(); 8];
    values[VALUE] = new_ref(value.as_ptr());
    values[KEY] = new_ref(key.as_ptr());
    values[HEADERS] = new_ref(headers.as_ptr());
    values[TIMESTAMP] = new_ref(timestamp_us.as_ptr());
    values[OFFSET] = new_ref(offset.as_ptr());
    values[STREAM] = new_ref(stream.as_ptr());
    values[PARTITION] = new_ref(partition.as_ptr());
    values[ID] = new_ref(id.as_ptr());
    // SAFETY: `py` proves the GIL is held; each of the eight values is a new reference made by
    // `new_ref` from a live argument, as `State::message` requires, and on success it returns a
    // new, non-null owned reference, whose ownership `from_owned_ptr` takes.
    unsafe { Ok(Bound::from_owned_ptr(py, st.message(py, values)?).unbind()) }
}

// gil_used: every "the GIL is held" invariant of this crate's unsafe code assumes a GIL
// build; on a free-threaded CPython, importing the module turns the GIL back on (with
// CPython's warning) rather than run it unsound.
#[pymodule(gil_used = true)]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ABI", ABI)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(make_message, m)?)?;
    m.add_function(wrap_pyfunction!(rabbitmq::rmq_decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(liftbridge::lb_decode_message, m)?)?;
    m.add_function(wrap_pyfunction!(liftbridge::lb_decode_grpc, m)?)?;
    m.add_function(wrap_pyfunction!(h2::h2_gather_data, m)?)?;
    m.add_function(wrap_pyfunction!(rabbitmq::rmq_chunk_columns, m)?)?;
    m.add_function(wrap_pyfunction!(publish::rmq_publish_entries, m)?)?;
    m.add_function(wrap_pyfunction!(publish::rmq_bytes_total, m)?)?;
    m.add_function(wrap_pyfunction!(publish::rmq_sub_batch_records, m)?)?;
    m.add_function(wrap_pyfunction!(publish::rmq_id_run, m)?)?;
    m.add_function(wrap_pyfunction!(iggy::iggy_encode_batch, m)?)?;
    m.add_function(wrap_pyfunction!(iggy::iggy_encode_runs, m)?)?;
    m.add_function(wrap_pyfunction!(iggy::iggy_locate_frames, m)?)?;
    m.add_function(wrap_pyfunction!(iggy::iggy_received_messages, m)?)?;
    m.add_function(wrap_pyfunction!(futures::lazy_futures, m)?)?;
    m.add_function(wrap_pyfunction!(futures::gc_track, m)?)?;
    m.add_function(wrap_pyfunction!(aiter::ready_iterator, m)?)?;
    m.add_function(wrap_pyfunction!(buffer::frame_buffer, m)?)?;
    m.add_class::<iggy::FrameIndex>()?;
    Ok(())
}

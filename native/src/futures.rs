//! `send_batch`'s per-message futures (`streamwire.transport.pending.LazyFuture`): `count`
//! instances of the class, each holding the shared ledger and its index, made without a
//! Python `__init__` call each — and not tracked by the garbage collector.
//!
//! A fresh `LazyFuture` refers only to its ledger, which refers back to it only through a
//! real future's callback (made when the future is first used: `gc_track` is called then),
//! so it cannot be part of a reference cycle the collector would need to see. Untracked,
//! the thousands of futures a producer holds until their messages are confirmed are never
//! walked by the collector, which is what made per-message futures expensive (see
//! docs/benchmarks.md). `PyObject_GC_UnTrack` is the C API CPython itself uses for
//! containers that cannot be in a cycle (tuples of atoms, dictionaries of atoms).

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::{new_ref, slot_offsets, Owned};

struct Lazy {
    cls: Py<PyType>,
    /// Offsets of the `_ledger` and `_index` slots in an instance.
    offsets: [isize; 2],
}

static LAZY: PyOnceLock<Lazy> = PyOnceLock::new();

/// `[cls(ledger, i) for i in range(count)]` for the class `LazyFuture` (the first call
/// fixes the class), each instance untracked by the garbage collector.
#[pyfunction]
pub(crate) fn lazy_futures(
    py: Python<'_>,
    cls: &Bound<'_, PyType>,
    ledger: &Bound<'_, PyAny>,
    count: usize,
) -> PyResult<Py<PyAny>> {
    let lazy = LAZY.get_or_try_init(py, || -> PyResult<Lazy> {
        Ok(Lazy {
            cls: cls.clone().unbind(),
            offsets: slot_offsets(py, cls, ["_ledger", "_index"])?,
        })
    })?;
    if !lazy.cls.bind(py).is(cls) {
        return Err(PyTypeError::new_err("lazy_futures is bound to another class"));
    }
    let tp = cls.as_type_ptr();
    let alloc = unsafe { (*tp).tp_alloc }
        .ok_or_else(|| PyTypeError::new_err("a slotted class without tp_alloc"))?;
    let [at_ledger, at_index] = lazy.offsets;
    let mut made = Owned::with_capacity(count);
    for i in 0..count {
        unsafe {
            let index = ffi::PyLong_FromSsize_t(i as ffi::Py_ssize_t);
            if index.is_null() {
                return Err(PyErr::fetch(py));
            }
            let obj = alloc(tp, 0);
            if obj.is_null() {
                ffi::Py_DECREF(index);
                return Err(PyErr::fetch(py));
            }
            let base = obj as *mut u8;
            *(base.offset(at_ledger) as *mut *mut ffi::PyObject) = new_ref(ledger.as_ptr());
            *(base.offset(at_index) as *mut *mut ffi::PyObject) = index;
            if ffi::PyObject_GC_IsTracked(obj) != 0 {
                ffi::PyObject_GC_UnTrack(obj as *mut std::ffi::c_void);
            }
            made.push(obj);
        }
    }
    made.into_list(py)
}

/// Track `obj` by the garbage collector again (a no-op when it is tracked or not a GC type).
#[pyfunction]
pub(crate) fn gc_track(obj: &Bound<'_, PyAny>) {
    unsafe {
        let p = obj.as_ptr();
        if ffi::PyType_IS_GC(ffi::Py_TYPE(p)) != 0 && ffi::PyObject_GC_IsTracked(p) == 0 {
            ffi::PyObject_GC_Track(p as *mut std::ffi::c_void);
        }
    }
}

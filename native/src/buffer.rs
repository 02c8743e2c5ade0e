//! `bytes` written in place: a receive buffer that becomes an immutable `bytes` without a
//! copy, and a `bytes` a decoder fills, neither zeroed first.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A new, unshared `bytes` of `size > 0` bytes whose storage is not initialised, and a pointer
/// to that storage.
///
/// # Safety
/// The caller writes all `size` bytes through the pointer before anyone else sees the
/// `bytes`, and writes nothing through it once the `bytes` is gone.
unsafe fn uninit_bytes(py: Python<'_>, size: isize) -> PyResult<(Bound<'_, PyBytes>, *mut u8)> {
    debug_assert!(size > 0);
    // SAFETY: `py` proves the GIL is held. `PyBytes_FromStringAndSize(NULL, size)` with
    // `size > 0` (0 would give the shared empty `bytes`) makes a new, unshared `bytes` whose
    // `size` bytes are ours to write; it is checked non-null and owned by `bytes` from then
    // on. `PyBytes_AsString` points at exactly those `size` bytes.
    unsafe {
        let raw = ffi::PyBytes_FromStringAndSize(std::ptr::null(), size);
        if raw.is_null() {
            return Err(PyErr::fetch(py));
        }
        let storage = ffi::PyBytes_AsString(raw) as *mut u8;
        Ok((Bound::from_owned_ptr(py, raw).cast_into_unchecked(), storage))
    }
}

/// A new `bytes` of `size` (not initialised) bytes and a writable memoryview of its storage,
/// for a socket to receive one frame into. The view holds no reference to the `bytes`: the
/// caller keeps both, fills the whole view, releases it, and only then hands the `bytes`
/// out (nobody else may see it before: its contents are undefined until filled).
#[pyfunction]
pub fn frame_buffer(py: Python<'_>, size: isize) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
    if size <= 0 {
        return Err(PyValueError::new_err(format!(
            "frame size must be positive, not {size}"
        )));
    }
    // SAFETY: `size > 0` (checked above). The view covers exactly the `size` bytes of the
    // storage. As this function's contract says (and `ReceiveInto` in
    // `streamwire.transport._receive` does), the caller keeps the `bytes` while the view
    // exists, fills all `size` bytes and releases the view before anyone else sees the `bytes`.
    unsafe {
        let (bytes, storage) = uninit_bytes(py, size)?;
        let view = ffi::PyMemoryView_FromMemory(storage as *mut _, size, ffi::PyBUF_WRITE);
        if view.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok((bytes.into_any().unbind(), Bound::from_owned_ptr(py, view).unbind()))
    }
}

/// A new `bytes` of `size` bytes that `fill` writes, every one of them, before anyone sees it:
/// unlike `PyBytes::new_with`, its storage is not zeroed first. `fill` must write the whole
/// slice it is given (its callers copy spans whose lengths sum to `size`).
pub fn filled_bytes<'py>(
    py: Python<'py>,
    size: usize,
    fill: impl FnOnce(&mut [u8]),
) -> PyResult<Bound<'py, PyBytes>> {
    if size == 0 {
        return Ok(PyBytes::new(py, b""));
    }
    let len = isize::try_from(size).map_err(|_| PyValueError::new_err("values too large"))?;
    // SAFETY: `len > 0`. The slice covers exactly the `size` bytes of the new `bytes`'s
    // storage, which no one else can reach until it is returned; `fill` writes all of them
    // (this function's contract) before it is.
    unsafe {
        let (bytes, storage) = uninit_bytes(py, len)?;
        fill(std::slice::from_raw_parts_mut(storage, size));
        Ok(bytes)
    }
}

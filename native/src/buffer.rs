//! A receive buffer that becomes an immutable `bytes` without a copy.

use pyo3::exceptions::PyValueError;
use pyo3::ffi;
use pyo3::prelude::*;

/// A new `bytes` of `size` bytes (not initialised) and a writable memoryview of its storage,
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
    // SAFETY: `py` proves the GIL is held. `PyBytes_FromStringAndSize(NULL, size)` with `size > 0`
    // (checked above; 0 would give the shared empty `bytes`) makes a new, unshared `bytes` whose
    // `size` bytes are ours to write; it is checked non-null and owned by `bytes`.
    // `PyBytes_AsString(raw)` points at those `size` bytes, so the view covers exactly them. The
    // view holds no reference to `raw`: as this function's contract says (and `ReceiveInto` in
    // `streamwire.transport._receive` does), the caller keeps the `bytes` while the view exists,
    // fills all `size` bytes and releases the view before anyone else sees the `bytes`.
    unsafe {
        let raw = ffi::PyBytes_FromStringAndSize(std::ptr::null(), size);
        if raw.is_null() {
            return Err(PyErr::fetch(py));
        }
        let bytes = Bound::from_owned_ptr(py, raw).unbind();
        let view = ffi::PyMemoryView_FromMemory(ffi::PyBytes_AsString(raw), size, ffi::PyBUF_WRITE);
        if view.is_null() {
            return Err(PyErr::fetch(py));
        }
        Ok((bytes, Bound::from_owned_ptr(py, view).unbind()))
    }
}

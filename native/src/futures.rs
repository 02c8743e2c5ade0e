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
//!
//! Making and freeing the objects was then most of what a future cost (~0.05 µs together,
//! plus the young collections their allocations counted towards), so:
//! * they are made with the collector paused (no Python code runs meanwhile), their index
//!   `int`s shared between calls;
//! * a future freed while still fresh (exactly `LazyFuture`, untracked, no weak reference,
//!   no `__dict__`) goes to a free list of at most [`MAX_FREE`] objects once its two slots
//!   are released, and the next call takes its futures from there (`PyObject_Init`): the
//!   class's `tp_dealloc` is [`lazy_dealloc`], which hands anything else to the class's own
//!   deallocator. `LazyFuture` refuses subclasses, whose deallocation would reach it too.

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyType};

use crate::{new_ref, slot_offsets, Owned};

struct Lazy {
    cls: Py<PyType>,
    /// Offsets of the `_ledger` and `_index` slots in an instance.
    offsets: [isize; 2],
    /// The class's own deallocator (replaced by [`lazy_dealloc`]).
    dealloc: Option<ffi::destructor>,
    /// Where an instance's list of weak references and its `__dict__` are (0: none).
    weaklist: isize,
    dict: isize,
}

/// Freed fresh futures kept for the next call: their memory, untracked, every field NULL,
/// no reference held (not even to the class). Only touched with the GIL held.
struct FreeList(std::cell::UnsafeCell<Vec<*mut ffi::PyObject>>);

// SAFETY: the `Vec` is only read or changed with the GIL held, by `lazy_dealloc` (a `tp_dealloc`,
// which CPython calls with it) and by `lazy_futures` (a #[pyfunction]), so no two threads touch it
// at once; its pointers are memory blocks no one else refers to.
unsafe impl Sync for FreeList {}

static FREE: FreeList = FreeList(std::cell::UnsafeCell::new(Vec::new()));
const MAX_FREE: usize = 1 << 14;
const MANAGED_DICT: std::os::raw::c_ulong = 1 << 4;
const MANAGED_WEAKREF: std::os::raw::c_ulong = 1 << 3;

/// Whether the pointer at `at` in the object at `base` is NULL (or there is none: 0).
///
/// # Safety
/// `at <= 0`, or `base + at` must be a pointer-sized field inside the live object at
/// `base` (an offset its type records, as `tp_weaklistoffset` or `tp_dictoffset`).
unsafe fn unset(base: *mut u8, at: isize) -> bool {
    at <= 0 || (*(base.offset(at) as *mut *mut ffi::PyObject)).is_null()
}

/// The deallocator of `LazyFuture`: a future that never became real (untracked: made by
/// [`lazy_futures`] and never used; no weak reference) goes to the free list once its two
/// slots are released; anything else takes the class's own way. A fresh future's asyncio
/// state was never initialised (all NULL), so there is nothing else to release and no
/// finalizer to run (`asyncio.Future`'s does nothing for a future that logs no traceback).
///
/// # Safety
/// Only CPython calls it, as the `tp_dealloc` that `lazy_futures` installs on `LazyFuture`
/// (after `LAZY` holds the class's own deallocator and its plain, non-negative dict and
/// weak-reference offsets): once, with the GIL held, for an object whose reference count
/// reached zero and whose class is `LazyFuture` (which refuses subclasses).
unsafe extern "C" fn lazy_dealloc(obj: *mut ffi::PyObject) {
    let py = Python::assume_attached();
    let lazy = match LAZY.get(py) {
        Some(lazy) => lazy,
        None => return, // unreachable: installed by the initialisation of LAZY
    };
    let tp = ffi::Py_TYPE(obj);
    let base = obj as *mut u8;
    let free = FREE.0.get();
    // SAFETY: `unset` runs only once `obj` is known to be a `LazyFuture` (the `&&` chain),
    // whose dict and weak-reference offsets `LAZY` recorded from the class (0 or a plain
    // field inside the instance); the free list is touched with the GIL held. The slots
    // at `lazy.offsets` are `_ledger` and `_index`, found by `slot_offsets`.
    if tp == lazy.cls.as_ptr() as *mut ffi::PyTypeObject
        && ffi::PyObject_GC_IsTracked(obj) == 0
        && unset(base, lazy.weaklist)
        && unset(base, lazy.dict)
        && (*free).len() < MAX_FREE
    {
        for at in lazy.offsets {
            let slot = base.offset(at) as *mut *mut ffi::PyObject;
            let p = *slot;
            if !p.is_null() {
                *slot = std::ptr::null_mut();
                ffi::Py_DECREF(p); // may free the ledger, and other futures with it
            }
        }
        (*free).push(obj);
        ffi::Py_DECREF(tp as *mut ffi::PyObject); // the instance's reference to its class
        return;
    }
    // The class's own deallocator is `subtype_dealloc`, which looks for the base class to
    // finish with by comparing each class's `tp_dealloc` with itself: it must see its own
    // while it starts (it reads the base's deallocator then; whatever runs during it, other
    // futures freed included, takes the same way).
    let cls = lazy.cls.as_ptr() as *mut ffi::PyTypeObject;
    (*cls).tp_dealloc = lazy.dealloc;
    if let Some(dealloc) = lazy.dealloc {
        dealloc(obj);
    }
    (*cls).tp_dealloc = Some(lazy_dealloc);
}

static LAZY: PyOnceLock<Lazy> = PyOnceLock::new();

/// The index objects `0, 1, ...` shared by every call (an `int` above 256 is otherwise one
/// more allocation per future), grown on demand up to [`MAX_CACHED`].
static INDEXES: PyOnceLock<Py<PyList>> = PyOnceLock::new();
const MAX_CACHED: usize = 1 << 16;

fn indexes(py: Python<'_>, count: usize) -> PyResult<*mut ffi::PyObject> {
    let list = INDEXES
        .get_or_init(py, || PyList::empty(py).unbind())
        .bind(py);
    let want = count.min(MAX_CACHED);
    for i in list.len()..want {
        list.append(i)?;
    }
    Ok(list.as_ptr())
}

/// The garbage collector disabled for this scope, as it was before afterwards.
struct GcPaused(bool);

impl GcPaused {
    fn new() -> Self {
        // SAFETY: a `GcPaused` is only made inside `lazy_futures`, a #[pyfunction], so the GIL is
        // held.
        GcPaused(unsafe { ffi::PyGC_Disable() } != 0)
    }
}

impl Drop for GcPaused {
    fn drop(&mut self) {
        if self.0 {
            // SAFETY: the GIL is held (the value lives inside `lazy_futures`), and the collector is
            // enabled again only because `new` disabled it.
            unsafe { ffi::PyGC_Enable() };
        }
    }
}

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
        let offsets = slot_offsets(py, cls, ["_ledger", "_index"])?;
        let tp = cls.as_type_ptr();
        // SAFETY: `py` proves the GIL is held. `tp` is `cls`'s type object, kept alive by the `cls`
        // borrow (and then by `lazy.cls`). `tp_dealloc` is replaced only after the class's own
        // deallocator is kept in `lazy.dealloc` for `lazy_dealloc` to fall back on, and only when
        // the instance dict and weak references are plain fields (no managed flags, non-negative
        // offsets), which `lazy_dealloc` reads through `unset`. No Python code runs between the
        // write and `LAZY` being set.
        unsafe {
            let lazy = Lazy {
                cls: cls.clone().unbind(),
                offsets,
                dealloc: (*tp).tp_dealloc,
                weaklist: (*tp).tp_weaklistoffset,
                dict: (*tp).tp_dictoffset,
            };
            // Recycled only where an instance's `__dict__` and weak references are plain
            // fields: not with the dictionary or weak references managed by the
            // interpreter before the object (`Py_TPFLAGS_MANAGED_DICT`/`_WEAKREF`, negative
            // offsets), as `asyncio.Future` subclasses have on Python 3.13.
            let managed = (*tp).tp_flags & (MANAGED_DICT | MANAGED_WEAKREF) != 0;
            if !managed && lazy.dict >= 0 && lazy.weaklist >= 0 && lazy.dealloc.is_some() {
                (*tp).tp_dealloc = Some(lazy_dealloc);
            }
            Ok(lazy)
        }
    })?;
    if !lazy.cls.bind(py).is(cls) {
        return Err(PyTypeError::new_err(
            "lazy_futures is bound to another class",
        ));
    }
    let tp = cls.as_type_ptr();
    // SAFETY: `tp` is `cls`'s type object, alive for the `cls` borrow; `py` proves the GIL.
    let alloc = unsafe { (*tp).tp_alloc }
        .ok_or_else(|| PyTypeError::new_err("a slotted class without tp_alloc"))?;
    let [at_ledger, at_index] = lazy.offsets;
    let indexes = indexes(py, count)?;
    // SAFETY: `indexes` is the list in `INDEXES`, which the static keeps alive for as long as the
    // module; `py` proves the GIL is held.
    let cached = unsafe { ffi::PyList_GET_SIZE(indexes) } as usize;
    let mut made = Owned::with_capacity(count);
    // No collection can be due to these objects (they are untracked at once), but each
    // allocation of a GC type counts towards the next one: without this, a call of 10 000
    // futures would trigger ~14 young collections, and every tenth call an older one (a
    // full collection every few hundred thousand futures, ~0.05 µs per future). Nothing
    // but allocation runs in between, so no other code sees the collector disabled.
    let _paused = GcPaused::new();
    for i in 0..count {
        // SAFETY: `py` proves the GIL is held, and the collector is paused, so no Python code runs
        // in this loop. `i < cached` is an index into `INDEXES`, which only grows, so the item is
        // live; `new_ref` makes it owned. A free-list entry is the memory of a fresh `LazyFuture`
        // (untracked, every field NULL, no references held); `PyObject_Init` gives it back its
        // class and one reference. Otherwise `alloc` is the class's `tp_alloc`, zeroing. Either way
        // `obj` is checked non-null and its `_ledger` and `_index` slots (the offsets
        // `slot_offsets` found, inside the instance) hold NULL, so the two owned references stored
        // there overwrite nothing. `obj` then moves into `made`, which owns it.
        unsafe {
            let index = if i < cached {
                new_ref(ffi::PyList_GET_ITEM(indexes, i as ffi::Py_ssize_t))
            } else {
                ffi::PyLong_FromSsize_t(i as ffi::Py_ssize_t)
            };
            if index.is_null() {
                return Err(PyErr::fetch(py));
            }
            let obj = match (*FREE.0.get()).pop() {
                Some(obj) => ffi::PyObject_Init(obj, tp), // its class and one reference
                None => alloc(tp, 0),
            };
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
    drop(_paused);
    made.into_list(py)
}

/// Track `obj` by the garbage collector again (a no-op when it is tracked or not a GC type).
#[pyfunction]
pub(crate) fn gc_track(obj: &Bound<'_, PyAny>) {
    // SAFETY: the GIL is held (`obj` is bound) and `obj` keeps the object alive; it is tracked only
    // when its type is a garbage-collected one and it is not tracked yet.
    unsafe {
        let p = obj.as_ptr();
        if ffi::PyType_IS_GC(ffi::Py_TYPE(p)) != 0 && ffi::PyObject_GC_IsTracked(p) == 0 {
            ffi::PyObject_GC_Track(p as *mut std::ffi::c_void);
        }
    }
}

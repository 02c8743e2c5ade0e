//! `async for` over a consumer's queue of ready messages without a coroutine per message
//! (`streamwire.transport.ready.ReadyIterator` is the pure-Python twin).
//!
//! `ready_iterator(ready, owner, name, field, slow)` makes an asynchronous iterator whose
//! `__anext__` is a C slot, so that `async for` calls no Python function per message:
//!
//! * when `ready` (a deque) is empty, `__anext__` returns `slow()` (the consumer's own
//!   `__anext__` coroutine: waiting, timeouts, the end of the stream, errors);
//! * otherwise it returns a `_Ready` awaitable that completes without suspending: when it is
//!   first resumed (`await`, `send(None)`, `next`) it takes the first message of `ready`, sets
//!   `owner.<name>` to the message's `<field>` and returns it (through `am_send` on 3.11, a
//!   `StopIteration` on later Pythons). Nothing is taken before the awaitable runs, as with
//!   a coroutine: one that is dropped or cancelled unawaited loses nothing. If the queue
//!   was emptied in between, the awaitable runs `slow()` and delegates to it (`send`,
//!   `throw`, `close`), so it behaves as that coroutine would.
//!
//! The iterator keeps the last `_Ready` it returned and hands it out again when nobody else
//! holds it any more (its reference count is 1), so the common loop allocates nothing per
//! message. It also does without lookups per message where it safely can: an exact deque's
//! length is read from the object and its builtin `popleft` is called as a C function; and
//! when `owner.<name>` is a writable `__slots__` slot of the owner's type, which sets
//! attributes generically (no `__setattr__` of its own), the offset is stored straight into
//! the slot, as `setattr` would, for as long as the owner keeps that type and the type is
//! not changed (its version tag); otherwise `setattr` is called. Both types take part in garbage collection (a `_Ready` refers to its iterator,
//! which refers to it).

use std::os::raw::{c_int, c_void};
use std::ptr::null_mut;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

use crate::new_ref;

#[repr(C)]
struct Iter {
    ob_base: ffi::PyObject,
    ready: *mut ffi::PyObject,
    popleft: *mut ffi::PyObject,
    owner: *mut ffi::PyObject,
    name: *mut ffi::PyObject,
    field: *mut ffi::PyObject,
    slow: *mut ffi::PyObject,
    spare: *mut ffi::PyObject,
    /// `Message` (borrowed from the core's state, which lives as long as the module) and
    /// where its `field` slot is, when `field` is one of its slots; else NULL and 0.
    message: *mut ffi::PyTypeObject,
    at: isize,
    /// `ready.popleft` as a C function taking no arguments (`ready` an exact deque), called
    /// without the bound method's vectorcall; else None and `popleft` is called.
    take: Option<ffi::PyCFunction>,
    /// `collections.deque` (borrowed from the types, which live as long as the module) when
    /// `ready` was an exact deque, else NULL: while `ready` still has that type, its length
    /// is its `ob_size` and `take` is its `popleft`.
    deque: *mut ffi::PyTypeObject,
    /// The owner's type (a strong reference) when `name` is one of its writable object
    /// slots and the type sets attributes generically: the value is stored straight into
    /// the slot at `slot` while the owner still has that type; else NULL (`setattr`).
    owner_type: *mut ffi::PyObject,
    /// The owner type's version tag then: any change to the type (a new attribute, another
    /// `__setattr__`) changes it, and the slot is no longer used.
    version: u32,
    slot: isize,
}

#[repr(C)]
struct Ready {
    ob_base: ffi::PyObject,
    iter: *mut ffi::PyObject,
    /// The coroutine delegated to when the queue was found empty, or NULL.
    coro: *mut ffi::PyObject,
    /// Set once the awaitable has completed (or failed): it cannot be resumed again.
    used: c_int,
}

struct Types {
    iter: Py<PyType>,
    ready: Py<PyType>,
    /// `collections.deque`
    deque: Py<PyAny>,
}

static TYPES: PyOnceLock<Types> = PyOnceLock::new();

/// Release the reference in `*slot`, leaving NULL there first.
///
/// # Safety
/// `slot` must point to an object-pointer field of a live object, holding NULL or an owned
/// reference; the GIL must be held.
unsafe fn clear(slot: *mut *mut ffi::PyObject) {
    let p = *slot;
    if !p.is_null() {
        *slot = null_mut();
        ffi::Py_DECREF(p);
    }
}

/// Free `obj`'s memory with its type's `tp_free` and drop its reference to its heap type.
///
/// # Safety
/// `obj` must be an untracked `ReadyIterator` or `_Ready` (a heap type made by
/// `make_type`) whose references were released, not used afterwards; the GIL must be held.
unsafe fn free(obj: *mut ffi::PyObject) {
    let tp = ffi::Py_TYPE(obj);
    match (*tp).tp_free {
        Some(f) => f(obj as *mut c_void),
        None => ffi::PyObject_GC_Del(obj as *mut c_void),
    }
    ffi::Py_DECREF(tp as *mut ffi::PyObject);
}

macro_rules! visit {
    ($p:expr, $visit:expr, $arg:expr) => {
        if !$p.is_null() {
            let r = $visit($p, $arg);
            if r != 0 {
                return r;
            }
        }
    };
}

// --- the iterator --------------------------------------------------------------------------

/// `tp_traverse` of `ReadyIterator`.
///
/// # Safety
/// Only the garbage collector calls it, with the GIL held, `obj` a live `ReadyIterator`
/// (allocated by that type, so an `Iter`) and its own `visit` and `arg`.
unsafe extern "C" fn iter_traverse(
    obj: *mut ffi::PyObject,
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    let it = obj as *mut Iter;
    visit!((*it).ready, visit, arg);
    visit!((*it).popleft, visit, arg);
    visit!((*it).owner, visit, arg);
    visit!((*it).name, visit, arg);
    visit!((*it).field, visit, arg);
    visit!((*it).slow, visit, arg);
    visit!((*it).spare, visit, arg);
    visit!((*it).owner_type, visit, arg);
    0
}

/// `tp_clear` of `ReadyIterator`.
///
/// # Safety
/// CPython (or `iter_dealloc`) calls it with the GIL held and `obj` a live `ReadyIterator`.
unsafe extern "C" fn iter_clear(obj: *mut ffi::PyObject) -> c_int {
    let it = obj as *mut Iter;
    // SAFETY: each field is an object pointer of the live `Iter` at `obj`, NULL or owned
    // by it, and the GIL is held (this function's contract), as `clear` requires.
    clear(&mut (*it).ready);
    clear(&mut (*it).popleft);
    clear(&mut (*it).owner);
    clear(&mut (*it).name);
    clear(&mut (*it).field);
    clear(&mut (*it).slow);
    clear(&mut (*it).spare);
    clear(&mut (*it).owner_type);
    0
}

/// `tp_dealloc` of `ReadyIterator`.
///
/// # Safety
/// Only CPython calls it: once, with the GIL held, for a `ReadyIterator` whose reference
/// count reached zero.
unsafe extern "C" fn iter_dealloc(obj: *mut ffi::PyObject) {
    ffi::PyObject_GC_UnTrack(obj as *mut c_void);
    // SAFETY: `obj` is a live `ReadyIterator`, now untracked; `iter_clear` releases its
    // references, after which `free` may free it, and nothing uses `obj` afterwards.
    iter_clear(obj);
    free(obj);
}

/// `__await__`, `__iter__` and `__aiter__`: the object itself.
///
/// # Safety
/// Only CPython calls it, as a type slot: with the GIL held and `obj` a live object.
unsafe extern "C" fn same(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    new_ref(obj)
}

/// Whether `ready` is (still) an exact deque: `__class__` may be assigned on Pythons whose
/// deque is a heap type.
///
/// # Safety
/// `it` must point to a live `ReadyIterator` whose `ready` is not NULL (not cleared); the
/// GIL must be held.
#[inline]
unsafe fn exact(it: *mut Iter) -> bool {
    !(*it).deque.is_null() && ffi::Py_TYPE((*it).ready) == (*it).deque
}

/// `len(ready)`, -1 with an exception set on failure.
///
/// # Safety
/// As for `exact`.
#[inline]
unsafe fn ready_len(it: *mut Iter) -> isize {
    // SAFETY: the caller's guarantee is `exact`'s; `Py_SIZE` reads `ob_size` only when
    // `ready` is still an exact deque, a variable-size object whose `ob_size` is its length.
    if exact(it) {
        ffi::Py_SIZE((*it).ready)
    } else {
        ffi::PyObject_Size((*it).ready)
    }
}

/// `owner.<name> = value` (a new reference, consumed): into the slot when the owner's type
/// is still the one whose slot it is (what `setattr` would do, without the lookups).
///
/// # Safety
/// `it` must point to a live `ReadyIterator` whose `owner` and `name` are set (not
/// cleared), `value` be an owned reference (consumed), and the GIL be held.
unsafe fn set_owner(it: *mut Iter, value: *mut ffi::PyObject) -> c_int {
    let owner = (*it).owner;
    let tp = ffi::Py_TYPE(owner);
    if !(*it).owner_type.is_null()
        && tp as *mut ffi::PyObject == (*it).owner_type
        && (*tp).tp_version_tag == (*it).version
    {
        // SAFETY: the owner still has the type `owner_slot` inspected (`owner_type` holds
        // a strong reference, so its address cannot be reused) and that type is unchanged
        // (same nonzero version tag), so `slot` is still the offset of a writable object
        // slot inside the owner's basic size, holding NULL or an owned reference.
        let at = (owner as *mut u8).offset((*it).slot) as *mut *mut ffi::PyObject;
        let old = *at;
        *at = value;
        if !old.is_null() {
            ffi::Py_DECREF(old);
        }
        return 0;
    }
    let rc = ffi::PyObject_SetAttr(owner, (*it).name, value);
    ffi::Py_DECREF(value);
    rc
}

/// `__anext__` of `ReadyIterator`: `slow()` when `ready` is empty, else a `_Ready`.
///
/// # Safety
/// Only CPython calls it, as `am_anext`: with the GIL held and `obj` a live
/// `ReadyIterator`.
unsafe extern "C" fn iter_anext(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let it = obj as *mut Iter;
    if (*it).ready.is_null() {
        ffi::PyErr_SetString(
            ffi::PyExc_RuntimeError,
            c"the iterator was cleared".as_ptr(),
        );
        return null_mut();
    }
    // SAFETY: `it` is the live `ReadyIterator` CPython passed, `ready` was checked
    // non-NULL just above, and the GIL is held, as `ready_len` requires.
    let n = ready_len(it);
    if n < 0 {
        return null_mut();
    }
    if n == 0 {
        return ffi::PyObject_CallNoArgs((*it).slow);
    }
    // SAFETY: `spare` is only ever set (below) to a `_Ready` this iterator made, and owned
    // by it; with a reference count of 1 nobody else holds it, so it can be handed out again.
    let spare = (*it).spare;
    if !spare.is_null() && ffi::Py_REFCNT(spare) == 1 {
        let r = spare as *mut Ready;
        if (*r).coro.is_null() {
            (*r).used = 0;
            return new_ref(spare);
        }
    }
    let tp = match TYPES.get(Python::assume_attached()) {
        Some(t) => t.ready.as_ptr() as *mut ffi::PyTypeObject,
        None => {
            ffi::PyErr_SetString(ffi::PyExc_RuntimeError, c"no _Ready type".as_ptr());
            return null_mut();
        }
    };
    let made = match (*tp).tp_alloc {
        Some(alloc) => alloc(tp, 0),
        None => null_mut(),
    };
    if made.is_null() {
        return null_mut();
    }
    let r = made as *mut Ready;
    (*r).iter = new_ref(obj);
    (*r).coro = null_mut();
    (*r).used = 0;
    let old = (*it).spare;
    (*it).spare = new_ref(made);
    if !old.is_null() {
        ffi::Py_DECREF(old);
    }
    made
}

// --- the awaitable -------------------------------------------------------------------------

/// `tp_traverse` of `_Ready`.
///
/// # Safety
/// Only the garbage collector calls it, with the GIL held, `obj` a live `_Ready`
/// (allocated by that type, so a `Ready`) and its own `visit` and `arg`.
unsafe extern "C" fn ready_traverse(
    obj: *mut ffi::PyObject,
    visit: ffi::visitproc,
    arg: *mut c_void,
) -> c_int {
    let r = obj as *mut Ready;
    visit!((*r).iter, visit, arg);
    visit!((*r).coro, visit, arg);
    0
}

/// `tp_clear` of `_Ready`.
///
/// # Safety
/// CPython (or `ready_dealloc`) calls it with the GIL held and `obj` a live `_Ready`.
unsafe extern "C" fn ready_clear(obj: *mut ffi::PyObject) -> c_int {
    let r = obj as *mut Ready;
    // SAFETY: both fields are object pointers of the live `Ready` at `obj`, NULL or owned
    // by it, and the GIL is held (this function's contract), as `clear` requires.
    clear(&mut (*r).iter);
    clear(&mut (*r).coro);
    0
}

/// `tp_dealloc` of `_Ready`.
///
/// # Safety
/// Only CPython calls it: once, with the GIL held, for a `_Ready` whose reference count
/// reached zero.
unsafe extern "C" fn ready_dealloc(obj: *mut ffi::PyObject) {
    ffi::PyObject_GC_UnTrack(obj as *mut c_void);
    // SAFETY: `obj` is a live `_Ready`, now untracked; `ready_clear` releases its
    // references, after which `free` may free it, and nothing uses `obj` afterwards.
    ready_clear(obj);
    free(obj);
}

/// After the delegated coroutine finished (returned or raised): this awaitable is done too.
///
/// # Safety
/// `r` must point to a live `_Ready`, and the GIL be held.
unsafe fn finished(r: *mut Ready) {
    (*r).used = 1;
    // SAFETY: `coro` is an object pointer field of the live `_Ready` at `r`, NULL or owned
    // by it, and the GIL is held (this function's contract).
    clear(&mut (*r).coro);
}

/// One step of the coroutine this awaitable delegates to.
///
/// # Safety
/// `r` must point to a live `_Ready` whose `coro` is not NULL, `arg` to a live object
/// (borrowed), `result` be valid for a write, and the GIL be held.
unsafe fn delegate(
    r: *mut Ready,
    arg: *mut ffi::PyObject,
    result: *mut *mut ffi::PyObject,
) -> ffi::PySendResult {
    let status = ffi::PyIter_Send((*r).coro, arg, result);
    if !matches!(status, ffi::PySendResult::PYGEN_NEXT) {
        // SAFETY: `r` is still a live `_Ready` (the caller holds it) and the GIL is held.
        finished(r);
    }
    status
}

/// One step: the first ready message (returned), or a step of the slow coroutine.
///
/// # Safety
/// `obj` must point to a live `_Ready`, `arg` to a live object (borrowed), `result` be
/// valid for a write, and the GIL be held. `*result` is a new reference after
/// `PYGEN_RETURN` or `PYGEN_NEXT`.
unsafe fn step(
    obj: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
    result: *mut *mut ffi::PyObject,
) -> ffi::PySendResult {
    let r = obj as *mut Ready;
    // SAFETY: `r` is the live `_Ready` at `obj` with `coro` checked non-NULL; `arg`,
    // `result` and the GIL are as this function's contract says, as `delegate` requires.
    if !(*r).coro.is_null() {
        return delegate(r, arg, result);
    }
    if (*r).used != 0 || (*r).iter.is_null() {
        ffi::PyErr_SetString(
            ffi::PyExc_RuntimeError,
            c"cannot reuse already awaited __anext__()".as_ptr(),
        );
        return ffi::PySendResult::PYGEN_ERROR;
    }
    // SAFETY: `iter` is set only by `iter_anext`, to the `ReadyIterator` that made this
    // `_Ready`, which holds a reference to it (checked non-NULL above): a live `Iter`.
    let it = (*r).iter as *mut Iter;
    if (*it).ready.is_null() {
        ffi::PyErr_SetString(
            ffi::PyExc_RuntimeError,
            c"the iterator was cleared".as_ptr(),
        );
        return ffi::PySendResult::PYGEN_ERROR;
    }
    // SAFETY: `it` is a live `ReadyIterator`, `ready` checked non-NULL just above (only
    // `iter_clear` resets it, and `r`, which the caller holds, keeps the iterator
    // reachable), and the GIL is held, as `ready_len` requires.
    let n = ready_len(it);
    if n < 0 {
        (*r).used = 1;
        return ffi::PySendResult::PYGEN_ERROR;
    }
    if n == 0 {
        // emptied since __anext__ was called: be the consumer's own coroutine
        let coro = ffi::PyObject_CallNoArgs((*it).slow);
        if coro.is_null() {
            (*r).used = 1;
            return ffi::PySendResult::PYGEN_ERROR;
        }
        if ffi::PyCoro_CheckExact(coro) == 0 {
            ffi::Py_DECREF(coro);
            (*r).used = 1;
            ffi::PyErr_SetString(
                ffi::PyExc_TypeError,
                c"slow() must return a coroutine".as_ptr(),
            );
            return ffi::PySendResult::PYGEN_ERROR;
        }
        (*r).coro = coro;
        // SAFETY: as for the first `delegate` above: `coro` was just set non-NULL.
        return delegate(r, arg, result);
    }
    (*r).used = 1;
    // SAFETY: `take` is the exact deque's builtin `popleft`, a `METH_NOARGS` C function,
    // called as CPython would (self, NULL) and only while `exact` confirms that `ready`
    // still is that exact deque (`ready` non-NULL, as for `ready_len` above).
    let msg = match (*it).take {
        Some(take) if exact(it) => take((*it).ready, null_mut()),
        _ => ffi::PyObject_CallNoArgs((*it).popleft),
    };
    if msg.is_null() {
        return ffi::PySendResult::PYGEN_ERROR;
    }
    // SAFETY: `message` is `Message` (non-NULL only when `field` is one of its slots) and
    // `at` that slot's offset, found by `slot_offsets` at `init`; `msg` is an exact
    // `Message` here, so the word at `at` lies inside it and holds NULL or a reference.
    let value = if ffi::Py_TYPE(msg) == (*it).message {
        let v = *((msg as *const u8).offset((*it).at) as *const *mut ffi::PyObject);
        if v.is_null() {
            ffi::PyObject_GetAttr(msg, (*it).field) // unset: the AttributeError
        } else {
            new_ref(v)
        }
    } else {
        ffi::PyObject_GetAttr(msg, (*it).field)
    };
    if value.is_null() {
        ffi::Py_DECREF(msg);
        return ffi::PySendResult::PYGEN_ERROR;
    }
    // SAFETY: `it` is a live `ReadyIterator` (not cleared: `ready` was non-NULL above),
    // `value` a new reference that `set_owner` consumes, and the GIL is held.
    if set_owner(it, value) < 0 {
        ffi::Py_DECREF(msg);
        return ffi::PySendResult::PYGEN_ERROR;
    }
    *result = msg;
    ffi::PySendResult::PYGEN_RETURN
}

/// `am_send` of `_Ready`.
///
/// # Safety
/// Only CPython calls it, as `am_send`: with the GIL held, `obj` a live `_Ready`, `arg` a
/// live object and `result` a valid place for the result.
unsafe extern "C" fn ready_send(
    obj: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
    result: *mut *mut ffi::PyObject,
) -> ffi::PySendResult {
    // SAFETY: this function's contract is exactly what `step` requires.
    step(obj, arg, result)
}

/// `StopIteration(value)` raised (a tuple or an exception as the value stays the value).
///
/// # Safety
/// `value` must be an owned reference (consumed), and the GIL be held.
unsafe fn stop(value: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let exc = ffi::PyObject_CallOneArg(ffi::PyExc_StopIteration, value);
    ffi::Py_DECREF(value);
    if !exc.is_null() {
        ffi::PyErr_SetObject(ffi::PyExc_StopIteration, exc);
        ffi::Py_DECREF(exc);
    }
    null_mut()
}

/// One step as `__next__` or `send` return it: the value, or NULL with `StopIteration`
/// carrying the result (or another exception) set.
///
/// # Safety
/// `obj` must point to a live `_Ready`, `arg` to a live object (borrowed), and the GIL be
/// held.
unsafe fn resume(obj: *mut ffi::PyObject, arg: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let mut result = null_mut();
    // SAFETY: `obj`, `arg` and the GIL are as `step` requires, and `result` is a local
    // it may write; after `PYGEN_RETURN`, `result` is the new reference `stop` consumes.
    match step(obj, arg, &mut result) {
        ffi::PySendResult::PYGEN_NEXT => result,
        ffi::PySendResult::PYGEN_RETURN => stop(result),
        ffi::PySendResult::PYGEN_ERROR => null_mut(),
    }
}

/// `__next__` of `_Ready`: `send(None)`.
///
/// # Safety
/// Only CPython calls it, as `tp_iternext`: with the GIL held and `obj` a live `_Ready`.
unsafe extern "C" fn ready_next(obj: *mut ffi::PyObject) -> *mut ffi::PyObject {
    // SAFETY: `obj` is a live `_Ready`, `None` a live object, and the GIL is held.
    resume(obj, ffi::Py_None())
}

/// `send(value)` of `_Ready`.
///
/// # Safety
/// Only CPython calls it, as a `METH_O` method: with the GIL held, `obj` a live `_Ready`
/// (the method descriptor checks the type) and `arg` a live object.
unsafe extern "C" fn ready_send_method(
    obj: *mut ffi::PyObject,
    arg: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let r = obj as *mut Ready;
    if (*r).coro.is_null() && (*r).used == 0 && arg != ffi::Py_None() {
        ffi::PyErr_SetString(
            ffi::PyExc_TypeError,
            c"can't send non-None value to a just-started coroutine".as_ptr(),
        );
        return null_mut();
    }
    // SAFETY: `obj` is a live `_Ready`, `arg` a live object, and the GIL is held.
    resume(obj, arg)
}

/// `throw(...)` of `_Ready`.
///
/// # Safety
/// Only CPython calls it, as a `METH_VARARGS` method: with the GIL held, `obj` a live
/// `_Ready` (the method descriptor checks the type) and `args` a live tuple.
unsafe extern "C" fn ready_throw(
    obj: *mut ffi::PyObject,
    args: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let r = obj as *mut Ready;
    if !(*r).coro.is_null() {
        let meth = ffi::PyObject_GetAttrString((*r).coro, c"throw".as_ptr());
        if meth.is_null() {
            return null_mut();
        }
        let out = ffi::PyObject_Call(meth, args, null_mut());
        ffi::Py_DECREF(meth);
        if out.is_null() {
            // SAFETY: `r` is the live `_Ready` CPython passed, and the GIL is held.
            finished(r);
        }
        return out;
    }
    if (*r).used != 0 {
        ffi::PyErr_SetString(
            ffi::PyExc_RuntimeError,
            c"cannot reuse already awaited __anext__()".as_ptr(),
        );
        return null_mut();
    }
    // Not started: the exception is raised here, as a coroutine that never ran raises what
    // is thrown into it (and is finished); nothing was taken from the queue.
    (*r).used = 1;
    let n = ffi::PyTuple_Size(args);
    if n < 1 {
        ffi::PyErr_SetString(
            ffi::PyExc_TypeError,
            c"throw expected at least 1 argument".as_ptr(),
        );
        return null_mut();
    }
    let typ = ffi::PyTuple_GetItem(args, 0);
    if ffi::PyExceptionInstance_Check(typ) != 0 {
        ffi::PyErr_SetObject(ffi::PyExceptionInstance_Class(typ), typ);
    } else if ffi::PyExceptionClass_Check(typ) != 0 {
        let value = if n > 1 {
            ffi::PyTuple_GetItem(args, 1)
        } else {
            ffi::Py_None()
        };
        ffi::PyErr_SetObject(typ, value);
    } else {
        ffi::PyErr_SetString(
            ffi::PyExc_TypeError,
            c"exceptions must be classes or instances deriving from BaseException".as_ptr(),
        );
    }
    null_mut()
}

/// `close()` of `_Ready`.
///
/// # Safety
/// Only CPython calls it, as a `METH_NOARGS` method: with the GIL held and `obj` a live
/// `_Ready` (the method descriptor checks the type).
unsafe extern "C" fn ready_close(
    obj: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let r = obj as *mut Ready;
    (*r).used = 1;
    if !(*r).coro.is_null() {
        let out = ffi::PyObject_CallMethod((*r).coro, c"close".as_ptr(), null_mut());
        // SAFETY: `r` is the live `_Ready` CPython passed, and the GIL is held.
        finished(r);
        return out;
    }
    new_ref(ffi::Py_None())
}

// --- the types -------------------------------------------------------------------------------

/// A new heap type (a new reference) from `name`, `basicsize` and `slots`, with the
/// garbage-collector flag, not instantiable from Python.
///
/// # Safety
/// The GIL must be held. Each slot must give a function with the signature CPython
/// expects for its slot id, for instances of `basicsize` bytes starting with a
/// `PyObject`; what a slot points to (a method table) must live as long as the type.
unsafe fn make_type(
    name: &'static std::ffi::CStr,
    basicsize: usize,
    mut slots: Vec<ffi::PyType_Slot>,
) -> PyResult<*mut ffi::PyObject> {
    slots.push(ffi::PyType_Slot {
        slot: 0,
        pfunc: null_mut(),
    });
    let mut spec = ffi::PyType_Spec {
        name: name.as_ptr(),
        basicsize: basicsize as c_int,
        itemsize: 0,
        flags: (ffi::Py_TPFLAGS_DEFAULT
            | ffi::Py_TPFLAGS_HAVE_GC
            | ffi::Py_TPFLAGS_DISALLOW_INSTANTIATION) as std::os::raw::c_uint,
        slots: slots.as_mut_ptr(),
    };
    let tp = ffi::PyType_FromSpec(&mut spec);
    if tp.is_null() {
        return Err(PyErr::fetch(Python::assume_attached()));
    }
    Ok(tp)
}

macro_rules! slot {
    ($id:expr, $f:expr) => {
        ffi::PyType_Slot {
            slot: $id,
            pfunc: $f as *mut c_void,
        }
    };
}

fn types(py: Python<'_>) -> PyResult<&'static Types> {
    TYPES.get_or_try_init(py, || -> PyResult<Types> {
        // SAFETY: the closure runs with the GIL held (`py`). Every slot below gives a function with
        // the signature CPython expects for its slot id (the casts spell them out), for
        // `#[repr(C)]` structs that start with their `PyObject` and whose size is given; the method
        // table is leaked, so it lives as long as the types, as `make_type` requires. `make_type`
        // returns new, non-null references, which `from_owned_ptr` takes.
        unsafe {
            let methods: &'static mut [ffi::PyMethodDef] = Box::leak(Box::new([
                ffi::PyMethodDef {
                    ml_name: c"send".as_ptr(),
                    ml_meth: ffi::PyMethodDefPointer {
                        PyCFunction: ready_send_method,
                    },
                    ml_flags: ffi::METH_O,
                    ml_doc: std::ptr::null(),
                },
                ffi::PyMethodDef {
                    ml_name: c"throw".as_ptr(),
                    ml_meth: ffi::PyMethodDefPointer {
                        PyCFunction: ready_throw,
                    },
                    ml_flags: ffi::METH_VARARGS,
                    ml_doc: std::ptr::null(),
                },
                ffi::PyMethodDef {
                    ml_name: c"close".as_ptr(),
                    ml_meth: ffi::PyMethodDefPointer {
                        PyCFunction: ready_close,
                    },
                    ml_flags: ffi::METH_NOARGS,
                    ml_doc: std::ptr::null(),
                },
                ffi::PyMethodDef::zeroed(),
            ]));
            let ready = make_type(
                c"streamwire._native._core._Ready",
                std::mem::size_of::<Ready>(),
                vec![
                    slot!(ffi::Py_tp_dealloc, ready_dealloc as unsafe extern "C" fn(_)),
                    slot!(
                        ffi::Py_tp_traverse,
                        ready_traverse as unsafe extern "C" fn(_, _, _) -> _
                    ),
                    slot!(
                        ffi::Py_tp_clear,
                        ready_clear as unsafe extern "C" fn(_) -> _
                    ),
                    slot!(ffi::Py_am_await, same as unsafe extern "C" fn(_) -> _),
                    slot!(
                        ffi::Py_am_send,
                        ready_send as unsafe extern "C" fn(_, _, _) -> _
                    ),
                    slot!(ffi::Py_tp_iter, same as unsafe extern "C" fn(_) -> _),
                    slot!(
                        ffi::Py_tp_iternext,
                        ready_next as unsafe extern "C" fn(_) -> _
                    ),
                    slot!(ffi::Py_tp_methods, methods.as_mut_ptr()),
                ],
            )?;
            let iter = make_type(
                c"streamwire._native._core.ReadyIterator",
                std::mem::size_of::<Iter>(),
                vec![
                    slot!(ffi::Py_tp_dealloc, iter_dealloc as unsafe extern "C" fn(_)),
                    slot!(
                        ffi::Py_tp_traverse,
                        iter_traverse as unsafe extern "C" fn(_, _, _) -> _
                    ),
                    slot!(ffi::Py_tp_clear, iter_clear as unsafe extern "C" fn(_) -> _),
                    slot!(ffi::Py_am_aiter, same as unsafe extern "C" fn(_) -> _),
                    slot!(ffi::Py_am_anext, iter_anext as unsafe extern "C" fn(_) -> _),
                ],
            )?;
            Ok(Types {
                iter: Bound::from_owned_ptr(py, iter)
                    .cast_into::<PyType>()?
                    .unbind(),
                ready: Bound::from_owned_ptr(py, ready)
                    .cast_into::<PyType>()?
                    .unbind(),
                deque: py.import("collections")?.getattr("deque")?.unbind(),
            })
        }
    })
}

/// `ready.popleft` as a C function to call with `ready` and no arguments, when `ready` is an
/// exact deque and `popleft` its builtin method.
///
/// # Safety
/// The GIL must be held (`ready` and `popleft` are live, borrowed for the call).
unsafe fn direct_popleft(
    ready: &Bound<'_, PyAny>,
    popleft: &Bound<'_, PyAny>,
    exact: bool,
) -> Option<ffi::PyCFunction> {
    let f = popleft.as_ptr();
    if !exact || ffi::PyCFunction_Check(f) == 0 || ffi::PyCFunction_GetSelf(f) != ready.as_ptr() {
        return None;
    }
    if ffi::PyCFunction_GetFlags(f) & !ffi::METH_COEXIST != ffi::METH_NOARGS {
        return None;
    }
    ffi::PyCFunction_GetFunction(f)
}

/// Where `owner.<name>` can be stored directly: the owner's type (a new reference), its
/// version tag and the slot's offset, when `name` is a writable object slot (`__slots__`)
/// found first in the type's MRO and the type sets attributes generically (no
/// `__setattr__` of its own); else None.
fn owner_slot(
    owner: &Bound<'_, PyAny>,
    name: &Bound<'_, PyAny>,
) -> PyResult<Option<(Py<PyAny>, u32, isize)>> {
    let tp = owner.get_type();
    let tptr = tp.as_type_ptr();
    // SAFETY: the GIL is held (`owner` is bound); `tptr` is the owner's type object, kept alive by
    // `tp`, so its fields can be read.
    unsafe {
        let generic = ffi::PyObject_GenericSetAttr as *const () as usize;
        if (*tptr).tp_setattro.map(|f| f as *const () as usize) != Some(generic)
            || (*tptr).tp_version_tag == 0
        {
            return Ok(None);
        }
    }
    let mut found = None;
    for klass in tp.getattr("__mro__")?.try_iter()? {
        let dict = klass?.getattr("__dict__")?;
        if dict.contains(name)? {
            found = Some(dict.get_item(name)?);
            break;
        }
    }
    let Some(descr) = found else { return Ok(None) };
    // SAFETY: the GIL is held; `descr` keeps the descriptor alive and it is checked to be exactly a
    // member descriptor before it is read as a `PyMemberDescrObject`; `d_member` is checked
    // non-null before it is read; `tptr` stays alive through `tp`.
    unsafe {
        let d = descr.as_ptr();
        if ffi::Py_TYPE(d) != &raw mut ffi::PyMemberDescr_Type {
            return Ok(None);
        }
        let member = (*(d as *mut ffi::PyMemberDescrObject)).d_member;
        if member.is_null()
            || (*member).type_code != ffi::Py_T_OBJECT_EX
            || (*member).flags != 0
            || ffi::PyType_IsSubtype(
                tptr,
                (*(d as *mut ffi::PyMemberDescrObject)).d_common.d_type,
            ) == 0
        {
            return Ok(None);
        }
        let at = (*member).offset;
        let word = std::mem::size_of::<*mut ffi::PyObject>() as isize;
        if at < std::mem::size_of::<ffi::PyObject>() as isize || at + word > (*tptr).tp_basicsize {
            return Ok(None);
        }
        Ok(Some((
            tp.clone().into_any().unbind(),
            (*tptr).tp_version_tag,
            at,
        )))
    }
}

/// An asynchronous iterator over `ready`: see the module docstring.
#[pyfunction]
pub(crate) fn ready_iterator(
    py: Python<'_>,
    ready: &Bound<'_, PyAny>,
    owner: &Bound<'_, PyAny>,
    name: &Bound<'_, PyAny>,
    field: &Bound<'_, PyAny>,
    slow: &Bound<'_, PyAny>,
) -> PyResult<Py<PyAny>> {
    if !name.is_instance_of::<pyo3::types::PyString>()
        || !field.is_instance_of::<pyo3::types::PyString>()
    {
        return Err(PyTypeError::new_err("name and field must be str"));
    }
    let popleft = ready.getattr("popleft")?;
    let (message, at) = match crate::state(py) {
        Ok(st) => {
            let field: String = field.extract()?;
            match crate::SLOTS.iter().position(|s| *s == field) {
                Some(i) => (st.message.as_ptr() as *mut ffi::PyTypeObject, st.offsets[i]),
                None => (null_mut(), 0),
            }
        }
        Err(_) => (null_mut(), 0),
    };
    let types = types(py)?;
    let deque = types.deque.bind(py);
    let exact = ready.get_type().is(deque);
    // SAFETY: `py` proves the GIL is held, and `ready` and `popleft` are live bound objects.
    let take = unsafe { direct_popleft(ready, &popleft, exact) };
    let (owner_type, version, slot) = match owner_slot(owner, name)? {
        Some((tp, version, slot)) => (tp.into_ptr(), version, slot),
        None => (null_mut(), 0, 0),
    };
    let tp = types.iter.as_ptr() as *mut ffi::PyTypeObject;
    // SAFETY: `py` proves the GIL is held. `tp` is `ReadyIterator`, which `TYPES` keeps alive for
    // as long as the module; its `tp_alloc` gives a zeroed `Iter` (checked non-null), so its fields
    // are NULL while the garbage collector may already see it. Each field is then set once: owned
    // references from `new_ref`/`into_ptr` (and `owner_type`, the new reference `owner_slot`
    // returned), `message` borrowed from the core's state and `deque` from `TYPES`, both alive as
    // long as the module. The new object goes to `from_owned_ptr`.
    unsafe {
        let obj = match (*tp).tp_alloc {
            Some(alloc) => alloc(tp, 0),
            None => null_mut(),
        };
        if obj.is_null() {
            if !owner_type.is_null() {
                ffi::Py_DECREF(owner_type);
            }
            return Err(PyErr::fetch(py));
        }
        let it = obj as *mut Iter;
        (*it).ready = new_ref(ready.as_ptr());
        (*it).popleft = popleft.into_ptr();
        (*it).owner = new_ref(owner.as_ptr());
        (*it).name = new_ref(name.as_ptr());
        (*it).field = new_ref(field.as_ptr());
        (*it).slow = new_ref(slow.as_ptr());
        (*it).spare = null_mut();
        (*it).message = message;
        (*it).at = at;
        (*it).take = take;
        (*it).deque = if exact {
            deque.as_ptr() as *mut ffi::PyTypeObject
        } else {
            null_mut()
        };
        (*it).owner_type = owner_type;
        (*it).version = version;
        (*it).slot = slot;
        Ok(Bound::from_owned_ptr(py, obj).unbind())
    }
}

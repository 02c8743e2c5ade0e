//! `ReceivedMessage`: the `Message` the Iggy poll decode makes, with three of its attributes
//! made on first access instead of per message.
//!
//! A subclass of `streamwire.codec.message.Message` (so `isinstance` holds and `__eq__`,
//! `__repr__`, `timestamp` and every slot are the base class's), created at `init` from a
//! type spec. Its instances carry, after the base class's eight slots, the message's offset
//! and id as machine integers and which attributes are still to be made:
//!
//! * `offset` and `id`: the Python `int` is made when first read (an id is a random u128
//!   on most messages: an allocation and a slow conversion each);
//! * `headers`: a message without user headers gets its empty `dict` when first read.
//!
//! Once made, the value is stored in the base class's slot and returned from there, so each
//! read gives the same object, and assigning or deleting the attribute behaves as on a plain
//! `Message` (the made value is replaced or dropped). Nothing else differs: the values read
//! equal those of the pure-Python decoder's plain `Message` (the property tests compare every
//! slot, types included). Pickling and copying give a plain `Message` (`__reduce__`).
//! Instances are made only by the decoder (the type cannot be instantiated from Python).

use std::ffi::{c_int, c_void, CStr};
use std::sync::atomic::{AtomicIsize, AtomicPtr, Ordering};

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::{int_u128, HEADERS, ID, OFFSET, SLOTS};

/// What follows the base class's slots in an instance.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Lazy {
    pub(crate) offset: [u64; 2],
    pub(crate) id: [u64; 2],
    /// `PENDING_*` bits: attributes not made yet.
    pub(crate) pending: u64,
}

pub(crate) const PENDING_OFFSET: u64 = 1;
pub(crate) const PENDING_ID: u64 = 2;
pub(crate) const PENDING_HEADERS: u64 = 4;

/// Where `Lazy` lives in an instance (the base class's basic size).
static LAZY_AT: AtomicIsize = AtomicIsize::new(0);
/// The base class's eight slots (`SLOTS` order), released by `dealloc`.
static SLOT_AT: [AtomicIsize; 8] = [const { AtomicIsize::new(0) }; 8];
/// `streamwire.codec.message.received_message` (for `__reduce__`), a strong reference.
static REBUILD: AtomicPtr<ffi::PyObject> = AtomicPtr::new(std::ptr::null_mut());

/// One lazy attribute: its base-class slot and its pending bit.
struct Attr {
    slot: AtomicIsize,
    bit: u64,
    missing: &'static CStr,
}

static ATTRS: [Attr; 3] = [
    Attr {
        slot: AtomicIsize::new(0),
        bit: PENDING_OFFSET,
        missing: c"'ReceivedMessage' object has no attribute 'offset'",
    },
    Attr {
        slot: AtomicIsize::new(0),
        bit: PENDING_ID,
        missing: c"'ReceivedMessage' object has no attribute 'id'",
    },
    Attr {
        slot: AtomicIsize::new(0),
        bit: PENDING_HEADERS,
        missing: c"'ReceivedMessage' object has no attribute 'headers'",
    },
];

/// Where `obj`'s `Lazy` part is.
///
/// # Safety
/// `obj` must point to a live instance of the `ReceivedMessage` type `create` made: its
/// basic size leaves room for a `Lazy` at `LAZY_AT`, which `create` stores before the type
/// exists. The result is valid only while `obj` is.
#[inline]
unsafe fn lazy_of(obj: *mut ffi::PyObject) -> *mut Lazy {
    (obj as *mut u8).offset(LAZY_AT.load(Ordering::Relaxed)) as *mut Lazy
}

/// Where `attr`'s base-class slot is in `obj`.
///
/// # Safety
/// `obj` must point to a live `ReceivedMessage` and `attr` be one of `ATTRS`, whose slot
/// offset `create` stores (an offset `slot_offsets` found inside `Message`'s basic size)
/// before the type exists. The result is valid only while `obj` is.
#[inline]
unsafe fn slot_of(obj: *mut ffi::PyObject, attr: &Attr) -> *mut *mut ffi::PyObject {
    (obj as *mut u8).offset(attr.slot.load(Ordering::Relaxed)) as *mut *mut ffi::PyObject
}

fn joined(v: [u64; 2]) -> u128 {
    v[0] as u128 | (v[1] as u128) << 64
}

/// The value of a pending attribute, made now (a new reference, or NULL with an error set).
///
/// # Safety
/// The calling thread must hold the GIL (`Python::assume_attached` relies on it); `get`,
/// its only caller, is a getter CPython calls with the GIL held.
unsafe fn make(lazy: &Lazy, bit: u64) -> *mut ffi::PyObject {
    if bit == PENDING_HEADERS {
        return ffi::PyDict_New();
    }
    let v = joined(if bit == PENDING_OFFSET {
        lazy.offset
    } else {
        lazy.id
    });
    let py = Python::assume_attached();
    match int_u128(py, v) {
        Ok(obj) => obj,
        Err(err) => {
            err.restore(py);
            std::ptr::null_mut()
        }
    }
}

/// The getter of a lazy attribute: the value in its slot, else the pending value, made now
/// and stored there.
///
/// # Safety
/// Only CPython calls it, through the `PyGetSetDef` `create` registers: with the GIL held,
/// `obj` a live `ReceivedMessage` (the descriptor checks the instance's type, and the type
/// cannot be subclassed) and `closure` the `&'static Attr` `getset_def` stored for it.
unsafe extern "C" fn get(obj: *mut ffi::PyObject, closure: *mut c_void) -> *mut ffi::PyObject {
    let attr = &*(closure as *const Attr);
    // SAFETY: `obj` is a live `ReceivedMessage` and `attr` one of `ATTRS` (this function's
    // contract), as `slot_of` and `lazy_of` require.
    let slot = slot_of(obj, attr);
    if !(*slot).is_null() {
        ffi::Py_INCREF(*slot);
        return *slot;
    }
    let lazy = lazy_of(obj);
    if (*lazy).pending & attr.bit == 0 {
        ffi::PyErr_SetString(ffi::PyExc_AttributeError, attr.missing.as_ptr());
        return std::ptr::null_mut();
    }
    // SAFETY: CPython calls this getter with the GIL held, as `make` requires.
    let made = make(&*lazy, attr.bit);
    if made.is_null() {
        return made;
    }
    (*lazy).pending &= !attr.bit;
    *slot = made;
    ffi::Py_INCREF(made);
    made
}

/// The setter (and deleter, `value` NULL) of a lazy attribute: as a plain slot's, and the
/// attribute is no longer pending.
///
/// # Safety
/// As for `get`; `value` is NULL (delete) or a live object CPython lends for the call.
unsafe extern "C" fn set(
    obj: *mut ffi::PyObject,
    value: *mut ffi::PyObject,
    closure: *mut c_void,
) -> c_int {
    let attr = &*(closure as *const Attr);
    // SAFETY: `obj` is a live `ReceivedMessage` and `attr` one of `ATTRS` (this function's
    // contract), as `slot_of` and `lazy_of` require.
    let slot = slot_of(obj, attr);
    let lazy = lazy_of(obj);
    let old = *slot;
    if value.is_null() && old.is_null() && (*lazy).pending & attr.bit == 0 {
        ffi::PyErr_SetString(ffi::PyExc_AttributeError, attr.missing.as_ptr());
        return -1;
    }
    if !value.is_null() {
        ffi::Py_INCREF(value);
    }
    *slot = value;
    (*lazy).pending &= !attr.bit;
    if !old.is_null() {
        ffi::Py_DECREF(old);
    }
    0
}

/// `received_message(*slots)`: a plain `Message` equal to this one.
///
/// # Safety
/// Only CPython calls it, as the `__reduce__` method (`METH_NOARGS`) `create` registers:
/// with the GIL held and `obj` a live `ReceivedMessage`. `REBUILD` then holds a strong
/// reference, stored by `create` before the type existed.
unsafe extern "C" fn reduce(obj: *mut ffi::PyObject, _: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let args = ffi::PyTuple_New(SLOTS.len() as ffi::Py_ssize_t);
    if args.is_null() {
        return args;
    }
    for (i, name) in SLOTS.iter().enumerate() {
        let name = std::ffi::CString::new(*name).expect("slot names have no NUL");
        let v = ffi::PyObject_GetAttrString(obj, name.as_ptr());
        if v.is_null() {
            ffi::Py_DECREF(args);
            return v;
        }
        ffi::PyTuple_SET_ITEM(args, i as ffi::Py_ssize_t, v);
    }
    let rebuild = REBUILD.load(Ordering::Acquire);
    ffi::Py_INCREF(rebuild);
    let out = ffi::PyTuple_New(2);
    if out.is_null() {
        ffi::Py_DECREF(rebuild);
        ffi::Py_DECREF(args);
        return out;
    }
    ffi::PyTuple_SET_ITEM(out, 0, rebuild);
    ffi::PyTuple_SET_ITEM(out, 1, args);
    out
}

/// `tp_dealloc`: what `subtype_dealloc` does for this type, without its generic steps
/// (finalizers, weak references, `__dict__`, walking the bases for slots), none of which an
/// instance can have (checked in `create`, which installs this only then): untrack, release
/// the eight slots, free, drop the type's reference.
///
/// # Safety
/// Only CPython calls it, as the `tp_dealloc` `create` installs when `plain_base` holds:
/// once, with the GIL held, for a `ReceivedMessage` whose reference count reached zero.
/// Such an instance was allocated by the (inherited, garbage-collected) `tp_alloc`, so
/// `PyObject_GC_Del` frees it; its slots are at `SLOT_AT`, which `create` stored before the
/// type existed; it holds a reference to its heap type, released last.
unsafe extern "C" fn dealloc(obj: *mut ffi::PyObject) {
    let tp = ffi::Py_TYPE(obj);
    ffi::PyObject_GC_UnTrack(obj as *mut c_void);
    for at in SLOT_AT.iter() {
        let slot = (obj as *mut u8).offset(at.load(Ordering::Relaxed)) as *mut *mut ffi::PyObject;
        let value = *slot;
        if !value.is_null() {
            *slot = std::ptr::null_mut();
            ffi::Py_DECREF(value);
        }
    }
    ffi::PyObject_GC_Del(obj as *mut c_void);
    ffi::Py_DECREF(tp as *mut ffi::PyObject);
}

/// Whether `dealloc` may stand in for `subtype_dealloc`: the base is a direct subclass of
/// `object` holding exactly the eight slots, with no `__dict__`, weak references or
/// finalizer.
///
/// # Safety
/// `tp` must point to a live type object, and the GIL be held while its fields are read.
unsafe fn plain_base(tp: *mut ffi::PyTypeObject) -> bool {
    let word = std::mem::size_of::<usize>() as isize;
    let object = std::ptr::addr_of_mut!(ffi::PyBaseObject_Type);
    (*tp).tp_base == object
        && (*tp).tp_basicsize == (*object).tp_basicsize + 8 * word
        && (*tp).tp_dictoffset == 0
        && (*tp).tp_weaklistoffset == 0
        && (*tp).tp_finalize.is_none()
        && (*tp).tp_del.is_none()
}

const DOC: &CStr =
    c"A received Message whose offset, id and empty headers are made on first access.";

/// Create the `ReceivedMessage` type, a subclass of `message` whose slots are at
/// `offsets` (`SLOTS` order).
pub(crate) fn create(
    py: Python<'_>,
    message: &Bound<'_, PyType>,
    offsets: &[isize; 8],
) -> PyResult<Py<PyType>> {
    let rebuild = py
        .import("streamwire.codec.message")?
        .getattr("received_message")?;
    let tp = message.as_type_ptr();
    // SAFETY: `tp` is `message`'s type object, kept alive by the `message` borrow; `py` proves the
    // GIL is held while the field is read.
    let basic = unsafe { (*tp).tp_basicsize };
    let word = std::mem::size_of::<usize>() as isize;
    let lazy_at = (basic + word - 1) / word * word;
    LAZY_AT.store(lazy_at, Ordering::Relaxed);
    ATTRS[0].slot.store(offsets[OFFSET], Ordering::Relaxed);
    ATTRS[1].slot.store(offsets[ID], Ordering::Relaxed);
    ATTRS[2].slot.store(offsets[HEADERS], Ordering::Relaxed);
    for (at, offset) in SLOT_AT.iter().zip(offsets.iter()) {
        at.store(*offset, Ordering::Relaxed);
    }
    let previous = REBUILD.swap(rebuild.into_ptr(), Ordering::AcqRel);
    if !previous.is_null() {
        // SAFETY: `previous` is the strong reference an earlier `create` stored in `REBUILD`
        // (`into_ptr`); the swap took it out, so nothing else releases it or reads it from there.
        // `py` proves the GIL is held.
        unsafe { ffi::Py_DECREF(previous) };
    }
    // the type refers to these for as long as the interpreter runs
    let getset: &'static mut [ffi::PyGetSetDef; 4] = Box::leak(Box::new([
        getset_def(c"offset", &ATTRS[0]),
        getset_def(c"id", &ATTRS[1]),
        getset_def(c"headers", &ATTRS[2]),
        ffi::PyGetSetDef::default(),
    ]));
    let methods: &'static mut [ffi::PyMethodDef; 2] = Box::leak(Box::new([
        ffi::PyMethodDef {
            ml_name: c"__reduce__".as_ptr(),
            ml_meth: ffi::PyMethodDefPointer {
                PyCFunction: reduce,
            },
            ml_flags: ffi::METH_NOARGS,
            ml_doc: std::ptr::null(),
        },
        ffi::PyMethodDef::zeroed(),
    ]));
    let mut slots = vec![
        ffi::PyType_Slot {
            slot: ffi::Py_tp_getset,
            pfunc: getset.as_mut_ptr() as *mut c_void,
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_methods,
            pfunc: methods.as_mut_ptr() as *mut c_void,
        },
        ffi::PyType_Slot {
            slot: ffi::Py_tp_doc,
            pfunc: DOC.as_ptr() as *mut c_void,
        },
    ];
    // SAFETY: `tp` is `message`'s type object, alive for the `message` borrow, and `py` proves the
    // GIL is held, as `plain_base` requires.
    if unsafe { plain_base(tp) } {
        slots.push(ffi::PyType_Slot {
            slot: ffi::Py_tp_dealloc,
            pfunc: dealloc as *mut c_void,
        });
    }
    slots.push(ffi::PyType_Slot {
        slot: 0,
        pfunc: std::ptr::null_mut(),
    });
    let slots: &'static mut [ffi::PyType_Slot] = Box::leak(slots.into_boxed_slice());
    let spec: &'static mut ffi::PyType_Spec = Box::leak(Box::new(ffi::PyType_Spec {
        name: c"streamwire._native._core.ReceivedMessage".as_ptr(),
        basicsize: (lazy_at + std::mem::size_of::<Lazy>() as isize) as c_int,
        itemsize: 0,
        // the garbage-collector flag and functions are inherited from the base class
        flags: (ffi::Py_TPFLAGS_DEFAULT | ffi::Py_TPFLAGS_DISALLOW_INSTANTIATION) as _,
        slots: slots.as_mut_ptr(),
    }));
    // SAFETY: `py` proves the GIL is held. `message.as_ptr()` is a live type, borrowed for the
    // call; `PyTuple_Pack` gives a new tuple (checked non-null) with its own reference to it,
    // released once `PyType_FromSpecWithBases` has read it. `spec` and everything it points to (the
    // slot, getset and method tables, names and doc) are leaked `'static` data, as the type keeps
    // pointers into some of them, and each function given has the signature its slot expects.
    // `LAZY_AT`, `SLOT_AT`, `ATTRS` and `REBUILD`, which those functions read, were stored above,
    // before the type exists. The new type is checked non-null and owned.
    unsafe {
        let bases = ffi::PyTuple_Pack(1, message.as_ptr());
        if bases.is_null() {
            return Err(PyErr::fetch(py));
        }
        let made = ffi::PyType_FromSpecWithBases(spec, bases);
        ffi::Py_DECREF(bases);
        let made = Bound::from_owned_ptr_or_err(py, made)?;
        Ok(made.cast_into::<PyType>()?.unbind())
    }
}

fn getset_def(name: &'static CStr, attr: &'static Attr) -> ffi::PyGetSetDef {
    ffi::PyGetSetDef {
        name: name.as_ptr(),
        get: Some(get),
        set: Some(set),
        doc: std::ptr::null(),
        closure: attr as *const Attr as *mut c_void,
    }
}

/// Store `lazy` into a fresh instance.
///
/// # Safety
/// `obj` is a live instance of the type `create` made, with the GIL held.
#[inline]
pub(crate) unsafe fn put_lazy(obj: *mut ffi::PyObject, lazy: Lazy) {
    // SAFETY: `obj` is a live `ReceivedMessage` (this function's contract), as `lazy_of`
    // requires; `create` sized the type so that the `Lazy` at `LAZY_AT` lies inside it.
    std::ptr::write_unaligned(lazy_of(obj), lazy);
}

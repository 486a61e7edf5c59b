/* The slots of streamer's Event (event.py: name, fields, _id, _bp, _json),
 * read and written directly by the compiled paths, which then need neither
 * Event.__init__ nor attribute lookups. `event_slots_load` checks the class
 * has that layout; when it has not, the compiled paths are not used. */
#ifndef STREAMER_SLOTS_H
#define STREAMER_SLOTS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "structmember.h"

typedef struct {
    PyTypeObject *type;
    Py_ssize_t name, fields, id, bp, json;
} EventSlots;

/* the offset of the object slot `name` of `type`, or -1 */
static Py_ssize_t slot_offset(PyObject *type, const char *name) {
    PyObject *descr = PyObject_GetAttrString(type, name);
    if (descr == NULL) { PyErr_Clear(); return -1; }
    Py_ssize_t offset = -1;
    if (Py_IS_TYPE(descr, &PyMemberDescr_Type)) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        if (member->type == T_OBJECT_EX && !(member->flags & READONLY)) offset = member->offset;
    }
    Py_DECREF(descr);
    return offset;
}

/* 1: `type` is an Event with these slots (kept in `slots`); 0: it is not */
static int event_slots_load(PyObject *type, EventSlots *slots) {
    if (!PyType_Check(type) || ((PyTypeObject *)type)->tp_alloc == NULL) return 0;
    EventSlots found = {(PyTypeObject *)type, slot_offset(type, "name"), slot_offset(type, "fields"),
                        slot_offset(type, "_id"), slot_offset(type, "_bp"), slot_offset(type, "_json")};
    if (found.name < 0 || found.fields < 0 || found.id < 0 || found.bp < 0 || found.json < 0) return 0;
    Py_INCREF(type);
    Py_XDECREF(slots->type);
    *slots = found;
    return 1;
}

/* the value in a slot (borrowed), NULL when unset */
static inline PyObject *slot_get(PyObject *object, Py_ssize_t offset) {
    return *(PyObject **)((char *)object + offset);
}

/* store a new reference to `value` in a slot */
static inline void slot_set(PyObject *object, Py_ssize_t offset, PyObject *value) {
    PyObject **slot = (PyObject **)((char *)object + offset);
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
}

#endif

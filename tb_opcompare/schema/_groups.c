/* Columns of text keys numbered and sorted out in C: groups.first_seen without a dict
 * entry and a method call a key, groups.starting_with without a method call a text.
 *
 * Optional: groups.py does both in Python when this module did not build or
 * TB_OPCOMPARE_PURE_PYTHON is set, and both ways give the same results.
 *
 *   first_seen(columns) -> tuple of bytes, or None
 *
 * columns: a list of lists of keys. Counting the keys of all the columns one after another,
 * a key's stamp is the count at which its value was first met (so equal keys share a
 * stamp, and a stamp below the first column's length is a key of the first column).
 * Returns each column's stamps as native int64, or None where a column is not a list or a
 * key not exactly a str (the caller's dict then numbers them, with Python's equality).
 *
 *   starting_with(texts, prefixes) -> bytes or None
 *
 * texts: a list; prefixes: a tuple of str. Returns a byte a text, 1 where it starts with
 * one of the prefixes (str.startswith), or None where a text is not exactly a str or a
 * prefix not ASCII (the caller's str.startswith then does it).
 *
 * Why: a comparison of a million op names a side spent 1.3 s of its 3.9 s numbering them
 * in a dict, and 0.9 s finding the names its rules may rename (issue 57). An
 * open-addressing table of (hash, stamp) pairs, the keys themselves found through their
 * stamp, numbers them in a fraction of the time; the prefixes are compared in place.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    Py_hash_t hash;
    int64_t stamp; /* -1: empty */
} Slot;

/* Whether two exact str objects hold the same text (a ready str's kind and data are
 * canonical: equal texts have equal kinds). */
static int same_text(PyObject *a, PyObject *b) {
    if (a == b) return 1;
    Py_ssize_t length = PyUnicode_GET_LENGTH(a);
    if (length != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b)) return 0;
    return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)length * PyUnicode_KIND(a)) == 0;
}

/* The key at a stamp: the stamp's place in the columns, counted one after another. */
static PyObject *key_at(PyObject *columns, const Py_ssize_t *starts, Py_ssize_t count, int64_t stamp) {
    Py_ssize_t column = 0;
    while (column + 1 < count && starts[column + 1] <= stamp) column++;
    return PyList_GET_ITEM(PyList_GET_ITEM(columns, column), (Py_ssize_t)stamp - starts[column]);
}

/* Every key an exact, ready str, and where each column starts in the count; -1 (an error
 * set) where a key cannot be made ready, 0 where a column is not a list or a key not a
 * str, 1 where all are. */
static int checked(PyObject *columns, Py_ssize_t count, Py_ssize_t *starts, Py_ssize_t *total) {
    *total = 0;
    for (Py_ssize_t c = 0; c < count; c++) {
        PyObject *column = PyList_GET_ITEM(columns, c);
        if (!PyList_CheckExact(column)) return 0;
        starts[c] = *total;
        for (Py_ssize_t r = 0; r < PyList_GET_SIZE(column); r++) {
            PyObject *key = PyList_GET_ITEM(column, r);
            if (!PyUnicode_CheckExact(key)) return 0;
#if PY_VERSION_HEX < 0x030C0000
            if (PyUnicode_READY(key) < 0) return -1;
#endif
        }
        *total += PyList_GET_SIZE(column);
    }
    return 1;
}

/* Keys hashed a block at a time before they are looked up, each slot fetched ahead: the
 * table is far bigger than the caches, and a lookup that waits for its slot, then for
 * the next key, took twice as long. */
#define BLOCK_KEYS 32
#if defined(__GNUC__) || defined(__clang__)
#define PREFETCH(address) __builtin_prefetch(address)
#else
#define PREFETCH(address) ((void)0)
#endif

/* Each key's stamp, written to the columns' int64 buffers in order. */
static void stamped(PyObject *columns, Py_ssize_t count, const Py_ssize_t *starts, Slot *table, size_t mask,
                    int64_t **out) {
    int64_t seen = 0;
    Py_hash_t hashes[BLOCK_KEYS];
    for (Py_ssize_t c = 0; c < count; c++) {
        PyObject **keys = ((PyListObject *)PyList_GET_ITEM(columns, c))->ob_item;
        Py_ssize_t rows = PyList_GET_SIZE(PyList_GET_ITEM(columns, c));
        for (Py_ssize_t block = 0; block < rows; block += BLOCK_KEYS) {
            Py_ssize_t stop = block + BLOCK_KEYS < rows ? block + BLOCK_KEYS : rows;
            for (Py_ssize_t r = block; r < stop; r++) {
                hashes[r - block] = PyObject_Hash(keys[r]); /* a str's: cached in it, never an error */
                PREFETCH(&table[(size_t)hashes[r - block] & mask]);
            }
            for (Py_ssize_t r = block; r < stop; r++, seen++) {
                Py_hash_t hash = hashes[r - block];
                size_t at = (size_t)hash & mask;
                while (table[at].stamp >= 0) {
                    if (table[at].hash == hash && same_text(key_at(columns, starts, count, table[at].stamp), keys[r]))
                        break;
                    at = (at + 1) & mask;
                }
                if (table[at].stamp < 0) {
                    table[at].hash = hash;
                    table[at].stamp = seen;
                }
                out[c][r] = table[at].stamp;
            }
        }
    }
}

static PyObject *first_seen(PyObject *self, PyObject *columns) {
    if (!PyList_CheckExact(columns)) {
        PyErr_SetString(PyExc_TypeError, "first_seen: columns must be a list of lists");
        return NULL;
    }
    /* The tuple first: its allocation may run the collector (and finalizers), which must
     * not change the columns once they are checked. */
    Py_ssize_t count = PyList_GET_SIZE(columns), total;
    PyObject *result = PyTuple_New(count);
    Py_ssize_t *starts = PyMem_New(Py_ssize_t, count ? count : 1);
    int64_t **out = PyMem_New(int64_t *, count ? count : 1);
    Slot *table = NULL;
    if (result == NULL || starts == NULL || out == NULL) goto failed;
    int outcome = checked(columns, count, starts, &total);
    if (outcome < 0) goto failed;
    if (outcome == 0) {
        Py_CLEAR(result);
        PyMem_Free(out);
        PyMem_Free(starts);
        Py_RETURN_NONE;
    }
    size_t capacity = 8; /* a power of two, at most half full */
    while (capacity < 2 * (size_t)total) capacity *= 2;
    table = PyMem_Malloc(capacity * sizeof(Slot));
    if (table == NULL) goto failed;
    memset(table, 0xff, capacity * sizeof(Slot)); /* every stamp -1 */
    for (Py_ssize_t c = 0; c < count; c++) {
        PyObject *stamps = PyBytes_FromStringAndSize(NULL, PyList_GET_SIZE(PyList_GET_ITEM(columns, c)) * 8);
        if (stamps == NULL) goto failed;
        PyTuple_SET_ITEM(result, c, stamps);
        out[c] = (int64_t *)PyBytes_AS_STRING(stamps);
    }
    stamped(columns, count, starts, table, capacity - 1, out);
    PyMem_Free(out);
    PyMem_Free(table);
    PyMem_Free(starts);
    return result;
failed:
    PyMem_Free(out);
    PyMem_Free(table);
    PyMem_Free(starts);
    Py_XDECREF(result);
    return PyErr_Occurred() ? NULL : PyErr_NoMemory();
}

/* Whether text starts with the ASCII prefix. */
static int starts(PyObject *text, PyObject *prefix) {
    Py_ssize_t length = PyUnicode_GET_LENGTH(prefix);
    if (PyUnicode_GET_LENGTH(text) < length) return 0;
    const Py_UCS1 *wanted = PyUnicode_1BYTE_DATA(prefix);
    int kind = PyUnicode_KIND(text);
    if (kind == PyUnicode_1BYTE_KIND) return memcmp(PyUnicode_1BYTE_DATA(text), wanted, (size_t)length) == 0;
    const void *data = PyUnicode_DATA(text);
    for (Py_ssize_t i = 0; i < length; i++) {
        if (PyUnicode_READ(kind, data, i) != wanted[i]) return 0;
    }
    return 1;
}

static PyObject *starting_with(PyObject *self, PyObject *args) {
    PyObject *texts, *prefixes;
    if (!PyArg_ParseTuple(args, "O!O!:starting_with", &PyList_Type, &texts, &PyTuple_Type, &prefixes)) return NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(prefixes), rows = PyList_GET_SIZE(texts);
    for (Py_ssize_t p = 0; p < count; p++) {
        PyObject *prefix = PyTuple_GET_ITEM(prefixes, p);
        if (!PyUnicode_CheckExact(prefix)) {
            PyErr_SetString(PyExc_TypeError, "starting_with: each prefix must be a str");
            return NULL;
        }
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(prefix) < 0) return NULL;
#endif
        if (!PyUnicode_IS_ASCII(prefix)) Py_RETURN_NONE;
    }
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *text = PyList_GET_ITEM(texts, r);
        if (!PyUnicode_CheckExact(text)) Py_RETURN_NONE;
#if PY_VERSION_HEX < 0x030C0000
        if (PyUnicode_READY(text) < 0) return NULL;
#endif
    }
    PyObject *flags = PyBytes_FromStringAndSize(NULL, rows);
    if (flags == NULL) return NULL;
    char *out = PyBytes_AS_STRING(flags);
    for (Py_ssize_t r = 0; r < rows; r++) {
        PyObject *text = PyList_GET_ITEM(texts, r);
        out[r] = 0;
        for (Py_ssize_t p = 0; p < count && !out[r]; p++) out[r] = (char)starts(text, PyTuple_GET_ITEM(prefixes, p));
    }
    return flags;
}

static PyMethodDef methods[] = {
    {"first_seen", first_seen, METH_O,
     "first_seen(columns) -> tuple of bytes or None: each key's stamp, the count at which its value was first "
     "met across the columns (see the module's source), or None where a key is not a str."},
    {"starting_with", starting_with, METH_VARARGS,
     "starting_with(texts, prefixes) -> bytes or None: 1 for each text that starts with one of the ASCII "
     "prefixes, 0 for the others; None where a text is not a str."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_groups",
    .m_doc = "Columns of text keys numbered and sorted out in C (optional; see groups.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__groups(void) { return PyModule_Create(&module_def); }

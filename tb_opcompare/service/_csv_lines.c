/* A chunk of CSV rows joined in C: csv_export._joined_lines without a tuple and a join a row.
 *
 * Optional: csv_export.py joins the lines in Python when this module did not build or
 * TB_OPCOMPARE_PURE_PYTHON is set, and both give the same text.
 *
 *   joined_lines(cells) -> str or None
 *
 * cells: a list of columns, each a list of str of one length (a column's cells as the
 * CSV shows them). Returns the rows' lines, the cells of a row joined by commas, each line
 * ended by "\n", as csv.writer writes cells that need no quoting. Returns None where a
 * cell needs quoting (it holds a comma, a quote or a line break), where there are fewer
 * than two columns (the writer quotes a lone empty cell) or no rows: the caller then
 * writes the chunk with csv.writer.
 *
 * Why: a million rows of 35 columns took 1.8 s in Python's per-row tuples and joins,
 * about a third of the CSV (issue 57).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

/* 1 for a character the writer would quote a cell for */
static unsigned char needs_quoting[256];

static int latin1_needs_quoting(const Py_UCS1 *text, Py_ssize_t length) {
    for (Py_ssize_t i = 0; i < length; i++) {
        if (needs_quoting[text[i]]) return 1;
    }
    return 0;
}

static int wide_needs_quoting(PyObject *cell, Py_ssize_t length) {
    int kind = PyUnicode_KIND(cell);
    const void *data = PyUnicode_DATA(cell);
    for (Py_ssize_t i = 0; i < length; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch < 256 && needs_quoting[ch]) return 1;
    }
    return 0;
}

/* Each row's length in the joined text (lengths[r], its comma and line end counted) and
 * the widest character, checking every cell: 1 where all is well, 0 where a cell needs
 * quoting, -1 (an error set) where the cells are not as documented. Column by column, as
 * the copy: each column's list is walked in order (a row at a time, across the columns,
 * took three times as long at a million rows). */
static int measured(PyObject *cells, Py_ssize_t columns, Py_ssize_t rows, Py_ssize_t *lengths, Py_UCS4 *widest) {
    *widest = 127;
    for (Py_ssize_t r = 0; r < rows; r++) lengths[r] = columns; /* a comma or a line end a cell */
    for (Py_ssize_t c = 0; c < columns; c++) {
        PyObject *column = PyList_GET_ITEM(cells, c);
        if (!PyList_CheckExact(column) || PyList_GET_SIZE(column) != rows) {
            PyErr_SetString(PyExc_ValueError, "joined_lines: each column must be a list, all of one length");
            return -1;
        }
        PyObject *previous = NULL; /* a cell repeated (a column of one value, numbers' texts) is checked once */
        for (Py_ssize_t r = 0; r < rows; r++) {
            PyObject *cell = PyList_GET_ITEM(column, r);
            if (cell != previous) {
                if (!PyUnicode_CheckExact(cell)) {
                    PyErr_SetString(PyExc_TypeError, "joined_lines: each cell must be a str");
                    return -1;
                }
#if PY_VERSION_HEX < 0x030C0000
                if (PyUnicode_READY(cell) < 0) return -1;
#endif
                Py_ssize_t length = PyUnicode_GET_LENGTH(cell);
                int quoted = PyUnicode_KIND(cell) == PyUnicode_1BYTE_KIND
                                 ? latin1_needs_quoting(PyUnicode_1BYTE_DATA(cell), length)
                                 : wide_needs_quoting(cell, length);
                if (quoted) return 0;
                if (PyUnicode_MAX_CHAR_VALUE(cell) > *widest) *widest = PyUnicode_MAX_CHAR_VALUE(cell);
                previous = cell;
            }
            lengths[r] += PyUnicode_GET_LENGTH(cell);
        }
    }
    return 1;
}

/* Rows a block of the copy: a block's text (a few hundred KB) stays in the cache while
 * each column's cells go to their rows' places in it. */
#define BLOCK_ROWS 1024

/* Each column's cells copied to their rows' places, a block of rows at a time: starts[r]
 * is where row r's next cell goes, and moves past it. */
static int copied(PyObject *cells, Py_ssize_t columns, Py_ssize_t rows, Py_ssize_t *starts, PyObject *text) {
    int kind = PyUnicode_KIND(text);
    void *data = PyUnicode_DATA(text);
    for (Py_ssize_t block = 0; block < rows; block += BLOCK_ROWS) {
        Py_ssize_t stop = block + BLOCK_ROWS < rows ? block + BLOCK_ROWS : rows;
        for (Py_ssize_t c = 0; c < columns; c++) {
            PyObject **column = ((PyListObject *)PyList_GET_ITEM(cells, c))->ob_item;
            Py_UCS4 end = c + 1 < columns ? ',' : '\n';
            for (Py_ssize_t r = block; r < stop; r++) {
                PyObject *cell = column[r];
                Py_ssize_t length = PyUnicode_GET_LENGTH(cell);
                if (kind == PyUnicode_1BYTE_KIND) { /* every cell one byte a character too */
                    memcpy((Py_UCS1 *)data + starts[r], PyUnicode_1BYTE_DATA(cell), length);
                } else if (length && PyUnicode_CopyCharacters(text, starts[r], cell, 0, length) < 0) {
                    return -1;
                }
                PyUnicode_WRITE(kind, data, starts[r] + length, end);
                starts[r] += length + 1;
            }
        }
    }
    return 0;
}

static PyObject *joined_lines(PyObject *self, PyObject *cells) {
    if (!PyList_CheckExact(cells)) {
        PyErr_SetString(PyExc_TypeError, "joined_lines: cells must be a list of columns");
        return NULL;
    }
    Py_ssize_t columns = PyList_GET_SIZE(cells);
    if (columns && !PyList_CheckExact(PyList_GET_ITEM(cells, 0))) {
        PyErr_SetString(PyExc_TypeError, "joined_lines: each column must be a list");
        return NULL;
    }
    Py_ssize_t rows = columns ? PyList_GET_SIZE(PyList_GET_ITEM(cells, 0)) : 0;
    if (columns < 2 || rows == 0) Py_RETURN_NONE;
    Py_ssize_t *starts = PyMem_New(Py_ssize_t, rows);
    if (starts == NULL) return PyErr_NoMemory();
    Py_UCS4 widest;
    PyObject *text = NULL;
    int outcome = measured(cells, columns, rows, starts, &widest);
    if (outcome == 1) {
        Py_ssize_t total = 0;
        for (Py_ssize_t r = 0; r < rows; r++) { /* lengths to starts */
            Py_ssize_t length = starts[r];
            starts[r] = total;
            total += length;
        }
        text = PyUnicode_New(total, widest);
        if (text != NULL && copied(cells, columns, rows, starts, text) < 0) Py_CLEAR(text);
    }
    PyMem_Free(starts);
    if (outcome == 0) Py_RETURN_NONE;
    return text; /* NULL, an error set, where outcome is -1 or a step failed */
}

static PyMethodDef methods[] = {
    {"joined_lines", joined_lines, METH_O,
     "joined_lines(cells) -> str or None: the CSV lines of columns of str cells (see the module's source), "
     "or None where a cell needs quoting."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_csv_lines",
    .m_doc = "CSV rows joined in C (optional; see csv_export.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__csv_lines(void) {
    needs_quoting[','] = needs_quoting['"'] = needs_quoting['\n'] = needs_quoting['\r'] = 1;
    return PyModule_Create(&module_def);
}

/* The two per-event loops of the xplane reader, straight from the wire bytes.
 *
 * Optional: xplane_wire.py falls back to its pure-Python code when this module did not
 * build or TB_OPCOMPARE_PURE_PYTHON is set, and both must give the same results.
 *
 *   split_events(buffer, start, end, batch_bytes) -> (header bytes, [(start, end), ...])
 *       mirrors xplane_wire._split_events, error positions and messages included;
 *   event_ints(buffer, start, end) -> bytearray of native int64 triples
 *       (metadata_id, offset_ps, duration_ps) of every XLine.events field in the span,
 *       with protobuf's semantics for what it reads (last occurrence wins, offset_ps and
 *       num_occurrences share a oneof, unknown fields of every wire type skipped).
 *
 * Both scan with the GIL released: the buffer is held for the whole call, and what is
 * found is kept in C until the GIL is back.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static PyObject *WireError;

/* ------------------------------------------------------------------------------------ */
/* split_events: the same walk as the Python code, so the same boundaries and errors.   */

enum split_failure {
    SPLIT_OK = 0,
    SPLIT_TRUNCATED_VARINT,   /* at = where the missing byte should be */
    SPLIT_VARINT_TOO_LONG,    /* at = just past the eleventh byte's predecessor, as Python counts */
    SPLIT_FIELD_ZERO,         /* at = tag start */
    SPLIT_BAD_WIRE_TYPE,      /* at = tag start, detail = wire type */
    SPLIT_FIELD_PAST_END,     /* at = tag start */
    SPLIT_EVENT_PAST_END,     /* at = tag start */
    SPLIT_NO_MEMORY,
};

typedef struct {
    enum split_failure failure;
    Py_ssize_t at;
    int detail;
} split_error;

/* A varint as xplane_wire._varint reads it: at most ten bytes, the tenth may carry bits
 * past 64 (Python keeps them; ``overflow`` says they were there). */
static int split_varint(const unsigned char *data, Py_ssize_t *pos, Py_ssize_t end,
                        uint64_t *value, int *overflow, split_error *error) {
    uint64_t result = 0;
    int shift = 0;
    *overflow = 0;
    for (;;) {
        if (*pos >= end) {
            error->failure = SPLIT_TRUNCATED_VARINT;
            error->at = *pos;
            return -1;
        }
        unsigned char byte = data[(*pos)++];
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (shift == 63 && (byte & 0x7E))
            *overflow = 1;
        if (!(byte & 0x80)) {
            *value = result;
            return 0;
        }
        shift += 7;
        if (shift > 63) {
            error->failure = SPLIT_VARINT_TOO_LONG;
            error->at = *pos;
            return -1;
        }
    }
}

/* xplane_wire._skip: the end of the field whose tag starts at ``tag_start``. */
static int split_skip(const unsigned char *data, Py_ssize_t tag_start, Py_ssize_t end,
                      Py_ssize_t *value_end, split_error *error) {
    Py_ssize_t pos = tag_start;
    uint64_t key, ignored;
    int overflow;
    if (split_varint(data, &pos, end, &key, &overflow, error) < 0)
        return -1;
    if (!overflow && (key >> 3) == 0) {
        error->failure = SPLIT_FIELD_ZERO;
        error->at = tag_start;
        return -1;
    }
    int wire = (int)(key & 7);
    /* Lengths are compared against what is left, never added to a position, so a huge
     * length cannot wrap around. */
    uint64_t room;
    switch (wire) {
    case 0:
        if (split_varint(data, &pos, end, &ignored, &overflow, error) < 0)
            return -1;
        *value_end = pos;
        return 0;
    case 1:
    case 5: {
        Py_ssize_t width = wire == 1 ? 8 : 4;
        if (width > end - pos)
            goto past_end;
        *value_end = pos + width;
        return 0;
    }
    case 2: {
        uint64_t length;
        if (split_varint(data, &pos, end, &length, &overflow, error) < 0)
            return -1;
        room = (uint64_t)(end - pos);
        if (overflow || length > room)
            goto past_end;
        *value_end = pos + (Py_ssize_t)length;
        return 0;
    }
    default:
        error->failure = SPLIT_BAD_WIRE_TYPE;
        error->at = tag_start;
        error->detail = wire;
        return -1;
    }
past_end:
    error->failure = SPLIT_FIELD_PAST_END;
    error->at = tag_start;
    return -1;
}

typedef struct {
    Py_ssize_t *items;  /* start, end, start, end, ... */
    Py_ssize_t count, capacity;
} span_list;

static int span_append(span_list *spans, Py_ssize_t start, Py_ssize_t end) {
    if (spans->count + 2 > spans->capacity) {
        Py_ssize_t capacity = spans->capacity ? spans->capacity * 2 : 64;
        Py_ssize_t *grown = PyMem_RawRealloc(spans->items, (size_t)capacity * sizeof(Py_ssize_t));
        if (!grown)
            return -1;
        spans->items = grown;
        spans->capacity = capacity;
    }
    spans->items[spans->count++] = start;
    spans->items[spans->count++] = end;
    return 0;
}

#define LINE_EVENTS_TAG 0x22 /* XLine.events: field 4, length-delimited */

/* Non-event fields go to ``header`` as spans (joined once the GIL is back); runs of event
 * fields are cut into batches that close once they reach ``batch_bytes``. */
static void split_scan(const unsigned char *data, Py_ssize_t start, Py_ssize_t end, Py_ssize_t batch_bytes,
                       span_list *header, span_list *batches, split_error *error) {
    Py_ssize_t batch_start = -1, pos = start, value_end;
    while (pos < end) {
        if (data[pos] == LINE_EVENTS_TAG) {
            if (batch_start < 0)
                batch_start = pos;
            Py_ssize_t value_start = pos + 1;
            unsigned char byte = value_start < end ? data[value_start] : 0x80;
            if (byte < 0x80) {
                value_end = value_start + 1 + byte;
                if (value_end > end) {
                    error->failure = SPLIT_EVENT_PAST_END;
                    error->at = pos;
                    return;
                }
            } else if (split_skip(data, pos, end, &value_end, error) < 0) {
                return;
            }
            pos = value_end;
            if (pos - batch_start >= batch_bytes) {
                if (span_append(batches, batch_start, pos) < 0)
                    goto no_memory;
                batch_start = -1;
            }
        } else {
            if (split_skip(data, pos, end, &value_end, error) < 0)
                return;
            if (span_append(header, pos, value_end) < 0)
                goto no_memory;
            pos = value_end;
        }
    }
    if (batch_start >= 0 && span_append(batches, batch_start, pos) < 0)
        goto no_memory;
    return;
no_memory:
    error->failure = SPLIT_NO_MEMORY;
}

static void raise_split_error(const split_error *error, Py_ssize_t end) {
    switch (error->failure) {
    case SPLIT_TRUNCATED_VARINT:
        PyErr_Format(WireError, "truncated varint at byte %zd", error->at);
        break;
    case SPLIT_VARINT_TOO_LONG:
        PyErr_Format(WireError, "varint too long at byte %zd", error->at);
        break;
    case SPLIT_FIELD_ZERO:
        PyErr_Format(WireError, "field number 0 at byte %zd", error->at);
        break;
    case SPLIT_BAD_WIRE_TYPE:
        PyErr_Format(WireError, "wire type %d at byte %zd", error->detail, error->at);
        break;
    case SPLIT_FIELD_PAST_END:
        PyErr_Format(WireError, "a field at byte %zd runs past the end (%zd)", error->at, end);
        break;
    case SPLIT_EVENT_PAST_END:
        PyErr_Format(WireError, "an event at byte %zd runs past the end of its line (%zd)", error->at, end);
        break;
    case SPLIT_NO_MEMORY:
        PyErr_NoMemory();
        break;
    case SPLIT_OK:
        break;
    }
}

static int check_span(const Py_buffer *buffer, Py_ssize_t start, Py_ssize_t end) {
    if (start < 0 || end < start || end > buffer->len) {
        PyErr_Format(PyExc_IndexError, "span [%zd, %zd) is outside the buffer of %zd bytes", start, end,
                     buffer->len);
        return -1;
    }
    return 0;
}

static PyObject *build_split_result(const unsigned char *data, const span_list *header, const span_list *batches) {
    Py_ssize_t header_size = 0;
    for (Py_ssize_t i = 0; i < header->count; i += 2)
        header_size += header->items[i + 1] - header->items[i];
    PyObject *header_bytes = PyBytes_FromStringAndSize(NULL, header_size);
    if (!header_bytes)
        return NULL;
    char *out = PyBytes_AS_STRING(header_bytes);
    for (Py_ssize_t i = 0; i < header->count; i += 2) {
        Py_ssize_t size = header->items[i + 1] - header->items[i];
        memcpy(out, data + header->items[i], (size_t)size);
        out += size;
    }
    PyObject *spans = PyList_New(batches->count / 2);
    if (!spans) {
        Py_DECREF(header_bytes);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < batches->count; i += 2) {
        PyObject *span = Py_BuildValue("(nn)", batches->items[i], batches->items[i + 1]);
        if (!span) {
            Py_DECREF(header_bytes);
            Py_DECREF(spans);
            return NULL;
        }
        PyList_SET_ITEM(spans, i / 2, span);
    }
    return Py_BuildValue("(NN)", header_bytes, spans);
}

static PyObject *split_events(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t start, end, batch_bytes;
    if (!PyArg_ParseTuple(args, "y*nnn:split_events", &buffer, &start, &end, &batch_bytes))
        return NULL;
    PyObject *result = NULL;
    span_list header = {0}, batches = {0};
    split_error error = {SPLIT_OK, 0, 0};
    if (check_span(&buffer, start, end) < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    split_scan(buffer.buf, start, end, batch_bytes, &header, &batches, &error);
    Py_END_ALLOW_THREADS
    if (error.failure != SPLIT_OK)
        raise_split_error(&error, end);
    else
        result = build_split_result(buffer.buf, &header, &batches);
done:
    PyMem_RawFree(header.items);
    PyMem_RawFree(batches.items);
    PyBuffer_Release(&buffer);
    return result;
}

/* ------------------------------------------------------------------------------------ */
/* event_ints: what the protobuf runtime would read of each XEvent.                     */

/* Deeper nested groups than this are refused; the reader then uses the Python path,
 * which goes through the protobuf runtime's own limit. */
#define MAX_GROUP_DEPTH 100

typedef struct {
    const unsigned char *pos, *end;
    const char *failure; /* a static message, or NULL */
    const unsigned char *failure_at;
} wire_cursor;

static int wire_fail(wire_cursor *cursor, const char *message, const unsigned char *at) {
    cursor->failure = message;
    cursor->failure_at = at;
    return -1;
}

/* protobuf's varint: at most ten bytes, bits past 64 dropped. */
static inline int wire_varint(wire_cursor *cursor, uint64_t *value) {
    const unsigned char *pos = cursor->pos;
    if (pos < cursor->end && !(*pos & 0x80)) { /* the common case: one byte */
        *value = *pos;
        cursor->pos = pos + 1;
        return 0;
    }
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (pos >= cursor->end)
            return wire_fail(cursor, "truncated varint", pos);
        unsigned char byte = *pos++;
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *value = result;
            cursor->pos = pos;
            return 0;
        }
    }
    return wire_fail(cursor, "varint longer than ten bytes", cursor->pos);
}

/* A tag as protobuf reads it: a 32-bit varint, field number 0 refused. */
static inline int wire_tag(wire_cursor *cursor, uint32_t *field, int *wire) {
    const unsigned char *tag_start = cursor->pos;
    uint64_t key;
    if (wire_varint(cursor, &key) < 0)
        return -1;
    if (key > UINT32_MAX || cursor->pos - tag_start > 5)
        return wire_fail(cursor, "tag out of range", tag_start);
    if ((key >> 3) == 0)
        return wire_fail(cursor, "field number 0", tag_start);
    *field = (uint32_t)(key >> 3);
    *wire = (int)(key & 7);
    return 0;
}

static int wire_skip(wire_cursor *cursor, uint32_t field, int wire, int depth);

/* The rest of a group opened by ``field``'s start tag, its end tag included. */
static int wire_skip_group(wire_cursor *cursor, uint32_t field, int depth) {
    if (depth >= MAX_GROUP_DEPTH)
        return wire_fail(cursor, "groups nested too deeply", cursor->pos);
    while (cursor->pos < cursor->end) {
        const unsigned char *tag_start = cursor->pos;
        uint32_t inner;
        int wire;
        if (wire_tag(cursor, &inner, &wire) < 0)
            return -1;
        if (wire == 4) {
            if (inner != field)
                return wire_fail(cursor, "end of group does not match its start", tag_start);
            return 0;
        }
        if (wire_skip(cursor, inner, wire, depth + 1) < 0)
            return -1;
    }
    return wire_fail(cursor, "group without its end", cursor->pos);
}

/* Past the value of a field whose tag was just read. */
static int wire_skip(wire_cursor *cursor, uint32_t field, int wire, int depth) {
    const unsigned char *value_start = cursor->pos;
    uint64_t value;
    switch (wire) {
    case 0:
        return wire_varint(cursor, &value);
    case 1:
    case 5: {
        Py_ssize_t width = wire == 1 ? 8 : 4;
        if (cursor->end - cursor->pos < width)
            return wire_fail(cursor, "fixed-width value past the end", value_start);
        cursor->pos += width;
        return 0;
    }
    case 2:
        if (wire_varint(cursor, &value) < 0)
            return -1;
        if (value > (uint64_t)(cursor->end - cursor->pos))
            return wire_fail(cursor, "length-delimited value past the end", value_start);
        cursor->pos += value;
        return 0;
    case 3:
        return wire_skip_group(cursor, field, depth);
    case 4:
        return wire_fail(cursor, "end of group without its start", value_start);
    default:
        return wire_fail(cursor, "invalid wire type", value_start);
    }
}

enum { XEVENT_METADATA_ID = 1, XEVENT_OFFSET_PS = 2, XEVENT_DURATION_PS = 3, XEVENT_NUM_OCCURRENCES = 5 };

static int decode_event(wire_cursor *event, int64_t out[3]) {
    int64_t metadata_id = 0, offset_ps = 0, duration_ps = 0;
    while (event->pos < event->end) {
        uint32_t field;
        int wire;
        uint64_t value;
        if (wire_tag(event, &field, &wire) < 0)
            return -1;
        /* A known number with another wire type is an unknown field to protobuf. */
        if (wire == 0 && (field == XEVENT_METADATA_ID || field == XEVENT_OFFSET_PS ||
                          field == XEVENT_DURATION_PS || field == XEVENT_NUM_OCCURRENCES)) {
            if (wire_varint(event, &value) < 0)
                return -1;
            switch (field) {
            case XEVENT_METADATA_ID:
                metadata_id = (int64_t)value;
                break;
            case XEVENT_OFFSET_PS:
                offset_ps = (int64_t)value;
                break;
            case XEVENT_DURATION_PS:
                duration_ps = (int64_t)value;
                break;
            default: /* num_occurrences takes the oneof offset_ps is in: offset_ps reads 0 */
                offset_ps = 0;
            }
        } else if (wire_skip(event, field, wire, 0) < 0) {
            return -1;
        }
    }
    out[0] = metadata_id;
    out[1] = offset_ps;
    out[2] = duration_ps;
    return 0;
}

typedef struct {
    int64_t *items;
    Py_ssize_t count, capacity; /* in triples */
} triple_list;

static int scan_events(wire_cursor *line, triple_list *triples) {
    enum { XLINE_EVENTS = 4 };
    while (line->pos < line->end) {
        uint32_t field;
        int wire;
        if (wire_tag(line, &field, &wire) < 0)
            return -1;
        if (field != XLINE_EVENTS || wire != 2) {
            if (wire_skip(line, field, wire, 0) < 0)
                return -1;
            continue;
        }
        const unsigned char *length_at = line->pos;
        uint64_t length;
        if (wire_varint(line, &length) < 0)
            return -1;
        if (length > (uint64_t)(line->end - line->pos))
            return wire_fail(line, "event past the end", length_at);
        if (triples->count == triples->capacity) {
            Py_ssize_t capacity = triples->capacity ? triples->capacity * 2 : 1024;
            int64_t *grown = PyMem_RawRealloc(triples->items, (size_t)capacity * 3 * sizeof(int64_t));
            if (!grown)
                return wire_fail(line, NULL, NULL);
            triples->items = grown;
            triples->capacity = capacity;
        }
        wire_cursor event = {line->pos, line->pos + length, NULL, NULL};
        if (decode_event(&event, triples->items + 3 * triples->count) < 0) {
            *line = event;
            return -1;
        }
        triples->count++;
        line->pos = event.end;
    }
    return 0;
}

static PyObject *event_ints(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t start, end;
    if (!PyArg_ParseTuple(args, "y*nn:event_ints", &buffer, &start, &end))
        return NULL;
    PyObject *result = NULL;
    triple_list triples = {0};
    const unsigned char *data = buffer.buf;
    wire_cursor line = {NULL, NULL, NULL, NULL};
    int status;
    if (check_span(&buffer, start, end) < 0)
        goto done;
    line.pos = data + start;
    line.end = data + end;
    Py_BEGIN_ALLOW_THREADS
    status = scan_events(&line, &triples);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        if (line.failure)
            PyErr_Format(WireError, "%s at byte %zd", line.failure, (Py_ssize_t)(line.failure_at - data));
        else
            PyErr_NoMemory();
        goto done;
    }
    /* A bytearray, so numpy's view of it is writable like an array the Python path makes. */
    result = PyByteArray_FromStringAndSize((const char *)triples.items,
                                           triples.count * 3 * (Py_ssize_t)sizeof(int64_t));
done:
    PyMem_RawFree(triples.items);
    PyBuffer_Release(&buffer);
    return result;
}

static PyMethodDef methods[] = {
    {"split_events", split_events, METH_VARARGS,
     "split_events(buffer, start, end, batch_bytes) -> (header, [(start, end), ...]): an XLine's non-event "
     "fields joined, and its event fields cut into batches that close once they reach batch_bytes."},
    {"event_ints", event_ints, METH_VARARGS,
     "event_ints(buffer, start, end) -> bytearray: metadata_id, offset_ps, duration_ps of each XLine.events "
     "field in buffer[start:end], as native int64 triples in wire order."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_xplane_wire",
    .m_doc = "The xplane reader's per-event wire loops in C (optional; see xplane_wire.py).",
    .m_size = -1, /* WireError is process-wide state: one interpreter only */
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__xplane_wire(void) {
    PyObject *module = PyModule_Create(&module_def);
    if (!module)
        return NULL;
    if (!WireError) {
        WireError = PyErr_NewExceptionWithDoc("tb_opcompare.ingest.readers._xplane_wire.WireError",
                                              "Broken protobuf wire framing.", PyExc_ValueError, NULL);
        if (!WireError) {
            Py_DECREF(module);
            return NULL;
        }
    }
    if (PyModule_AddObjectRef(module, "WireError", WireError) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}

/* The per-event loops of the xplane reader, straight from the wire bytes.
 *
 * Optional: xplane_wire.py falls back to its pure-Python code when this module did not
 * build or TB_OPCOMPARE_PURE_PYTHON is set, and both must give the same results.
 *
 *   split_events(buffer, start, end, batch_bytes) -> (header bytes, [(start, end), ...])
 *       mirrors xplane_wire._split_events, error positions and messages included;
 *   plane_header(buffer, start, end) -> (header bytes, metadata entries) and
 *   next_line(buffer, pos, end) -> (start, end, next) or None
 *       mirror PlaneView's walks of an XPlane's fields (xplane_wire.fields), likewise;
 *   event_ints(buffer, start, end, with_spans=False) -> bytearray of native int64 triples
 *       (metadata_id, offset_ps, duration_ps) of every XLine.events field in the span
 *       (with_spans: and a bytearray of each event's (start, end) byte offsets, as pairs),
 *       with protobuf's semantics for what it reads (last occurrence wins, offset_ps and
 *       num_occurrences share a oneof, unknown fields of every wire type skipped);
 *   event_stats(buffer, start, end, event_ids, stat_columns, column_count, flag_repeats=False)
 *       -> (rows, text_spans)
 *       chosen stats of the events whose metadata_id is in ``event_ids`` (None: of every
 *       event): a row of native int64 per such event, its index among the span's events and
 *       then a (kind, value) pair per column, ``stat_columns`` mapping a stat metadata id to
 *       its column (several ids may share one: the last stat of the event in a column wins;
 *       with ``flag_repeats`` the kind of such a column has STAT_REPEATED, 256, added, for
 *       a reader to whom the earlier stats matter). kind 0: the event
 *       has no such stat; 1: the stat holds no value; else the field number of the value
 *       the XStat's oneof holds: 2 double_value (value: its bits), 3 uint64_value (its
 *       bits), 4 int64_value, 5 str_value (value: an index into ``text_spans``, the distinct
 *       str values as (offset, length) in the buffer, so each is decoded once), 6
 *       bytes_value (value 0), 7 ref_value (its bits). Protobuf's semantics as above, in
 *       the XStats too.
 *
 * All but next_line (one field at a time) scan with the GIL released: the buffer is held
 * for the whole call, and what is found is kept in C until the GIL is back.
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

/* xplane_wire._skip: the field number, value start and value end of the field whose tag
 * starts at ``tag_start`` (a field number past 2**64, which Python keeps, is reported as
 * UINT64_MAX: no caller asks for one). */
static int split_field(const unsigned char *data, Py_ssize_t tag_start, Py_ssize_t end, uint64_t *field,
                       Py_ssize_t *value_start, Py_ssize_t *value_end, split_error *error) {
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
    *field = overflow ? UINT64_MAX : key >> 3;
    *value_start = pos;
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
        *value_start = pos;
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

/* xplane_wire._skip: the end of the field whose tag starts at ``tag_start``. */
static int split_skip(const unsigned char *data, Py_ssize_t tag_start, Py_ssize_t end, Py_ssize_t *value_end,
                      split_error *error) {
    uint64_t field;
    Py_ssize_t value_start;
    return split_field(data, tag_start, end, &field, &value_start, value_end, error);
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
/* plane_header, next_line: an XPlane's walk in PlaneView, the same fields and errors.   */

#define PLANE_LINES 3
#define PLANE_EVENT_METADATA 4
#define PLANE_STAT_METADATA 5

static void plane_scan(const unsigned char *data, Py_ssize_t start, Py_ssize_t end, span_list *header,
                       Py_ssize_t *entries, split_error *error) {
    Py_ssize_t pos = start, value_start, value_end;
    uint64_t field;
    while (pos < end) {
        if (split_field(data, pos, end, &field, &value_start, &value_end, error) < 0)
            return;
        if (field != PLANE_LINES) {
            *entries += field == PLANE_EVENT_METADATA || field == PLANE_STAT_METADATA;
            if (span_append(header, pos, value_end) < 0) {
                error->failure = SPLIT_NO_MEMORY;
                return;
            }
        }
        pos = value_end;
    }
}

static PyObject *plane_header(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t start, end, entries = 0;
    if (!PyArg_ParseTuple(args, "y*nn:plane_header", &buffer, &start, &end))
        return NULL;
    PyObject *result = NULL;
    span_list header = {0}, no_batches = {0};
    split_error error = {SPLIT_OK, 0, 0};
    if (check_span(&buffer, start, end) < 0)
        goto done;
    Py_BEGIN_ALLOW_THREADS
    plane_scan(buffer.buf, start, end, &header, &entries, &error);
    Py_END_ALLOW_THREADS
    if (error.failure != SPLIT_OK) {
        raise_split_error(&error, end);
    } else {
        PyObject *split = build_split_result(buffer.buf, &header, &no_batches);
        if (split) {
            result = Py_BuildValue("(On)", PyTuple_GET_ITEM(split, 0), entries);
            Py_DECREF(split);
        }
    }
done:
    PyMem_RawFree(header.items);
    PyBuffer_Release(&buffer);
    return result;
}

static PyObject *next_line(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t pos, end, value_start = 0, value_end = 0;
    if (!PyArg_ParseTuple(args, "y*nn:next_line", &buffer, &pos, &end))
        return NULL;
    if (check_span(&buffer, pos, end) < 0) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    const unsigned char *data = buffer.buf;
    split_error error = {SPLIT_OK, 0, 0};
    uint64_t field;
    int found = 0;
    while (pos < end && !found) {
        if (split_field(data, pos, end, &field, &value_start, &value_end, &error) < 0)
            break;
        found = field == PLANE_LINES && value_end > value_start; /* an empty line holds no event */
        pos = value_end;
    }
    PyBuffer_Release(&buffer);
    if (error.failure != SPLIT_OK) {
        raise_split_error(&error, end);
        return NULL;
    }
    if (!found)
        Py_RETURN_NONE;
    return Py_BuildValue("(nnn)", value_start, value_end, pos);
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

enum { XEVENT_METADATA_ID = 1, XEVENT_OFFSET_PS = 2, XEVENT_DURATION_PS = 3, XEVENT_STATS = 4, XEVENT_NUM_OCCURRENCES = 5 };
enum { XSTAT_METADATA_ID = 1, XSTAT_DOUBLE = 2, XSTAT_UINT64 = 3, XSTAT_INT64 = 4, XSTAT_STR = 5, XSTAT_BYTES = 6,
       XSTAT_REF = 7 };

/* The length-delimited value at ``outer``'s position (its tag read) as a cursor over its
 * bytes, ``outer`` left past it; -1 where it runs past ``outer``'s end (``past_end`` says
 * what did). */
static int take_message(wire_cursor *outer, const char *past_end, wire_cursor *inner) {
    const unsigned char *length_at = outer->pos;
    uint64_t length;
    if (wire_varint(outer, &length) < 0)
        return -1;
    if (length > (uint64_t)(outer->end - outer->pos))
        return wire_fail(outer, past_end, length_at);
    *inner = (wire_cursor){outer->pos, outer->pos + length, NULL, NULL};
    outer->pos += length;
    return 0;
}

static int next_message(wire_cursor *outer, uint32_t wanted, const char *past_end, wire_cursor *inner, int depth);

/* How deep below an XLine its messages sit, as protobuf counts nesting against its limit
 * of 100: groups nested in an XStat are refused from one level shallower than in its
 * XEvent, and so on (measured against protobuf's parser: tests/test_xplane_accel.py). */
enum { LINE_DEPTH = 0, EVENT_DEPTH = 1, STAT_DEPTH = 2 };

/* Whether bytes are UTF-8 as protobuf requires of a string field (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF). */
static int utf8_valid(const unsigned char *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        unsigned char low = 0x80, high = 0xBF; /* the range of the second byte */
        int length;
        if (c >= 0xC2 && c <= 0xDF)
            length = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            length = 3;
            if (c == 0xE0)
                low = 0xA0;
            else if (c == 0xED)
                high = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            length = 4;
            if (c == 0xF0)
                low = 0x90;
            else if (c == 0xF4)
                high = 0x8F;
        } else
            return 0;
        if (n - i < length || s[i + 1] < low || s[i + 1] > high)
            return 0;
        for (int k = 2; k < length; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
        i += length;
    }
    return 1;
}

/* What protobuf checks of one of an XEvent's stats when it parses it (its framing, and that
 * its str_value is UTF-8), so that an event the reader never parses is refused exactly where
 * protobuf would refuse it: the reader then parses the batch, and protobuf's own error
 * names what is broken. */
static int check_stat(wire_cursor *stat) {
    wire_cursor text;
    int found;
    while ((found = next_message(stat, XSTAT_STR, "length-delimited value past the end", &text, STAT_DEPTH)) > 0)
        if (!utf8_valid(text.pos, text.end - text.pos))
            return wire_fail(stat, "string field with bad UTF-8", text.pos);
    return found;
}



/* ``check_stats``: check each stat as protobuf would (``check_stat``), else skip it by its
 * framing alone. */
static int decode_event(wire_cursor *event, int64_t out[3], int check_stats) {
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
        } else if (field == XEVENT_STATS && wire == 2 && check_stats) {
            wire_cursor stat;
            if (take_message(event, "length-delimited value past the end", &stat) < 0)
                return -1;
            if (check_stat(&stat) < 0) {
                *event = stat;
                return -1;
            }
        } else if (wire_skip(event, field, wire, EVENT_DEPTH) < 0) {
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

/* The next length-delimited field ``wanted`` of ``outer`` (the others skipped) as a
 * cursor over its bytes, ``outer`` left past it: 1 found, 0 at the end, -1 on broken
 * framing (``past_end`` names a field that runs past its parent's end). */
static int next_message(wire_cursor *outer, uint32_t wanted, const char *past_end, wire_cursor *inner, int depth) {
    while (outer->pos < outer->end) {
        uint32_t field;
        int wire;
        if (wire_tag(outer, &field, &wire) < 0)
            return -1;
        if (field != wanted || wire != 2) {
            if (wire_skip(outer, field, wire, depth) < 0)
                return -1;
            continue;
        }
        return take_message(outer, past_end, inner) < 0 ? -1 : 1;
    }
    return 0;
}

enum { XLINE_EVENTS = 4 };

/* ``spans``, where not NULL, gets each event's (start, end) byte offsets in the buffer
 * (from ``data``), so that the reader can parse one event alone when it needs its stats. */
static int scan_events(wire_cursor *line, triple_list *triples, triple_list *spans, const unsigned char *data) {
    wire_cursor event;
    int found;
    while ((found = next_message(line, XLINE_EVENTS, "event past the end", &event, LINE_DEPTH)) > 0) {
        if (triples->count == triples->capacity) {
            Py_ssize_t capacity = triples->capacity ? triples->capacity * 2 : 1024;
            int64_t *grown = PyMem_RawRealloc(triples->items, (size_t)capacity * 3 * sizeof(int64_t));
            if (!grown)
                return wire_fail(line, NULL, NULL);
            triples->items = grown;
            triples->capacity = capacity;
            if (spans) { /* pairs, kept at the triples' capacity */
                grown = PyMem_RawRealloc(spans->items, (size_t)capacity * 2 * sizeof(int64_t));
                if (!grown)
                    return wire_fail(line, NULL, NULL);
                spans->items = grown;
                spans->capacity = capacity;
            }
        }
        if (spans) {
            spans->items[2 * triples->count] = (int64_t)(event.pos - data);
            spans->items[2 * triples->count + 1] = (int64_t)(event.end - data);
        }
        if (decode_event(&event, triples->items + 3 * triples->count, 1) < 0) {
            *line = event;
            return -1;
        }
        triples->count++;
    }
    if (spans)
        spans->count = triples->count;
    return found;
}

/* The exception for a scan that stopped at ``cursor``'s failure (none: out of memory). */
static void raise_wire_failure(const wire_cursor *cursor, const unsigned char *data) {
    if (cursor->failure)
        PyErr_Format(WireError, "%s at byte %zd", cursor->failure, (Py_ssize_t)(cursor->failure_at - data));
    else
        PyErr_NoMemory();
}

static PyObject *event_ints(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t start, end;
    int with_spans = 0;
    if (!PyArg_ParseTuple(args, "y*nn|p:event_ints", &buffer, &start, &end, &with_spans))
        return NULL;
    PyObject *result = NULL;
    triple_list triples = {0}, spans = {0};
    const unsigned char *data = buffer.buf;
    wire_cursor line = {NULL, NULL, NULL, NULL};
    int status;
    if (check_span(&buffer, start, end) < 0)
        goto done;
    line.pos = data + start;
    line.end = data + end;
    Py_BEGIN_ALLOW_THREADS
    status = scan_events(&line, &triples, with_spans ? &spans : NULL, data);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        raise_wire_failure(&line, data);
        goto done;
    }
    /* A bytearray, so numpy's view of it is writable like an array the Python path makes. */
    result = PyByteArray_FromStringAndSize((const char *)triples.items,
                                           triples.count * 3 * (Py_ssize_t)sizeof(int64_t));
    if (result && with_spans) {
        PyObject *span_bytes = PyByteArray_FromStringAndSize((const char *)spans.items,
                                                            spans.count * 2 * (Py_ssize_t)sizeof(int64_t));
        PyObject *pair = span_bytes ? PyTuple_Pack(2, result, span_bytes) : NULL;
        Py_XDECREF(span_bytes);
        Py_SETREF(result, pair);
    }
done:
    PyMem_RawFree(triples.items);
    PyMem_RawFree(spans.items);
    PyBuffer_Release(&buffer);
    return result;
}

/* ------------------------------------------------------------------------------------ */
/* event_stats: chosen stats of the events of chosen metadata.                          */

/* What a row says of a stat: absent, present without a value, or the field number of
 * the value it holds (XStat's value oneof). */
enum { STAT_ABSENT = 0, STAT_WITHOUT_VALUE = 1, STAT_REPEATED = 256 };

typedef struct {
    int64_t stat_id;
    Py_ssize_t column;
} stat_column;

typedef struct {
    int64_t *event_ids; /* sorted; NULL: every event */
    Py_ssize_t event_id_count;
    int flag_repeats;
    stat_column *columns; /* sorted by stat_id */
    Py_ssize_t column_entries, column_count;
} stat_query;

static int compare_int64(const void *left, const void *right) {
    int64_t a = *(const int64_t *)left, b = *(const int64_t *)right;
    return (a > b) - (a < b);
}

static int compare_stat_column(const void *left, const void *right) {
    return compare_int64(&((const stat_column *)left)->stat_id, &((const stat_column *)right)->stat_id);
}

static int query_has_event(const stat_query *query, int64_t metadata_id) {
    if (!query->event_ids)
        return 1;
    return bsearch(&metadata_id, query->event_ids, (size_t)query->event_id_count, sizeof(int64_t),
                   compare_int64) != NULL;
}

static Py_ssize_t query_column(const stat_query *query, int64_t stat_id) {
    stat_column key = {stat_id, 0};
    const stat_column *found = bsearch(&key, query->columns, (size_t)query->column_entries, sizeof(stat_column),
                                       compare_stat_column);
    return found ? found->column : -1;
}

/* The distinct str values met, so that Python decodes each once however many events
 * repeat it (a tf_op or a shape recurs in every step). FNV-1a is not keyed: a hostile file
 * could pile thousands of texts on one slot, so the probes are counted and a table that
 * takes far more than its share is given up (the caller then reads the parsed events). */
typedef struct {
    const unsigned char *start;
    Py_ssize_t length;
    uint64_t hash;
} text_entry;

typedef struct {
    text_entry *entries;
    Py_ssize_t count, capacity;
    Py_ssize_t *slots; /* open addressing: entry index + 1, 0 for a free slot */
    Py_ssize_t slot_count; /* a power of two, at least twice count */
    Py_ssize_t lookups, probes;
} text_table;

/* Half full, a table takes about 1.5 probes a lookup with a fair hash. */
#define TEXT_PROBES_PER_LOOKUP 64
enum { TEXT_NO_MEMORY = -1, TEXT_COLLISIONS = -2 };

static uint64_t text_hash(const unsigned char *start, Py_ssize_t length) {
    uint64_t hash = 14695981039346656037ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < length; i++)
        hash = (hash ^ start[i]) * 1099511628211ULL;
    return hash;
}

static int text_table_grow(text_table *table) {
    Py_ssize_t slot_count = table->slot_count ? table->slot_count * 2 : 256;
    Py_ssize_t *slots = PyMem_RawCalloc((size_t)slot_count, sizeof(Py_ssize_t));
    if (!slots)
        return -1;
    for (Py_ssize_t i = 0; i < table->count; i++) {
        size_t slot = (size_t)table->entries[i].hash & (size_t)(slot_count - 1);
        while (slots[slot])
            slot = (slot + 1) & (size_t)(slot_count - 1);
        slots[slot] = i + 1;
    }
    PyMem_RawFree(table->slots);
    table->slots = slots;
    table->slot_count = slot_count;
    return 0;
}

/* The index of the text among the distinct ones, or TEXT_NO_MEMORY, TEXT_COLLISIONS. */
static Py_ssize_t text_index(text_table *table, const unsigned char *start, Py_ssize_t length) {
    if (2 * (table->count + 1) > table->slot_count && text_table_grow(table) < 0)
        return TEXT_NO_MEMORY;
    uint64_t hash = text_hash(start, length);
    size_t slot = (size_t)hash & (size_t)(table->slot_count - 1);
    table->lookups++;
    for (; table->slots[slot]; slot = (slot + 1) & (size_t)(table->slot_count - 1)) {
        const text_entry *entry = &table->entries[table->slots[slot] - 1];
        if (entry->hash == hash && entry->length == length && memcmp(entry->start, start, (size_t)length) == 0)
            return table->slots[slot] - 1;
        if (++table->probes > TEXT_PROBES_PER_LOOKUP * table->lookups + 1024)
            return TEXT_COLLISIONS;
    }
    if (table->count == table->capacity) {
        Py_ssize_t capacity = table->capacity ? table->capacity * 2 : 64;
        text_entry *grown = PyMem_RawRealloc(table->entries, (size_t)capacity * sizeof(text_entry));
        if (!grown)
            return TEXT_NO_MEMORY;
        table->entries = grown;
        table->capacity = capacity;
    }
    table->entries[table->count] = (text_entry){start, length, hash};
    table->slots[slot] = table->count + 1;
    return table->count++;
}

typedef struct {
    int64_t *items;
    Py_ssize_t count, capacity, width; /* in rows of ``width`` int64 */
} row_list;

static int64_t *row_append(row_list *rows) {
    if (rows->count == rows->capacity) {
        Py_ssize_t capacity = rows->capacity ? rows->capacity * 2 : 256;
        int64_t *grown = PyMem_RawRealloc(rows->items, (size_t)capacity * (size_t)rows->width * sizeof(int64_t));
        if (!grown)
            return NULL;
        rows->items = grown;
        rows->capacity = capacity;
    }
    int64_t *row = rows->items + rows->count++ * rows->width;
    memset(row, 0, (size_t)rows->width * sizeof(int64_t)); /* every stat STAT_ABSENT */
    return row;
}

static uint64_t little_endian_64(const unsigned char *bytes) {
    uint64_t value = 0;
    for (int i = 7; i >= 0; i--)
        value = value << 8 | bytes[i];
    return value;
}

typedef struct {
    int64_t metadata_id;
    int kind;
    uint64_t value;                    /* numbers and refs; a double's bits */
    const unsigned char *text_start; /* str and bytes values */
    Py_ssize_t text_length;
} stat_value;

/* One XStat as protobuf reads it: the last occurrence of a field wins, and the last value
 * field read is the one its oneof holds. */
static int decode_stat(wire_cursor *stat, stat_value *out) {
    *out = (stat_value){0, STAT_WITHOUT_VALUE, 0, NULL, 0};
    while (stat->pos < stat->end) {
        const unsigned char *value_start;
        uint32_t field;
        int wire;
        uint64_t value;
        if (wire_tag(stat, &field, &wire) < 0)
            return -1;
        value_start = stat->pos;
        /* A known number with another wire type is an unknown field to protobuf. */
        if (wire == 0 && (field == XSTAT_METADATA_ID || field == XSTAT_UINT64 || field == XSTAT_INT64 ||
                          field == XSTAT_REF)) {
            if (wire_varint(stat, &value) < 0)
                return -1;
            if (field == XSTAT_METADATA_ID) {
                out->metadata_id = (int64_t)value;
            } else {
                out->kind = (int)field;
                out->value = value;
            }
        } else if (wire == 1 && field == XSTAT_DOUBLE) {
            if (stat->end - stat->pos < 8)
                return wire_fail(stat, "fixed-width value past the end", value_start);
            out->kind = XSTAT_DOUBLE;
            out->value = little_endian_64(stat->pos);
            stat->pos += 8;
        } else if (wire == 2 && (field == XSTAT_STR || field == XSTAT_BYTES)) {
            if (wire_varint(stat, &value) < 0)
                return -1;
            if (value > (uint64_t)(stat->end - stat->pos))
                return wire_fail(stat, "length-delimited value past the end", value_start);
            out->kind = (int)field;
            out->value = 0;
            out->text_start = stat->pos;
            out->text_length = (Py_ssize_t)value;
            stat->pos += value;
        } else if (wire_skip(stat, field, wire, STAT_DEPTH) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The queried stats of one event into ``row`` (kind, value pairs by column): a later stat
 * of a column replaces an earlier one, as a dict built from the stats in order would. */
static int read_event_stats(wire_cursor *event, const stat_query *query, int64_t *row, text_table *texts) {
    wire_cursor stat;
    int found;
    while ((found = next_message(event, XEVENT_STATS, "stat past the end", &stat, EVENT_DEPTH)) > 0) {
        stat_value value;
        if (decode_stat(&stat, &value) < 0) {
            *event = stat;
            return -1;
        }
        Py_ssize_t column = query_column(query, value.metadata_id);
        if (column < 0)
            continue;
        int repeated = query->flag_repeats && (row[2 * column] != STAT_ABSENT);
        row[2 * column] = value.kind | (repeated ? STAT_REPEATED : 0);
        if (value.kind == XSTAT_STR) {
            Py_ssize_t index = text_index(texts, value.text_start, value.text_length);
            if (index == TEXT_NO_MEMORY)
                return wire_fail(event, NULL, NULL);
            if (index == TEXT_COLLISIONS)
                return wire_fail(event, "too many str values share a hash", value.text_start);
            row[2 * column + 1] = index;
        } else {
            row[2 * column + 1] = (int64_t)value.value;
        }
    }
    return found;
}

static int scan_event_stats(wire_cursor *line, const stat_query *query, row_list *rows, text_table *texts) {
    int64_t index = 0;
    wire_cursor event;
    int found;
    while ((found = next_message(line, XLINE_EVENTS, "event past the end", &event, LINE_DEPTH)) > 0) {
        wire_cursor whole = event; /* read again, for its stats, where it is one asked for */
        int64_t ints[3]; /* metadata_id, offset_ps, duration_ps: the first is the one needed */
        /* the stats of an event not asked for are not checked: the reader scans every batch
         * with event_ints, which checks them all, before it asks for any stats */
        if (decode_event(&event, ints, 0) < 0) {
            *line = event;
            return -1;
        }
        if (query_has_event(query, ints[0])) {
            int64_t *row = row_append(rows);
            if (!row)
                return wire_fail(line, NULL, NULL);
            row[0] = index;
            if (read_event_stats(&whole, query, row + 1, texts) < 0) {
                *line = whole;
                return -1;
            }
        }
        index++;
    }
    return found;
}

/* Far more than any caller reads; it keeps a row's size from overflowing. */
#define MAX_STAT_COLUMNS 4096

/* The query's Python arguments in C arrays, read while the GIL is held. */
/* The event ids asked for, sorted, into ``query``; None asks for every event. */
static int parse_event_ids(PyObject *event_ids, stat_query *query) {
    if (event_ids == Py_None) {
        query->event_ids = NULL;
        query->event_id_count = 0;
        return 0;
    }
    PyObject *ids = PySequence_Fast(event_ids, "event_ids must be a sequence of ints or None");
    if (!ids)
        return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(ids);
    query->event_ids = PyMem_RawMalloc((size_t)(count ? count : 1) * sizeof(int64_t));
    if (!query->event_ids) {
        Py_DECREF(ids);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        long long id = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(ids, i));
        if (id == -1 && PyErr_Occurred()) {
            Py_DECREF(ids);
            return -1;
        }
        query->event_ids[i] = id;
    }
    Py_DECREF(ids);
    query->event_id_count = count;
    qsort(query->event_ids, (size_t)count, sizeof(int64_t), compare_int64);
    return 0;
}

static int parse_query(PyObject *event_ids, PyObject *stat_columns, Py_ssize_t column_count, stat_query *query) {
    if (column_count < 0 || column_count > MAX_STAT_COLUMNS) {
        PyErr_Format(PyExc_ValueError, "column_count must be within [0, %d]", MAX_STAT_COLUMNS);
        return -1;
    }
    query->column_count = column_count;
    if (parse_event_ids(event_ids, query) < 0)
        return -1;
    if (!PyDict_Check(stat_columns)) {
        PyErr_SetString(PyExc_TypeError, "stat_columns must be a dict {stat metadata id: column}");
        return -1;
    }
    Py_ssize_t entries = PyDict_Size(stat_columns), position = 0, at = 0;
    query->columns = PyMem_RawMalloc((size_t)(entries ? entries : 1) * sizeof(stat_column));
    if (!query->columns) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *key, *value;
    while (PyDict_Next(stat_columns, &position, &key, &value)) {
        long long stat_id = PyLong_AsLongLong(key);
        if (stat_id == -1 && PyErr_Occurred())
            return -1;
        Py_ssize_t column = PyLong_AsSsize_t(value);
        if (column == -1 && PyErr_Occurred())
            return -1;
        if (column < 0 || column >= column_count) {
            PyErr_Format(PyExc_ValueError, "column %zd of stat %lld is outside [0, %zd)", column, stat_id,
                         column_count);
            return -1;
        }
        query->columns[at++] = (stat_column){stat_id, column};
    }
    query->column_entries = at;
    qsort(query->columns, (size_t)at, sizeof(stat_column), compare_stat_column);
    return 0;
}

static PyObject *build_stats_result(const unsigned char *data, const row_list *rows, const text_table *texts) {
    PyObject *spans = PyList_New(texts->count);
    if (!spans)
        return NULL;
    for (Py_ssize_t i = 0; i < texts->count; i++) {
        PyObject *span = Py_BuildValue("(nn)", (Py_ssize_t)(texts->entries[i].start - data), texts->entries[i].length);
        if (!span) {
            Py_DECREF(spans);
            return NULL;
        }
        PyList_SET_ITEM(spans, i, span);
    }
    PyObject *table = PyByteArray_FromStringAndSize((const char *)rows->items,
                                                    rows->count * rows->width * (Py_ssize_t)sizeof(int64_t));
    if (!table) {
        Py_DECREF(spans);
        return NULL;
    }
    return Py_BuildValue("(NN)", table, spans);
}

static PyObject *event_stats(PyObject *module, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t start, end, column_count;
    PyObject *event_ids, *stat_columns;
    int flag_repeats = 0;
    if (!PyArg_ParseTuple(args, "y*nnOOn|p:event_stats", &buffer, &start, &end, &event_ids, &stat_columns,
                          &column_count, &flag_repeats))
        return NULL;
    PyObject *result = NULL;
    stat_query query = {0};
    query.flag_repeats = flag_repeats;
    row_list rows = {0};
    text_table texts = {0};
    const unsigned char *data = buffer.buf;
    wire_cursor line = {NULL, NULL, NULL, NULL};
    int status;
    if (check_span(&buffer, start, end) < 0 || parse_query(event_ids, stat_columns, column_count, &query) < 0)
        goto done;
    rows.width = 1 + 2 * column_count;
    line.pos = data + start;
    line.end = data + end;
    Py_BEGIN_ALLOW_THREADS
    status = scan_event_stats(&line, &query, &rows, &texts);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        raise_wire_failure(&line, data);
        goto done;
    }
    result = build_stats_result(data, &rows, &texts);
done:
    PyMem_RawFree(query.event_ids);
    PyMem_RawFree(query.columns);
    PyMem_RawFree(rows.items);
    PyMem_RawFree(texts.entries);
    PyMem_RawFree(texts.slots);
    PyBuffer_Release(&buffer);
    return result;
}

static PyMethodDef methods[] = {
    {"split_events", split_events, METH_VARARGS,
     "split_events(buffer, start, end, batch_bytes) -> (header, [(start, end), ...]): an XLine's non-event "
     "fields joined, and its event fields cut into batches that close once they reach batch_bytes."},
    {"plane_header", plane_header, METH_VARARGS,
     "plane_header(buffer, start, end) -> (header, entries): the fields of the XPlane in buffer[start:end] "
     "other than its lines, joined, and how many event and stat metadata entries it holds."},
    {"next_line", next_line, METH_VARARGS,
     "next_line(buffer, pos, end) -> (start, end, next) or None: the value span of the first non-empty "
     "XPlane.lines field at or after pos, and where the field after it starts."},
    {"event_ints", event_ints, METH_VARARGS,
     "event_ints(buffer, start, end, with_spans=False) -> bytearray: metadata_id, offset_ps, duration_ps of "
     "each XLine.events field in buffer[start:end], as native int64 triples in wire order; with_spans: "
     "(that bytearray, a bytearray of each event's (start, end) byte offsets in buffer as int64 pairs)."},
    {"event_stats", event_stats, METH_VARARGS,
     "event_stats(buffer, start, end, event_ids, stat_columns, column_count, flag_repeats=False) -> (rows, "
     "text_spans): for each XLine.events field in buffer[start:end] whose metadata_id is in event_ids (None: "
     "every event), a row of native int64: the event's index, then a (kind, value) pair per column, the column "
     "of a stat being stat_columns[its metadata_id], the last such stat of the event (flag_repeats: its kind "
     "plus 256 where the column had an earlier one). kind: 0 absent, 1 a stat without a value, else the field number of its value (2 double, "
     "value its bits; 3 uint64, its bits; 4 int64; 5 str, value an index into text_spans, the distinct str "
     "values as (offset, length) in buffer; 6 bytes, value 0; 7 ref_value, its bits)."},
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

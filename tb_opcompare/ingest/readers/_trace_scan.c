/* The Chrome-trace reader's per-event loop in C: a batch of trace events as columns.
 *
 * Optional: torch_trace.py reads with msgspec when this module did not build or
 * TB_OPCOMPARE_PURE_PYTHON is set, and both must give the same results.
 *
 *   scan_events(buffer, begin, end, tables) -> bytes or None
 *
 * buffer[begin:end] holds trace events separated by commas (a batch as TraceText cuts
 * them). Each must be a JSON object; the fields read are those of torch_trace._Event:
 * ph, name, cat (strings), pid, tid (an integer or a string), ts (a number), dur (a number
 * or null) and args (any value, kept as its byte span); any other field is skipped.
 * tables holds five (dict, list) pairs, for ph, cat, name, pid and tid: a value's code is
 * its position in the list, and a value met for the first time is appended to the list
 * and entered in the dict, so codes count in order of first sight across calls.
 *
 * Returns COLUMNS columns of native int64, one after another, a row per event: the ph,
 * cat, name, pid and tid codes; ts and dur as the bits of a double (dur NaN where it is
 * null or absent); the byte offsets of args' value (begin, end; -1 where absent).
 *
 * The scanner is strict on purpose. It validates what it skips as JSON (structure,
 * strings' escapes and UTF-8, numbers' grammar), and returns None, not an error, for
 * anything it is not sure msgspec reads as it does: invalid JSON, a field of another
 * type, a repeated field, a key written with escapes, an integer id of over 18 digits, a
 * number that overflows, nesting deeper than MAX_DEPTH, a lone surrogate. The caller
 * then reads the whole file with msgspec, which names what is wrong as before.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define COLUMNS 9
#define MAX_DEPTH 256
#define TABLES 5
enum { T_PH, T_CAT, T_NAME, T_PID, T_TID };
/* the columns: a table's codes first, in the column of its number */
enum { C_PH = T_PH, C_CAT = T_CAT, C_NAME = T_NAME, C_PID = T_PID, C_TID = T_TID, C_TS = TABLES, C_DUR, C_ARGS_BEGIN, C_ARGS_END };

/* A failure that is not the scanner's: memory, or an error raised by Python. */
#define FAILED (-2)
/* Not sure: return None, for msgspec to read the file. */
#define UNSURE (-1)

typedef struct {
    const unsigned char *s;
    Py_ssize_t p, end;
} Cursor;

/* By byte: 1 for JSON's whitespace; 2 for a byte a string holds as it is (printable
 * ASCII but the quote and the backslash). One lookup a byte in the loops that visit
 * every byte of the text. */
static unsigned char byte_class[256];
#define SPACE 1
#define PLAIN 2

static void init_byte_class(void) {
    byte_class[' '] = byte_class['\n'] = byte_class['\r'] = byte_class['\t'] = SPACE;
    for (int ch = 0x20; ch < 0x80; ch++)
        if (ch != '"' && ch != '\\')
            byte_class[ch] |= PLAIN;
}

static inline void skip_space(Cursor *c) {
    while (c->p < c->end && (byte_class[c->s[c->p]] & SPACE))
        c->p++;
}

static inline int hex_value(unsigned char ch) {
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Length of the valid UTF-8 sequence of 2-4 bytes at s[p] (no overlong forms, no
 * surrogates, nothing past U+10FFFF), or 0. */
static inline int utf8_length(const unsigned char *s, Py_ssize_t p, Py_ssize_t end) {
    unsigned char b0 = s[p];
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        return (p + 1 < end && (s[p + 1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (b0 >= 0xE0 && b0 <= 0xEF) {
        if (p + 2 >= end)
            return 0;
        unsigned char b1 = s[p + 1];
        if ((b1 & 0xC0) != 0x80 || (s[p + 2] & 0xC0) != 0x80)
            return 0;
        if (b0 == 0xE0 && b1 < 0xA0)
            return 0; /* overlong */
        if (b0 == 0xED && b1 >= 0xA0)
            return 0; /* a surrogate */
        return 3;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4) {
        if (p + 3 >= end)
            return 0;
        unsigned char b1 = s[p + 1];
        if ((b1 & 0xC0) != 0x80 || (s[p + 2] & 0xC0) != 0x80 || (s[p + 3] & 0xC0) != 0x80)
            return 0;
        if ((b0 == 0xF0 && b1 < 0x90) || (b0 == 0xF4 && b1 >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

/* A string at c->p (its opening quote): its content's span, whether it holds escapes,
 * and the cursor past its closing quote. 0, or UNSURE. */
static int scan_string(Cursor *c, Py_ssize_t *begin, Py_ssize_t *end, int *escaped) {
    const unsigned char *s = c->s;
    Py_ssize_t p = c->p + 1, stop = c->end;
    *begin = p;
    *escaped = 0;
    for (;;) {
        while (p < stop && (byte_class[s[p]] & PLAIN))
            p++;
        if (p >= stop)
            return UNSURE;
        unsigned char ch = s[p];
        if (ch == '"') {
            *end = p;
            c->p = p + 1;
            return 0;
        }
        if (ch == '\\') {
            *escaped = 1;
            if (p + 1 >= stop)
                return UNSURE;
            unsigned char next = s[p + 1];
            if (next == 'u') {
                uint32_t unit = 0;
                if (p + 5 >= stop)
                    return UNSURE;
                for (int k = 2; k < 6; k++) {
                    int digit = hex_value(s[p + k]);
                    if (digit < 0)
                        return UNSURE;
                    unit = unit * 16 + (uint32_t)digit;
                }
                p += 6;
                if (unit >= 0xDC00 && unit <= 0xDFFF)
                    return UNSURE; /* a low surrogate alone */
                if (unit >= 0xD800 && unit <= 0xDBFF) { /* a high one: a low one must follow */
                    uint32_t low = 0;
                    if (p + 5 >= stop || s[p] != '\\' || s[p + 1] != 'u')
                        return UNSURE;
                    for (int k = 2; k < 6; k++) {
                        int digit = hex_value(s[p + k]);
                        if (digit < 0)
                            return UNSURE;
                        low = low * 16 + (uint32_t)digit;
                    }
                    if (low < 0xDC00 || low > 0xDFFF)
                        return UNSURE;
                    p += 6;
                }
            } else if (strchr("\"\\/bfnrt", next) != NULL && next != '\0') {
                p += 2;
            } else {
                return UNSURE;
            }
            continue;
        }
        if (ch < 0x20)
            return UNSURE;
        int length = utf8_length(s, p, stop);
        if (!length)
            return UNSURE;
        p += length;
    }
}

/* A number at c->p by JSON's grammar: its span, whether it is an integer, the cursor past it. */
static int scan_number(Cursor *c, Py_ssize_t *begin, Py_ssize_t *end, int *integer) {
    const unsigned char *s = c->s;
    Py_ssize_t p = c->p, stop = c->end;
    *begin = p;
    *integer = 1;
    if (p < stop && s[p] == '-')
        p++;
    if (p >= stop)
        return UNSURE;
    if (s[p] == '0') {
        p++;
    } else if (s[p] >= '1' && s[p] <= '9') {
        while (p < stop && s[p] >= '0' && s[p] <= '9')
            p++;
    } else {
        return UNSURE;
    }
    if (p < stop && s[p] == '.') {
        *integer = 0;
        p++;
        if (p >= stop || s[p] < '0' || s[p] > '9')
            return UNSURE;
        while (p < stop && s[p] >= '0' && s[p] <= '9')
            p++;
    }
    if (p < stop && (s[p] == 'e' || s[p] == 'E')) {
        *integer = 0;
        p++;
        if (p < stop && (s[p] == '+' || s[p] == '-'))
            p++;
        if (p >= stop || s[p] < '0' || s[p] > '9')
            return UNSURE;
        while (p < stop && s[p] >= '0' && s[p] <= '9')
            p++;
    }
    *end = p;
    c->p = p;
    return 0;
}

static int scan_literal(Cursor *c, const char *word, Py_ssize_t length) {
    if (c->end - c->p < length || memcmp(c->s + c->p, word, (size_t)length) != 0)
        return UNSURE;
    c->p += length;
    return 0;
}

/* Past an object's or array's opening and the space after it: 0 where ``close`` follows at
 * once (an empty one: the cursor past it), 1 where a member follows. */
static int opened(Cursor *c, unsigned char close) {
    c->p++;
    skip_space(c);
    if (c->p < c->end && c->s[c->p] == close) {
        c->p++;
        return 0;
    }
    return 1;
}

/* A member's key, its colon and the space around them: the key's span, and whether it holds
 * escapes. */
static int scan_key(Cursor *c, Py_ssize_t *begin, Py_ssize_t *end, int *escaped) {
    if (c->p >= c->end || c->s[c->p] != '"' || scan_string(c, begin, end, escaped))
        return UNSURE;
    skip_space(c);
    if (c->p >= c->end || c->s[c->p] != ':')
        return UNSURE;
    c->p++;
    skip_space(c);
    return 0;
}

/* After a member or an element: 1 where a comma says another follows, 0 where ``close``
 * ends them (the cursor past either and the space after a comma), UNSURE else. */
static int next_member(Cursor *c, unsigned char close) {
    skip_space(c);
    if (c->p >= c->end)
        return UNSURE;
    if (c->s[c->p] == ',') {
        c->p++;
        skip_space(c);
        return 1;
    }
    if (c->s[c->p] == close) {
        c->p++;
        return 0;
    }
    return UNSURE;
}

/* Any JSON value at c->p, validated and passed over. */
static int skip_value(Cursor *c, int depth) {
    if (c->p >= c->end || depth > MAX_DEPTH)
        return UNSURE;
    Py_ssize_t begin, end;
    int flag;
    unsigned char ch = c->s[c->p];
    switch (ch) {
    case '"':
        return scan_string(c, &begin, &end, &flag);
    case 't':
        return scan_literal(c, "true", 4);
    case 'f':
        return scan_literal(c, "false", 5);
    case 'n':
        return scan_literal(c, "null", 4);
    case '{':
    case '[': {
        unsigned char close = ch == '{' ? '}' : ']';
        int more = opened(c, close);
        while (more > 0) {
            if (ch == '{' && scan_key(c, &begin, &end, &flag))
                return UNSURE;
            if (skip_value(c, depth + 1))
                return UNSURE;
            more = next_member(c, close);
        }
        return more; /* 0: closed, or UNSURE */
    }
    default:
        return scan_number(c, &begin, &end, &flag);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Codes: a value's text looked up in a table of this call first, so that the Python     */
/* object of a value seen before in the batch is not made again.                           */

typedef struct {
    Py_ssize_t begin, length; /* its text in the buffer; length -1: an empty slot */
    uint64_t hash;
    int kind; /* 0 a string, 1 an integer: "1" and 1 are different values */
    int64_t code;
} Slot;

typedef struct {
    Slot *slots;
    Py_ssize_t capacity, used;
    PyObject *dict, *list; /* borrowed */
} Codes;

static uint64_t text_hash(const unsigned char *s, Py_ssize_t length, int kind) {
    uint64_t h = 1469598103934665603ULL ^ (uint64_t)kind;
    for (Py_ssize_t k = 0; k < length; k++) {
        h ^= s[k];
        h *= 1099511628211ULL;
    }
    return h;
}

static int codes_init(Codes *codes, PyObject *dict, PyObject *list) {
    codes->capacity = 256;
    codes->used = 0;
    codes->dict = dict;
    codes->list = list;
    codes->slots = PyMem_Malloc(sizeof(Slot) * (size_t)codes->capacity);
    if (!codes->slots) {
        PyErr_NoMemory();
        return FAILED;
    }
    for (Py_ssize_t k = 0; k < codes->capacity; k++)
        codes->slots[k].length = -1;
    return 0;
}

static int codes_grow(Codes *codes) {
    Py_ssize_t capacity = codes->capacity * 2;
    Slot *slots = PyMem_Malloc(sizeof(Slot) * (size_t)capacity);
    if (!slots) {
        PyErr_NoMemory();
        return FAILED;
    }
    for (Py_ssize_t k = 0; k < capacity; k++)
        slots[k].length = -1;
    for (Py_ssize_t k = 0; k < codes->capacity; k++) {
        Slot slot = codes->slots[k];
        if (slot.length < 0)
            continue;
        Py_ssize_t at = (Py_ssize_t)(slot.hash & (uint64_t)(capacity - 1));
        while (slots[at].length >= 0)
            at = (at + 1) & (capacity - 1);
        slots[at] = slot;
    }
    PyMem_Free(codes->slots);
    codes->slots = slots;
    codes->capacity = capacity;
    return 0;
}

/* The code of a Python value (a new reference is taken over), numbered if new. */
static int64_t code_of_value(Codes *codes, PyObject *value) {
    if (!value)
        return FAILED;
    PyObject *found = PyDict_GetItemWithError(codes->dict, value);
    if (found) {
        int64_t code = PyLong_AsLongLong(found);
        Py_DECREF(value);
        return (code == -1 && PyErr_Occurred()) ? FAILED : code;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(value);
        return FAILED;
    }
    Py_ssize_t code = PyList_GET_SIZE(codes->list);
    PyObject *number = PyLong_FromSsize_t(code);
    int failed = !number || PyDict_SetItem(codes->dict, value, number) || PyList_Append(codes->list, value);
    Py_XDECREF(number);
    Py_DECREF(value);
    return failed ? FAILED : (int64_t)code;
}

/* A string's value with its escapes undone, or NULL with *unsure set (a lone surrogate). */
static PyObject *unescaped(const unsigned char *s, Py_ssize_t begin, Py_ssize_t end, int *unsure) {
    /* each escape is at least as long as the UTF-8 it stands for */
    char *out = PyMem_Malloc((size_t)(end - begin) + 1);
    if (!out)
        return PyErr_NoMemory();
    Py_ssize_t n = 0;
    for (Py_ssize_t p = begin; p < end;) {
        if (s[p] != '\\') {
            out[n++] = (char)s[p++];
            continue;
        }
        unsigned char kind = s[p + 1];
        if (kind != 'u') {
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
            out[n++] = to[strchr(from, kind) - from];
            p += 2;
            continue;
        }
        uint32_t unit = 0;
        for (int k = 2; k < 6; k++)
            unit = unit * 16 + (uint32_t)hex_value(s[p + k]);
        p += 6;
        uint32_t point = unit;
        if (unit >= 0xD800 && unit <= 0xDBFF) {
            uint32_t low = 0;
            if (p + 5 < end && s[p] == '\\' && s[p + 1] == 'u') {
                for (int k = 2; k < 6; k++)
                    low = low * 16 + (uint32_t)hex_value(s[p + k]);
            }
            if (low < 0xDC00 || low > 0xDFFF) {
                PyMem_Free(out);
                *unsure = 1;
                return NULL;
            }
            p += 6;
            point = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
        } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
            PyMem_Free(out);
            *unsure = 1;
            return NULL;
        }
        if (point < 0x80) {
            out[n++] = (char)point;
        } else if (point < 0x800) {
            out[n++] = (char)(0xC0 | (point >> 6));
            out[n++] = (char)(0x80 | (point & 0x3F));
        } else if (point < 0x10000) {
            out[n++] = (char)(0xE0 | (point >> 12));
            out[n++] = (char)(0x80 | ((point >> 6) & 0x3F));
            out[n++] = (char)(0x80 | (point & 0x3F));
        } else {
            out[n++] = (char)(0xF0 | (point >> 18));
            out[n++] = (char)(0x80 | ((point >> 12) & 0x3F));
            out[n++] = (char)(0x80 | ((point >> 6) & 0x3F));
            out[n++] = (char)(0x80 | (point & 0x3F));
        }
    }
    PyObject *text = PyUnicode_DecodeUTF8(out, n, "strict");
    PyMem_Free(out);
    if (!text && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();
        *unsure = 1;
    }
    return text;
}

/* The code of the string or integer whose text is s[begin:end] (kind 0: a string's
 * content, escapes undone if any; 1: an integer of at most 18 digits). */
static int64_t code_of_text(Codes *codes, const unsigned char *s, Py_ssize_t begin, Py_ssize_t end, int kind,
                            int escaped) {
    Py_ssize_t length = end - begin;
    if (escaped) {
        int unsure = 0;
        PyObject *value = unescaped(s, begin, end, &unsure);
        if (!value)
            return unsure ? UNSURE : FAILED;
        return code_of_value(codes, value);
    }
    uint64_t hash = text_hash(s + begin, length, kind);
    Py_ssize_t at = (Py_ssize_t)(hash & (uint64_t)(codes->capacity - 1));
    while (codes->slots[at].length >= 0) {
        Slot *slot = &codes->slots[at];
        if (slot->hash == hash && slot->length == length && slot->kind == kind &&
            memcmp(s + slot->begin, s + begin, (size_t)length) == 0)
            return slot->code;
        at = (at + 1) & (codes->capacity - 1);
    }
    PyObject *value;
    if (kind == 0) {
        value = PyUnicode_DecodeUTF8((const char *)s + begin, length, "strict");
        if (!value && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
            PyErr_Clear(); /* scan_string validated it: never seen, but msgspec is the judge */
            return UNSURE;
        }
    } else {
        long long number = 0;
        int negative = s[begin] == '-';
        for (Py_ssize_t p = begin + negative; p < end; p++)
            number = number * 10 + (s[p] - '0');
        value = PyLong_FromLongLong(negative ? -number : number);
    }
    int64_t code = code_of_value(codes, value);
    if (code < 0)
        return code;
    Slot *slot = &codes->slots[at];
    slot->begin = begin;
    slot->length = length;
    slot->hash = hash;
    slot->kind = kind;
    slot->code = code;
    if (++codes->used * 2 > codes->capacity && codes_grow(codes))
        return FAILED;
    return code;
}

/* ------------------------------------------------------------------------------------ */
/* The events.                                                                            */

typedef struct {
    int64_t *data; /* COLUMNS arrays of capacity rows, one after another once done */
    Py_ssize_t rows, capacity;
} Rows;

static int rows_grow(Rows *rows) {
    Py_ssize_t capacity = rows->capacity ? rows->capacity * 2 : 4096;
    int64_t *data = PyMem_Malloc(sizeof(int64_t) * COLUMNS * (size_t)capacity);
    if (!data) {
        PyErr_NoMemory();
        return FAILED;
    }
    for (int k = 0; k < COLUMNS && rows->rows; k++)
        memcpy(data + (size_t)k * (size_t)capacity, rows->data + (size_t)k * (size_t)rows->capacity,
               sizeof(int64_t) * (size_t)rows->rows);
    PyMem_Free(rows->data);
    rows->data = data;
    rows->capacity = capacity;
    return 0;
}

static inline void put(Rows *rows, int column, int64_t value) {
    rows->data[(size_t)column * (size_t)rows->capacity + (size_t)rows->rows] = value;
}

static inline int64_t double_bits(double value) {
    int64_t bits;
    memcpy(&bits, &value, sizeof bits);
    return bits;
}

/* A number whose digits make an integer of at most 2**53 and that has at most 22 digits
 * after the point and no exponent, as timestamps are, exactly as strtod gives it
 * (Clinger's fast path: the digits and the power of ten are both exact doubles, so one
 * division rounds once, correctly); 0 where the number is not such a one. */
static int plain_number(const unsigned char *s, Py_ssize_t begin, Py_ssize_t end, double *value) {
    static const double powers[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    Py_ssize_t p = begin;
    int negative = s[p] == '-', fraction = 0;
    p += negative;
    uint64_t digits = 0;
    int significant = 0, scale = 0; /* digits from the first non-zero one: 19 of them fit in 64 bits */
    for (; p < end; p++) {
        if (s[p] == '.' && !fraction) {
            fraction = 1;
            continue;
        }
        if (s[p] < '0' || s[p] > '9')
            return 0; /* an exponent: strtod's */
        if (digits || s[p] != '0')
            significant++;
        if (significant > 19)
            return 0; /* before the digits wrap around */
        digits = digits * 10 + (uint64_t)(s[p] - '0');
        scale -= fraction;
    }
    if (digits > (1ULL << 53) || scale < -22)
        return 0;
    double mantissa = (double)digits; /* exact: at most 2**53 */
    double result = scale < 0 ? mantissa / powers[-scale] : mantissa;
    /* msgspec reads an integer as an int, then a float: "-0" is 0.0; "-0.0" is -0.0 */
    *value = negative && (digits || fraction) ? -result : result;
    return 1;
}

/* A number's text as a double (PyOS_string_to_double: correctly rounded, whatever the
 * locale), UNSURE where it overflows. */
static int number_value(const unsigned char *s, Py_ssize_t begin, Py_ssize_t end, double *value) {
    if (end - begin <= 40 && plain_number(s, begin, end, value))
        return 0;
    char text[64];
    if (end - begin >= (Py_ssize_t)sizeof text)
        return UNSURE;
    memcpy(text, s + begin, (size_t)(end - begin));
    text[end - begin] = '\0';
    char *stop;
    *value = PyOS_string_to_double(text, &stop, NULL);
    if (*value == -1.0 && PyErr_Occurred())
        return FAILED;
    if (stop != text + (end - begin) || !isfinite(*value))
        return UNSURE;
    return 0;
}

enum { F_PH = 1, F_NAME = 2, F_CAT = 4, F_PID = 8, F_TID = 16, F_TS = 32, F_DUR = 64, F_ARGS = 128 };

static const struct {
    const char *key;
    Py_ssize_t length;
    int field;
} FIELDS[] = {{"ph", 2, F_PH},   {"ts", 2, F_TS},   {"cat", 3, F_CAT},   {"pid", 3, F_PID},
              {"tid", 3, F_TID}, {"dur", 3, F_DUR}, {"name", 4, F_NAME}, {"args", 4, F_ARGS}};

/* The field a key names (0: one the reader skips). */
static int field_of(const unsigned char *key, Py_ssize_t length) {
    for (size_t k = 0; k < sizeof FIELDS / sizeof FIELDS[0]; k++)
        if (FIELDS[k].length == length && !memcmp(key, FIELDS[k].key, (size_t)length))
            return FIELDS[k].field;
    return 0;
}

/* The id (pid or tid) at c->p: an integer's or a string's code. */
static int64_t scan_id(Cursor *c, Codes *codes) {
    Py_ssize_t begin, end;
    int flag;
    if (c->p < c->end && c->s[c->p] == '"') {
        if (scan_string(c, &begin, &end, &flag))
            return UNSURE;
        return code_of_text(codes, c->s, begin, end, 0, flag);
    }
    if (scan_number(c, &begin, &end, &flag) || !flag || end - begin - (c->s[begin] == '-') > 18)
        return UNSURE;
    return code_of_text(codes, c->s, begin, end, 1, 0);
}

static int64_t scan_text_code(Cursor *c, Codes *codes) {
    Py_ssize_t begin, end;
    int escaped;
    if (c->p >= c->end || c->s[c->p] != '"' || scan_string(c, &begin, &end, &escaped))
        return UNSURE;
    return code_of_text(codes, c->s, begin, end, 0, escaped);
}

/* One field's value at c->p into the row. */
static int scan_field(Cursor *c, int field, Codes *codes, Rows *rows) {
    Py_ssize_t begin, end;
    int flag;
    int64_t code;
    double value;
    switch (field) {
    case F_PH:
    case F_CAT:
    case F_NAME: {
        int table = field == F_PH ? T_PH : field == F_CAT ? T_CAT : T_NAME;
        code = scan_text_code(c, &codes[table]);
        if (code < 0)
            return (int)code;
        put(rows, table, code);
        return 0;
    }
    case F_PID:
    case F_TID: {
        int table = field == F_PID ? T_PID : T_TID;
        code = scan_id(c, &codes[table]);
        if (code < 0)
            return (int)code;
        put(rows, table, code);
        return 0;
    }
    case F_TS:
    case F_DUR: {
        if (field == F_DUR && c->p < c->end && c->s[c->p] == 'n') {
            if (scan_literal(c, "null", 4))
                return UNSURE;
            put(rows, C_DUR, double_bits(NAN));
            return 0;
        }
        if (c->p >= c->end || !(c->s[c->p] == '-' || (c->s[c->p] >= '0' && c->s[c->p] <= '9')))
            return UNSURE;
        if (scan_number(c, &begin, &end, &flag))
            return UNSURE;
        int failed = number_value(c->s, begin, end, &value);
        if (failed)
            return failed;
        put(rows, field == F_TS ? C_TS : C_DUR, double_bits(value));
        return 0;
    }
    case F_ARGS:
        begin = c->p;
        if (skip_value(c, 1))
            return UNSURE;
        put(rows, C_ARGS_BEGIN, begin);
        put(rows, C_ARGS_END, c->p);
        return 0;
    default:
        return skip_value(c, 1);
    }
}

/* The object at c->p, one row; defaults as torch_trace._Event's. */
static int scan_event(Cursor *c, Codes *codes, Rows *rows, const int64_t *defaults) {
    if (rows->rows == rows->capacity && rows_grow(rows))
        return FAILED;
    if (c->p >= c->end || c->s[c->p] != '{')
        return UNSURE;
    int seen = 0, more = opened(c, '}');
    while (more > 0) {
        Py_ssize_t begin, end;
        int escaped;
        if (scan_key(c, &begin, &end, &escaped) || escaped)
            return UNSURE; /* a key written with escapes may still name a field */
        int field = field_of(c->s + begin, end - begin);
        if (field & seen)
            return UNSURE; /* a repeated field */
        seen |= field;
        int failed = scan_field(c, field, codes, rows);
        if (failed)
            return failed;
        more = next_member(c, '}');
    }
    if (more < 0)
        return UNSURE;
    static const int fields[COLUMNS] = {F_PH, F_CAT, F_NAME, F_PID, F_TID, F_TS, F_DUR, F_ARGS, F_ARGS};
    static const int columns[COLUMNS] = {C_PH, C_CAT, C_NAME, C_PID, C_TID, C_TS, C_DUR, C_ARGS_BEGIN, C_ARGS_END};
    for (int k = 0; k < COLUMNS; k++)
        if (!(seen & fields[k]))
            put(rows, columns[k], defaults[columns[k]]);
    rows->rows++;
    return 0;
}

static int scan_all(Cursor *c, Codes *codes, Rows *rows, const int64_t *defaults) {
    skip_space(c);
    if (c->p >= c->end)
        return 0;
    for (;;) {
        int failed = scan_event(c, codes, rows, defaults);
        if (failed)
            return failed;
        skip_space(c);
        if (c->p >= c->end)
            return 0;
        if (c->s[c->p] != ',')
            return UNSURE;
        c->p++;
        skip_space(c);
        if (c->p >= c->end)
            return UNSURE; /* a trailing comma */
    }
}

static PyObject *scan_events(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t begin, end;
    PyObject *tables;
    if (!PyArg_ParseTuple(args, "y*nnO!", &view, &begin, &end, &PyTuple_Type, &tables))
        return NULL;
    PyObject *result = NULL;
    Codes codes[TABLES];
    int made = 0;
    Rows rows = {NULL, 0, 0};
    if (begin < 0 || end > view.len || begin > end || PyTuple_GET_SIZE(tables) != TABLES) {
        PyErr_SetString(PyExc_ValueError, "scan_events: a span outside the buffer, or not five tables");
        goto done;
    }
    for (; made < TABLES; made++) {
        PyObject *pair = PyTuple_GET_ITEM(tables, made);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyDict_Check(PyTuple_GET_ITEM(pair, 0)) ||
            !PyList_Check(PyTuple_GET_ITEM(pair, 1))) {
            PyErr_SetString(PyExc_TypeError, "scan_events: each table is a (dict, list) pair");
            goto done;
        }
        if (codes_init(&codes[made], PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1)))
            goto done;
    }
    /* the defaults of an absent field: the codes of "" and 0, ts 0.0, dur and args absent */
    int64_t defaults[COLUMNS] = {0};
    for (int k = 0; k < TABLES; k++) {
        PyObject *value = k < T_PID ? PyUnicode_FromStringAndSize("", 0) : PyLong_FromLong(0);
        int64_t code = code_of_value(&codes[k], value);
        if (code < 0)
            goto done;
        defaults[k] = code;
    }
    defaults[C_TS] = double_bits(0.0);
    defaults[C_DUR] = double_bits(NAN);
    defaults[C_ARGS_BEGIN] = defaults[C_ARGS_END] = -1;
    Cursor cursor = {(const unsigned char *)view.buf, begin, end};
    int failed = scan_all(&cursor, codes, &rows, defaults);
    if (failed == FAILED)
        goto done;
    if (failed == UNSURE) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(sizeof(int64_t) * COLUMNS * (size_t)rows.rows));
    if (!result)
        goto done;
    int64_t *out = (int64_t *)PyBytes_AS_STRING(result);
    for (int k = 0; k < COLUMNS && rows.rows; k++)
        memcpy(out + (size_t)k * (size_t)rows.rows, rows.data + (size_t)k * (size_t)rows.capacity,
               sizeof(int64_t) * (size_t)rows.rows);
done:
    for (int k = 0; k < made; k++)
        PyMem_Free(codes[k].slots);
    PyMem_Free(rows.data);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"scan_events", scan_events, METH_VARARGS,
     "scan_events(buffer, begin, end, tables) -> bytes or None: the trace events of buffer[begin:end] as "
     "columns of int64 (see the module's source), or None where msgspec should read them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_trace_scan",
    .m_doc = "The Chrome-trace reader's per-event loop in C (optional; see torch_trace.py).",
    .m_size = 0,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__trace_scan(void) {
    init_byte_class();
    return PyModule_Create(&module_def);
}

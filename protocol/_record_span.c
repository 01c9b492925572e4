/*
 * The per-record loop of protocol/record_walk.py, compiled.
 *
 * Every produce of a magic-2 batch walks each of its records' varint fields to check
 * them against the batch header (see record_walk.py for why). In Python that loop
 * costs about 1.4 microseconds per record, most of a small record's produce cost; here
 * it costs a few nanoseconds. It decides exactly what the Python walk decided before
 * it (the record layout of Kafka's DefaultRecord.readFrom) and leaves slicing,
 * inflating and error types to record_walk.py.
 *
 * span(buf, pos, index, stop) walks whole records of buf from byte pos, record index,
 * up to record stop. It returns (pos, index, problem): where it stopped (at stop, or at
 * the first record not wholly inside buf, for a caller with more data to come) and
 * problem, None or the text of the first malformed record's fault.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define VARINT_MAX 5
#define VARLONG_MAX 10

enum read { READ_OK, READ_SHORT, READ_LONG };

/* The unsigned varint at *pos (zigzag not undone). READ_SHORT when it runs off the
 * buffer, READ_LONG when it is longer than max_bytes. */
static enum read
raw_varint(const uint8_t *buf, Py_ssize_t len, Py_ssize_t *pos, int max_bytes, uint64_t *value)
{
    uint64_t v = 0;
    Py_ssize_t at = *pos;
    for (int i = 0; i < max_bytes; i++, at++) {
        if (at >= len)
            return READ_SHORT;
        uint8_t byte = buf[at];
        v |= (uint64_t)(byte & 0x7F) << (7 * i);
        if (byte < 0x80) {
            *value = v;
            *pos = at + 1;
            return READ_OK;
        }
    }
    return READ_LONG;
}

static long long
zigzag(uint64_t raw)
{
    return (long long)(raw >> 1) ^ -(long long)(raw & 1);
}

static PyObject *
result(Py_ssize_t pos, Py_ssize_t index, PyObject *problem)
{
    if (problem == NULL)
        return Py_BuildValue("nnO", pos, index, Py_None);
    return Py_BuildValue("nnN", pos, index, problem);
}

/* A varint that runs past max_bytes, as record_walk.py words it. */
static PyObject *
too_long(Py_ssize_t at, int max_bytes)
{
    return PyUnicode_FromFormat("varint at byte %zd is longer than %d bytes", at, max_bytes);
}

static PyObject *
span(PyObject *module, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, index, stop;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &pos, &index, &stop))
        return NULL;
    const uint8_t *buf = view.buf;
    const Py_ssize_t len = view.len;
    PyObject *problem = NULL;
    uint64_t raw;

/* Read a varint inside a record's fields: running off the buffer means the fields run
 * past the record, which ends inside the buffer. */
#define FIELD(max_bytes)                                                                     \
    do {                                                                                     \
        Py_ssize_t at_ = pos;                                                                \
        enum read r_ = raw_varint(buf, len, &pos, (max_bytes), &raw);                        \
        if (r_ == READ_SHORT)                                                                \
            goto fields_past;                                                                \
        if (r_ == READ_LONG) {                                                               \
            problem = too_long(at_, (max_bytes));                                            \
            goto done;                                                                       \
        }                                                                                    \
    } while (0)

    while (index < stop) {
        Py_ssize_t start = pos;
        enum read r = raw_varint(buf, len, &pos, VARINT_MAX, &raw);
        if (r == READ_SHORT) {
            pos = start;
            goto done;
        }
        if (r == READ_LONG) {
            problem = too_long(start, VARINT_MAX);
            goto done;
        }
        if ((raw & 1) || raw == 0) {
            problem = PyUnicode_FromFormat("record %zd has length %lld", index, zigzag(raw));
            goto done;
        }
        Py_ssize_t size = (Py_ssize_t)(raw >> 1);
        Py_ssize_t record_end = pos + size;
        if (record_end > len) {
            pos = start;
            goto done;
        }
        pos += 1; /* attributes: unused by magic 2 */
        FIELD(VARLONG_MAX); /* timestamp delta: skipped */
        FIELD(VARINT_MAX); /* offset delta */
        if (raw != ((uint64_t)index << 1)) {
            problem = PyUnicode_FromFormat("record %zd has offset delta %lld", index, zigzag(raw));
            goto done;
        }
        for (int field = 0; field < 2; field++) { /* key, value; a negative length (-1) is null */
            FIELD(VARINT_MAX);
            if (!(raw & 1))
                pos += (Py_ssize_t)(raw >> 1);
        }
        if (pos >= len)
            goto fields_past;
        if (buf[pos] == 0) {
            pos += 1;
        } else { /* headers: a count, then key and value per header */
            FIELD(VARINT_MAX);
            long long count = zigzag(raw);
            if (count < 0 || 2 * count > record_end - pos) {
                problem = PyUnicode_FromFormat("record %zd has %lld headers in %zd bytes", index, count,
                                               record_end - pos);
                goto done;
            }
            for (long long h = 0; h < count; h++) {
                FIELD(VARINT_MAX);
                if (raw & 1) {
                    problem = PyUnicode_FromFormat("record %zd has a header key of length %lld", index,
                                                   zigzag(raw));
                    goto done;
                }
                pos += (Py_ssize_t)(raw >> 1);
                FIELD(VARINT_MAX);
                if (!(raw & 1))
                    pos += (Py_ssize_t)(raw >> 1);
            }
        }
        if (pos != record_end) {
            problem = PyUnicode_FromFormat("record %zd is %zd bytes long but its fields take %zd", index, size,
                                           pos - record_end + size);
            goto done;
        }
        index += 1;
        continue;
    fields_past:
        problem = PyUnicode_FromFormat("record %zd's fields run past its %zd bytes", index, size);
        goto done;
    }
#undef FIELD
done:
    PyBuffer_Release(&view);
    if (problem == NULL && PyErr_Occurred())
        return NULL;
    return result(pos, index, problem);
}

static PyMethodDef methods[] = {
    {"span", span, METH_VARARGS, "Walk whole records: (buf, pos, index, stop) -> (pos, index, problem)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_record_span", "The per-record loop of record_walk, compiled.", -1, methods,
};

PyMODINIT_FUNC
PyInit__record_span(void)
{
    return PyModule_Create(&module);
}

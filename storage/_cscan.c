/* The records-section scan of storage/_scan.py, compiled: the same checks, one pass, no objects.
 *
 * Why: a produce batch is validated before it is written (issue 12), and at 16 KiB batches of
 * 1 KiB records the Python scan cost as much as the write itself (issue 12 section 3). This
 * module answers only "well formed, and these are its figures" or "not well formed": on any
 * failure it returns None and the caller runs the Python scan, which names the record and the
 * reason. tests/fuzz/test_fuzz_cscan.py holds the two to the same verdict and figures.
 *
 * scan(data, start, end, count, dense, last_offset_delta) -> (min_ts_delta, max_ts_delta,
 * null_keys) | None, with the rules of _scan.scan_records:
 *   - each record: a length varint (<= 5 bytes, >= 1) whose record ends within `end`; then the
 *     attributes byte, a timestamp-delta varint (<= 10 bytes, within int64), an offset-delta
 *     varint, key length (-1 or what fits), key, value length, value, header count (>= 0 and
 *     at most half the bytes left), headers; everything ending exactly at the record's end;
 *   - offset deltas exactly 0..count-1 when `dense`, else strictly increasing within
 *     0..last_offset_delta;
 *   - nothing follows the last record.
 * A read at or past the record's end fails: the Python scan may read further, but then its
 * position passes the record's end and it fails too (positions only grow).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>
#include <stdint.h>

/* An unsigned LEB128 varint of at most max_bytes bytes at *pos, before limit. Returns 0 on
 * success; -1 when it does not end in time or runs into limit. */
static int
read_uvarint(const unsigned char *data, Py_ssize_t *pos, Py_ssize_t limit, int max_bytes, uint64_t *out,
             int *top_byte)
{
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (int n = 0; n < max_bytes; n++) {
        if (p >= limit) {
            return -1;
        }
        unsigned char b = data[p++];
        if (shift < 64) {
            result |= (uint64_t)(b & 0x7F) << shift;
        }
        if (b < 0x80) {
            *pos = p;
            *out = result;
            *top_byte = b;
            return 0;
        }
        shift += 7;
    }
    return -1;
}

/* A zig-zag varint of at most 5 bytes (35 bits: Python's scan does not narrow to int32). */
static int
read_varint35(const unsigned char *data, Py_ssize_t *pos, Py_ssize_t limit, int64_t *out)
{
    uint64_t z;
    int top;
    if (read_uvarint(data, pos, limit, 5, &z, &top) < 0) {
        return -1;
    }
    *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    return 0;
}

/* The timestamp delta: at most 10 bytes and within int64, i.e. the 10th byte is 0 or 1. */
static int
read_varint64(const unsigned char *data, Py_ssize_t *pos, Py_ssize_t limit, int64_t *out)
{
    uint64_t z;
    int top;
    Py_ssize_t before = *pos;
    if (read_uvarint(data, pos, limit, 10, &z, &top) < 0) {
        return -1;
    }
    if (*pos - before == 10 && top > 1) {
        return -1;
    }
    *out = (int64_t)(z >> 1) ^ -(int64_t)(z & 1);
    return 0;
}

/* Sections from this size on are scanned with the GIL released: only inflated sections a worker
 * thread scans reach it (an inline scan on the event loop, at most 4 MiB, keeps the GIL: giving it
 * up there could leave the loop waiting a switch interval to take it back). */
#define RELEASE_GIL_FROM_BYTES (8 * 1024 * 1024)

static PyObject *
cscan_scan(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t start, end, count;
    int dense;
    long long last_offset_delta;
    if (!PyArg_ParseTuple(args, "y*nnnpL", &view, &start, &end, &count, &dense, &last_offset_delta)) {
        return NULL;
    }
    const unsigned char *data = (const unsigned char *)view.buf;
    int ok = 1;
    int64_t min_ts = INT64_MAX, max_ts = INT64_MIN, null_keys = 0, prev_od = -1;
    if (start < 0 || end > view.len || start > end || count < 0) {
        ok = 0;
    }
    Py_ssize_t pos = start;
    /* The loop touches no Python object, only the exported buffer (held until PyBuffer_Release),
     * so a large section is scanned without the GIL: a worker thread validating a big produce
     * payload leaves the event loop running. A small one keeps it (releasing costs more). */
    PyThreadState *released = NULL;
    if (end - start >= RELEASE_GIL_FROM_BYTES) {
        released = PyEval_SaveThread();
    }
    for (Py_ssize_t i = 0; ok && i < count; i++) {
        int64_t length, ts_delta, od, key_len, value_len, header_count, n;
        Py_ssize_t p = pos;
        if (read_varint35(data, &p, end, &length) < 0 || length < 1 || length > end - p) {
            ok = 0;
            break;
        }
        Py_ssize_t stop = p + (Py_ssize_t)length;
        p += 1; /* attributes */
        if (read_varint64(data, &p, stop, &ts_delta) < 0 || read_varint35(data, &p, stop, &od) < 0 ||
            read_varint35(data, &p, stop, &key_len) < 0 || key_len < -1 || key_len > stop - p) {
            ok = 0;
            break;
        }
        if (key_len > 0) {
            p += (Py_ssize_t)key_len;
        }
        if (read_varint35(data, &p, stop, &value_len) < 0 || value_len < -1 || value_len > stop - p) {
            ok = 0;
            break;
        }
        if (value_len > 0) {
            p += (Py_ssize_t)value_len;
        }
        if (read_varint35(data, &p, stop, &header_count) < 0 || header_count < 0 ||
            header_count > (stop - p) / 2) {
            ok = 0;
            break;
        }
        for (int64_t h = 0; h < header_count; h++) {
            if (read_varint35(data, &p, stop, &n) < 0 || n < 0 || n > stop - p) {
                ok = 0;
                break;
            }
            p += (Py_ssize_t)n;
            if (read_varint35(data, &p, stop, &n) < 0 || n < -1 || n > stop - p) {
                ok = 0;
                break;
            }
            if (n > 0) {
                p += (Py_ssize_t)n;
            }
        }
        if (!ok || p != stop) {
            ok = 0;
            break;
        }
        if (dense ? od != (int64_t)i : (od <= prev_od || od > last_offset_delta)) {
            ok = 0;
            break;
        }
        prev_od = od;
        if (ts_delta < min_ts) {
            min_ts = ts_delta;
        }
        if (ts_delta > max_ts) {
            max_ts = ts_delta;
        }
        if (key_len < 0) {
            null_keys++;
        }
        pos = stop;
    }
    if (released != NULL) {
        PyEval_RestoreThread(released);
    }
    PyBuffer_Release(&view);
    if (!ok || pos != end) {
        Py_RETURN_NONE;
    }
    if (count == 0) {
        min_ts = max_ts = 0;
    }
    return Py_BuildValue("(LLL)", (long long)min_ts, (long long)max_ts, (long long)null_keys);
}

/* join(chunks) -> bytes: the chunks (bytes) in one bytes object, copied with the GIL released.
 * A stepped decompression (a produce payload validated on a worker thread) ends with hundreds of
 * MiB in 1 MiB pieces; b"".join would copy (and fault in) all of it with the GIL held, stalling
 * the event loop. Each piece is referenced while the GIL is released. */
static PyObject *
cscan_join(PyObject *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "join needs a sequence of bytes");
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyBytes_Check(items[i])) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "join needs a sequence of bytes");
            return NULL;
        }
        Py_ssize_t size = PyBytes_GET_SIZE(items[i]);
        if (size > PY_SSIZE_T_MAX - total) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_OverflowError, "joined size overflows");
            return NULL;
        }
        total += size;
    }
    PyObject **held = PyMem_Malloc(sizeof(PyObject *) * (size_t)(n > 0 ? n : 1));
    if (held == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        held[i] = items[i];
        Py_INCREF(held[i]);
    }
    Py_DECREF(seq);
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out != NULL) {
        char *dst = PyBytes_AS_STRING(out);
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t size = PyBytes_GET_SIZE(held[i]);
            memcpy(dst, PyBytes_AS_STRING(held[i]), (size_t)size);
            dst += size;
        }
        Py_END_ALLOW_THREADS
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_DECREF(held[i]);
    }
    PyMem_Free(held);
    return out;
}

static PyMethodDef cscan_methods[] = {
    {"join", cscan_join, METH_O,
     "join(chunks) -> bytes: the chunks concatenated, copied without holding the GIL."},
    {"scan", cscan_scan, METH_VARARGS,
     "scan(data, start, end, count, dense, last_offset_delta) -> (min_ts_delta, max_ts_delta, null_keys) "
     "or None when the records section is malformed (the Python scan then names the record)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef cscan_module = {
    PyModuleDef_HEAD_INIT, "_cscan", "The compiled records-section scan of kraftlog.storage._scan.", -1,
    cscan_methods,
};

PyMODINIT_FUNC
PyInit__cscan(void)
{
    return PyModule_Create(&cscan_module);
}

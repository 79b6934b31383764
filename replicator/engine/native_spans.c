/*
 * The replication loop's hot path in C: produce a span of one partition's
 * records, each with the replica's three headers, straight from the consumed
 * `confluent_kafka.Message` objects into the target producer's librdkafka
 * handle.
 *
 * With one task at 100 B the Python loop is the limit: per record it spent
 * 1.8 us, of which produce() alone took 1.2 (bench/hot_loop.py), and most of
 * that was building Python objects that librdkafka copies right away (the
 * header list and its tuples, the offset's bytes, keyword and tuple parsing).
 * Here a record costs two struct reads and one rd_kafka_producev() call.
 *
 * Only the common record goes through here: no headers of its own, not larger
 * than the remote topic allows, produced without a delivery report. The span
 * stops before the first record that is not one (another partition, a consume
 * error, own headers, too large), and it always leaves its last record
 * unproduced: the caller produces that one, with the run's delivery report if
 * it ends the run (see ReplicationTask._replicate_run).
 *
 * It reads confluent-kafka's objects through their C layout (below), which is
 * not a public API. So nothing here reads that layout unless it was checked:
 * `bind` refuses (Unusable) unless the sizes of confluent-kafka's Message and
 * Producer are those declared here, and `produce` refuses before it reads a
 * record unless bind succeeded, the SpanProducer was initialised, and the
 * handle read from the Producer is that Producer's (librdkafka's opaque of the
 * handle is the Python object, as confluent-kafka sets it). Misuse raises a
 * Python exception, never reads at an unchecked offset. On top of this,
 * `replicator.engine.spans` uses the module only with the confluent-kafka
 * version it was written for, and only after records a consumer read from
 * librdkafka's mock cluster read back through the layout as they were made.
 * librdkafka's functions are looked up through confluent-kafka's own module
 * (`bind`): the copy it links, so records go to the very handle the Python
 * Producer owns.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <stdint.h>

/* -- librdkafka: the part of its stable C ABI used here (rdkafka.h) ---------- */

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_headers_s rd_kafka_headers_t;
typedef int rd_kafka_resp_err_t;

enum { /* rd_kafka_vtype_t */
       VTYPE_END       = 0,
       VTYPE_RKT       = 2,
       VTYPE_PARTITION = 3,
       VTYPE_VALUE     = 4,
       VTYPE_KEY       = 5,
       VTYPE_MSGFLAGS  = 7,
       VTYPE_TIMESTAMP = 8,
       VTYPE_HEADERS   = 10,
};
#define MSG_F_COPY 0x2

static struct {
        rd_kafka_resp_err_t (*producev)(rd_kafka_t *, ...);
        rd_kafka_topic_t *(*topic_new)(rd_kafka_t *, const char *, void *);
        void (*topic_destroy)(rd_kafka_topic_t *);
        rd_kafka_headers_t *(*headers_new)(size_t);
        void (*headers_destroy)(rd_kafka_headers_t *);
        rd_kafka_resp_err_t (*header_add)(rd_kafka_headers_t *, const char *,
                                          Py_ssize_t, const void *, Py_ssize_t);
        void *(*opaque)(const rd_kafka_t *);
} rk;
/* Set by a successful bind(): librdkafka's functions are found and the layout
 * below is the installed confluent-kafka's. produce() refuses until then. */
static int bound;

/* -- confluent-kafka 2.16.1: src/confluent_kafka/src/confluent_kafka.h -------- */

#ifndef NATIVE_SPANS_SOURCE_SHA256 /* setup.py defines it: the sha256 of this file */
#define NATIVE_SPANS_SOURCE_SHA256 "unknown"
#endif

/* The confluent-kafka version whose layout is declared here. */
#define CONFLUENT_KAFKA_LAYOUT "2.16.1"

/* The head of `Handle` (Producer, Consumer): only `rk` is read. The whole
 * struct is HANDLE_SIZE bytes in 2.16.1 (`cimpl.Producer.__basicsize__`); a
 * version that changes it changes this layout, and bind() refuses it. */
typedef struct {
        PyObject_HEAD rd_kafka_t *rk;
} HandleHead;
#define HANDLE_SIZE 176

/* `Message`, whole: its size is checked against `Message.__basicsize__`. */
typedef struct {
        PyObject_HEAD PyObject *topic;
        PyObject *value;
        PyObject *key;
        PyObject *headers;
        void *c_headers; /* rd_kafka_headers_t *, detached by consume() */
        PyObject *error;
        int32_t partition;
        int64_t offset;
        int32_t leader_epoch;
        int64_t timestamp;
        int tstype;
        int64_t latency;
        int16_t delivery_count;
} CMessage;

static PyTypeObject *message_type;  /* confluent_kafka.cimpl.Message */
static PyTypeObject *producer_type; /* confluent_kafka.cimpl.Producer */

/* -- bind --------------------------------------------------------------------- */

/* bind(cimpl_path): dlsym on confluent-kafka's loaded module finds each symbol
 * in that module's own dependencies, i.e. in the librdkafka it links. */
static PyObject *Unusable; /* the layout or the handle is not what is declared */

/* layout() -> {"Message": (declared, actual), "Producer": (declared, actual)}:
 * the struct sizes this module declares and the installed confluent-kafka's. */
static PyObject *layout(PyObject *module, PyObject *unused) {
        return Py_BuildValue("{s(nn)s(nn)}", "Message", (Py_ssize_t)sizeof(CMessage),
                             message_type->tp_basicsize, "Producer",
                             (Py_ssize_t)HANDLE_SIZE, producer_type->tp_basicsize);
}

static int layout_matches(void) {
        return message_type->tp_basicsize == (Py_ssize_t)sizeof(CMessage) &&
               producer_type->tp_basicsize == HANDLE_SIZE;
}

static PyObject *layout_refused(void) {
        return PyErr_Format(Unusable,
                            "confluent-kafka's Message is %zd bytes and its Producer %zd; "
                            "the C part declares %zd and %d (confluent-kafka %s)",
                            message_type->tp_basicsize, producer_type->tp_basicsize,
                            (Py_ssize_t)sizeof(CMessage), HANDLE_SIZE,
                            CONFLUENT_KAFKA_LAYOUT);
}

static PyObject *bind(PyObject *module, PyObject *arg) {
        const char *path = PyUnicode_AsUTF8(arg);
        void *lib;
        if (!path)
                return NULL;
        if (!layout_matches())
                return layout_refused();
        /* RTLD_NOLOAD: the copy already in the process, never a second one. */
        lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
        if (!lib)
                return PyErr_Format(PyExc_OSError, "%s is not loaded: %s", path,
                                    dlerror());
#define BIND(field, symbol)                                                    \
        if (!(*(void **)&rk.field = dlsym(lib, symbol)))                       \
                return PyErr_Format(PyExc_OSError, "%s has no %s", path, symbol);
        BIND(producev, "rd_kafka_producev");
        BIND(topic_new, "rd_kafka_topic_new");
        BIND(topic_destroy, "rd_kafka_topic_destroy");
        BIND(headers_new, "rd_kafka_headers_new");
        BIND(headers_destroy, "rd_kafka_headers_destroy");
        BIND(header_add, "rd_kafka_header_add");
        BIND(opaque, "rd_kafka_opaque");
#undef BIND
        bound = 1;
        Py_RETURN_NONE;
}

/* What the layout reads from a Message, for the check before first use. */
static PyObject *message_fields(PyObject *module, PyObject *arg) {
        CMessage *m = (CMessage *)arg;
        if (!layout_matches())
                return layout_refused();
        if (!PyObject_TypeCheck(arg, message_type))
                return PyErr_Format(PyExc_TypeError, "expected a Message");
        return Py_BuildValue(
            "(OiLLOOO)", m->topic ? m->topic : Py_None, (int)m->partition,
            (long long)m->offset, (long long)m->timestamp,
            m->key ? m->key : Py_None, m->value ? m->value : Py_None,
            (m->headers && m->headers != Py_None) || m->c_headers ? Py_True
                                                                   : Py_False);
}

/* -- SpanProducer --------------------------------------------------------------- */

typedef struct {
        PyObject_HEAD PyObject *source_name;  /* str: the source header's name */
        PyObject *source_value;               /* bytes: the source cluster */
        PyObject *offset_name;                /* str: the offset header's name */
        PyObject *topic_name;                 /* str: the topic header's name */
        const char *source_name_utf8;         /* their UTF-8, owned by the str; */
        const char *offset_name_utf8;         /* NULL until __init__ succeeded */
        const char *topic_name_utf8;
} SpanProducer;

static int SpanProducer_init(SpanProducer *self, PyObject *args, PyObject *kw) {
        static char *kws[] = {"source_name", "source_value", "offset_name", "topic_name",
                              NULL};
        PyObject *source_name, *source_value, *offset_name, *topic_name;
        self->source_name_utf8 = self->offset_name_utf8 = self->topic_name_utf8 = NULL;
        if (!PyArg_ParseTupleAndKeywords(args, kw, "USUU", kws, &source_name,
                                         &source_value, &offset_name, &topic_name))
                return -1;
        Py_XSETREF(self->source_name, Py_NewRef(source_name));
        Py_XSETREF(self->source_value, Py_NewRef(source_value));
        Py_XSETREF(self->offset_name, Py_NewRef(offset_name));
        Py_XSETREF(self->topic_name, Py_NewRef(topic_name));
        if (!PyUnicode_AsUTF8(source_name) || !PyUnicode_AsUTF8(offset_name) ||
            !PyUnicode_AsUTF8(topic_name))
                return -1;
        self->source_name_utf8 = PyUnicode_AsUTF8(source_name);
        self->offset_name_utf8 = PyUnicode_AsUTF8(offset_name);
        self->topic_name_utf8  = PyUnicode_AsUTF8(topic_name);
        return 0;
}

static void SpanProducer_dealloc(SpanProducer *self) {
        Py_XDECREF(self->source_name);
        Py_XDECREF(self->source_value);
        Py_XDECREF(self->offset_name);
        Py_XDECREF(self->topic_name);
        Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t bytes_len(PyObject *o) {
        return o ? PyBytes_GET_SIZE(o) : 0;
}

/* A record the span can take: of the run's partition, no consume error, no
 * headers of its own, bytes for key and value, and no larger than `limit`. */
static int plain(CMessage *m, PyObject *topic, int32_t partition, Py_ssize_t limit) {
        if (Py_TYPE(m) != message_type || m->partition != partition ||
            (m->error && m->error != Py_None) || m->c_headers ||
            (m->headers && m->headers != Py_None))
                return 0;
        if ((m->key && !PyBytes_CheckExact(m->key)) ||
            (m->value && !PyBytes_CheckExact(m->value)))
                return 0;
        if (bytes_len(m->key) + bytes_len(m->value) > limit)
                return 0;
        return m->topic == topic || (m->topic && PyUnicode_Compare(m->topic, topic) == 0);
}

static rd_kafka_resp_err_t produce_one(SpanProducer *self, rd_kafka_t *h,
                                       rd_kafka_topic_t *rkt, CMessage *m,
                                       const char *topic, Py_ssize_t topic_len) {
        unsigned char offset[8];
        uint64_t o = (uint64_t)m->offset;
        rd_kafka_headers_t *headers = rk.headers_new(3);
        rd_kafka_resp_err_t err;
        for (int i = 7; i >= 0; i--, o >>= 8)
                offset[i] = (unsigned char)(o & 0xff); /* big-endian, as ">q" */
        rk.header_add(headers, self->source_name_utf8, -1,
                      PyBytes_AS_STRING(self->source_value),
                      PyBytes_GET_SIZE(self->source_value));
        rk.header_add(headers, self->offset_name_utf8, -1, offset, 8);
        rk.header_add(headers, self->topic_name_utf8, -1, topic, topic_len);
        err = rk.producev(
            h, VTYPE_RKT, rkt, VTYPE_PARTITION, (int32_t)m->partition,
            VTYPE_MSGFLAGS, MSG_F_COPY, VTYPE_VALUE,
            m->value ? PyBytes_AS_STRING(m->value) : NULL, (size_t)bytes_len(m->value),
            VTYPE_KEY, m->key ? PyBytes_AS_STRING(m->key) : NULL, (size_t)bytes_len(m->key),
            VTYPE_TIMESTAMP, (int64_t)m->timestamp, VTYPE_HEADERS, headers, VTYPE_END);
        if (err)
                rk.headers_destroy(headers); /* librdkafka owns them only on success */
        return err;
}

/*
 * produce(producer, remote, messages, start, limit)
 *   -> (index, produced, bytes, first_offset, last_offset, refused)
 *
 * Produces the plain records from messages[start] on, all but the last, to the
 * same partition of `remote`, each with the replica's three headers (source
 * cluster, source offset, source topic). `index` is the first record not produced: the
 * span's last plain record (the caller's to produce), or the first record that
 * is not plain when there was none. `refused` is librdkafka's error for
 * messages[index] when it refused it (QUEUE_FULL, or an error the caller's
 * produce() will raise), else 0: the span stopped there, the record unproduced.
 */
static PyObject *SpanProducer_produce(SpanProducer *self, PyObject *const *args,
                                      Py_ssize_t nargs) {
        PyObject *producer, *remote, *messages, *topic;
        Py_ssize_t start, limit, count, index, held = -1, produced = 0, bytes = 0;
        long long first = -1, last = -1;
        int32_t partition;
        rd_kafka_resp_err_t refused = 0;
        rd_kafka_t *h;
        rd_kafka_topic_t *rkt;
        const char *remote_name, *topic_utf8;
        Py_ssize_t topic_len;

        if (!bound)
                return PyErr_Format(PyExc_RuntimeError,
                                    "produce() before bind(): librdkafka's functions are "
                                    "not looked up and the layout is not checked");
        if (!self->source_name_utf8 || !self->offset_name_utf8 || !self->topic_name_utf8)
                return PyErr_Format(PyExc_RuntimeError,
                                    "this SpanProducer was not initialised (__init__)");
        if (nargs != 5)
                return PyErr_Format(PyExc_TypeError, "produce() takes 5 arguments");
        producer = args[0], remote = args[1], messages = args[2];
        if (!PyObject_TypeCheck(producer, producer_type) || !PyList_CheckExact(messages))
                return PyErr_Format(PyExc_TypeError,
                                    "produce(Producer, str, list[Message], int, int)");
        start = PyLong_AsSsize_t(args[3]);
        limit = PyLong_AsSsize_t(args[4]);
        if ((start == -1 || limit == -1) && PyErr_Occurred())
                return NULL;
        if (!(remote_name = PyUnicode_AsUTF8(remote)))
                return NULL;
        if (!(h = ((HandleHead *)producer)->rk))
                return PyErr_Format(PyExc_RuntimeError, "Producer has been closed");
        /* confluent-kafka makes the Producer object the handle's opaque: anything
         * else means `rk` was not read from where the handle is. */
        if (rk.opaque(h) != (void *)producer)
                return PyErr_Format(Unusable,
                                    "the librdkafka handle read from this Producer is not "
                                    "its own (its opaque is not the Producer)");
        count = PyList_GET_SIZE(messages);
        if (start < 0 || start >= count)
                return PyErr_Format(PyExc_IndexError, "start %zd of %zd messages", start, count);

        CMessage *head = (CMessage *)PyList_GET_ITEM(messages, start);
        if (Py_TYPE(head) != message_type || !head->topic)
                return Py_BuildValue("(nnnLLi)", start, 0, 0, first, last, 0);
        topic = head->topic;
        partition = head->partition;
        if (!(topic_utf8 = PyUnicode_AsUTF8AndSize(topic, &topic_len)))
                return NULL;
        if (!(rkt = rk.topic_new(h, remote_name, NULL)))
                return PyErr_Format(PyExc_RuntimeError, "no topic handle for %s", remote_name);

        for (index = start; index < count; index++) {
                CMessage *m = (CMessage *)PyList_GET_ITEM(messages, index);
                if (!plain(m, topic, partition, limit))
                        break;
                if (held >= 0) {
                        CMessage *p = (CMessage *)PyList_GET_ITEM(messages, held);
                        if ((refused = produce_one(self, h, rkt, p, topic_utf8, topic_len)))
                                break;
                        if (first < 0)
                                first = p->offset;
                        last = p->offset;
                        produced++;
                        bytes += bytes_len(p->key) + bytes_len(p->value);
                }
                held = index;
        }
        rk.topic_destroy(rkt);
        if (PyErr_Occurred()) /* PyUnicode_Compare or AsUTF8 failed */
                return NULL;
        return Py_BuildValue("(nnnLLi)", held >= 0 ? held : start, produced, bytes,
                             first, last, (int)refused);
}

static PyMethodDef SpanProducer_methods[] = {
    {"produce", (PyCFunction)(void (*)(void))SpanProducer_produce, METH_FASTCALL,
     "produce(producer, remote, messages, start, limit) -> (index, produced, bytes, "
     "first_offset, last_offset, refused)"},
    {NULL}};

static PyTypeObject SpanProducerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "replicator.engine._native_spans.SpanProducer",
    .tp_basicsize = sizeof(SpanProducer),
    .tp_flags     = Py_TPFLAGS_DEFAULT,
    .tp_new       = PyType_GenericNew,
    .tp_init      = (initproc)SpanProducer_init,
    .tp_dealloc   = (destructor)SpanProducer_dealloc,
    .tp_methods   = SpanProducer_methods,
    .tp_doc       = "Produces spans of plain records with the replica's three headers.",
};

/* -- module --------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_O, "bind(cimpl_path): use the librdkafka confluent-kafka links"},
    {"layout", layout, METH_NOARGS,
     "layout() -> {'Message': (declared, actual), 'Producer': (declared, actual)}: "
     "struct sizes"},
    {"message_fields", message_fields, METH_O,
     "message_fields(message) -> what the layout reads: (topic, partition, offset, "
     "timestamp, key, value, has_headers)"},
    {NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_native_spans",
                                        NULL, -1, module_methods};


PyMODINIT_FUNC PyInit__native_spans(void) {
        PyObject *module, *cimpl;
        if (PyType_Ready(&SpanProducerType) < 0)
                return NULL;
        if (!(cimpl = PyImport_ImportModule("confluent_kafka.cimpl")))
                return NULL;
        message_type  = (PyTypeObject *)PyObject_GetAttrString(cimpl, "Message");
        producer_type = (PyTypeObject *)PyObject_GetAttrString(cimpl, "Producer");
        Py_DECREF(cimpl);
        if (!message_type || !producer_type)
                return NULL;
        if (!(module = PyModule_Create(&module_def)))
                return NULL;
        if (!Unusable &&
            !(Unusable = PyErr_NewException("replicator.engine._native_spans.Unusable",
                                            PyExc_RuntimeError, NULL))) {
                Py_DECREF(module);
                return NULL;
        }
        if (PyModule_AddObjectRef(module, "SpanProducer", (PyObject *)&SpanProducerType) < 0 ||
            PyModule_AddObjectRef(module, "Unusable", Unusable) < 0 ||
            PyModule_AddStringConstant(module, "CONFLUENT_KAFKA_LAYOUT",
                                       CONFLUENT_KAFKA_LAYOUT) < 0 ||
            PyModule_AddStringConstant(module, "SOURCE_SHA256", NATIVE_SPANS_SOURCE_SHA256) < 0) {
                Py_DECREF(module);
                return NULL;
        }
        return module;
}

/* Walks over decoded bodies, in C: the twin of kinspect/wire/exchange.py's collect_error_codes.
 *
 * error_codes(body, out): appends to the list ``out`` every int (exactly int: not bool) that is
 * not zero and sits under a str key ending in "error_code", depth first in the dicts' and lists'
 * own order, looking into dicts and lists only (exactly those types), and not into a list under
 * the key "records". A Metadata response of thousands of partitions is walked in microseconds:
 * the Python walk was a call per dict and list (95k calls on a 322 MB capture).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *suffix;   /* "error_code" */
static PyObject *records;  /* "records" */

static int walk(PyObject *body, PyObject *out);

/* walk() of a borrowed container, held while it is walked */
static int
walk_held(PyObject *child, PyObject *out)
{
    Py_INCREF(child);
    int failed = walk(child, out);
    Py_DECREF(child);
    return failed;
}

static int
walk_list(PyObject *list, PyObject *out)
{
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if ((PyDict_CheckExact(item) || PyList_CheckExact(item)) && walk_held(item, out))
            return -1;
    }
    return 0;
}

static int
walk_dict(PyObject *dict, PyObject *out)
{
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &pos, &key, &value)) {
        int is_str = PyUnicode_CheckExact(key);
        if (PyLong_CheckExact(value)) {
            if (!is_str)
                continue;
            int nonzero = PyObject_IsTrue(value);
            if (nonzero < 0)
                return -1;
            if (!nonzero)
                continue;
            Py_ssize_t match = PyUnicode_Tailmatch(key, suffix, 0, PY_SSIZE_T_MAX, 1);
            if (match < 0)
                return -1;
            if (match && PyList_Append(out, value) < 0)
                return -1;
        } else if ((PyDict_CheckExact(value)
                    || (PyList_CheckExact(value) && !(is_str && PyUnicode_Compare(key, records) == 0)))
                   && walk_held(value, out)) {
            return -1;
        }
    }
    return 0;
}

static int
walk(PyObject *body, PyObject *out)
{
    if (Py_EnterRecursiveCall(" while collecting error codes"))
        return -1;
    int failed = PyList_CheckExact(body) ? walk_list(body, out)
               : PyDict_CheckExact(body) ? walk_dict(body, out) : 0;
    Py_LeaveRecursiveCall();
    return failed;
}

static PyObject *
error_codes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyList_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "error_codes(body, out: list)");
        return NULL;
    }
    if (walk(args[0], args[1]))
        return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"error_codes", (PyCFunction)(void (*)(void))error_codes, METH_FASTCALL,
     "error_codes(body, out) -> None: the non-zero error codes of a decoded body, appended to out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_bodies",
    .m_doc = "Walks over decoded bodies, fast.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__bodies(void)
{
    suffix = PyUnicode_InternFromString("error_code");
    records = PyUnicode_InternFromString("records");
    if (suffix == NULL || records == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}

/* orjson's `default` for the common case, in C: record keys and values as JSON strings.
 *
 * text_or(fallback, value): value decoded as UTF-8 when it is exactly bytes and valid UTF-8,
 * else fallback(value). kinspect/render/jsonl.py binds the fallback with functools.partial, so
 * orjson calls C for each of the millions of keys and values a capture holds.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *
text_or(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "text_or(fallback, value)");
        return NULL;
    }
    PyObject *value = args[1];
    if (PyBytes_CheckExact(value)) {
        PyObject *text = PyUnicode_DecodeUTF8(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value), NULL);
        if (text != NULL)
            return text;
        if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError))
            return NULL;
        PyErr_Clear();
    }
    return PyObject_CallOneArg(args[0], value);
}

static PyMethodDef methods[] = {
    {"text_or", (PyCFunction)(void (*)(void))text_or, METH_FASTCALL,
     "text_or(fallback, value) -> str | fallback(value)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_bytes_json",
    .m_doc = "Bytes as JSON text, fast.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC
PyInit__bytes_json(void)
{
    return PyModule_Create(&module_def);
}

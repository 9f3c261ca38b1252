/* SPDX-License-Identifier: MIT */
/*
 * Loader(images=...): fields of encoded images decoded in the pipeline
 * (rf_config.images).  Taken out of the keyword arguments before the
 * others are parsed, and turned into rf_image_field entries kept in the
 * loader's `keep` list (a bytes object holds the array, the names are
 * bytes objects too), so they live as long as the config that points at
 * them.
 *
 *   images={"image": 224}                         eval, 224 x 224 x 3
 *   images={"image": {"size": (192, 256), "transform": "train",
 *                     "scale": (0.25, 1), "ratio": (0.75, 1.333),
 *                     "flip": 0.5, "channels": 3, "resize": 292,
 *                     "dct": True, "max_pixels": 0}}
 */
#include "loader.h"

int
rfpy_images_split(PyObject *kwargs, PyObject **images, PyObject **rest)
{
	*images = NULL;
	*rest = NULL;
	if (!kwargs)
		return 0;
	PyObject *v = PyDict_GetItemString(kwargs, "images");
	if (!v)
		return 0;
	if (!(*rest = PyDict_Copy(kwargs)))
		return -1;
	if (PyDict_DelItemString(*rest, "images") < 0) {
		Py_CLEAR(*rest);
		return -1;
	}
	*images = v == Py_None ? NULL : v;
	return 0;
}

/* opts[key] as a float (an int or float), or keep *out when absent. */
static int
opt_float(PyObject *opts, const char *field, const char *key, double *out)
{
	PyObject *v = opts ? PyDict_GetItemString(opts, key) : NULL;
	if (!v)
		return 0;
	double d = PyFloat_AsDouble(v);
	if (d == -1.0 && PyErr_Occurred()) {
		PyErr_Format(PyExc_TypeError, "images[\"%s\"][\"%s\"] must be a number, not %.100s",
			     field, key, rfpy_type_name(v));
		return -1;
	}
	*out = d;
	return 0;
}

/* opts[key] as a pair of numbers (a, b), or keep them when absent. */
static int
opt_pair(PyObject *opts, const char *field, const char *key, double *a, double *b)
{
	PyObject *v = opts ? PyDict_GetItemString(opts, key) : NULL;
	if (!v)
		return 0;
	PyObject *seq = PySequence_Check(v) && !PyUnicode_Check(v) ? PySequence_Tuple(v) : NULL;
	int ok = seq && PyTuple_Size(seq) == 2;
	if (ok) {
		*a = PyFloat_AsDouble(PyTuple_GetItem(seq, 0));
		*b = PyFloat_AsDouble(PyTuple_GetItem(seq, 1));
		ok = !PyErr_Occurred();
	}
	Py_XDECREF(seq);
	if (!ok) {
		PyErr_Clear();
		PyErr_Format(PyExc_TypeError, "images[\"%s\"][\"%s\"] must be a pair of numbers "
			     "(min, max)", field, key);
		return -1;
	}
	return 0;
}

/* The size: an int (square) or a pair (height, width). */
static int
parse_size(PyObject *v, const char *field, uint32_t *h, uint32_t *w)
{
	long long a, b;
	if (PyLong_Check(v)) {
		if (rfpy_arg_int(v, "image size", 1, 65535, &a) < 0)
			return -1;
		*h = *w = (uint32_t)a;
		return 0;
	}
	PyObject *seq = PySequence_Check(v) && !PyUnicode_Check(v) ? PySequence_Tuple(v) : NULL;
	int ok = seq && PyTuple_Size(seq) == 2 &&
		 rfpy_arg_int(PyTuple_GetItem(seq, 0), "image height", 1, 65535, &a) == 0 &&
		 rfpy_arg_int(PyTuple_GetItem(seq, 1), "image width", 1, 65535, &b) == 0;
	Py_XDECREF(seq);
	if (!ok) {
		if (!PyErr_Occurred())
			PyErr_Format(PyExc_TypeError, "images[\"%s\"]: the size is an int or a "
				     "(height, width) pair", field);
		return -1;
	}
	*h = (uint32_t)a;
	*w = (uint32_t)b;
	return 0;
}

static int
one_field(PyObject *key, PyObject *val, PyObject *keep, rf_image_field *f)
{
	PyObject *kb = PyUnicode_Check(key) ? PyUnicode_AsUTF8String(key) : NULL;
	if (!kb) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "images: the keys are field names (str)");
		return -1;
	}
	int rc = PyList_Append(keep, kb);
	Py_DECREF(kb);
	if (rc < 0)
		return -1;
	const char *name = PyBytes_AsString(kb);
	PyObject *opts = PyDict_Check(val) ? val : NULL;
	PyObject *size = opts ? PyDict_GetItemString(opts, "size") : val;
	if (!size) {
		PyErr_Format(PyExc_ValueError, "images[\"%s\"] needs a \"size\"", name);
		return -1;
	}
	uint32_t h, w;
	if (parse_size(size, name, &h, &w) < 0)
		return -1;
	enum rf_image_transform_kind kind = RF_IMAGE_EVAL;
	PyObject *t = opts ? PyDict_GetItemString(opts, "transform") : NULL;
	if (t) {
		PyObject *tb = PyUnicode_Check(t) ? PyUnicode_AsUTF8String(t) : NULL;
		const char *ts = tb ? PyBytes_AsString(tb) : NULL;
		int train = ts && !strcmp(ts, "train"), eval = ts && !strcmp(ts, "eval");
		Py_XDECREF(tb);
		if (!train && !eval) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError, "images[\"%s\"][\"transform\"] must be "
				     "\"eval\" or \"train\"", name);
			return -1;
		}
		kind = train ? RF_IMAGE_TRAIN : RF_IMAGE_EVAL;
	}
	rf_image_field_init(f, name, h, w, kind);
	double channels = f->channels, resize = f->resize, dct = f->dct_scale, mp = 0;
	if (opt_float(opts, name, "channels", &channels) < 0 ||
	    opt_float(opts, name, "resize", &resize) < 0 ||
	    opt_float(opts, name, "flip", &f->flip) < 0 ||
	    opt_float(opts, name, "max_pixels", &mp) < 0 ||
	    opt_pair(opts, name, "scale", &f->scale_min, &f->scale_max) < 0 ||
	    opt_pair(opts, name, "ratio", &f->ratio_min, &f->ratio_max) < 0)
		return -1;
	PyObject *d = opts ? PyDict_GetItemString(opts, "dct") : NULL;
	if (d && !PyBool_Check(d)) {
		PyErr_Format(PyExc_TypeError, "images[\"%s\"][\"dct\"] must be True or False, "
			     "not %.100s", name, rfpy_type_name(d));
		return -1;
	}
	if (d)
		dct = d == Py_True;
	/* The train transform's options mean nothing to eval: refused rather
	 * than ignored. */
	static const char *const train_only[] = {"scale", "ratio", "flip", NULL};
	for (int i = 0; kind == RF_IMAGE_EVAL && opts && train_only[i]; i++)
		if (PyDict_GetItemString(opts, train_only[i])) {
			PyErr_Format(PyExc_ValueError, "images[\"%s\"][\"%s\"] is an option of "
				     "the train transform, but the transform is \"eval\": add "
				     "\"transform\": \"train\" or leave \"%s\" out", name,
				     train_only[i], train_only[i]);
			return -1;
		}
	if (kind == RF_IMAGE_TRAIN && opts && PyDict_GetItemString(opts, "resize")) {
		PyErr_Format(PyExc_ValueError, "images[\"%s\"][\"resize\"] is an option of the "
			     "eval transform, but the transform is \"train\": leave it out", name);
		return -1;
	}
	if (channels != 1 && channels != 3) {
		PyErr_Format(PyExc_ValueError, "images[\"%s\"][\"channels\"] must be 1 or 3", name);
		return -1;
	}
	if (!(resize >= 1 && resize <= 65535) || !(mp >= 0 && mp < 18446744073709551615.0)) {
		PyErr_Format(PyExc_ValueError, "images[\"%s\"]: resize in 1..65535, max_pixels >= 0",
			     name);
		return -1;
	}
	static const char *const known[] = {"size", "transform", "channels", "resize", "flip",
					    "max_pixels", "scale", "ratio", "dct", NULL};
	PyObject *k;
	Py_ssize_t pos = 0;
	while (opts && PyDict_Next(opts, &pos, &k, NULL)) {
		PyObject *b = PyUnicode_Check(k) ? PyUnicode_AsUTF8String(k) : NULL;
		const char *s = b ? PyBytes_AsString(b) : "?";
		int found = 0;
		for (int i = 0; known[i]; i++)
			found |= !strcmp(s, known[i]);
		if (!found) {
			PyErr_Clear();
			PyErr_Format(PyExc_ValueError, "images[\"%s\"]: unknown option \"%s\" (size, "
				     "transform, channels, resize, scale, ratio, flip, dct, "
				     "max_pixels)", name, s);
			Py_XDECREF(b);
			return -1;
		}
		Py_XDECREF(b);
	}
	f->channels = (uint32_t)channels;
	f->resize = (uint32_t)resize;
	f->dct_scale = dct != 0;
	f->max_pixels = (uint64_t)mp;
	return 0;
}

int
rfpy_images_config(PyObject *images, PyObject *keep, rf_config *cfg)
{
	if (!PyDict_Check(images)) {
		PyErr_Format(PyExc_TypeError, "images must be a dict {field: size or options}, "
			     "not %.100s", rfpy_type_name(images));
		return -1;
	}
	Py_ssize_t n = PyDict_Size(images), pos = 0, i = 0;
	if (n == 0)
		return 0;
	PyObject *arr = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(rf_image_field));
	if (!arr)
		return -1;
	int rc = PyList_Append(keep, arr);
	Py_DECREF(arr);
	if (rc < 0)
		return -1;
	rf_image_field *f = (rf_image_field *)(void *)PyBytes_AsString(arr);
	PyObject *k, *v;
	while (PyDict_Next(images, &pos, &k, &v))
		if (one_field(k, v, keep, &f[i++]) < 0)
			return -1;
	cfg->images = f;
	cfg->nimages = (size_t)n;
	return 0;
}

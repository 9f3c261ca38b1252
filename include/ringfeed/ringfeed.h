/* SPDX-License-Identifier: MIT */
/*
 * ringfeed: stream training datasets from disk into GPU memory with bounded
 * host and device memory.
 *
 * This header is the manual for the library's common vocabulary (versions,
 * error codes, logging, element types) and for the streaming loader.  The
 * dataset writer and random-access reader are in <ringfeed/dataset.h>.
 *
 * Conventions used by every function of the library:
 *  - Functions return int: 0 on success or a negative error code: either a
 *    negated errno value (-ENOMEM, -EIO, -EINVAL, ...) or one of the RF_E*
 *    codes below.  rf_strerror() names any of them.  Sizes and handles come
 *    back through out-parameters.
 *  - Arguments: a NULL or foreign handle, or a NULL out-pointer, is -EINVAL;
 *    a bad value (out of range, contradicting another, a settings struct
 *    that is NULL where one is required) is RF_EUSAGE.
 *  - Settings structs (rf_config, rf_dataset_config, rf_writer_config,
 *    rf_stats) start with a `size` that their init function sets and end
 *    with `reserved` bytes that must be 0.  Any other size (an uninitialised
 *    struct) is RF_EUSAGE ("call ..._init") with no other byte of the struct
 *    read, its log callback included; reserved bytes that are not 0 (a
 *    setting of a newer header) are RF_EUSAGE.
 *  - The detail of the last failure (file, chunk, byte offset, cause) is kept
 *    on the handle that failed and read with the handle's errmsg function; it
 *    is also sent to the log callback, if one is set.  A constructor that
 *    fails leaves no handle: its message is the calling thread's "open
 *    error", thread-local and valid until that thread's next call of the
 *    same constructor: rf_loader_last_open_error, rf_dataset_last_open_error,
 *    rf_writer_last_error.
 *  - The library never exits, aborts or prints.  Diagnostics go to the log
 *    callback only.
 *  - Teardown functions accept NULL and a pointer to NULL, and clear the
 *    caller's handle.
 */
#ifndef RINGFEED_RINGFEED_H
#define RINGFEED_RINGFEED_H

#include <stddef.h>
#include <stdint.h>

#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RF_BUILDING_LIBRARY) && defined(__GNUC__)
#define RF_API __attribute__((visibility("default")))
#else
#define RF_API
#endif

/* ---------------------------------------------------------------- version */

/* The run-time version as (major << 16) | (minor << 8) | patch; compare with
 * RF_VERSION_MAJOR etc. from <ringfeed/version.h> to detect a mismatch between
 * the header a program was built with and the library it runs with. */
RF_API unsigned rf_version(void);
/* The same as a static string, "0.1.0". */
RF_API const char *rf_version_string(void);

/* ------------------------------------------------------------ error codes */

/* Library-specific failures.  Every RF_E* value below is stable: it keeps
 * its meaning in every later version, is never reused, and new codes take
 * new values below the last.  They lie below every errno value, so a caller
 * can tell them apart from negated errno codes.  The texts (rf_strerror,
 * the errmsg functions) are not stable: match codes, not messages. */
enum rf_error {
	RF_EFORMAT = -1000,   /* not a ringfeed shard, or an unsupported version */
	RF_ECORRUPT = -1001,  /* a size, offset, count or value in a file is invalid */
	RF_ECHECKSUM = -1002, /* a chunk's stored bytes, or a sample's value, do not
	                         match their XXH3-64 */
	RF_ESCHEMA = -1003,   /* shards disagree on the schema, or a bad schema was given */
	RF_ETRUNCATED = -1004,/* a file ends before a region it declares */
	RF_ECODEC = -1005,    /* zstd could not decode (or encode) a chunk */
	RF_ENODEVICE = -1006, /* no usable CUDA runtime or device */
	RF_ECUDA = -1007,     /* a CUDA runtime call failed; the message names it */
	RF_EMEMPLAN = -1008,  /* the memory plan does not fit the budget or the device */
	RF_EHELD = -1009,     /* the consumer holds every buffer (more than depth batches) */
	RF_ESTATE = -1010,    /* a resume state blob is corrupt or from another dataset */
	RF_ENPY = -1011,      /* reserved for readers of .npy input built on the
	                         library (a malformed or unsupported array);
	                         no library function returns it */
	RF_EUSAGE = -1012,    /* an argument is out of range or contradicts another */
	RF_EFORK = -1013,     /* a loader used in a child of fork(): open one per process */
};

/* A static, human-readable name for any code returned by the library
 * (negated errno values included).  Never NULL; thread-safe. */
RF_API const char *rf_strerror(int code);

/* ---------------------------------------------------------------- logging */

enum rf_log_level {
	RF_LOG_ERROR = 0,
	RF_LOG_WARN = 1,
	RF_LOG_INFO = 2,
	RF_LOG_DEBUG = 3,
};

/* A log callback receives one complete message (no trailing newline) at a
 * time.  It may be called from any of the library's threads, concurrently
 * when the callback's owner sets one callback on several handles; it must not
 * call back into the handle that logged.  `user` is the pointer given with the
 * callback.  When no callback is set, nothing is logged. */
typedef void (*rf_log_fn)(void *user, enum rf_log_level level, const char *msg);

/* ------------------------------------------------------------ element types */

enum rf_dtype {
	RF_DTYPE_U8 = 1,
	RF_DTYPE_I8 = 2,
	RF_DTYPE_U16 = 3,
	RF_DTYPE_I16 = 4,
	RF_DTYPE_U32 = 5,
	RF_DTYPE_I32 = 6,
	RF_DTYPE_U64 = 7,
	RF_DTYPE_I64 = 8,
	RF_DTYPE_F16 = 9,
	RF_DTYPE_BF16 = 10,
	RF_DTYPE_F32 = 11,
	RF_DTYPE_F64 = 12,
	RF_DTYPE_BYTES = 13, /* opaque bytes: element size 1 */
};

/* Element size in bytes (1, 2, 4 or 8), or 0 for an unknown dtype. */
RF_API size_t rf_dtype_size(enum rf_dtype dtype);
/* The dtype's short name ("u8", "f32", "bf16", "bytes"), or NULL. */
RF_API const char *rf_dtype_name(enum rf_dtype dtype);
/* Parse a short name; returns 0 and sets *out, or RF_EUSAGE. */
RF_API int rf_dtype_parse(const char *name, enum rf_dtype *out);

/* ---------------------------------------------------------------- loader */
/* The default pinned budget (see rf_config.pinned_bytes): one loader's
 * share at most, and the process's in all. */
#define RF_PINNED_DEFAULT (256ull << 20)
#define RF_PINNED_PROCESS (512ull << 20)

/*
 * The streaming loader.  It reads a dataset's chunks with io_uring into a
 * fixed ring of page-locked host memory, verifies and decodes them on worker
 * threads, assembles each batch of B samples in one pinned staging slot and
 * moves it to the device with one asynchronous copy into one of `depth`
 * device buffers.  Memory is bounded: the host holds at most `pinned_bytes`
 * of page-locked memory, the device at most depth x batch bytes.
 *
 * The default pinned budget is the process's.  A loader opened with
 * pinned_bytes 0 (rf_config_init's) takes at most RF_PINNED_DEFAULT of what
 * the other loaders of the process opened that way leave of
 * RF_PINNED_PROCESS, counted as the rings they allocated, and of that only
 * the ring it runs at full speed with (reads in flight, the window, depth +
 * 2 staged batches: a small dataset's is small), and gives it back at
 * rf_loader_close.  A loader opens while its ring fits in what the others
 * left; one that does not fails at open with RF_EMEMPLAN, whose
 * message names the loaders holding the budget and the fix (close one, or
 * give it its own pinned_bytes, which is outside this count).  A child of
 * fork() starts with the whole budget.
 *
 * Threads.  rf_loader_open starts a reader thread, `decode_threads` decode
 * workers and one copy thread; rf_loader_close joins them.  The consumer
 * functions (rf_loader_next, try_next, release, stats, errmsg, rf_batch_wait)
 * are meant for one consumer thread at a time: calling them from several
 * threads at once is safe but the order of delivery between those threads is
 * unspecified.  rf_loader_close must not overlap any other call on the same
 * loader (a consumer waiting in rf_loader_next included): stop the consumer
 * first.  The log callback is called from any of the loader's threads.
 *
 * Ownership.  The loader owns every rf_batch and every byte it points to.  A
 * batch returned by rf_loader_next stays valid, and its device buffer is not
 * refilled, until the consumer hands it back with rf_loader_release and the
 * work it recorded on its stream at that point has completed.  The consumer
 * may hold up to `depth` batches at once; asking for one more returns
 * RF_EHELD (never a deadlock).
 *
 * Order.  Batches come out in the plan's order, whatever the number of
 * decode workers.  With the default plan (no shuffling) that is file order:
 * shard by shard as opened, samples in file order.
 *
 * A complete training loop, in CUDA C++ (the CUDA runtime is the program's
 * own; the loader shares the one already loaded; examples/cuda_train.cu is
 * this loop as a program):
 *
 *     __global__ void train_step(const float *x, const int64_t *y, uint32_t n);
 *
 *     rf_config cfg;
 *     rf_config_init(&cfg);
 *     const char *paths[] = {"data/train/"};
 *     cfg.paths = paths;
 *     cfg.npaths = 1;
 *     cfg.batch_size = 256;
 *     cfg.device = RF_DEVICE_CUDA;           // RF_ENODEVICE without a GPU
 *     cfg.epochs = 10;
 *
 *     rf_loader *ld;
 *     int rc = rf_loader_open(&ld, &cfg);
 *     if (rc < 0) {
 *         // the loader is NULL; the message went to cfg.log and to
 *         // rf_loader_last_open_error()
 *         fprintf(stderr, "open: %s\n", rf_loader_last_open_error());
 *         return 1;
 *     }
 *     cudaStream_t stream;
 *     cudaStreamCreate(&stream);
 *     for (;;) {
 *         const rf_batch *b;
 *         rc = rf_loader_next(ld, &b);        // blocks until a batch is ready
 *         if (rc < 0 || !b)                   // error, or the end of the last epoch
 *             break;
 *         rf_batch_wait(b, stream);           // stream waits for the copy; host does not
 *         // fields in cfg.fields order (here the schema's): f32 x, i64 y
 *         const float *x = (const float *)b->fields[0].data;
 *         const int64_t *y = (const int64_t *)b->fields[1].data;
 *         train_step<<<(b->samples + 255) / 256, 256, 0, stream>>>(x, y, b->samples);
 *         rf_loader_release(ld, b, stream);   // buffer refilled once the step is done
 *     }
 *     if (rc < 0)
 *         fprintf(stderr, "loader: %s\n", rf_loader_errmsg(ld));
 *     rf_stats st;
 *     memset(&st, 0, sizeof st);
 *     st.size = sizeof st;
 *     rf_loader_stats(ld, &st);               // stall_share, bytes, high-water marks
 *     rf_loader_close(&ld);                   // joins threads, frees everything
 *
 * RF_DEVICE_AUTO instead picks cuda when there is a usable GPU and falls
 * back to host memory otherwise (logged at RF_LOG_INFO only): host pointers
 * must never reach a kernel, so a program that wants AUTO checks after open
 * where batches go:
 *
 *     rf_stats st;
 *     memset(&st, 0, sizeof st);
 *     st.size = sizeof st;
 *     if (rf_loader_stats(ld, &st) == 0 && st.device_ordinal < 0) {
 *         // host memory: no kernel may read it (say so and stop, or
 *         // hand the data over with cudaMemcpy)
 *     }
 *
 * With the host backend ("device" memory is host memory) the same loop works
 * with stream = NULL: rf_batch_wait returns once the data is in place and
 * rf_loader_release(ld, b, NULL) means "done with it now".
 *
 * Several GPUs: run one process per GPU (torchrun, mpirun, srun).  With
 * device_index left at its default, each process's loader takes the GPU of
 * its launcher's local rank; a program that calls cudaSetDevice(n) before
 * rf_loader_open (and sets no launcher variable) gets device n; an explicit
 * device_index always wins (rf_device_kind).  Launch your kernels on that
 * device: rf_stats.device_ordinal says which it is.
 */

/*
 * Where batches are delivered.
 *
 * Which CUDA device (RF_DEVICE_CUDA, or RF_DEVICE_AUTO when it picks cuda):
 * rf_config.device_index when it is 0 or more (an explicit index always
 * wins); with the default RF_DEVICE_INDEX_AUTO (-1), in this order:
 *  1. the launcher's local rank, modulo the number of devices: the first of
 *     LOCAL_RANK (torchrun), OMPI_COMM_WORLD_LOCAL_RANK (Open MPI),
 *     SLURM_LOCALID (srun), MPI_LOCALRANKID (MPICH/Intel MPI) that is set.
 *     A value that is not a plain decimal number is RF_EUSAGE (also with
 *     RF_DEVICE_AUTO: host would hide it);
 *  2. else the calling thread's current device (what cudaSetDevice or
 *     torch.cuda.set_device made current; a thread that set none is on 0);
 *  3. else device 0.
 * The choice and its reason are logged at open (RF_LOG_INFO, e.g. "cuda:1
 * (LOCAL_RANK=1 of 2 devices)"); rf_stats.device_ordinal is the ordinal.
 *
 * The CUDA runtime.  The loader does not link cudart: it dlopens it at open,
 * the first of: RINGFEED_CUDART (a path; used alone), a libcudart.so.13 or
 * libcudart.so.12 already loaded in the process (the program's own shared
 * runtime), libcudart.so.13, libcudart.so.12.  A runtime that does not load
 * or does not start (cudaGetDeviceCount fails, e.g. an older driver that
 * cannot run .so.13) is passed over for the next; the error, when none
 * starts, names each.  A fully static program (gcc -static) has the host
 * device only: glibc cannot dlopen cudart into it (RF_ENODEVICE saying so).
 *
 * A C/CUDA program.  Recommended: build with `nvcc -cudart shared` (or link
 * -lcudart), so the program's libcudart.so is the one the loader finds
 * already loaded and one runtime serves both.  nvcc links cudart statically
 * by default; such a program and the loader then hold two runtime
 * instances.  What the CUDA documentation gives for that case: every user
 * of the runtime API in a process works on the device's primary context
 * (one per device per process); runtime calls act on the driver context
 * current to the calling thread, and cudaSetDevice makes the device's
 * primary context current (cuCtxSetCurrent); cudaStream_t and cudaEvent_t
 * are the driver's CUstream and CUevent (the same types in the headers).
 * So the batch's device pointers, its ready event and the stream you give
 * rf_batch_wait and rf_loader_release are objects of one context, and
 * cudaSetDevice in the program is the current device the loader sees.
 * The GPU test kit must verify it with nvcc's static default: the
 * program's stream ordered after a batch's copy, and the device followed.
 * Not shared between two runtimes: the error state (cudaGetLastError),
 * loaded kernels, and runtime-only settings (cudaSetDeviceFlags); never
 * call cudaDeviceReset while a loader is open.  The two runtimes need a
 * driver new enough for both.
 */
enum rf_device_kind {
	RF_DEVICE_AUTO = 0,  /* cuda when a CUDA runtime and a device are there, else host
	                        (logged at RF_LOG_INFO; rf_stats.device_ordinal is -1:
	                        check it before handing batches to kernels, as the
	                        example above does).  Host when no runtime starts
	                        or it sees no device; not to hide a choice: a
	                        device_index the runtime does not have is
	                        RF_EUSAGE naming it and the count (also with cuda),
	                        and with RINGFEED_CUDART set, a runtime that does
	                        not load or start is RF_ENODEVICE */
	RF_DEVICE_HOST = 1,  /* host memory; copies run on a loader thread */
	RF_DEVICE_CUDA = 2,  /* a CUDA device; RF_ENODEVICE when there is none */
};

/* rf_config.device_index: choose the device at open (see rf_device_kind). */
#define RF_DEVICE_INDEX_AUTO (-1)

/* The order of samples in an epoch: a pure function of (dataset, seed,
 * epoch, rank, world, mode), and for window shuffling of the window W; see
 * also rf_config.rank / world and rf_config.window. */
enum rf_shuffle {
	RF_SHUFFLE_NONE = 0,   /* file order (the default) */
	RF_SHUFFLE_CHUNKS = 1, /* the chunks in a random order each epoch, the
	                          samples of a chunk in file order */
	RF_SHUFFLE_WINDOW = 2, /* chunks in a random order, read into a window of W
	                          decoded chunks (rf_config.window), full before the
	                          first draw; every batch draws from all W of them
	                          (one chunk leaves and one enters per chunk's worth
	                          of samples), so mixing starts with the first batch;
	                          with W >= the dataset's chunks, a uniform
	                          permutation of the epoch; memory bounded by W */
	RF_SHUFFLE_FULL = 3,   /* a uniform permutation of all samples, each
	                          sample read on its own (see below) */
};

/*
 * RF_SHUFFLE_FULL reads every sample of a batch with its own read, io_depth
 * reads in flight (cfg.io_depth, default 32), straight into the batch's
 * pinned staging slot; the order needs O(1) memory (a keyed permutation).
 * Requirements, checked at rf_loader_open (RF_EUSAGE, with a message that
 * suggests RF_SHUFFLE_WINDOW): every chunk uncompressed, and every loaded
 * field fixed-size with no variable-size field before it in the schema
 * (select fields with rf_config.fields to leave later ones out).
 * Checksums: a chunk's XXH3 covers the whole chunk, which is never read.
 * With verify = 1 (the default) full mode checks every sample it reads
 * against its own checksums instead: format 2 shards (what rf_writer writes
 * by default, docs/format.md) keep an XXH3-64 of each value
 * beside each chunk.  When the tables of the whole dataset take at most
 * 64 MiB (4 million samples of two fields) they are read once at the
 * start, each checked against its own checksum in the index (a table that
 * does not match is logged and its rows read as below), and kept in plain
 * malloc'd memory outside pinned_bytes; otherwise each sample's row is
 * read with one more small read (served, after a first pass over a table,
 * from a cache of the table's 4 KiB pages of at most 32 MiB).  A value
 * that does not match stops the stream with
 * RF_ECHECKSUM, its message naming the shard, the chunk, the sample (in the
 * chunk and in the dataset) and the field, before its batch is delivered.
 * Shards without these checksums (format 1) are refused at open with
 * RF_EUSAGE and a message that says how to repack them (rf_writer) or to
 * set verify = 0, which reads them unchecked.  Structure is checked either
 * way (each chunk's raw size against what its sample count implies, each
 * sample inside its chunk, each read complete).
 * With O_DIRECT (rf_config.direct, the default) a value whose file offset or
 * size is not a multiple of 4096 is read as its covering 4 KiB-aligned range
 * into a bounce area (ring slots set aside for it) and copied into place;
 * values of 4 KiB multiples in a dataset's first field (the usual large
 * samples: images, token blocks) are read in place with no copy.  The
 * bounce areas come from pinned_bytes and can lower the queue depth when
 * the budget is small.  Order, sharding and resume are as for the other
 * modes (rank r takes its slice of each global batch of world x B samples;
 * rf_loader_state_save/load).
 * Read through the page cache (direct = 0 chosen or given, or map = 1),
 * samples are copied from maps of the shards instead of read, and on the
 * host device rf_loader_next (and _timeout) fills the next batch on the
 * caller's thread when none is ready rather than wait for the loader's
 * thread: same order, same checks (its CPU time counts in
 * rf_stats.thread_cpu_ns).
 */

/* How the staging memory is page-locked for the device. */
enum rf_pinning {
	/* The whole pinned ring is registered once at open and unregistered at
	 * close (page-locking costs about 1 s per GiB, paid once). */
	RF_PINNING_RING = 0,
	/* Each staged batch is registered just before its copy and unregistered
	 * when the copy has completed: for hosts where page-locked memory is
	 * scarce.  Costs the registration on every batch; the reader's
	 * buffers are then not registered with io_uring either (that too
	 * would keep the whole ring locked). */
	RF_PINNING_TRANSIENT = 1,
};

/* The layout of a token field in a batch (rf_config.tokens). */
enum rf_tokens {
	RF_TOKENS_STORED = 0,        /* as stored: [B, T + 1] of the packed type */
	RF_TOKENS_INPUTS_TARGETS = 1,/* int32 "inputs" [B, T] and "targets" [B, T] */
};

/* What a chunk that cannot be used does (rf_config.on_error). */
enum rf_on_error {
	RF_ON_ERROR_RAISE = 0,       /* stop the stream with its error (default) */
	RF_ON_ERROR_SKIP = 1,        /* zero substitutes for its samples, up to a limit */
};
/* rf_config.inplace: every batch copied, or batches handed out where they
 * lie in the shards' maps when they can be (read-only, RF_BATCH_READONLY). */
enum rf_inplace {
	RF_INPLACE_OFF = 0,          /* every batch copied into the ring (default) */
	RF_INPLACE_ON = 1,           /* in place when possible: read-only batches */
};

/* rf_config.skip_limit 0: at most this many chunks skipped. */
#define RF_SKIP_LIMIT_DEFAULT 16

/*
 * Images decoded in the pipeline (rf_config.images).  A loaded field of
 * encoded images (a variable-size bytes field of JPEG or PNG files, as
 * `ringfeed pack --images` / `--tar` write "image") is delivered as a fixed
 * uint8 [B, height, width, channels] array instead of its bytes: each image
 * is decoded and transformed by the decode workers (rf_config
 * .decode_threads), in parallel, before its batch is gathered.
 *
 * The transforms are torchvision's with PIL's bilinear resampling (with
 * antialias) reproduced exactly:
 *  - RF_IMAGE_EVAL: Resize(resize) then CenterCrop((height, width)).
 *  - RF_IMAGE_TRAIN: RandomResizedCrop((height, width), scale, ratio) then
 *    RandomHorizontalFlip(flip).
 * Decoding: RGB whatever the input (grayscale replicated, alpha dropped,
 * palette expanded, 16-bit to its high byte, CMYK converted as PIL does);
 * EXIF orientation is not applied (PIL's Image.open does not either).  PNG
 * pixels equal PIL's convert("RGB"), except 16-bit grayscale (PIL clips
 * the values to 255, ringfeed keeps the high byte); a JPEG decoded at full size equals PIL's within 1
 * level (0 with the same libjpeg-turbo).  With dct_scale (the default) a
 * JPEG whose region is at least twice the output is decoded at 1/2, 1/4 or
 * 1/8 scale in the DCT domain (the smallest that keeps the region at least
 * the output size): faster, and close to (not equal to) a full decode.  channels 1 is the luma of the RGB result, as PIL's
 * convert("L") (torchvision's Grayscale() after the crop).
 *
 * Determinism: every random draw (crop box, flip) is a pure function of
 * the order's seed (rf_config.seed, or a resumed blob's), the epoch and
 * the sample's dataset-wide index, so the pixels of a sample do not depend
 * on the rank, the world size, the threads, the batch or where a run
 * resumed.
 *
 * Memory: each decode worker allocates at open a buffer of the decoded
 * images of one chunk (the largest chunk's samples x height x width x
 * channels), and keeps a decoder scratch that grows to the largest image
 * decoded (at most about 4 x max_pixels bytes): both are in the memory
 * plan logged at open (the "decode" part of its line).  Pack small images
 * in small chunks (`ringfeed pack --chunk-bytes`): a chunk of 10000 28x28
 * PNGs decoded at 224x224 is 1.5 GB per worker, and open refuses
 * (RF_EMEMPLAN) a plan whose chunk buffers exceed
 * RF_IMAGE_DECODE_BYTES_MAX in all.  In a job of several ranks each rank
 * decodes the whole chunks it reads, the samples of other ranks included:
 * chunks of about a batch keep that small.
 *
 * Errors: an image that cannot be decoded (corrupt, truncated, not JPEG
 * or PNG, larger than max_pixels) stops the stream with RF_EFORMAT,
 * RF_ETRUNCATED, RF_ECORRUPT or -E2BIG and a message naming the shard,
 * the chunk, the sample's index and its "name" field (the source file
 * name, when the dataset has one).  With RF_ON_ERROR_SKIP its chunk is
 * skipped as a chunk that fails its checksum is: every sample of it comes
 * as zeros (black pixels) and counts in rf_stats.chunks_skipped.
 *
 * Limits: shuffle none and chunks (window and full are RF_EUSAGE at open;
 * pack with --shuffle for a sample-level mix), and not with the token
 * layout on the same field.  A library built without TurboJPEG and libspng
 * (meson -Dimages), a Python wheel's, and the static libringfeed.a where
 * the system has no static libspng (Debian) refuse images with RF_EUSAGE.
 */
enum rf_image_transform_kind {
	RF_IMAGE_EVAL = 0,           /* resize the shorter side, centre crop */
	RF_IMAGE_TRAIN = 1,          /* random resized crop, horizontal flip */
};

typedef struct rf_image_field {
	const char *field;           /* the loaded field of encoded images ("image") */
	uint32_t height, width;      /* output size, 1 .. 65535 */
	uint32_t channels;           /* 3 (RGB, the default) or 1 (luma) */
	enum rf_image_transform_kind transform;
	uint32_t resize;             /* EVAL: the shorter side before the crop, at
	                                least height and width; default
	                                round(max(height, width) x 8 / 7), 256 for 224 */
	double scale_min, scale_max; /* TRAIN: the crop's share of the area,
	                                0 < min <= max <= 1; default 0.08, 1 */
	double ratio_min, ratio_max; /* TRAIN: its aspect ratio (log-uniform),
	                                0 < min <= max; default 3/4, 4/3 */
	double flip;                 /* TRAIN: probability of a horizontal flip,
	                                0 .. 1; default 0.5 */
	int dct_scale;               /* 1 (default): JPEG DCT-domain downscaling; 0: off */
	uint64_t max_pixels;         /* larger images are errors; default 2^26 */
	uint8_t reserved[32];        /* zero */
} rf_image_field;

/* The most bytes all decode workers' chunk buffers of decoded images may
 * take together. */
#define RF_IMAGE_DECODE_BYTES_MAX (4ull << 30)

/* Fill *f with the defaults above for `field` decoded to height x width x 3
 * with `transform`. */
RF_API void rf_image_field_init(rf_image_field *f, const char *field, uint32_t height,
				uint32_t width, enum rf_image_transform_kind transform);

/* Limits of the loader's settings.  A larger value is RF_EUSAGE at open,
 * except where the field says it is lowered to the limit. */
#define RF_IO_DEPTH_MAX 4096        /* rf_config.io_depth: reads in flight */
#define RF_DEPTH_MAX 64             /* rf_config.depth: device buffers in flight */
#define RF_DECODE_THREADS_MAX 64    /* rf_config.decode_threads */
#define RF_WINDOW_MAX 1024          /* rf_config.window: decoded chunks held */
#define RF_WORLD_MAX (1 << 24)      /* rf_config.world, and a launcher's world size;
                                       rf_config.rank is below it */

/*
 * Names of the settings, one vocabulary for command lines, bindings and
 * logs (the `ringfeed` tool and the Python module spell them so):
 *   shuffle  "none", "chunks", "window", "full"
 *   device   "auto", "host", "cuda"
 *   pinning  "ring", "transient"
 * Each _name function returns a static string, or NULL for a value outside
 * the enum.  Each _parse function takes the exact, lower-case name, sets
 * *out and returns 0, or returns RF_EUSAGE (an unknown or NULL name, out
 * NULL) leaving *out as it was.  Pure and thread-safe.
 */
RF_API const char *rf_shuffle_name(enum rf_shuffle mode);
RF_API int rf_shuffle_parse(const char *name, enum rf_shuffle *out);
RF_API const char *rf_device_name(enum rf_device_kind kind);
RF_API int rf_device_parse(const char *name, enum rf_device_kind *out);
RF_API const char *rf_pinning_name(enum rf_pinning pinning);
RF_API int rf_pinning_parse(const char *name, enum rf_pinning *out);

/*
 * The rank and world size rf_loader_open will use for rf_config.rank and
 * rf_config.world as given (-1: unset), by the same rule and from the same
 * launcher variables in the process environment (see rf_config.rank): for a
 * front end that shows them, or computes a length, before opening.  Sets
 * *rank_out, *world_out and *source (a static string naming where they came
 * from, as the loader's open log line does: "config", "default",
 * "RANK/WORLD_SIZE", "config+RANK/WORLD_SIZE", ...); any of them may be
 * NULL.  `msg` (may be NULL; msg_cap bytes) receives the reason of a
 * failure, or on success the warnings the loader logs at RF_LOG_WARN for
 * these values (a launcher pair half set, a configured value that
 * contradicts the launcher's), joined by "; ", or "".  Returns 0, or RF_EUSAGE for what rf_loader_open
 * refuses: a value below -1 or above RF_WORLD_MAX, a launcher variable that
 * is not a plain decimal number, world 0, rank >= world, a world above 1
 * configured with neither a rank nor a launcher's.  Reads the environment;
 * thread-safe as getenv is.
 */
RF_API int rf_rank_resolve(int32_t rank, int32_t world, uint32_t *rank_out, uint32_t *world_out,
			   const char **source, char *msg, size_t msg_cap);

/*
 * Batches each rank receives in one epoch of `samples` samples with
 * batch_size B per rank, as the loader's order deals them (see
 * rf_config.drop_last): the full global batches of world x B samples, plus,
 * with drop_last 0, one smaller batch when rem = samples % (world x B) is
 * not 0.  The same on every rank (rank
 * is checked, not used).  The count of a stream whose batches are not
 * closed early (rf_config.var_bytes).  Returns 0 and *out, or RF_EUSAGE for
 * batch_size 0, world 0, rank >= world or out NULL.  Pure.
 */
RF_API int rf_epoch_batches(uint64_t samples, uint32_t batch_size, uint32_t rank, uint32_t world,
			    int drop_last, uint64_t *out);

/*
 * Loader settings.  Initialise with rf_config_init() and change what you
 * need; fields added in later versions go into `reserved`, so a program built
 * against this header keeps working with a newer library.  The loader copies
 * what it needs at open: the strings and arrays may be freed afterwards.
 */
typedef struct rf_config {
	uint32_t size;               /* sizeof(rf_config), set by rf_config_init;
	                                any other value is RF_EUSAGE at open */

	/* The dataset: each entry a shard, a directory or a glob, as for
	 * rf_dataset_open() in <ringfeed/dataset.h>. */
	const char *const *paths;
	size_t npaths;
	/* The fields to load, by name, in the order they appear in a batch.
	 * NULL (the default) loads every field in schema order; NULL with
	 * nfields other than 0 is RF_EUSAGE. */
	const char *const *fields;
	size_t nfields;

	uint32_t batch_size;         /* samples per batch, B (per rank); default 32 */
	int drop_last;               /* 1: drop the last batch of an epoch when it has
	                                fewer than B samples; 0 (default): deliver it.
	                                With world > 1 the last batch is global: the
	                                rem = N % (world x B) samples left after the
	                                full global batches.  drop_last = 1 drops
	                                them (the last rem of the epoch's order).
	                                drop_last = 0 delivers every one of them,
	                                and every rank the same number of batches
	                                of the same sizes, so that no rank waits
	                                alone in a collective: when rem > 0 every
	                                rank gets one more batch of s = ceil(rem /
	                                world) samples; with q = rem / world and
	                                m = rem % world, rank r takes the q + (r <
	                                m) samples at positions rq + min(r, m) of
	                                the tail, and the ranks r >= m (none when m
	                                = 0) end that batch with one pad: a repeat
	                                of the rank's sample before it (of its last
	                                batch when q = 0).  So the ranks together
	                                deliver every sample of the epoch once, and
	                                world - m of them once more when m > 0, as
	                                PyTorch's DistributedSampler pads; world = 1
	                                never pads.  A world above N gives every
	                                rank one batch (ranks >= N: a pad).
	                                An epoch with no batch for this rank (B,
	                                or world x B, above the samples with
	                                drop_last = 1; no samples) is logged as a
	                                warning at open: the stream is empty */
	/* Passes over the data; default 1; 0 = until closed.  The stream ends
	 * after epoch `epoch + epochs - 1` of this config, whether or not it
	 * resumes: a position (resume, rf_loader_state_load, rf_loader_rewind)
	 * only says where to continue, so a run saved and resumed with the
	 * same settings delivers exactly the samples of the uninterrupted run.
	 * A position outside epochs epoch .. epoch + epochs - 1 is refused
	 * (RF_ESTATE).  (`epochs` once counted from the saved epoch: a
	 * program that gives the epochs left instead of the run's total ends
	 * early now.) */
	uint32_t epochs;

	/* The order.  Batches, in order, are a pure function of the dataset,
	 * shuffle, seed, epoch, rank, world, batch_size, drop_last and (window
	 * shuffling) the window W, and of nothing else: not of the memory,
	 * depth, device, threads or I/O settings, which may differ between
	 * ranks.  rf_stats.order_id hashes these inputs but the rank and
	 * epoch, for a job to check that its ranks agree. */
	enum rf_shuffle shuffle;     /* default RF_SHUFFLE_NONE */
	uint64_t seed;               /* key of the shuffled orders; default 0 */
	uint64_t epoch;              /* number of the first epoch (its order); default 0 */
	/* RF_SHUFFLE_WINDOW: decoded chunks held, W, at most 1024 (RF_EUSAGE
	 * above).  0 (default): from the dataset alone, 128 MiB over its
	 * average raw chunk size, and at most what RF_PINNED_DEFAULT holds
	 * in read slots of its largest chunk beside 2 more and 5 staging
	 * ones, clamped to [2, 1024] (32 chunks of the writer's default 4
	 * MiB, 128 of 1 MiB; 5 of its 20 MiB chunks of 1 MiB samples, 2 of
	 * 30 MiB samples, one a chunk).  A W above the dataset's
	 * chunk count is that count (the same order).  The window must fit
	 * the pinned ring: uncompressed chunks stay in their read slots (or
	 * with map where they lie in the map, still counted as slots),
	 * compressed ones in W raw buffers of ordinary memory, and the ring
	 * needs W + 2 read slots besides its staging ones (about 136 MiB of
	 * the default 256 MiB pinned_bytes for chunks of 4 MiB), which give
	 * way to them down to one.  A W the ring cannot hold fails at open
	 * with RF_EMEMPLAN naming W and what would hold it: the
	 * pinned_bytes, a smaller batch_size (read slots are a chunk's size,
	 * staging slots a batch's), or a smaller W on every rank (W is part
	 * of the order, never lowered to fit).  The W in force is in
	 * rf_stats.window and the open log line.
	 * From memory (data read through the page cache: map, or buffered
	 * because it fits), over fixed fields stored uncompressed with
	 * per-sample checksums (format 2; any format with verify = 0), no
	 * chunk is held: each batch of the same order is copied from maps of
	 * the shards as RF_SHUFFLE_FULL does (every sample checked against
	 * its own checksums; the consumer's thread fills batches too), so the
	 * window needs no read slots (rf_stats.io_engine "mmap", no decode
	 * thread).  Compressed chunks, variable fields, tokens, images,
	 * mixtures and on_error skip hold the window as above. */
	uint32_t window;
	/* This process's share of every global batch of world x B samples:
	 * disjoint samples and the same number of batches on every rank.
	 * -1 (default): from the launcher's environment (RANK/WORLD_SIZE,
	 * OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE, SLURM_PROCID/NTASKS), else
	 * rank 0 of 1.  A pair half set is ignored with a warning; a world
	 * above 1 with neither a rank nor a launcher's is RF_EUSAGE (every
	 * process would read rank 0's share). */
	int32_t rank, world;
	/* Resume: a blob from rf_loader_state_save (resume_len bytes), or
	 * NULL.  The stream starts with the batch that would have followed
	 * the last one handed out before the save, reading none of the
	 * skipped data; the blob's shuffle, seed and epoch replace the
	 * settings above (and its window, when `window` is 0; a window set
	 * smaller than the blob's is RF_ESTATE).  `epoch` and `epochs` keep
	 * their meaning: the stream still ends after epoch epoch + epochs - 1
	 * (give them as in the run that saved the blob).  The blob is copied
	 * at open.  NULL with resume_len other than 0 is RF_EUSAGE. */
	const void *resume;
	size_t resume_len;

	enum rf_device_kind device;  /* default RF_DEVICE_AUTO */
	int device_index;            /* CUDA device ordinal (0 is device 0); default
	                                RF_DEVICE_INDEX_AUTO (-1): the launcher's local
	                                rank, else the thread's current device, else 0
	                                (see rf_device_kind); below -1, or an index
	                                the runtime does not have: RF_EUSAGE */
	uint32_t depth;              /* device buffers in flight; default 2 (double buffering);
	                                0 means the default; at most RF_DEPTH_MAX */

	uint64_t pinned_bytes;       /* page-locked host budget; 0 (default): a share
	                                of the process's default budget, below */
	enum rf_pinning pinning;     /* default RF_PINNING_RING */

	uint32_t io_depth;           /* reads in flight, at most RF_IO_DEPTH_MAX
	                                (more is that) (map: unused); 0 (default):
	                                the library's choice, 32 */
	int direct;                  /* 1: O_DIRECT reads that bypass the page cache;
	                                0: buffered; -1 (default): O_DIRECT unless the
	                                dataset's stored bytes are at most a quarter of
	                                MemAvailable at open, when buffered reads let
	                                it stay hot in the page cache (logged, info) */
	/* Checksum + decompress + assembly workers.  0 (default): chosen at
	 * open from the CPUs the process may run on and the dataset, and
	 * reported in rf_stats.decode_threads: uncompressed, 1 below 4 CPUs
	 * and one per two CPUs from 4, at most 8 (the workers check and copy
	 * their chunks into the batches together, at memory speed; on 2 CPUs
	 * a second worker only takes a core from the consumer), except shuffle
	 * window over read slots (O_DIRECT or remote shards), 2 from 2 CPUs:
	 * its gather is one thread in turn, and the second checks the next
	 * chunk meanwhile; compressed, one per CPU, at most 8.  Above RF_DECODE_THREADS_MAX: lowered to it.
	 * Shuffle full (and window) from memory decodes nothing: as many
	 * threads copy samples from the maps into batches, the full thread
	 * and decode_threads - 1 more (none on 2 CPUs, where the consumer's
	 * thread fills batches when none is ready). */
	uint32_t decode_threads;
	int verify;                  /* 1 (default): check every chunk's XXH3-64 before
	                                its bytes are used, and in shuffle full every
	                                sample's own XXH3-64s (format 2 shards only:
	                                see RF_SHUFFLE_FULL); in shuffle window from
	                                maps, samples of at least 4 KiB of fixed
	                                fields are checked that way instead, each in
	                                the batch as it is gathered (format 2 shards,
	                                uncompressed, on_error fail; logged at open).
	                                There and in shuffle full from memory, a
	                                value that fails its row is checked again by
	                                its chunk's XXH3-64; when that holds, the
	                                table is what is damaged: a warning, and the
	                                stream goes on.  0: skip */

	/*
	 * Byte capacity of each variable-size field per batch.  The bytes of B
	 * variable-size values are not known before they are read, so each such
	 * field gets a fixed region of this many bytes in every batch buffer.
	 * 0 (default): 2 x B x the largest per-sample average of any chunk
	 * (raw chunk bytes / samples), at least 4 KiB, rounded up to 256.
	 * A batch whose values would overflow the region is closed early: it
	 * holds fewer than B samples (rf_batch.samples says how many) and the
	 * rest start the next batch; order is unchanged.  A single value larger
	 * than the region is an error (RF_EMEMPLAN) naming the sample and the
	 * size to set here.  With world > 1 an early close would give that rank
	 * one batch more than the others, which would then wait for it at the
	 * epoch's end, so there rf_loader_next returns RF_EMEMPLAN instead,
	 * naming the rank, the batch, the field and the bytes it needs: size
	 * var_bytes for the largest batch.
	 */
	uint64_t var_bytes;

	rf_log_fn log;               /* messages; NULL: none (RINGFEED_LOG sets the level) */
	void *log_user;

	/*
	 * 1: read chunks through a read-only memory map of each shard instead
	 * of read calls.  The decode workers check, decompress and gather
	 * straight from the page cache's pages, which saves the copy of every
	 * byte from the page cache into the ring when the dataset is in the
	 * page cache (on the host device, a batch that lies whole in one
	 * uncompressed chunk is handed out where it lies, read-only: see
	 * rf_config.inplace; the others are gathered); the reader faults each chunk in ahead of its
	 * turn (MADV_POPULATE_READ, Linux 5.14), so a read error or a shard
	 * shorter than its index is reported as an error of that chunk (older
	 * kernels only start the reads, and such a page raises SIGBUS).  Implies buffered reads (direct = 1 with map = 1
	 * is RF_EUSAGE).  Full shuffling copies each sample from the mapped
	 * shards (as it does by itself with buffered reads, direct = 0 or
	 * chosen by -1: the dataset is then in the page cache) instead of a
	 * read call per sample, hashing it right after the copy; with O_DIRECT
	 * it reads each sample.  Window shuffling likewise reads through the
	 * maps by itself with buffered reads (direct = 0, or -1 choosing
	 * them), local shards and no image step: each chunk is checked and
	 * gathered where it lies in the page cache.  File and chunk order
	 * (shuffle none and chunks) read through the maps by themselves when
	 * direct = -1 chose buffered reads, on 4 CPUs or more, with local
	 * shards, no image step and no mixture: the decode workers then copy
	 * the chunks in parallel, where a read call copies on the reader's one
	 * thread (16 CPUs, hot, to a GPU: 4.3-4.8 against 35-38 GB/s); on
	 * fewer CPUs the reads stay, a batch then handed out of its read slot
	 * with no copy.  The choice is logged at open.  The price: a shard that is truncated or whose disk
	 * fails after its pages were faulted in raises SIGBUS when the loader
	 * touches them, which ends the process; use it for datasets nobody
	 * modifies while they are read, on local storage.  Mapped pages count
	 * in the process's RSS (shared, reclaimable page cache).  The pinned
	 * ring then holds only staged batches (slots of a batch's size, not a
	 * chunk's): much less page-locked memory and a faster open; the reads
	 * still count against pinned_bytes as chunk-sized slots, which bounds
	 * how far ahead chunks are faulted in.  0 (default): read calls into
	 * the pinned ring.
	 */
	int map;

	/*
	 * Token batches ready for a GPT-style step (llm.c's layout).
	 * RF_TOKENS_STORED (0, default): every field as stored.
	 * RF_TOKENS_INPUTS_TARGETS: the loaded field named "tokens" (fixed,
	 * one dimension of T + 1 >= 2 tokens of u16, u32 or i32, which is
	 * the layout of llm.c's token files packed as samples of T + 1 tokens
	 * taken every T) is delivered as two
	 * fields in its place: "inputs", int32 [B, T], tokens [0, T) of each
	 * sample, and "targets", int32 [B, T], tokens [1, T + 1): each a
	 * contiguous C-order array, as llm.c's gpt2_forward(inputs, targets,
	 * B, T) reads them.  The widening and the split are done in the
	 * gather, so the device copy carries the int32 layout (no kernel of
	 * yours to run) and the memory plan sizes a batch from it: 2 x B x T
	 * x 4 bytes for this field instead of B x (T + 1) x 2 for u16.  Other
	 * loaded fields are delivered unchanged.  u32 tokens above INT32_MAX
	 * come out negative (llm.c reads tokens as int).  RF_EUSAGE at open
	 * when no loaded field is called "tokens" or it is not such a field,
	 * when a loaded field is called "inputs" or "targets" too, or with
	 * shuffle full (which reads values straight into the batch: use
	 * window).
	 *
	 * What changes against llm.c's DataLoader: T is fixed when packing
	 * (a sample is T + 1 tokens taken every T tokens, the same windows
	 * llm.c's rows are, sharing one token with the next); a shard's last
	 * tokens that do not fill a sample are dropped (llm.c drops those
	 * that do not fill a whole B x T x world step), so a batch can hold
	 * rows of two shards, in shard order; the order of rows is the
	 * loader's (shuffle, seed; ranks take disjoint rows as the plan
	 * deals them, not llm.c's interleaved B x T spans); and the last
	 * batch of an epoch holds fewer than B rows unless drop_last = 1,
	 * which a step with fixed (B, T) buffers wants.
	 */
	enum rf_tokens tokens;

	/*
	 * What a chunk that cannot be used does to the stream: one that fails
	 * its checksum, its decompression or validation, or its read (after
	 * the retries described at rf_loader_open).
	 *
	 * RF_ON_ERROR_RAISE (0, default): the stream stops with that error
	 * (rf_loader_next returns it).
	 *
	 * RF_ON_ERROR_SKIP: the chunk is dropped and each of its samples the
	 * order places in a batch is replaced by a substitute sample of zeros:
	 * every fixed field all zero bytes (its dtype's 0), every variable
	 * field empty (length 0).  The substitute takes the bad sample's place
	 * in its batch, so every rank still delivers the same number of
	 * batches of the same sizes and every other sample stays where it
	 * was; the rule depends on nothing but the chunk, so it is the same on
	 * every rank and every run.  A batch does not say which of its samples
	 * are substitutes: a consumer that must not train on them recognises
	 * them by their content (an all-zero label field, an empty variable
	 * field) or stops on rf_stats.chunks_skipped.  Each skip is logged at
	 * RF_LOG_WARN with the shard, the chunk, its offset and the error, and
	 * counted in rf_stats.chunks_skipped and samples_substituted when its
	 * substitutes are delivered (see there).  The limit counts distinct
	 * chunks, in the order they come in the stream: a chunk skipped before
	 * is skipped again without counting anew, and the first bad chunk
	 * that would make more than skip_limit of them stops the stream with
	 * its own error, as RF_ON_ERROR_RAISE does (the message adds the
	 * limit).  Each rank counts the chunks it reads, so with world > 1 a
	 * rank may stop where another goes on: keep the limit for data that
	 * is broken beyond use.  The samples of a bad chunk that the order
	 * drops (drop_last) or that belong to other ranks are not counted.  Only chunk-wise reading skips: with shuffle
	 * full (which reads samples, not chunks) RF_ON_ERROR_SKIP is RF_EUSAGE
	 * at open.  Any other value is RF_EUSAGE.
	 */
	enum rf_on_error on_error;
	/* With RF_ON_ERROR_SKIP: the most distinct chunks skipped over the
	 * loader's life (all its epochs) before a bad chunk stops the stream;
	 * 0 (the default) means RF_SKIP_LIMIT_DEFAULT (16); UINT32_MAX: no
	 * limit.  Ignored with RF_ON_ERROR_RAISE. */
	uint32_t skip_limit;

	/*
	 * A mixture: instead of paths, nsources datasets ("sources") streamed
	 * together at the proportions of their weights (see "Mixtures" below
	 * rf_config_init); paths must then be NULL with npaths 0.  NULL with
	 * nsources 0 (the default): one dataset, from paths.
	 */
	const struct rf_source *sources;
	size_t nsources;
	/* A mixture epoch, in samples of the whole stream (all ranks); 0 (the
	 * default): the included sources' samples together.  Must be 0 without
	 * sources. */
	uint64_t epoch_samples;

	/* Fields of encoded images delivered decoded, one entry per field (see
	 * rf_image_field); NULL (default): every field as stored.  Each entry
	 * must name a loaded variable-size bytes field, once.  NULL with
	 * nimages other than 0, or a bad entry, is RF_EUSAGE at open.
	 * Copied at open. */
	const rf_image_field *images;
	size_t nimages;

	/*
	 * A local cache of a remote dataset's chunks (docs/remote.md "Cache"),
	 * so that later epochs, and later runs, read them from local disk.
	 * NULL (default): none, every epoch reads from the server.  A
	 * directory (made if missing): every chunk read from a URL is kept
	 * there in a file of its own, written to a temporary name and renamed,
	 * and checked against its own XXH3-64 each time it is reused (one that
	 * fails is deleted and read from the server again: a corrupted cache
	 * file is never delivered).  Entries are keyed by the URL, the shard's
	 * size and the byte range.  The entries never add up to more than
	 * cache_bytes: when one would not fit, the least recently used are
	 * deleted.  Several processes (the ranks of a node) may share the
	 * directory: insertions are serialized by a lock file in it, so the
	 * cap holds for all of them together.  Local shards are never cached.
	 * A directory that cannot be made or written fails the open. */
	const char *cache_dir;
	uint64_t cache_bytes;        /* the cap; 0 (default): 10 GiB */

	/*
	 * Batches handed out where they lie in the shards' maps, with no copy
	 * (RF_INPLACE_ON), or always copied (RF_INPLACE_OFF, 0, the default:
	 * a program may write into its batches).  Asked for, in place applies
	 * when every one of these holds:
	 * the device is the host and the ring lends its slots
	 * (rf_stats.in_place), the dataset is read through maps (map = 1),
	 * shuffle none or chunks, every
	 * loaded field fixed-size and delivered as stored (no image decoding,
	 * no token layout), no mixture; and, per batch, the chunk is
	 * uncompressed and the batch's samples are consecutive in that one
	 * chunk.  Other batches are gathered into the ring as
	 * usual; so is every batch whose chunk fails to verify with on_error
	 * skip (its zero substitutes).
	 *
	 * A batch handed out in place is read-only: rf_batch.flags has
	 * RF_BATCH_READONLY, its fields' data point into read-only
	 * (PROT_READ) shared maps of the page cache, and a write through them
	 * faults (SIGSEGV): copy what you modify, and hand such memory to no
	 * code that may write into it.  Its chunk's XXH3-64 is
	 * checked (verify = 1) before any batch from it is delivered, once per
	 * read of the chunk (each epoch), as for a copied batch.  The batch is
	 * the file's cached pages themselves: a program that writes into the
	 * shard file while it is read (rather than writing a new file and
	 * renaming it, as rf_writer and ringfeed pack do) changes bytes after
	 * their check, which a copied batch would not show; the next read of
	 * the chunk fails its check.  A staging share too small to lend
	 * depth + 1 slots copies every batch instead (said in the memory plan
	 * line of the log).  The memory
	 * stays valid until the batch is released (rf_loader_release), and
	 * the maps until rf_loader_close.  rf_stats.inplace says whether the
	 * loader does it.  Nothing changes in the order, the batches'
	 * contents or the memory plan.  Any other value is RF_EUSAGE.
	 */
	enum rf_inplace inplace;

	uint8_t reserved[52];        /* zero; room to grow */
} rf_config;

/* One source of a mixture (rf_config.sources). */
typedef struct rf_source {
	const char *path;   /* a shard, a directory or a glob, as a paths entry */
	double weight;      /* finite and >= 0; 0 leaves the source out */
	const char *name;   /* for messages and stats; NULL: the path */
} rf_source;

/* Sources a mixture may have. */
#define RF_SOURCES_MAX 16

/* Fill *cfg with the defaults above (paths NULL: set them). */
RF_API void rf_config_init(rf_config *cfg);

/*
 * Mixtures.  rf_config.sources lists several datasets, each with a weight;
 * one stream draws from them at the weights' proportions:
 *
 *     rf_source src[3] = {{"web/", 0.7, "web"}, {"code/", 0.2, "code"},
 *                         {"math/", 0.1, "math"}};
 *     cfg.sources = src; cfg.nsources = 3;
 *
 * Weights: finite and >= 0, relative (0.7/0.2/0.1 and 7/2/1 are the same
 * mixture).  A weight of 0 leaves its source out (never read, its schema
 * still checked); a negative, NaN or infinite weight, or all weights 0, is
 * RF_EUSAGE naming the source.  At most RF_SOURCES_MAX sources.
 *
 * Fields: those loaded (rf_config.fields, or every field of the first
 * source) must exist in every source with the same dtype and shape (a
 * variable dimension may differ in length per sample); a mismatch is
 * RF_ESCHEMA naming the source and the field.  Today every source must
 * also have the same schema as a whole (same fields in the same order).
 * A source that cannot be opened or is corrupt fails with its name.
 * Images (rf_config.images) are not decoded in a mixture yet: RF_EUSAGE.
 *
 * The order is a pure function of the sources (their chunks' sample
 * counts and fingerprints), weights, seed, shuffle, epoch, rank, world,
 * batch_size and drop_last.  The samples drawn from each source so far
 * stay within D_s of its weight's share at every position of the stream
 * (D_s < 1 sample with up to 4 sources, at most ceil(log2 S) / 2 with S),
 * so proportions never drift; hence every global batch (world x
 * batch_size samples), and any run of consecutive batches, takes each
 * source's share within 2 D_s: fewer than 2 samples with up to 4 sources
 * (0.7/0.2/0.1 at 64 may give 46/12/6 against 44.8/12.8/6.4).  Each source walks its own epochs, each a fresh permutation in
 * its own shuffle (seeded from the seed and the source's index): a small
 * source repeats, a large one continues where it stopped.  A mixture epoch
 * is rf_config.epoch_samples positions of the stream (default: the
 * included sources' samples together), cut into batches and rank slices
 * as one dataset's epoch is.  Shuffle none, chunks and window are
 * supported (window: W chunks held per source); full is RF_EUSAGE.  The
 * position blob (rf_loader_state_save) records every source's position:
 * resume continues exactly, also with another world size when world x
 * batch_size is the same.  Batches of a mixture are never closed early: a
 * variable field that overflows var_bytes is RF_EMEMPLAN.  Per-source
 * counters: rf_loader_source_stats.
 */

typedef struct rf_loader rf_loader;

/* Dimensions of a batch field: 1 (the batch) + RF_MAX_RANK. */
#define RF_BATCH_MAX_DIMS 9

/* One field of a delivered batch.  All pointers are into the batch's device
 * buffer (device memory for cuda, host memory for the host backend), or for
 * a batch handed out in place (RF_BATCH_READONLY) into the shard's
 * read-only map, and stay valid until the batch is released. */
typedef struct rf_batch_field {
	const char *name;            /* the schema's name ("inputs", "targets" for the
	                                token layout, rf_config.tokens); owned by
	                                the loader */
	enum rf_dtype dtype;
	uint32_t ndim;               /* 1 + the field's rank */
	/* [samples, *field shape].  For a variable-size field the variable
	 * dimension's entry is 0: its length differs per sample. */
	int64_t shape[RF_BATCH_MAX_DIMS];
	int32_t var_dim;             /* -1 fixed; else the variable dimension of a
	                                sample (shape index var_dim + 1) */
	/* Fixed field: samples x value bytes, C order, row i = sample i.
	 * Variable field: the values back to back, sample i at
	 * data + offsets[i] .. data + offsets[i + 1]. */
	void *data;
	uint64_t bytes;              /* bytes used at data */
	/* Variable field: samples + 1 int64 byte offsets into data (device
	 * memory), offsets[0] == 0, offsets[samples] == bytes.  NULL when fixed. */
	int64_t *offsets;
	/* The same offsets in host memory, for the consumer's convenience
	 * (launch sizes, slicing) without a device read.  NULL when fixed. */
	const int64_t *host_offsets;
} rf_batch_field;

/* A delivered batch.  Every part of it lives in one device buffer; fields'
 * parts start at 256-byte-aligned addresses.  A batch handed out in place
 * (RF_BATCH_READONLY, see rf_config.inplace) is the exception: its fields
 * lie where they are in the shard's map, each aligned to its element type
 * (a chunk's field sections start 64-byte aligned and hold whole rows), not
 * to 256 bytes. */
typedef struct rf_batch {
	uint64_t index;              /* batch number since open, from 0 */
	uint64_t epoch;              /* epoch it belongs to (rf_config.epoch first) */
	uint64_t first_sample;       /* position in the epoch's global sample order of
	                                its first sample (file order, one rank: the
	                                sample index) */
	uint32_t samples;            /* B, or fewer for the last batch of an epoch (or
	                                a batch closed early, see rf_config.var_bytes) */
	uint32_t nfields;
	const rf_batch_field *fields;
	void *data;                  /* the whole device buffer */
	uint64_t bytes;              /* bytes of it that this batch uses */
	/* Fires when the batch's bytes are on the device: a cudaEvent_t for
	 * cuda, the host backend's event otherwise.  Use rf_batch_wait() rather
	 * than the event directly.  This version hands a batch out only after
	 * its copy has completed (the pinned staging memory is reused at that
	 * moment anyway), so waiting costs nothing; the wait is still part of
	 * the contract, so that a later version may deliver earlier. */
	void *ready_event;
	/* RF_BATCH_* bits.  RF_BATCH_READONLY: the batch was handed out in
	 * place (rf_config.inplace): its fields point into read-only maps of
	 * the shards, where a write faults, and lie apart rather than in one
	 * buffer (data is then the first field's, bytes the fields' total). */
	uint32_t flags;
} rf_batch;

/* rf_batch.flags: the batch's memory is read-only (rf_config.inplace). */
#define RF_BATCH_READONLY (1u << 0)

/*
 * Processes.  A loader belongs to the process that opened it: fork()
 * copies its memory into the child but none of its threads, and its locks
 * and io_uring as they were at that instant.  In a child, every rf_loader_*
 * and rf_batch_* call on a loader opened before the fork returns RF_EFORK
 * at once (the message says so), touching nothing the parent uses, and
 * rf_loader_close frees nothing (below); the parent's loader goes on
 * working.  Open a loader in each process that reads, after the fork: with
 * a PyTorch DataLoader(num_workers=N), in each worker (docs/python.md
 * shows an IterableDataset that does, each worker reading a disjoint share
 * with rank' = rank x N + worker, world' = world x N).  The check costs a
 * load and a compare (a pthread_atfork handler counts forks), no system
 * call.  rf_dataset handles need no such care: they have no threads.
 *
 * Open the dataset, check the memory plan, allocate every buffer and start
 * the threads.  Everything the loader will ever allocate is allocated here:
 * the pinned ring (pinned_bytes), depth device buffers of the batch size and
 * the decode workers' buffers.
 *
 * device = RF_DEVICE_AUTO picks cuda when a CUDA runtime with a device is
 * there, else host, and logs which (RF_LOG_INFO); the CUDA device is the one
 * rf_config.device_index names, else the one rf_device_kind's rule picks
 * (the launcher's local rank, the thread's current device, 0), logged with
 * its reason.  On the host device a
 * batch needs no copy: it is handed out in the ring slot it was assembled
 * (or read) in, with no device buffers at all, and that slot returns to the
 * ring when the batch is released (rf_stats.in_place = 1).  The ring then
 * lends up to depth slots to the consumer; when its staging share cannot
 * hold depth + 1 slots the host device copies into depth buffers as cuda
 * does (docs/memory.md).  The memory plan (read and staging slots,
 * their sizes, pinned bytes, device bytes = depth x batch bytes) is
 * checked against pinned_bytes and against the device's free memory before
 * anything large is allocated.
 *
 * Open files: the reader keeps one read-only descriptor per shard (none in
 * map mode, where each shard is mapped and its descriptor closed); while the
 * dataset's index is read at open, one per shard is open too.  When the
 * open-file soft limit (RLIMIT_NOFILE, often 1024) cannot hold them beside
 * those already open plus 64 spare, the soft limit is raised as far as
 * needed, never past the hard limit, and that is logged at RF_LOG_INFO;
 * descriptors above 1023 do not work with select(2).
 *
 * Transient read errors: a read that fails with EIO, ETIMEDOUT or (after
 * immediate retries) EAGAIN, as network and parallel file systems (NFS,
 * Lustre, FUSE) do for a moment, is read again up to 5 times, 1, 4, 16, 64
 * and 256 ms apart, each retry logged at RF_LOG_WARN with the shard and
 * offset, before it becomes the chunk's error; short reads are asked again
 * for the rest.  (Map mode reads through the page cache and does not retry.)
 *
 * Returns 0 and *out, or: -EINVAL for out NULL; RF_EUSAGE for a bad config
 * (unknown field name, batch_size 0, no paths; a config NULL or whose size is
 * not sizeof(rf_config), such as one never passed to rf_config_init: "call
 * rf_config_init", and then no other byte of it is read, the log callback
 * included; reserved bytes that are not 0, settings of a newer header); what
 * rf_dataset_open returns for the dataset; RF_EMEMPLAN when the plan does not
 * fit (the message gives the numbers and what to change); RF_ENODEVICE for
 * device = cuda without a usable runtime or device; RF_ECUDA; -ENOMEM;
 * -EMFILE when the hard open-file limit cannot hold the shards' descriptors.
 * On error *out is NULL, nothing is left allocated, and the message goes to
 * cfg->log (once the config's size is known to be right) and to the open
 * error, rf_loader_last_open_error().
 */
RF_API int rf_loader_open(rf_loader **out, const rf_config *cfg);

/* The message of the calling thread's last failed rf_loader_open ("" when
 * none): thread-local, valid until that thread's next open. */
RF_API const char *rf_loader_last_open_error(void);

/*
 * The next batch, in plan order.  Blocks until it is ready (the consumer's
 * waiting time is counted as stall time in the stats).
 *
 * Returns 0 with *batch set; 0 with *batch NULL after the last batch of the
 * last epoch (and on every later call); RF_EHELD without blocking when the
 * consumer already holds `depth` batches (release one first); or the error
 * that stopped the stream (RF_ECHECKSUM, RF_ECORRUPT, RF_ECODEC, -EIO,
 * RF_ECUDA, ...; the message names the shard, chunk and file offset;
 * RF_EMEMPLAN when, with world > 1, a batch needs more than var_bytes).
 * Batches before the failing chunk are delivered first.  After an error the
 * same code is returned by every later call.  After rf_loader_stop the
 * stream has ended: 0 with *batch NULL (try_next and _timeout too), or the
 * error that had stopped the stream before the stop.
 *
 * When a batch is ready this takes one uncontended lock and makes no system
 * call.
 */
RF_API int rf_loader_next(rf_loader *ld, const rf_batch **batch);

/* As rf_loader_next, but returns -EAGAIN instead of waiting when the next
 * batch is not ready yet. */
RF_API int rf_loader_try_next(rf_loader *ld, const rf_batch **batch);

/* As rf_loader_next, but waits at most timeout_ns nanoseconds (of
 * CLOCK_MONOTONIC) and then returns -EAGAIN: for consumers that must wake up
 * now and then, such as an interpreter checking for Ctrl-C.  0 behaves as
 * rf_loader_try_next; UINT64_MAX as rf_loader_next.  A batch it fills on
 * the caller's thread (RF_SHUFFLE_FULL, above) can take it past the timeout
 * by the time of that one batch; the wait for that batch's turn (behind
 * batches the loader's threads are still filling) keeps the timeout: the
 * batch is then kept and handed out in its turn by a later call (next,
 * try_next or _timeout). */
RF_API int rf_loader_next_timeout(rf_loader *ld, const rf_batch **batch, uint64_t timeout_ns);

/*
 * Make `stream` (a cudaStream_t; NULL for the default stream) wait for the
 * batch's copy to complete, without blocking the host (cuda).  With the host
 * backend, and for stream NULL, it returns once the bytes are in place.
 * Returns 0, -EINVAL for a batch not held, or RF_ECUDA.  `batch` must be a
 * pointer returned by rf_loader_next or try_next of a loader still open (the
 * batch finds its loader through it); -EINVAL is returned for such a batch
 * once released, but any other pointer is undefined behaviour.
 */
RF_API int rf_batch_wait(const rf_batch *batch, void *stream);

/*
 * Copy field `field` (an index into batch->fields) of a held batch into host
 * memory: its `bytes` bytes of data (for a variable-size field the values
 * back to back; host_offsets says where each one starts).  Waits for the
 * batch's copy, then copies synchronously (a device-to-host copy for cuda, a
 * memcpy for the host backend).  For checking and tools, not for the
 * training path.  Returns 0, -EINVAL (batch not held, bad field), -ENOSPC
 * when cap < bytes, or RF_ECUDA.  `batch` must come from rf_loader_next or
 * try_next of a loader still open, as for rf_batch_wait.
 */
RF_API int rf_batch_field_read(const rf_batch *batch, uint32_t field, void *dst, uint64_t cap);

/*
 * Hand a batch back.  An event is recorded on `stream` (NULL: the default
 * stream, i.e. "done now" for the host backend): the batch's device buffer
 * is refilled only after that event has fired, so kernels queued on the
 * stream before this call may still read the batch.  The batch pointer is
 * invalid after this call.  Returns 0, -EINVAL for a batch not held by the
 * consumer, or RF_ECUDA when neither the event could be recorded nor the
 * stream waited for: the batch is then still held (release it again, or
 * close).  When only the event failed, the call waits for the stream,
 * releases the batch, logs a warning and returns 0.
 */
RF_API int rf_loader_release(rf_loader *ld, const rf_batch *batch, void *stream);

/* Stop the threads, wait for reads and copies in flight, then free every
 * buffer, close the files and the device backend.  Batches still held are
 * invalid afterwards (their release events are waited for first).  NULL and
 * a pointer to NULL are no-ops; *ld is cleared.  In a child of fork() (see
 * "Processes" above rf_loader_open) it only clears *ld: the threads,
 * io_uring, device and locks belong to the parent, and the child's copy of
 * the loader's memory stays until the child exits or execs. */
RF_API void rf_loader_close(rf_loader **ld);

/* Stop the loader for good but keep its memory: the reader, the decode
 * workers, the copy thread and the reader's own (a remote reader's
 * transfers, a pread pool) are stopped and joined, the files closed, so
 * that nothing runs or is read afterwards, while the batches still held
 * stay readable.  Afterwards rf_loader_next (try_next, _timeout) returns
 * the end of the stream, 0 with *batch NULL, however many batches were
 * ready (or the error that had stopped the stream before the stop), and
 * only rf_loader_release (of those batches), rf_loader_errmsg,
 * rf_loader_stats, rf_loader_state_save and rf_loader_close may be called
 * besides: rf_loader_state_load and rf_loader_rewind return RF_EUSAGE.
 * For an owner that cannot close while batches are held (a Python Loader
 * whose arrays outlive close()).  A no-op the second time, and in a child
 * of fork(). */
RF_API void rf_loader_stop(rf_loader *ld);

/* 1 when the calling process is a child of fork() (or a later descendant)
 * of the process that opened ld, where every other rf_loader_* and rf_batch_*
 * call on ld returns RF_EFORK; 0 in the process that opened it, and for
 * NULL.  A load and a compare, no system call: a binding that keeps its
 * own objects beside the loader (a Python Loader's held batches) asks it
 * before touching the loader's state.  Any thread. */
RF_API int rf_loader_forked(const rf_loader *ld);

/* How many times fork() has been called, in this process and the ancestors
 * it was forked from, since the first call of this function or of
 * rf_loader_open in the process tree: an object stamped with one value and
 * seen with another is in a child of the process that stamped it.  The
 * count is kept by a pthread_atfork handler the first call installs; a
 * load, no system call.  Any thread. */
RF_API unsigned rf_fork_generation(void);

/* Bytes enough for any position blob of this library version: one
 * dataset's (128 bytes at most) and a mixture's of up to RF_SOURCES_MAX
 * sources (88 + 48 per source).  rf_loader_state_size gives a loader's. */
#define RF_STATE_MAX 1024

/* The size of this loader's position blob (<= RF_STATE_MAX); 0 for NULL. */
RF_API size_t rf_loader_state_size(const rf_loader *ld);

/*
 * Save the position after the last batch rf_loader_next has handed out
 * (batches still in the pipeline do not count) into buf: a blob of a few
 * dozen bytes naming the dataset (a fingerprint of its chunks), the order
 * (shuffle, seed, epoch, batch size, world size) and the samples consumed
 * (after a batch closed early, those of its batch already handed out too),
 * little-endian, checksummed, portable between machines.  Save on every rank
 * after the same batch (the blob does not depend on the rank: rank 0's is
 * enough).  Consumer thread.  Returns 0 and *len; -ENOSPC when cap is too
 * small (*len still set; RF_STATE_MAX is always enough); -EINVAL.
 *
 *     uint8_t st[RF_STATE_MAX]; size_t n;
 *     if (step % 1000 == 0 && rf_loader_state_save(ld, st, sizeof st, &n) == 0)
 *         write_checkpoint(model, st, n);
 */
RF_API int rf_loader_state_save(rf_loader *ld, void *buf, size_t cap, size_t *len);

/*
 * Continue from a saved position: the next rf_loader_next returns exactly the
 * batch that would have followed the last one handed out before the save,
 * without reading the skipped data.  The blob's shuffle, seed and epoch
 * replace the loader's (a window or full position needs a loader opened in
 * that mode, with a window at least the blob's: rf_config.resume sets them
 * up by itself); the end does not move (rf_config.epochs: the stream ends
 * after epoch rf_config.epoch + epochs - 1, and a position in another
 * epoch is RF_ESTATE).  The world size
 * may differ from the one at the save when world x batch_size is the same
 * (the epoch's last, partial global batch, kept with drop_last = 0, is then
 * shared out and padded by the new world size);
 * a position saved after a batch closed early (var_bytes) lies inside a
 * batch: it resumes with one rank, the next batch holding the rest of that
 * batch's samples.  Batches already read ahead are discarded (the pipeline restarts), so call
 * it right after rf_loader_open, or set rf_config.resume instead, which
 * reads nothing twice.  The consumer must hold no batch.
 * A window-shuffle position saved by ringfeed before the window order of
 * state version 2 (blob version 1) is refused with RF_ESTATE, since this
 * version draws another window order and could not continue it exactly;
 * blobs of the other modes, whose orders did not change, still resume.
 * Returns 0; RF_ESTATE for a blob that is corrupt or from another dataset,
 * order or global batch size (the message says which field differs), the
 * loader staying where it was; -EBUSY while batches are held; -EINVAL.
 */
RF_API int rf_loader_state_load(rf_loader *ld, const void *buf, size_t len);

/*
 * Go back (or ahead) to the start of epoch `epoch` of the loader's order
 * (its shuffle and seed, those of a resumed blob included): the next
 * rf_loader_next returns that epoch's first batch, and the stream ends
 * where it would have (after epoch rf_config.epoch + epochs - 1), so going
 * back streams those epochs again.  rf_loader_rewind(ld, rf_config.epoch)
 * restarts the run.  As rf_loader_state_load, batches read ahead are
 * discarded and the consumer must hold no batch; it may follow the end of
 * the stream.  Consumer thread.  Returns 0; RF_EUSAGE for an epoch outside
 * rf_config.epoch .. epoch + epochs - 1 (with epochs 0, any epoch); -EBUSY
 * while batches are held; -EINVAL.  An empty dataset returns 0 and stays at
 * its end.
 */
RF_API int rf_loader_rewind(rf_loader *ld, uint64_t epoch);

/* The message of the loader's last failure ("" when none).  Owned by the
 * loader; valid until the next call on it. */
RF_API const char *rf_loader_errmsg(const rf_loader *ld);

/* Counters since open.  Times are in nanoseconds of CLOCK_MONOTONIC. */
typedef struct rf_stats {
	uint32_t size;               /* set by the caller to sizeof(rf_stats); any
	                                other value is RF_EUSAGE */
	uint64_t bytes_read;         /* bytes read from the shards */
	uint64_t bytes_delivered;    /* bytes of delivered batches (rf_batch.bytes) */
	uint64_t batches;            /* batches delivered */
	uint64_t samples;            /* samples delivered */
	uint64_t chunks;             /* chunks decoded */
	uint64_t wall_ns;            /* since open */
	uint64_t read_ns;            /* reader thread waiting for reads to complete
	                                (map: faulting chunks in) */
	uint64_t decode_ns;          /* decode workers verifying, decompressing, assembling
	                                (summed over workers) */
	uint64_t copy_ns;            /* from a batch's copy submit to its completion */
	uint64_t stall_ns;           /* the consumer held up inside rf_loader_next
	                                with no batch ready: waiting, or filling
	                                one itself (full shuffling from memory) */
	double stall_share;          /* stall_ns / wall_ns */
	uint64_t thread_cpu_ns;      /* CPU time of the loader's own threads, and of
	                                the batches full shuffling from memory fills
	                                on the caller's thread in rf_loader_next */
	/* Queue occupancy now and at most: reads in flight (0 with map: a
	 * chunk is faulted in by the reader itself), ring slots in use (with
	 * map, the staging slots alone: reads hold no ring slot),
	 * batches staged (waiting for a device buffer or their copy), batches
	 * ready (copied, not yet taken), batches held by the consumer. */
	uint32_t reads_inflight, reads_inflight_max;
	uint32_t slots_used, slots_used_max, slots_total;
	uint32_t staged, staged_max;
	uint32_t ready, ready_max;
	uint32_t held, held_max;
	uint64_t slot_bytes;         /* the ring's read slot size (map, full
	                                shuffling: a staging slot's, a batch) */
	uint64_t batch_bytes;        /* one device buffer */
	uint64_t pinned_bytes;       /* page-locked now */
	uint64_t pinned_peak;        /* page-locked at most (<= rf_config.pinned_bytes) */
	uint64_t device_bytes;       /* device memory held now (depth x batch_bytes;
	                                0 when in_place) */
	uint64_t device_peak;
	char io_engine[32];          /* "io_uring", "io_uring-unregistered", "pread",
	                                "mmap" (rf_config.map) */
	int io_direct;               /* 1 when every read bypasses the page cache */
	char device[128];            /* e.g. "host" or "cuda:0 ..." */
	/* 1 when batches are handed out in the ring slot they were assembled or
	 * read in, with no copy (the host device, when the ring has room to
	 * lend depth slots to the consumer; see rf_loader_open). */
	int32_t in_place;
	uint32_t decode_threads;     /* decode workers running (rf_config.decode_threads,
	                                or the number chosen for 0) */
	int32_t device_ordinal;      /* the CUDA device batches are delivered to (as
	                                chosen at open, see rf_device_kind), or -1
	                                for the host device */
	uint32_t window;             /* the window shuffle's W in force (rf_config.window,
	                                its default, or a resumed blob's; at most the
	                                dataset's chunks), else 0 */
	/* 1 when batches that lie whole in one uncompressed chunk are handed
	 * out where they lie in the shards' maps, read-only (rf_config.inplace,
	 * RF_BATCH_READONLY; rf_batch.flags says which batches were). */
	uint32_t inplace;
	/* A 64-bit hash of every input of the order (dataset fingerprint,
	 * shuffle, seed, W, batch_size, world, drop_last; not the rank nor the
	 * epoch; the seed only when shuffled, W only for window shuffling):
	 * equal on every rank of one job, so a job can assert its ranks agree
	 * on the order (gather it from every rank and compare).  After a
	 * resume, that of the order in force: the blob's shuffle, seed, W and
	 * drop_last with this loader's world and batch_size (their product is
	 * the blob's), so a resume at another world size gives the id of the
	 * new world, not the saved one.  Also in the open log line. */
	uint64_t order_id;
	/* Reads asked again after a transient error (EIO, EAGAIN, ETIMEDOUT,
	 * a short read), with backoff, before it would fail its chunk. */
	uint64_t read_retries;
	/* rf_config.on_error = RF_ON_ERROR_SKIP, counted as batches are
	 * delivered (rf_loader_next hands them out): samples_substituted, the
	 * zero substitutes in the batches delivered; chunks_skipped, each
	 * skipped chunk once per epoch, at the delivery of the first batch of
	 * that epoch holding one of its substitutes (however many steps this
	 * rank reads it in).  Batches prepared ahead count nothing until they
	 * are delivered, and nothing at all when the loader is closed or a
	 * position loaded first; a loaded position (or rewind) counts the
	 * chunks of its epoch afresh.  Each rank counts its own batches.  In a
	 * mixture (rf_config.sources) the epoch is the chunk's source epoch:
	 * a chunk counts once per source epoch whose batches hold its
	 * substitutes. */
	uint64_t chunks_skipped;
	uint64_t samples_substituted;
	/* rf_config.images: images decoded (each image field's samples), only
	 * those this rank takes (with world > 1 a chunk's other samples are
	 * read but not decoded), counted as the decode workers finish them,
	 * batches prepared ahead included. */
	uint64_t images_decoded;
	/* The size of a staging slot (a batch, 4096-aligned): with chunk
	 * reads the ring holds slots_total slots of two sizes, read slots of
	 * slot_bytes (the largest chunk read) and staging slots of this. */
	uint64_t stage_slot_bytes;
} rf_stats;

/* Per-source counters of a mixture, at the last batch handed out. */
typedef struct rf_source_stats {
	const char *name;            /* rf_source.name, or its path (the loader's) */
	double weight;               /* as given */
	double share;                /* the fraction of the stream drawn from it */
	uint64_t samples;            /* drawn from it since the stream's start, all
	                                ranks (the global batches up to the last
	                                one handed out, a dropped tail included) */
	uint64_t epochs;             /* its own epochs completed */
	uint64_t in_epoch;           /* samples into its current epoch */
} rf_source_stats;

/* Counters of source `i` (0 <= i < rf_config.nsources).  Returns 0;
 * -ERANGE for i out of range or a loader without sources; -EINVAL. */
RF_API int rf_loader_source_stats(rf_loader *ld, size_t i, rf_source_stats *st);

/* Fill *st.  st->size must be set by the caller to sizeof(rf_stats) (fields
 * added later come out of `reserved`, so the size never changes); any other
 * size, such as an uninitialised struct's, is RF_EUSAGE with nothing
 * written (rf_loader_errmsg says why).  Safe at any time from the consumer
 * thread.  Returns 0, RF_EUSAGE, or -EINVAL for ld or st NULL. */
RF_API int rf_loader_stats(rf_loader *ld, rf_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* RINGFEED_RINGFEED_H */

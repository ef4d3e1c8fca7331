/* The GPUs as the driver shows them (backend.h, backend_gpu_probe): asked
 * once per process, since the CUDA runtime keeps its first answer. A driver
 * that cannot be asked is not "no GPU": its error is kept with what to do
 * about it, for parled's log, `parlectl devices` and the refusal of a GPU
 * job. Plain C, built with or without CUDA (the injection below serves tests
 * of both builds). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "backend_ops.h"
#include "parle_config.h"

/* The lowest compute capability this build has code for (kernels/cuda/meson.build). */
#define MIN_CC 80

/* The cudaGetDeviceCount errors a machine's set-up causes, by their number
 * (driver_types.h), with what to do: at length (the log, parlectl devices)
 * and in brief (a refusal, which has less room). */
static const struct {
    int code;
    const char *name, *fix, *brief;
} advice[] = {
    {3, "cudaErrorInitializationError",
     "the driver did not start: check that the nvidia kernel module is loaded (lsmod | grep nvidia), "
     "that nvidia-smi works, and dmesg",
     "the driver did not start: check lsmod, nvidia-smi, dmesg"},
    {34, "cudaErrorStubLibrary",
     "the CUDA toolkit's stub libcuda.so was loaded instead of the driver's: take the toolkit's "
     "lib64/stubs out of LD_LIBRARY_PATH and /etc/ld.so.conf.d, or install the driver",
     "take the toolkit's lib64/stubs off the library path"},
    {35, "cudaErrorInsufficientDriver",
     "the NVIDIA driver is older than the CUDA runtime parle was built with: install a driver whose "
     "CUDA version (nvidia-smi, top right) is at least the runtime's, or rebuild with the toolkit the "
     "driver supports (NVCC=/usr/local/cuda-X.Y/bin/nvcc scripts/setup-gpu.sh BUILD-DIR)",
     "install a driver as new as the runtime, or rebuild for the driver's CUDA"},
    {46, "cudaErrorDevicesUnavailable",
     "the GPUs are held by another process in exclusive compute mode, or prohibited: "
     "nvidia-smi -q -d COMPUTE shows the mode",
     "GPUs held in exclusive mode: see nvidia-smi -q -d COMPUTE"},
    {100, "cudaErrorNoDevice",
     "the driver sees no GPU: check nvidia-smi, that /dev/nvidiactl, /dev/nvidia0... and "
     "/dev/nvidia-uvm exist, and in a container that it was started with the GPUs (docker run --gpus all)",
     "check nvidia-smi, /dev/nvidia*, a container's --gpus"},
    {304, "cudaErrorOperatingSystem",
     "a call of the driver into the kernel failed: check the /dev/nvidia* files and dmesg",
     "check /dev/nvidia* and dmesg"},
    {803, "cudaErrorSystemDriverMismatch",
     "the loaded nvidia kernel module and the driver's libcuda differ in version (a driver upgraded "
     "without a reboot): reboot, or unload and reload the nvidia modules",
     "reboot after the driver upgrade"},
    {804, "cudaErrorCompatNotSupportedOnDevice",
     "the CUDA forward-compatibility package (cuda-compat) does not support this GPU: take it out of "
     "the library path and install a driver new enough for the runtime",
     "take cuda-compat off the library path"},
};

static backend_gpu_probe_t probe;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

/* PARLE_FAULT_GPU_CC=CC[,CC...] (tests): the driver is not asked; it shows
 * these GPUs instead, each of compute capability CC (75 for 7.5), all below
 * 8.0: none can be placed on, so any build shows them safely. 0, or -1 with
 * the refusal in probe.error. */
static int inject_old_gpus(const char *spec)
{
    if (!spec || !*spec)
        return 0;
    int n = 0;
    for (const char *p = spec; *p && n < BACKEND_MAX_GPUS; n++) {
        char *end;
        long cc = strtol(p, &end, 10);
        if (end == p || cc < 10 || cc >= MIN_CC || (*end && *end != ',')) {
            snprintf(probe.error, sizeof probe.error, "PARLE_FAULT_GPU_CC=\"%.32s\": want compute "
                     "capabilities below %d, like 75,61", spec, MIN_CC);
            snprintf(probe.brief, sizeof probe.brief, "%.200s", probe.error);
            probe.count = 0;
            return -1;
        }
        probe.cc[n] = (int)cc;
        p = *end ? end + 1 : end;
    }
    probe.count = n;
    return 0;
}

static void run_probe(void)
{
    /* PARLE_FAULT_GPU_PROBE=N (tests): the driver's answer is CUDA error N. */
    int inject = 0;
    const char *f = getenv("PARLE_FAULT_GPU_PROBE");
    if (f && *f) {
        char *end;
        long v = strtol(f, &end, 10);
        if (*end || v < 1 || v > 9999) {
            snprintf(probe.error, sizeof probe.error,
                     "PARLE_FAULT_GPU_PROBE=\"%.32s\": want a CUDA error number (1-9999)", f);
            snprintf(probe.brief, sizeof probe.brief, "%.200s", probe.error);
            return;
        }
        inject = (int)v;
    }
    char text[160] = "";
    int code = inject, ver[2] = {-1, -1}; /* runtime, driver; -1: not asked */
    probe.built = PARLE_HAVE_CUDA;
    const char *old_gpus = getenv("PARLE_FAULT_GPU_CC");
    if (old_gpus && *old_gpus) { /* in place of the driver's answer, whatever it is */
        if (inject_old_gpus(old_gpus) == 0)
            for (int i = 0; i < probe.count; i++)
                probe.unusable |= 1ull << i;
        return;
    }
#if PARLE_HAVE_CUDA
    code = backend_cuda_probe(inject, &probe.count, probe.cc, BACKEND_MAX_GPUS, ver, text, sizeof text);
#endif
    if (code == 0) {
        for (int i = 0; i < probe.count && i < BACKEND_MAX_GPUS; i++)
            if (probe.cc[i] < MIN_CC)
                probe.unusable |= 1ull << i;
        return;
    }
    probe.count = 0;
    const char *fix = "check nvidia-smi and dmesg for the driver's own errors", *brief = "check nvidia-smi, dmesg";
    for (size_t i = 0; i < sizeof advice / sizeof *advice; i++)
        if (advice[i].code == code) {
            fix = advice[i].fix, brief = advice[i].brief;
            if (!text[0]) /* no runtime to name it: a build without CUDA */
                snprintf(text, sizeof text, "CUDA error %d (%s)", code, advice[i].name);
        }
    if (!text[0])
        snprintf(text, sizeof text, "CUDA error %d", code);
    if (ver[1] == 0 && !inject) /* the runtime says "insufficient" for no driver at all */
        fix = "no NVIDIA driver is loaded: install one (docs/gpu.md) and check that nvidia-smi works; "
              "in a container, start it with the GPUs (docker run --gpus all)",
        brief = "no NVIDIA driver is loaded: install one, check nvidia-smi";
    char versions[64] = "";
    if (ver[0] >= 0)
        snprintf(versions, sizeof versions, " [runtime CUDA %d.%d, driver's CUDA %d.%d]", ver[0] / 1000,
                 ver[0] % 1000 / 10, ver[1] / 1000, ver[1] % 1000 / 10);
    const char *by = inject ? " [injected by PARLE_FAULT_GPU_PROBE]" : "";
    snprintf(probe.error, sizeof probe.error, "the NVIDIA driver cannot be used: cudaGetDeviceCount: "
             "%s%s: %s%s", text, versions, fix, by);
    snprintf(probe.brief, sizeof probe.brief, "%s: %s (parlectl devices says more)%s", text, brief, by);
}

const backend_gpu_probe_t *backend_gpu_probe(void)
{
    pthread_once(&probe_once, run_probe);
    return &probe;
}

int backend_gpu_unusable(int device, char *why, size_t len)
{
    const backend_gpu_probe_t *p = backend_gpu_probe();
    if (device < 0 || device >= BACKEND_MAX_GPUS || !(p->unusable >> device & 1))
        return 0;
    snprintf(why, len, "compute capability %d.%d: this build has code for %d.%d and later only "
             "(sm_80, sm_90)", p->cc[device] / 10, p->cc[device] % 10, MIN_CC / 10, MIN_CC % 10);
    return 1;
}

void backend_gpu_why_none(char *buf, size_t len)
{
    const backend_gpu_probe_t *p = backend_gpu_probe();
    buf[0] = 0;
    if (p->brief[0]) {
        snprintf(buf, len, "%s", p->brief);
    } else if (p->unusable) {
        int n = snprintf(buf, len, "unusable:");
        for (int i = 0; i < p->count && i < BACKEND_MAX_GPUS && n >= 0 && (size_t)n < len; i++)
            if (p->unusable >> i & 1)
                n += snprintf(buf + n, len - (size_t)n, " GPU %d compute capability %d.%d,", i,
                              p->cc[i] / 10, p->cc[i] % 10);
        if (n > 0 && (size_t)n < len)
            snprintf(buf + n - 1, len - (size_t)n + 1, " (below %d.%d: this build has no code for it)",
                     MIN_CC / 10, MIN_CC % 10);
    } else if (!p->built) {
        snprintf(buf, len, "this parle was built without CUDA (configure it with scripts/setup-gpu.sh)");
    } else if (p->count == 0) {
        snprintf(buf, len, "the NVIDIA driver shows no GPU");
    }
}

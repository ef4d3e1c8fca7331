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
 * (driver_types.h), with what to do. */
static const struct {
    int code;
    const char *name;
    const char *fix;
} advice[] = {
    {3, "cudaErrorInitializationError",
     "the driver did not start: check that the nvidia kernel module is loaded (lsmod | grep nvidia), "
     "that nvidia-smi works, and dmesg"},
    {34, "cudaErrorStubLibrary",
     "the CUDA toolkit's stub libcuda.so was loaded instead of the driver's: take the toolkit's "
     "lib64/stubs out of LD_LIBRARY_PATH and /etc/ld.so.conf.d, or install the driver"},
    {35, "cudaErrorInsufficientDriver",
     "the NVIDIA driver is older than the CUDA runtime parle was built with: install a driver whose "
     "CUDA version (nvidia-smi, top right) is at least the runtime's, or rebuild with the toolkit the "
     "driver supports (NVCC=/usr/local/cuda-X.Y/bin/nvcc scripts/setup-gpu.sh BUILD-DIR)"},
    {46, "cudaErrorDevicesUnavailable",
     "the GPUs are held by another process in exclusive compute mode, or prohibited: "
     "nvidia-smi -q -d COMPUTE shows the mode"},
    {100, "cudaErrorNoDevice",
     "the driver sees no GPU: check nvidia-smi, that /dev/nvidiactl, /dev/nvidia0... and "
     "/dev/nvidia-uvm exist, and in a container that it was started with the GPUs (docker run --gpus all)"},
    {304, "cudaErrorOperatingSystem",
     "a call of the driver into the kernel failed: check the /dev/nvidia* files and dmesg"},
    {803, "cudaErrorSystemDriverMismatch",
     "the loaded nvidia kernel module and the driver's libcuda differ in version (a driver upgraded "
     "without a reboot): reboot, or unload and reload the nvidia modules"},
    {804, "cudaErrorCompatNotSupportedOnDevice",
     "the CUDA forward-compatibility package (cuda-compat) does not support this GPU: take it out of "
     "the library path and install a driver new enough for the runtime"},
};

static backend_gpu_probe_t probe;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

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
            return;
        }
        inject = (int)v;
    }
    char text[192] = "";
    int code = inject;
#if PARLE_HAVE_CUDA
    probe.built = 1;
    code = backend_cuda_probe(inject, &probe.count, probe.cc, BACKEND_MAX_GPUS, text, sizeof text);
#else
    if (inject)
        snprintf(text, sizeof text, "CUDA error %d", inject);
#endif
    if (code == 0) {
        for (int i = 0; i < probe.count && i < BACKEND_MAX_GPUS; i++)
            if (probe.cc[i] < MIN_CC)
                probe.unusable |= 1ull << i;
        return;
    }
    probe.count = 0;
    const char *name = "", *fix = "check nvidia-smi and dmesg for the driver's own errors";
    for (size_t i = 0; i < sizeof advice / sizeof *advice; i++)
        if (advice[i].code == code)
            name = advice[i].name, fix = advice[i].fix;
    snprintf(probe.error, sizeof probe.error, "the NVIDIA driver cannot be used: %s%s%s%s: %s", text,
             *name && !strstr(text, name) ? " (" : "", *name && !strstr(text, name) ? name : "",
             *name && !strstr(text, name) ? ")" : "", fix);
    if (inject) /* said so, where it is read */
        snprintf(probe.error + strlen(probe.error), sizeof probe.error - strlen(probe.error),
                 " [injected by PARLE_FAULT_GPU_PROBE]");
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
    if (p->error[0])
        snprintf(buf, len, "%s", p->error);
    else if (!p->built)
        snprintf(buf, len, "this parle was built without CUDA (configure it with scripts/setup-gpu.sh)");
    else if (p->count == 0)
        snprintf(buf, len, "the NVIDIA driver shows no GPU");
    else if (p->unusable) {
        int n = snprintf(buf, len, "unusable:");
        for (int i = 0; i < p->count && i < BACKEND_MAX_GPUS && n >= 0 && (size_t)n < len; i++)
            if (p->unusable >> i & 1)
                n += snprintf(buf + n, len - (size_t)n, " GPU %d compute capability %d.%d,", i,
                              p->cc[i] / 10, p->cc[i] % 10);
        if (n > 0 && (size_t)n < len)
            snprintf(buf + n - 1, len - (size_t)n + 1, " (below %d.%d: this build has no code for it)",
                     MIN_CC / 10, MIN_CC % 10);
    }
}

/* A context's sticky error (backend.h): the first failure is kept, with
 * its message, and every later op is skipped. Both backends report through
 * these, so they live apart from backend.c, which calls into the backends. */
#include <stdarg.h>
#include <stdio.h>

#include "backend.h"

static void fail_v(backend_ctx *ctx, const char *fmt, va_list ap)
{
    if (ctx->failed)
        return;
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    ctx->failed = 1;
}

void backend_fail(backend_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(ctx, fmt, ap);
    va_end(ap);
}

int backend_recover(backend_ctx *ctx)
{
    if (ctx->device_fault)
        return -1;
    ctx->failed = 0;
    ctx->err[0] = '\0';
    return 0;
}

void backend_fail_device(backend_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(ctx, fmt, ap);
    va_end(ap);
    ctx->device_fault = 1;
}

/* What text a user writes may hold, and how it is quoted back (user_text.h). */
#include "user_text.h"

#include <ctype.h>
#include <string.h>

const char *user_text_shown(const char *s, char out[48])
{
    size_t n = 0;
    for (; s[n] && n < 40; n++)
        out[n] = isprint((unsigned char)s[n]) ? s[n] : '?';
    if (s[n]) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
    return out;
}

int user_text_check(const char *s, size_t *at, const char **what)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; u[i];) {
        unsigned cp = u[i], len = 1;
        if (cp >= 0x80) {
            len = cp >= 0xf0 && cp < 0xf5 ? 4 : cp >= 0xe0 ? 3 : cp >= 0xc2 && cp < 0xe0 ? 2 : 0;
            if (len == 4 && cp >= 0xf5)
                len = 0;
            cp &= len == 2 ? 0x1f : len == 3 ? 0x0f : 0x07;
            for (unsigned k = 1; k < len; k++) {
                if ((u[i + k] & 0xc0) != 0x80) {
                    len = 0;
                    break;
                }
                cp = cp << 6 | (u[i + k] & 0x3f);
            }
            /* Overlong forms, surrogates and values past U+10FFFF. */
            if (len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp < 0xe000)))
                len = 0;
            if (len == 4 && (cp < 0x10000 || cp > 0x10ffff))
                len = 0;
            if (len == 0) {
                *at = i;
                *what = "is not valid UTF-8";
                return -1;
            }
        }
        if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) {
            *at = i;
            *what = "is a control character";
            return -1;
        }
        i += len;
    }
    return 0;
}

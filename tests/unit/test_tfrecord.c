/* TensorBoard event files as parlectl writes them (client/crc32c.c,
 * tfrecord.c, tfevent.c): CRC-32C against the known vectors (RFC 3720's
 * among them), and whole records byte for byte against what TensorBoard's
 * own Python protobuf classes and framing give for the same events. */
#include <stdio.h>
#include <string.h>

#include "crc32c.h"
#include "testutil.h"
#include "tfevent.h"
#include "tfrecord.h"

/* b holds exactly the bytes the hex string spells. */
static void check_hex(const bytebuf *b, const char *hex, const char *what)
{
    size_t n = strlen(hex) / 2;
    int same = b->n == n;
    for (size_t i = 0; same && i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        same = b->p[i] == v;
    }
    CHECK(same, "%s: %zu bytes differ from the %zu expected", what, b->n, n);
}

static void test_crc32c(void)
{
    unsigned char zeros[32] = {0}, ones[32], up[32], down[32];
    for (int i = 0; i < 32; i++) {
        ones[i] = 0xFF;
        up[i] = (unsigned char)i;
        down[i] = (unsigned char)(31 - i);
    }
    CHECK(crc32c("123456789", 9) == 0xE3069283u, "got %08x", crc32c("123456789", 9));
    CHECK(crc32c("", 0) == 0, "empty: %08x", crc32c("", 0));
    CHECK(crc32c(zeros, 32) == 0x8A9136AAu, "32 zeros: %08x", crc32c(zeros, 32));
    CHECK(crc32c(ones, 32) == 0x62A8AB43u, "32 x 0xFF: %08x", crc32c(ones, 32));
    CHECK(crc32c(up, 32) == 0x46DD794Eu, "0..31: %08x", crc32c(up, 32));
    CHECK(crc32c(down, 32) == 0x113FDB5Cu, "31..0: %08x", crc32c(down, 32));
    CHECK(tfrecord_masked_crc("", 0) == 0xA282EAD8u, "masked empty: %08x",
          tfrecord_masked_crc("", 0));
}

static void test_framing(void)
{
    bytebuf b = {0};
    CHECK(tfrecord_put(&b, "", 0) == 0, "empty record");
    check_hex(&b, "000000000000000029039807d8ea82a2", "the empty record");
    /* Records append: the second starts where the first ended. */
    CHECK(tfrecord_put(&b, "abc", 3) == 0, "a second record");
    CHECK(b.n == 16 + 12 + 3 + 4 && b.p[16] == 3 && memcmp(b.p + 28, "abc", 3) == 0,
          "the second record is not framed after the first (%zu bytes)", b.n);
    bytebuf_free(&b);
}

static void test_events(void)
{
    bytebuf b = {0};
    CHECK(tfevent_file_version(&b, 1.5) == 0, "file_version");
    check_hex(&b,
              "1800000000000000a37f4b2209000000000000f83f1a0d627261696e2e4576656e743a322a28646c",
              "the file_version event");
    bytebuf_free(&b);

    tb_scalar two[2] = {{"train/loss", 0.25f}, {"lr", -3.0f}};
    CHECK(tfevent_scalars(&b, 1700000000.25, 300, two, 2) == 0, "two scalars");
    check_hex(&b,
              "2c00000000000000f4aecc450900001040fc54d94110ac022a1e0a110a0a747261696e2f6c6f7373"
              "150000803e0a090a026c7215000040c01952cf42",
              "an event of two scalars");
    bytebuf_free(&b);

    /* A 6-byte step and a 127-byte tag: varints of several bytes. */
    tb_scalar one = {.value = 1e-3f};
    memcpy(one.tag, "rule/", 5);
    memset(one.tag + 5, 'x', 120);
    memcpy(one.tag + 125, "/7", 3);
    CHECK(tfevent_scalars(&b, 0.5, ((int64_t)1 << 40) + 5, &one, 1) == 0, "a long tag");
    char want[2 * 172 + 1] = "9c00000000000000cba95dfa09000000000000e03f108580808080202a89010a86010a7f"
                             "72756c652f";
    for (int i = 0; i < 120; i++)
        strcat(want, "78");
    strcat(want, "2f37156f12833a9790eeb4");
    check_hex(&b, want, "a long step and tag");
    bytebuf_free(&b);
}

int main(void)
{
    test_init("tfrecord");
    test_crc32c();
    test_framing();
    test_events();
    return test_main_end();
}

/* A C operator with a static output of 2 GiB + 4 KiB: Clara's int-sized
 * `__map_allocation` refuses it with FASTIO_ERR_TOO_LARGE and writes
 * nothing; `__map_allocation64` maps it with its whole size. */
#include "clara_fastio.h"
#include "check.h"

int main(void) {
    fastio_operator *op = NULL;
    EXPECT(fastio_operator_from_env(&op), FASTIO_OK);
    if (!op) return 2;
    nvidia_clara_fastio_entry *big = NULL;
    EXPECT(fastio_operator_output(op, "big", &big), FASTIO_OK);
    size_t want = ((size_t)1 << 31) + 4096, size = 0;
    EXPECT(nvidia_clara_fastio_entry__size_bytes(big, &size), FASTIO_OK);
    TRUE(size == want);
    void *p = (void *)&want;
    int small = -7;
    EXPECT(nvidia_clara_fastio_entry__map_allocation(big, &p, &small), FASTIO_ERR_TOO_LARGE);
    TRUE(p == (void *)&want && small == -7);
    char msg[256];
    fastio_last_error_message(msg, sizeof msg);
    TRUE(strstr(msg, "map_allocation64") != NULL);
    TRUE(strcmp(fastio_status_string(FASTIO_ERR_TOO_LARGE), "size too large for an int (use the 64-bit call)") == 0);
    size_t n = 0;
    EXPECT(nvidia_clara_fastio_entry__map_allocation64(big, &p, &n), FASTIO_OK);
    TRUE(n == want && p != NULL && p != (void *)&want);
    if (n == want && p) {
        ((unsigned char *)p)[0] = 1;
        ((unsigned char *)p)[n - 1] = 42;
    }
    /* One mapping at a time, whichever call made it. */
    EXPECT(nvidia_clara_fastio_entry__map_allocation64(big, &p, &n), FASTIO_ERR_CONFLICT);
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(big, p), FASTIO_OK);
    fastio_operator_release(op);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("large: mapped %zu bytes\n", n);
    return 0;
}

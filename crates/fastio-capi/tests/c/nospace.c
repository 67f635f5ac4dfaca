/* /dev/shm running out, from C (run with a small tmpfs on /dev/shm): the
 * call that needs the memory gives FASTIO_ERR_NO_SPACE with a message that
 * says how much was asked and how much is free; what fits still works. */
#include "fastio.h"
#include "check.h"

int main(void) {
    fastio_context *ctx = NULL;
    EXPECT(fastio_context_create(1ull << 30, &ctx), FASTIO_OK);
    fastio_allocation *a = NULL;
    EXPECT(fastio_context_create_allocation(ctx, 64u << 20, &a), FASTIO_ERR_NO_SPACE);
    TRUE(a == NULL);
    char msg[512];
    fastio_last_error_message(msg, sizeof msg);
    TRUE(strstr(msg, "/dev/shm is full: 64.0 MiB asked") != NULL);
    TRUE(strstr(msg, "free") != NULL);
    TRUE(strcmp(fastio_status_string(FASTIO_ERR_NO_SPACE), "shared memory (/dev/shm) is full") == 0);
    EXPECT(fastio_context_create_allocation(ctx, 1u << 20, &a), FASTIO_OK);
    EXPECT(fastio_allocation_free(a), FASTIO_OK);
    fastio_context_release(ctx);
    if (failures) return 1;
    printf("nospace: ok\n");
    return 0;
}

/* A Clara-style C operator: reads its input `v` (read-only), checks it,
 * and checks that an input can be neither resized nor allocated. */
#include "clara_fastio.h"
#include "check.h"

int main(void) {
    fastio_operator *op = NULL;
    EXPECT(fastio_operator_from_env(&op), FASTIO_OK);
    if (!op) return 2;
    nvidia_clara_fastio_entry *v = NULL;
    EXPECT(fastio_operator_input(op, "v", &v), FASTIO_OK);
    EXPECT(fastio_operator_output(op, "v", &v), FASTIO_ERR_NOT_FOUND);
    EXPECT(fastio_operator_input(op, "c-producer/v", &v), FASTIO_OK);

    int access = 0;
    EXPECT(nvidia_clara_fastio_entry__access(v, &access), FASTIO_OK);
    TRUE(access == NVIDIA_CLARA_IO_ACCESS_READ_ONLY);
    EXPECT(nvidia_clara_fastio_entry__allocate(v), FASTIO_ERR_ACCESS);
    int dims[1] = {1}, values[1] = {9}, n = 1;
    EXPECT(nvidia_clara_fastio_entry__update_shape(v, dims, values, &n), FASTIO_ERR_ACCESS);

    const void *mem = NULL;
    int size = 0;
    EXPECT(nvidia_clara_fastio_entry__map_allocation(v, (void **)&mem, &size), FASTIO_OK);
    TRUE(size == 24);
    float sum = 0;
    for (int i = 0; i < 6; i++) sum += ((const float *)mem)[i];
    TRUE(sum == 7.5f);
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(v, (void *)mem), FASTIO_OK);

    fastio_operator_release(op);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("consumed sum %.1f\n", sum);
    return 0;
}

/* A C operator for the three-language pipeline: sums its float32 input
 * `w` (read-only shared memory) and prints it. */
#include "clara_fastio.h"
#include "check.h"

int main(void) {
    fastio_operator *op = NULL;
    EXPECT(fastio_operator_from_env(&op), FASTIO_OK);
    if (!op) return 2;
    nvidia_clara_fastio_entry *w = NULL;
    EXPECT(fastio_operator_input(op, "w", &w), FASTIO_OK);
    void *mem = NULL;
    int size = 0;
    EXPECT(nvidia_clara_fastio_entry__map_allocation(w, &mem, &size), FASTIO_OK);
    double sum = 0;
    for (int i = 0; i < size / 4; i++) sum += ((const float *)mem)[i];
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(w, mem), FASTIO_OK);
    fastio_operator_release(op);
    if (failures) return 1;
    printf("c sum %g\n", sum);
    return 0;
}

// The streaming demo's `gray` in C++: every frame of `image` (uint8
// [h, w, 3]) to its luminance `luma` (float32 [h, w]), as the Rust stage
// computes it.
#include <fastio.hpp>

#include <cstdint>
#include <iostream>

int main() try {
    auto op = fastio::op::from_env();
    std::uint64_t n = 0;
    for (auto &frame : op.frames()) {
        auto image = frame.input<std::uint8_t>("image");  // read-only, the slot itself
        const std::size_t h = image.shape()[0], w = image.shape()[1];
        auto luma = frame.output<float>("luma", {h, w});
        for (std::size_t i = 0; i < h * w; ++i) {
            const std::uint8_t *p = &image[3 * i];
            luma[i] = (0.299f * p[0] + 0.587f * p[1] + 0.114f * p[2]) / 255.0f;
        }
        ++n;  // the frame is published when its iteration ends
    }
    std::cout << "gray: " << n << " frames" << std::endl;
    return 0;
} catch (const std::exception &e) {
    std::cerr << "gray: " << e.what() << std::endl;
    return 1;
}

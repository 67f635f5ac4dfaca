// The volume demo's `crop` in C++: the bounding box of the voxels of
// channel 0 above a threshold in input `volume` (float32 [c, d, h, w]),
// every channel of it copied to the dynamic output `cropped`.
#include <fastio.hpp>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <sstream>

namespace {

constexpr float threshold = 0.1f;

std::string list(const std::size_t *v, std::size_t n) {
    std::ostringstream s;
    s << '[';
    for (std::size_t i = 0; i < n; ++i) s << (i ? ", " : "") << v[i];
    s << ']';
    return s.str();
}

} // namespace

int main() try {
    auto op = fastio::op::from_env();
    auto volume = op.input("volume").map<float>();
    const auto &shape = volume.shape();
    if (shape.size() != 4) throw std::runtime_error("volume is not 4-D");
    const std::size_t c = shape[0], d = shape[1], h = shape[2], w = shape[3];
    std::size_t lo[3] = {SIZE_MAX, SIZE_MAX, SIZE_MAX}, hi[3] = {0, 0, 0};
    for (std::size_t z = 0; z < d; ++z)
        for (std::size_t y = 0; y < h; ++y)
            for (std::size_t x = 0; x < w; ++x)
                if (volume[(z * h + y) * w + x] > threshold) {
                    const std::size_t at[3] = {z, y, x};
                    for (int k = 0; k < 3; ++k) {
                        lo[k] = std::min(lo[k], at[k]);
                        hi[k] = std::max(hi[k], at[k] + 1);
                    }
                }
    if (lo[0] == SIZE_MAX) throw std::runtime_error("no voxel above the threshold");
    const std::size_t box[4] = {c, hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]};
    auto cropped = op.output("cropped");
    cropped.update_shape({{0, static_cast<int>(box[0])},
                          {1, static_cast<int>(box[1])},
                          {2, static_cast<int>(box[2])},
                          {3, static_cast<int>(box[3])}});
    cropped.allocate();
    auto out = cropped.map_mut<float>();
    std::size_t i = 0;
    for (std::size_t k = 0; k < c; ++k)
        for (std::size_t z = lo[0]; z < hi[0]; ++z)
            for (std::size_t y = lo[1]; y < hi[1]; ++y)
                for (std::size_t x = lo[2]; x < hi[2]; ++x)
                    out[i++] = volume.at({k, z, y, x});
    std::cout << "cropped " << list(shape.data(), 4) << " to " << list(box, 4) << " (box "
              << list(lo, 3) << ".." << list(hi, 3) << ")" << std::endl;
    return 0;
} catch (const std::exception &e) {
    std::cerr << "crop: " << e.what() << std::endl;
    return 1;
}

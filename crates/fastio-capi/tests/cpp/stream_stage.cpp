// A streaming C++ operator between Rust ones: every frame of `v` (uint32),
// one stage further (every word + 1, fio-streamop's rule), into `w`, with
// the frame's shape. `for (auto &frame : op.frames())`.
#include <fastio.hpp>

#include <cstdint>
#include <iostream>

int main() try {
    auto op = fastio::op::from_env();
    std::uint64_t n = 0;
    for (auto &frame : op.frames()) {
        if (frame.seq() != n) throw std::runtime_error("frame " + std::to_string(frame.seq()) + " out of order");
        auto v = frame.input<std::uint32_t>("v");
        auto w = frame.output<std::uint32_t>("w", v.shape());
        if (w.size() != v.size()) throw std::runtime_error("output slot of another size");
        for (std::size_t i = 0; i < v.size(); ++i) w[i] = v[i] + 1;
        ++n;
    }
    std::cout << "c++ stage: " << n << " frames" << std::endl;
    return 0;
} catch (const std::exception &e) {
    std::cerr << "c++ stage: " << e.what() << std::endl;
    return 1;
}
